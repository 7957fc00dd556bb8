"""Systematic problems that would show only as zeros: each said once per run or report, in one line of its own kind,
and kept in ``Report.issues`` and on the card (issue 12, item 6). Each kind is a row of docs/bad-input/reports.md,
section "Systematic problems"."""

from __future__ import annotations

import warnings

import pytest

from rag_eval import Hit, Pipeline, Qrels, Run, evaluate
from rag_eval.adapters.functions import reranker, retriever
from rag_eval.errors import CappedResults, FailingStage, LowJudgedShare, LowQueryOverlap, NearMissIds

QUERIES = {f"q{i:02d}": f"query number {i}" for i in range(30)}
QRELS = {q: {f"d{i}": 1, f"e{i}": 1} for i, q in enumerate(QUERIES)}  # two relevant per query


def caught_of(kind, call, *args, **kwargs):
    """``call``'s result and the messages of the warnings of ``kind`` it gave (every other kind is an error)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("error")
        warnings.simplefilter("always", kind)
        warnings.filterwarnings("ignore", category=LowJudgedShare) if kind is not LowJudgedShare else None
        value = call(*args, **kwargs)
    return value, [str(w.message) for w in caught if issubclass(w.category, kind)]


def test_a_langchain_retriever_without_ids_is_announced_at_run_and_evaluate_time():
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from rag_eval.adapters import langchain as lc

    class NoIds(BaseRetriever):  # as a new user writes one: Documents without ids
        def _get_relevant_documents(self, query, *, run_manager=None):
            return [Document(page_content=f"passage {i} about {query}") for i in range(4)]

    pipe = Pipeline(lc.retriever(NoIds(), name="dense"), depth=10, budget=5)
    result, at_run = caught_of(FailingStage, pipe.run, QUERIES)
    assert len(at_run) == 1  # once per run, not once per query
    assert at_run[0].startswith(
        "stage 'dense' failed on 30 of 30 queries (first: query 'q00': ValueError: stage "
        "'dense': the retriever returned a document without an id"
    )
    report, at_evaluate = caught_of(FailingStage, evaluate, QRELS, result)
    assert at_evaluate == at_run
    rows = report.issues[report.issues["query_id"].isna()]
    assert rows["stage"].tolist() == ["dense"] and rows["issue"].tolist() == at_run
    assert report.card.notes == at_run and f"  warning: {at_run[0]}" in report.card.render()
    assert report.mean(report.runs[0], "recall@depth", stage="dense") == 0.0
    assert report.mean(report.runs[0], "loss.failed", stage="dense") == 1.0  # lost to the failure
    # under half failing: no announcement, each failure is in the table
    flaky = retriever(lambda q, k: None if q.endswith(("1", "2")) else [Hit(f"d{q.split()[-1]}", 1.0)], name="flaky")
    some, lines = caught_of(FailingStage, Pipeline(flaky, depth=1, budget=1).run, QUERIES)
    assert lines == [] and len(some.failures) == 6


def test_a_retriever_capping_its_results_is_announced():
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from rag_eval.adapters import langchain as lc

    class Capped(BaseRetriever):  # returns at most 4 whatever the depth asked, as a store with its own limit
        def _get_relevant_documents(self, query, *, run_manager=None):
            n = int(query.split()[-1])
            return [Document(page_content="x", id=f"{p}{n}") for p in "dexyz"][: 3 if n == 0 else 4]

    pipe = Pipeline(lc.retriever(Capped(), name="capped"), depth=20, budget=5)
    result, lines = caught_of(CappedResults, pipe.run, QUERIES)
    assert lines == [
        "stage 'capped' returned exactly 4 hit(s) for a depth of 20 on 29 of 30 answered queries "
        "(e.g. 'q01'): a cap of its own (LangChain's default k=4, a store's limit?); recall@depth is "
        "measured on those 4"
    ]
    report, again = caught_of(CappedResults, evaluate, QRELS, result)
    assert again == lines and report.card.notes[0] == lines[0]  # then the judged share at the budget
    assert report.mean(report.runs[0], "recall@depth", stage="capped") == 1.0  # d and e are in the first 4
    # a corpus of 4 documents: returning all of it is no cap; fewer than 10 queries show no pattern
    corpus = {f"{p}{n}" for p in "dexy" for n in range(30)}
    _, lines = caught_of(
        CappedResults,
        Pipeline(lc.retriever(Capped(), name="c"), depth=20, corpus=corpus).run,
        dict(list(QUERIES.items())[:9]),
    )
    assert lines == []


def test_qrels_sharing_no_query_with_the_run_are_announced():
    test_split = Run.from_ranking({f"t{i}": [f"d{i}"] for i in range(5)}, name="bm25")
    report, lines = caught_of(LowQueryOverlap, evaluate, QRELS, test_split, ["recall@10"])
    assert lines == [
        "run 'bm25' shares no query with the qrels (run: 5 queries, e.g. 't0', 't1', 't2', ...; qrels: "
        "30 queries, e.g. 'q00', 'q01', 'q02', ...): the wrong split, or ids spelled another way? Every "
        "score is 0 or left out"
    ]
    assert report.mean("bm25", "recall@10") == 0.0
    assert report.issues["issue"].tolist() == lines and report.card.notes == lines
    # a pipeline run on the other split: the same line, named by the pipeline
    result = Pipeline(retriever(lambda q, k: [Hit("d1", 1.0)], name="one"), depth=1, budget=1).run(
        {"t1": "x", "t2": "y"}
    )
    report, lines = caught_of(LowQueryOverlap, evaluate, QRELS, result)
    assert len(lines) == 1 and lines[0].startswith("run 'one %1 %budget(1)' shares no query with the qrels (run: 2")
    assert lines[0] in report.issues["issue"].tolist()
    # ids that differ only by leading zeros are NearMissIds' to say (with the pair), not said twice
    with pytest.warns(NearMissIds) as caught:
        evaluate({"1": {"d1": 1}}, Run.from_ranking({"001": ["d1"]}, name="zeros"), ["P@1"])
    assert [w.category for w in caught] == [NearMissIds]


def test_a_tiny_overlap_with_the_qrels_is_announced():
    # the rule: fewer than 10% of the qrels' judged queries in the run; 2 of 30 (6.7%) is announced, 3 (10%) is not
    two = Run.from_ranking({"q00": ["d0"], "q01": ["d1"], "zz": ["d9"]}, name="few")
    report, lines = caught_of(LowQueryOverlap, evaluate, QRELS, two, ["recall@10"])
    assert lines == [
        "run 'few' holds only 2 of the qrels' 30 judged queries (6.7%, under 10%; e.g. qrels 'q02', "
        "'q03', 'q04', ... are not in the run, which has 3 queries, e.g. 'q00', 'q01', 'zz'): the wrong "
        "split? The others score 0 or are left out"
    ]
    assert report.mean("few", "recall@10") == pytest.approx(1 / 30)  # 2 queries at 0.5, 28 counted as 0
    three = Run.from_ranking({q: ["d0"] for q in ("q00", "q01", "q02")}, name="three")
    _, lines = caught_of(LowQueryOverlap, evaluate, QRELS, three, ["recall@10"])
    assert lines == []
    _, lines = caught_of(LowQueryOverlap, evaluate, QRELS, Run.from_scores({}), ["recall@10"])
    assert lines == []  # an empty run mismatches nothing: the card counts its queries as missing


def test_a_failed_reranker_is_lost_to_the_failure_not_reranked_out():
    qrels = Qrels.from_dict({"a": {"d1": 1, "d2": 1, "d9": 1, "d8": 1}, "b": {"d1": 1, "d9": 1}})

    def search(query, k):  # returns 4 for a depth of 3: d8 is past the depth
        return [Hit("d1", 3.0), Hit("d2", 2.0), Hit("d3", 1.0), Hit("d8", 0.5)]

    def rerank(query, hits):
        if query == "boom":
            raise RuntimeError("model crashed")
        return hits

    pipe = Pipeline(retriever(search, name="first"), reranker(rerank, name="rr"), depth=3, budget=1)
    result = pipe.run({"a": "boom", "b": "fine"})  # one failure of two: no announcement
    report = evaluate(qrels, result, judged_threshold=0)
    v = {
        m: report.values(report.runs[0], f"loss.{m}", stage="rr").to_dict()
        for m in ("never_retrieved", "below_depth", "reranked_out", "failed", "delivered")
    }
    # a: d1 d2 were candidates of a reranker that failed: failed (not reranked_out); d8 below depth; d9 never
    assert {m: x["a"] for m, x in v.items()} == {
        "never_retrieved": 0.25,
        "below_depth": 0.25,
        "reranked_out": 0.0,
        "failed": 0.5,
        "delivered": 0.0,
    }
    assert {m: x["b"] for m, x in v.items()} == {
        "never_retrieved": 0.5,
        "below_depth": 0.0,
        "reranked_out": 0.0,
        "failed": 0.0,
        "delivered": 0.5,
    }
    fates = {(r.query_id, r.doc_id): r.fate for r in report.loss_items.itertuples()}
    assert fates == {
        ("a", "d1"): "failed",
        ("a", "d2"): "failed",
        ("a", "d8"): "below_depth",
        ("a", "d9"): "never_retrieved",
        ("b", "d1"): "delivered",
        ("b", "d9"): "never_retrieved",
    }
    # the first stage failing: every relevant item lost to the failure
    down = Pipeline(retriever(lambda q, k: None, name="down"), depth=3, budget=1)
    failed, _ = caught_of(FailingStage, down.run, {"b": "x"})
    down_report, _ = caught_of(FailingStage, evaluate, qrels, failed, judged_threshold=0)
    shares = down_report.values("down %3 %budget(1)", "loss.failed", stage="down")
    assert shares.to_dict() == {"a": 0.0, "b": 1.0}  # a was not run at all (counted as 0): not a failure
    assert down_report.values("down %3 %budget(1)", "loss.never_retrieved", stage="down").to_dict() == {
        "a": 1.0,
        "b": 0.0,
    }


def test_low_judged_shares_are_one_line_per_report_and_say_when_unreachable():
    sparse = {q: {f"d{i}": 1} for i, q in enumerate(QUERIES)}  # one judgement per query, as BEIR's
    runs = {
        name: Run.from_ranking({q: [f"d{i}"] + [f"u{j}" for j in range(9)] for i, q in enumerate(QUERIES)}, name=name)
        for name in ("a", "b")
    }
    report, lines = caught_of(LowJudgedShare, evaluate, sparse, runs, ["ndcg@10"])
    assert lines == [
        "judged share below 0.9 for 2 of 2 systems (stages), the lowest first: run 'a': judged@10 0.100; "
        "run 'b': judged@10 0.100: their scores are lower bounds (pool their results with rag_eval.pool, "
        "label them, and evaluate again); the qrels judge too few documents per query to reach it for 2 "
        "of them: even a perfect system's judged@10 is at most 0.100 (run 'a'), as with sparse qrels such "
        "as BEIR's; condensed lists (Conventions(unjudged='remove')) measure judged documents only"
    ]
    assert report.card.notes == lines and report.issues["issue"].tolist() == lines
    # pipeline stages: one line for the report, not one per stage
    result = Pipeline(
        retriever(lambda q, k: [Hit(f"u{j}", 1.0) for j in range(k)], name="new"),
        reranker(lambda q, hits: hits[::-1], name="flip"),
        depth=4,
        budget=2,
    ).run(dict(list(QUERIES.items())[:3]))
    report, lines = caught_of(LowJudgedShare, evaluate, {q: QRELS[q] for q in list(QUERIES)[:3]}, result)
    assert len(lines) == 1 and lines[0].startswith(
        "judged share below 0.9 for 2 of 2 systems (stages), the lowest first: run "
    )
    assert "stage 'new': judged@budget 0.000" in lines[0] and "stage 'flip': judged@budget 0.000" in lines[0]
    assert "at most" not in lines[0]  # two judged per query at a budget of 2: reachable
    # one system: the line it always was, and the ceiling without naming it again
    _, lines = caught_of(LowJudgedShare, evaluate, sparse, runs["a"], ["ndcg@10"])
    assert lines == [
        "run 'a': judged@10 is 0.100, below 0.9: its scores are lower bounds (pool its results with "
        "rag_eval.pool, label them, and evaluate again); the qrels judge too few documents per query to "
        "reach it: even a perfect system's judged@10 is at most 0.100, as with sparse qrels such as "
        "BEIR's; condensed lists (Conventions(unjudged='remove')) measure judged documents only"
    ]
