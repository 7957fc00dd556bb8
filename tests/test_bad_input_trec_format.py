"""Bad input for trec_eval's printout and the text metrics a report keeps (docs/bad-input/values.md, "trec_eval's
printout"): a metric asked of the printout that the report lacks, text values of a saved report that do not match
it, a text metric in a pipeline report. Each is refused with a message naming it, never printed otherwise."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from rag_eval import Hit, InputError, Pipeline
from rag_eval.adapters.functions import retriever
from rag_eval.metrics.conventions import PRESETS
from rag_eval.metrics.grammar import parse_metric
from rag_eval.renderers.trec_eval import format_trec_eval
from rag_eval.reports.card import MetricCard, QueryRecord
from rag_eval.reports.report import Report, RunScores


def _report() -> Report:
    card = MetricCard.build(
        PRESETS["trec_eval"], ["precision@5", "relstring@20"], [], [QueryRecord(run="sys", counted=2)]
    )
    block = RunScores(
        ["q1", "q2"], np.array([[0.2], [0.4]]), "sys", None, ["precision@5"], texts={"relstring@20": ["10", "0-"]}
    )
    return Report([block], ["precision@5", "relstring@20"], card)


def test_printing_a_metric_the_report_lacks_is_refused():
    report = _report()
    with pytest.raises(
        ValueError,
        match=r"metric 'precision@10' is not in the report; measured: precision@5, "
        r"relstring@20",
    ):
        format_trec_eval(report, metrics=[parse_metric("P.10")])


def _rewritten(tmp_path, change) -> str:
    """The report saved, its text values (metadata rag_eval.texts) changed by ``change``, written back."""
    path = tmp_path / "report.parquet"
    _report().save(path)
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    meta[b"rag_eval.texts"] = change(json.loads(meta[b"rag_eval.texts"]))
    pq.write_table(table.replace_schema_metadata(meta), path)
    return str(path)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda t: b"not json", "its text values (metadata rag_eval.texts) do not parse"),
        (lambda t: json.dumps([{**t[0], "run": "other"}]).encode(), "entry 0 of its text values"),
        (lambda t: json.dumps(t + t).encode(), "entry 1 of its text values"),
        (
            lambda t: json.dumps([{**t[0], "texts": {"relstring@20": ["10"]}}]).encode(),
            "the text values of 'relstring@20' (run 'sys') are not one str per query",
        ),
        (lambda t: json.dumps([{**t[0], "texts": {"relstring@20": ["10", 3]}}]).encode(), "not one str per query"),
        (
            lambda t: json.dumps([{**t[0], "texts": {"precision@5": ["a", "b"]}}]).encode(),
            "name metric 'precision@5', which the card does not list as text",
        ),
    ],
)
def test_tampered_text_values_of_a_saved_report_are_refused(tmp_path, change, message):
    path = _rewritten(tmp_path, change)
    with pytest.raises(InputError, match=r"report\.parquet") as caught:
        Report.load(path)
    assert message in str(caught.value)


def test_a_text_metric_in_a_pipeline_report_is_refused():
    import rag_eval

    result = Pipeline(retriever(lambda q, k: [Hit("c1", 1.0)], name="first"), depth=2, budget=1).run({"q1": "x"})
    with pytest.raises(
        InputError,
        match=r"metric 'relstring@3' is one string per query, which a pipeline "
        r"report's stage tables cannot hold",
    ):
        rag_eval.evaluate({"q1": {"c1": 1}}, result, ["relstring@3", "recall@depth"])
