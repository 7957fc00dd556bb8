"""docs/metrics.md names every family of the catalogue, and its worked nDCG example is what rag_eval computes."""

from __future__ import annotations

import re

import pytest

import rag_eval
from rag_eval.metrics.catalogue import FAMILIES
from rag_eval.metrics.trec_eval_measures import NICKNAMES, trec_eval_metrics

from .conftest import ROOT

DOC = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
TICKED = set(re.findall(r"`([^`]+)`", DOC))


def _names(cell_text: str) -> set[str]:
    """The family names a backticked name stands for: ``ndcg(gain=linear)@10`` -> ndcg."""
    return {re.split(r"[(@]", cell_text, maxsplit=1)[0]}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_is_in_the_catalogue_page(family):
    spelled = set().union(*(_names(t) for t in TICKED))
    assert family in spelled, f"docs/metrics.md does not name the family {family!r} in backticks"
    trec_name = FAMILIES[family].trec_name
    if trec_name is not None:
        assert trec_name in TICKED or any(t.startswith(trec_name + "_") for t in TICKED), (
            f"docs/metrics.md does not give {family!r}'s trec_eval name {trec_name!r}"
        )


def test_every_measure_of_every_nickname_and_the_out_of_scope_ones_are_named():
    for nickname, measures in NICKNAMES.items():
        assert f"`{nickname}`" in DOC
        for measure in measures:
            assert f"`{measure}`" in DOC or f"`{measure}_" in DOC, f"{nickname}: {measure} is not in docs/metrics.md"
    for name in ("prefs_simp", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg", "yaap", "`-N`", "qrels_jg"):
        assert name in DOC


def test_the_ndcg_example_is_what_rag_eval_computes():
    qrels = rag_eval.Qrels.from_dict({"q": {"a": 3, "b": 2, "c": 1, "d": 0}})
    run = rag_eval.Run.from_ranking({"q": ["b", "d", "a", "x"]})
    expected = {
        ("ndcg", "default"): "0.6920",
        ("ndcg(gain=linear)", "default"): "0.7350",
        ("ndcg", "trec_eval"): "0.7350",
        ("ndcg(gain=linear,gains=1:3;2:9)", "default"): "0.8473",
        ("ndcg(gain=linear,gains=1:3;2:9)", "trec_eval"): "0.8473",
        ("ndcg(gains=1:3;2:9)", "default"): "0.8380",
        ("ndcg@2", "default"): "0.3374",
        ("ndcg(gain=linear)@2", "default"): "0.4693",
    }
    for (metric, conventions), printed in expected.items():
        value = rag_eval.evaluate(qrels, run, [metric], conventions=conventions).per_query["value"].iloc[0]
        assert f"{value:.4f}" == printed, (metric, conventions, value)
        assert printed in DOC
    trec = trec_eval_metrics(["ndcg.1=3,2=9"])
    assert [str(m) for m in trec] == ["ndcg(gain=linear,gains=1:3;2:9)"]  # the table's trec_eval column
