"""Failing and slow stages: each fault kind is caught, recorded per query and stage, and reported.

Every fault kind runs through a sync and an async stage, on threads and on the event loop: the faulty query is
recorded in ``failures`` (its work lost) or ``issues`` (its answer mended and kept), the other queries are
untouched, and the summary shows ``n_failed`` beside an unchanged denominator (failed queries score 0) or, under
``failed="exclude"``, a smaller ``n`` that says so.
"""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

import rag_eval
from rag_eval.adapters import functions
from rag_eval.stages import Hit, Pipeline

QUERIES = {"q1": "good one", "q2": "faulty", "q3": "good two"}
QRELS = {"q1": {"a": 1}, "q2": {"a": 1}, "q3": {"b": 1}}
CANDIDATES = ["a", "b", "c", "d"]
_order = itertools.count()


def _good(query: str) -> list[str]:
    return ["a", "b", "c", "d"] if query == "good one" else ["b", "a", "c", "d"]


# kind -> (stage that misbehaves, what it does on the faulty query, table it lands in, message fragment)
RETRIEVER_FAULTS = {
    "raises": (
        lambda k: (_ for _ in ()).throw(ConnectionError("index offline")),
        "failures",
        "ConnectionError: index offline",
    ),
    "hangs": (lambda k: time.sleep(2.0) or ["a"], "failures", "timed out"),
    "returns None": (lambda k: None, "failures", "returned None"),
    "returns a str": (lambda k: "a b c", "failures", "str"),
    "returns more than asked": (lambda k: ["a", "b", "c", "d", "e", "f"], "issues", "returned 6 hits for a depth of 4"),
    "returns a chunk twice": (lambda k: ["a", "a", "b", "c"], "issues", "returned 1 repeated doc id(s)"),
    "changes its order": (
        lambda k: ["a", "b", "c", "d"] if next(_order) % 2 else ["b", "a", "c", "d"],
        "issues",
        "nondeterministic: a second call returned a different ranking (first difference at rank 1)",
    ),
}
RERANKER_FAULTS = {
    "raises": (lambda hits: 1 / 0, "failures", "ZeroDivisionError"),
    "hangs": (lambda hits: time.sleep(2.0) or hits, "failures", "timed out"),
    "returns None": (lambda hits: None, "failures", "returned None"),
    "invents a document": (lambda hits: ["invented", *[h.doc_id for h in hits]], "failures", "invented"),
    "returns a chunk twice": (
        lambda hits: [hits[0].doc_id, hits[0].doc_id, hits[1].doc_id],
        "issues",
        "returned 1 repeated doc id(s)",
    ),
    "changes its order": (
        lambda hits: [h.doc_id for h in (hits if next(_order) % 2 else hits[::-1])],
        "issues",
        "nondeterministic: a second call returned a different ranking",
    ),
}


def _retriever(fault, is_async: bool):
    def search(query: str, k: int):
        return fault(k) if query == "faulty" else _good(query)

    if not is_async:
        return functions.retriever(search, name="retriever")

    async def asearch(query: str, k: int):
        await asyncio.sleep(0)
        if query == "faulty" and fault is RETRIEVER_FAULTS["hangs"][0]:
            await asyncio.sleep(2.0)
        return search(query, k)

    return functions.retriever(asearch, name="retriever")


def _reranker(fault, is_async: bool):
    def rerank(query: str, hits: list[Hit]):
        return fault(hits) if query == "faulty" else [h.doc_id for h in hits]

    if not is_async:
        return functions.reranker(rerank, name="reranker")

    async def arerank(query: str, hits: list[Hit]):
        await asyncio.sleep(0)
        if query == "faulty" and fault is RERANKER_FAULTS["hangs"][0]:
            await asyncio.sleep(2.0)
        return rerank(query, hits)

    return functions.reranker(arerank, name="reranker")


def _identity_reranker():
    return functions.reranker(lambda query, hits: [h.doc_id for h in hits], name="reranker")


MODES = [pytest.param(False, 1, id="sync"), pytest.param(False, 3, id="threads"), pytest.param(True, 3, id="async")]


def _check(result, stage: str, table: str, message: str, failed_stages: list[str]):
    rows = getattr(result, table)
    assert rows.query_id.tolist().count("q2") >= 1 and set(rows.query_id) == {"q2"}
    assert any(message in text for text in rows[rows.stage == stage].iloc[:, 2])
    for other in ("q1", "q3"):  # the other queries are untouched
        assert not result.stages[stage].outcomes[other].failed
        assert not result.stages[stage].outcomes[other].issues
    report = rag_eval.evaluate(QRELS, result)
    summary = report.summary.set_index(["stage", "metric"])
    for name in result.stages:
        expected_failed = 1 if name in failed_stages else 0
        assert (summary.loc[name, "n_failed"] == expected_failed).all(), name
        assert (summary.loc[name, "n"] >= 2).all()
    if failed_stages:  # scored 0, never dropped from the denominator
        final = report.values(report.runs[0], "recall@budget", stage=list(result.stages)[-1])
        assert final["q2"] == 0.0 and len(final) == 3
        excluded = rag_eval.evaluate(
            QRELS, result, conventions=rag_eval.Conventions.preset("default").replace(failed="exclude")
        )
        row = excluded.summary.set_index(["stage", "metric"]).loc[(list(result.stages)[-1], "recall@budget")]
        assert row["n"] == 2 and row["n_failed"] == 1
    return report


