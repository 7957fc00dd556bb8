"""Judged share in reports: per run and stage, on the card, with a warning below the threshold; condensed lists."""

from __future__ import annotations

import warnings

import pytest

from rag_eval import Conventions, Hit, Pipeline, Qrels, Report, Run, evaluate, pool
from rag_eval.adapters.functions import reranker, retriever
from rag_eval.errors import LowJudgedShare

QRELS = Qrels.from_dict({"q1": {"d1": 2, "d2": 0, "d3": 1}, "q2": {"d7": 1, "d8": 0}})
# judged@k is the judged share of the top min(k, returned):
# judged@2: q1 (d1, d5) 1/2, q2 (d7, d8) 2/2 -> mean .75; judged@4: q1 (d1 d5 d3 d6) 2/4, q2 (d7 d8) 2/2 -> .75
NEW = Run.from_ranking({"q1": ["d1", "d5", "d3", "d6"], "q2": ["d7", "d8"]}, name="new")
OLD = Run.from_ranking({"q1": ["d1", "d2", "d3"], "q2": ["d8", "d7"]}, name="old")  # every item judged


def shares(report: Report) -> dict[tuple[str, str], float]:
    return {(r.run, r.metric): r.share for r in report.judged.itertuples()}


def test_judged_share_per_run_at_the_report_cutoffs():
    with pytest.warns(LowJudgedShare) as caught:
        report = evaluate(QRELS, [NEW, OLD], ["ndcg@4", "P@2", "ap"])
    assert shares(report) == {
        ("new", "judged@2"): 0.75,
        ("new", "judged@4"): 0.75,
        ("old", "judged@2"): 1.0,
        ("old", "judged@4"): 1.0,
    }
    # one warning per run below the threshold, at its lowest share (the first cutoff on a tie)
    assert [str(w.message) for w in caught] == [
        "run 'new': judged@2 is 0.750, below 0.9: its scores are lower bounds (pool its results with rag_eval.pool, "
        "label them, and evaluate again)",
    ]
    assert list(report.judged.columns) == ["run", "stage", "metric", "share", "n"]
    assert report.judged["n"].tolist() == [2, 2, 2, 2]
    assert report.card.judged_threshold == 0.9
    text = report.card.render()
    assert (
        "judged share (threshold 0.9): new judged@2 75.0% (n=2, below threshold: lower bound); new judged@4 "
        "75.0% (n=2, below threshold: lower bound); old judged@2 100.0% (n=2); old judged@4 100.0% (n=2)"
    ) in text


def test_no_warning_at_or_above_the_threshold_and_cutoff_10_without_cutoffs():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = evaluate(QRELS, OLD, ["P@2"], judged_threshold=0.9)
        assert shares(report) == {("old", "judged@2"): 1.0}
        report = evaluate(QRELS, NEW, ["ap", "mrr"], judged_threshold=0.5)  # judged@10: (2/4 + 2/2) / 2
    assert report.judged["metric"].tolist() == ["judged@10"]
    assert report.judged["share"].tolist() == [0.75]
    with pytest.raises(ValueError, match=r"judged_threshold must lie in \[0, 1\]"):
        evaluate(QRELS, NEW, ["ap"], judged_threshold=1.5)


def test_condensed_lists_are_labelled_and_do_not_hide_the_judged_share():
    condensed = Conventions(unjudged="remove")
    with pytest.warns(LowJudgedShare):
        report = evaluate(QRELS, NEW, ["P@2"], conventions=condensed)
    # condensed: q1's list is d1, d3 -> P@2 = 1; q2: d7, d8 -> .5
    assert report.values("new", "P@2").to_dict() == {"q1": 1.0, "q2": 0.5}
    assert shares(report) == {("new", "judged@2"): 0.75}  # measured on the list as given
    assert "condensed lists (Sakai 2007): unjudged items are removed from each ranking before measuring" in (
        report.card.render()
    )
    assert "condensed" not in evaluate(QRELS, OLD, ["P@2"]).card.render()


def test_judged_share_survives_save_and_load(tmp_path):
    with pytest.warns(LowJudgedShare):
        report = evaluate(QRELS, NEW, ["P@2"])
    report.save(tmp_path / "r.parquet")
    loaded = Report.load(tmp_path / "r.parquet")
    assert shares(loaded) == shares(report) == {("new", "judged@2"): 0.75}
    assert loaded.card.judged == report.card.judged


