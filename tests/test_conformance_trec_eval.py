"""rag_eval's trec_eval preset against trec_eval's own expected outputs, to the 4 printed decimals.

Every measure rag_eval implements that appears in a reference file is checked, per query and for ``all``, as
rag_eval's trec_eval formatter prints it (:mod:`rag_eval.reports.trec_eval`: ``all`` lines accumulated as
trec_eval does); each (file, measure, query) is its own collected test case. tests/test_trec_eval_oracle.py checks
the same against the trec_eval binary itself, on random data.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cache

import pytest

import rag_eval
from rag_eval.errors import InputError
from rag_eval.reports.trec_eval import format_trec_eval, trec_eval_lines

from .conftest import CONFORMANCE, need_shared

# reference file -> (qrels, run, conventions changes from the trec_eval preset, extra measures asked of trec_eval)
CASES = {
    "out.test": ("qrels.test", "results.test", {}),
    "out.test.a": ("qrels.test", "results.test", {}),
    "out.test.aq": ("qrels.test", "results.test", {}),
    "out.test.aqc": ("qrels.test", "results.trunc", {"missing_run": "zero"}),
    "out.test.aqcM": ("qrels.test", "results.trunc", {"missing_run": "zero", "max_depth": 100}),
    "out.test.aql": ("qrels.rel_level", "results.test", {"relevance_threshold": 2}),
    "out.test.meas_params": ("qrels.test", "results.test", {}),
}
# every family must be reached by at least one reference line, or the parsing below has silently broken
EXPECTED_FAMILIES = {
    "num_ret", "num_rel", "num_rel_ret", "ap", "r_precision", "bpref", "mrr", "precision", "recall", "ndcg", "hit",
}


def _metric_for(trec_name: str) -> rag_eval.Metric | None:
    """Our metric for a trec_eval measure name, or None when rag_eval does not implement that measure."""
    if trec_name.startswith("ndcg_") and "=" in trec_name:  # ndcg.1=3,2=9,4=4.5 is printed ndcg_1=3,2=9,4=4.5
        gains = trec_name[len("ndcg_"):].replace("=", ":").replace(",", ";")
        return rag_eval.parse_metric(f"ndcg(gains={gains})")
    try:
        metric = rag_eval.parse_metric(trec_name)
    except InputError:
        return None
    return metric if metric.trec_name == trec_name else None


@cache
def _reference(name: str) -> dict[tuple[str, str], str]:
    expected = {}
    for line in (CONFORMANCE / name).read_text().splitlines():
        measure, qid, value = line.split()
        expected[(measure, qid)] = value
    return expected


@cache
def _evaluated(name: str) -> tuple[rag_eval.Report, dict[tuple[str, str], str]]:
    """The report, and what its trec_eval formatter prints: ``{(measure, query or "all"): value}``."""
    qrels_file, run_file, changes = CASES[name]
    conventions = rag_eval.Conventions(**(rag_eval.metrics.PRESETS["trec_eval"].model_dump() | changes))
    metrics = sorted({m for (measure, _) in _reference(name) if (m := _metric_for(measure))}, key=str)
    qrels = rag_eval.Qrels.from_trec(CONFORMANCE / qrels_file)
    run = rag_eval.Run.from_trec(CONFORMANCE / run_file)
    report = rag_eval.evaluate(qrels, run, metrics, conventions=conventions)
    lines = trec_eval_lines(report, qrels=qrels, runs={run.name: run}, per_query=True)
    printed = format_trec_eval(report, qrels=qrels, runs={run.name: run}, per_query=True).splitlines()
    return report, {(line.measure, line.query_id): text.split("\t")[2] for line, text in zip(lines, printed)}


def _cases():
    if not CONFORMANCE.exists():
        return [pytest.param(None, None, None, id="shared-data-absent")]
    params = []
    for name in CASES:
        for measure, qid in _reference(name):
            if _metric_for(measure) is not None or measure == "num_q":
                params.append(pytest.param(name, measure, qid, id=f"{name}:{measure}:{qid}"))
    return params


@pytest.mark.parametrize("reference, measure, qid", _cases())
def test_matches_trec_eval(reference, measure, qid):
    need_shared(CONFORMANCE)
    report, printed = _evaluated(reference)
    expected = _reference(reference)[(measure, qid)]
    if measure == "num_q":
        assert str(report.card.queries[0].counted) == expected == printed[(measure, qid)]
        return
    metric = _metric_for(measure)
    value = report.values(report.runs[0], metric).get(qid)  # None for "all"
    # per query: the value printed as trec_eval prints it; "all": the mean (or sum) accumulated as trec_eval does
    assert printed[(measure, qid)] == expected, f"{metric} ({measure}) for {qid}: {value!r}"


def test_every_family_is_checked():
    need_shared(CONFORMANCE)
    checked = defaultdict(set)
    for name in CASES:
        for measure, _ in _reference(name):
            metric = _metric_for(measure)
            if metric is not None:
                checked[metric.family].add(measure)
    assert EXPECTED_FAMILIES <= set(checked), EXPECTED_FAMILIES - set(checked)
    # the parametrised cutoffs and gains of out.test.meas_params are among them
    assert {"P_7", "recall_2000", "ndcg_cut_23", "success_20", "ndcg_1=3,2=9,4=4.5"} <= set().union(*checked.values())