@pytest.mark.parametrize("kind", list(RETRIEVER_FAULTS))
@pytest.mark.parametrize("is_async,concurrency", MODES)
def test_a_faulty_retriever_is_recorded_per_query(kind, is_async, concurrency):
    fault, table, message = RETRIEVER_FAULTS[kind]
    pipe = Pipeline(_retriever(fault, is_async), _identity_reranker(), depth=4, budget=2)
    result = pipe.run(QUERIES, concurrency=concurrency, timeout=0.5, verify=kind == "changes its order")
    failed = ["retriever", "reranker"] if table == "failures" else []
    _check(result, "retriever", table, message, failed)
    if table == "failures":  # the later stage skipped the query, saying why
        assert result.failures.set_index(["stage", "query_id"]).loc[("reranker", "q2"), "error"] == (
            "not run: retriever failed on this query"
        )
    else:  # a mended answer is kept and measured: 'a' is relevant for q2 and comes first
        assert result.stages["retriever"].outcomes["q2"].hits[0].doc_id in ("a", "b")
        assert len(result.stages["retriever"].outcomes["q2"].hits) <= 4


@pytest.mark.parametrize("kind", list(RERANKER_FAULTS))
@pytest.mark.parametrize("is_async,concurrency", MODES)
def test_a_faulty_reranker_is_recorded_per_query(kind, is_async, concurrency):
    fault, table, message = RERANKER_FAULTS[kind]
    good = functions.retriever(lambda query, k: _good(query), name="retriever")
    pipe = Pipeline(good, _reranker(fault, is_async), depth=4, budget=2)
    result = pipe.run(QUERIES, concurrency=concurrency, timeout=0.5, verify=kind == "changes its order")
    _check(result, "reranker", table, message, ["reranker"] if table == "failures" else [])
    assert not result.stages["retriever"].outcomes["q2"].failed  # the first stage's work is kept


def test_a_mended_answer_keeps_its_issue_through_the_cache(tmp_path):
    fault = RETRIEVER_FAULTS["returns a chunk twice"][0]
    first = Pipeline(_retriever(fault, False), depth=4).run(QUERIES, cache=tmp_path)
    again = Pipeline(_retriever(fault, False), depth=4).run(QUERIES, cache=tmp_path)
    assert again.stages["retriever"].cache_hits == 3
    assert again.issues.equals(first.issues) and len(again.issues) == 1
    report = rag_eval.evaluate(QRELS, again)
    assert report.issues.query_id.tolist() == ["q2", None]  # and the report's judged-share line, of no query
    assert report.issues.issue.iloc[1].startswith("run 'retriever %4 %budget(5)', stage 'retriever': judged@")
    assert "1 query(ies) with an issue" in str(report.card)


def test_verify_calls_a_deterministic_stage_twice_and_records_nothing():
    calls = []

    def search(query, k):
        calls.append(query)
        return _good(query)

    result = Pipeline(functions.retriever(search, name="r"), depth=4).run(QUERIES, verify=2)
    assert len(calls) == 5  # the first two queries twice, the third once
    assert result.issues.empty and result.failures.empty


def test_a_second_call_that_fails_is_an_issue_not_a_failure():
    calls = itertools.count()

    def search(query, k):
        if query == "faulty" and next(calls) % 2:
            raise TimeoutError("flaky")
        return _good(query)

    result = Pipeline(functions.retriever(search, name="r"), depth=4).run(QUERIES, verify=True)
    assert result.failures.empty
    assert result.issues.issue.tolist() == ["nondeterministic: a second call failed (timed out)"]


def test_verify_must_be_a_count_or_a_flag():
    with pytest.raises(ValueError, match="verify must be True, False or a number"):
        Pipeline(functions.retriever(lambda q, k: ["a"], name="r"), depth=4).run(QUERIES, verify=-1)


def test_an_empty_result_is_an_answer_scoring_zero_not_a_fault():
    """LlamaIndex's evaluator raises on an empty result; here it is a ranking with nothing relevant in it."""
    search = functions.retriever(lambda query, k: [] if query == "faulty" else _good(query), name="r")
    result = Pipeline(search, depth=4, budget=2).run(QUERIES)
    assert result.failures.empty and result.issues.empty
    report = rag_eval.evaluate(QRELS, result)
    recall = report.values(report.runs[0], "recall@depth", stage="r")
    assert recall.to_dict() == {"q1": 1.0, "q2": 0.0, "q3": 1.0}
    row = report.summary.set_index("metric").loc["recall@depth"]
    assert row["n"] == 3 and row["n_failed"] == 0 and row["mean"] == pytest.approx(2 / 3)