CHUNKS = {"c1": "alpha", "c2": "alpha beta", "c3": "beta", "c4": "gamma"}


def test_pipeline_stages_report_judged_at_budget_and_depth(tmp_path):
    def search(query: str, k: int):
        return [Hit(c, float(-i)) for i, c in enumerate(["c1", "c2", "c3", "c4"][:k])]

    def flip(query: str, hits):
        return list(reversed(hits))

    result = Pipeline(retriever(search, name="first"), reranker(flip, name="flip"), depth=4, budget=2).run(
        {"q1": "alpha"}, cache=tmp_path
    )
    qrels = {"q1": {"c1": 1, "c2": 0, "c4": 1}}
    with pytest.warns(LowJudgedShare) as caught:
        report = evaluate(qrels, result)
    rows = {(r.stage, r.metric): r.share for r in report.judged.itertuples()}
    # first: c1 c2 | c3 c4 -> budget 2/2, depth 3/4; flip: c4 c3 -> budget 1/2
    assert rows == {("first", "judged@budget"): 1.0, ("first", "judged@depth"): 0.75, ("flip", "judged@budget"): 0.5}
    run = repr(result.pipeline)
    # one line for the report, the lowest first; the qrels judge 3 documents, so judged@depth (4) is at most 0.75
    assert [str(w.message) for w in caught] == [
        f"judged share below 0.9 for 2 of 2 systems (stages), the lowest first: run {run!r}, stage 'flip': "
        f"judged@budget 0.500; run {run!r}, stage 'first': judged@depth 0.750: their scores are lower bounds (pool "
        "their results with rag_eval.pool, label them, and evaluate again); the qrels judge too few documents per "
        f"query to reach it for 1 of them: even a perfect system's judged@depth is at most 0.750 (run {run!r}, stage "
        "'first'), as with sparse qrels such as BEIR's; condensed lists (Conventions(unjudged='remove')) measure "
        "judged documents only",
    ]
    assert report.card.notes == [str(caught[0].message)]


def test_labelling_the_pool_raises_the_judged_share():
    """The loop of issue 6 without the browser: pool both systems, judge every pooled item, evaluate again."""
    before = evaluate(QRELS, {"new": NEW, "old": OLD}, ["P@4"], judged_threshold=0)
    assert shares(before) == {("new", "judged@4"): 0.75, ("old", "judged@4"): 1.0}
    p = pool({"new": NEW, "old": OLD}, depth=4, qrels=QRELS)
    assert [(i.query_id, i.doc_id) for i in p] == [("q1", "d5"), ("q1", "d6")]
    labelled = {q: dict(QRELS[q]) for q in QRELS.query_ids}
    labelled["q1"].update({i.doc_id: 1 for i in p})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        after = evaluate(labelled, {"new": NEW, "old": OLD}, ["P@4"])  # no warning left
    assert shares(after) == {("new", "judged@4"): 1.0, ("old", "judged@4"): 1.0}
    # the new system's unlabelled answers were counted as wrong: P@4 (2/4 + 1/4) / 2 becomes (4/4 + 1/4) / 2
    assert (before.mean("new", "P@4"), after.mean("new", "P@4")) == (0.375, 0.625)


def test_queries_without_results_do_not_pull_the_share_down():
    # q2 is in the qrels but the run has nothing for it (counted as 0 by default): nothing there is unjudged
    run = Run.from_ranking({"q1": ["d1", "d2"], "q3": []}, name="sparse")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = evaluate(QRELS, run, ["P@2"])
    assert report.values("sparse", "P@2").to_dict() == {"q1": 0.5, "q2": 0.0}
    assert report.judged[["share", "n"]].values.tolist() == [[1.0, 1]]
    with warnings.catch_warnings():  # no query returned anything: no share, and no warning
        warnings.simplefilter("error")
        empty = evaluate(QRELS, Run.from_ranking({"q1": []}, name="none"), ["P@2"])
    assert empty.judged["n"].tolist() == [0] and empty.judged["share"].isna().all()
    assert "judged share (threshold 0.9): none judged@2 - (no results)" in empty.card.render()
