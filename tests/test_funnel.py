"""The funnel of a pipeline's relevant items (rag_eval.reports.funnel): counts by hand on a tiny report, each loss
named by its cause, a failed stage's items counted as failed (never as a ranking loss), the headlines the summary's
rows, the same funnel from a result folder."""

from __future__ import annotations

import warnings

import pytest

from rag_eval import Pipeline, Report, Run, evaluate
from rag_eval.adapters import functions
from rag_eval.reports.funnel import HEADLINE_COLUMNS, LOSS_COLUMNS, STEP_COLUMNS, funnel, query_funnel

# kw returns 3 within the depth (a3 and y past it); cut drops a2; order reverses, and fails on qc; budget 2
RANKINGS = {"qa": ["a1", "x", "a2", "a3", "y"], "qb": ["b1", "b2", "b3"], "qc": ["c1", "z", "w"], "qd": ["d0", "e"]}
QRELS = {
    "qa": {"a1": 1, "a2": 2, "a3": 1, "a4": 1},  # a1 delivered, a2 cut by 'cut', a3 below the depth, a4 never
    "qb": {"b1": 1, "b2": 1, "b3": 3},  # 'order' puts b1 third: cut by 'order'; b2, b3 delivered
    "qc": {"c1": 1, "c2": 1},  # 'order' failed on qc: c1 failed; c2 never retrieved
    "qd": {"d0": 0},  # no relevant item
}
QUERIES = {q: q for q in RANKINGS}
PIPE = "kw %3 >> cut >> order %budget(2)"


def search(query, k):
    return RANKINGS[query]


def cut(query, hits):
    return [h.doc_id for h in hits if h.doc_id != "a2"]


def order(query, hits):
    if query == "qc":
        raise RuntimeError("model down")
    return [h.doc_id for h in hits][::-1]


def _evaluate(results, metrics=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a tiny hand-made set: judged-share warnings expected
        return evaluate(QRELS, results, metrics)


@pytest.fixture(scope="module")
def three_stages():
    stages = (functions.retriever(search, name="kw"), functions.reranker(cut, name="cut"))
    result = Pipeline(*stages, functions.reranker(order, name="order"), depth=3, budget=2).run(QUERIES, progress=False)
    return result, _evaluate(result)


def _losses(f, pipeline=PIPE):
    rows = f.losses[f.losses["pipeline"] == pipeline]
    return [(r.order, r.stage, r.fate, r.cause, r.items) for r in rows.itertuples()]


def test_the_funnel_counts_by_hand(three_stages):
    _, report = three_stages
    f = funnel(report)
    assert list(f.steps.columns) == STEP_COLUMNS and list(f.losses.columns) == LOSS_COLUMNS
    assert f.pipelines == [PIPE] and f.notes == ()
    steps = [(r.order, r.step, r.stage, r.role, r.items, r.lost) for r in f.steps.itertuples()]
    assert steps == [
        (0, "relevant (judged relevant in the qrels)", "", "relevant", 9, 0),
        (1, "returned by 'kw' within depth 3", "kw", "first", 6, 3),
        (2, "kept by 'cut'", "cut", "reranker", 5, 1),
        (3, "ranked within budget(2) by 'order'", "order", "reranker", 3, 2),
        (4, "delivered within budget(2)", "", "budget", 3, 0),
    ]
    assert _losses(f) == [
        (1, "kw", "never_retrieved", "never retrieved by 'kw'", 2),  # a4, c2
        (1, "kw", "below_depth", "ranked below the depth (3) by 'kw'", 1),  # a3
        (2, "cut", "reranked_out", "cut by 'cut'", 1),  # a2
        (3, "order", "reranked_out", "cut by 'order'", 1),  # b1
        (3, "order", "failed", "failed: 'order' failed on the query (a stage failure, not a ranking loss)", 1),  # c1
    ]
    # the counts add up: relevant = delivered + every loss; each step's lost is the sum of its losses
    assert f.steps["items"].iloc[0] == f.steps["items"].iloc[-1] + f.losses["items"].sum()
    by_step = f.losses.groupby("order")["items"].sum().reindex(f.steps["order"], fill_value=0)
    assert by_step.tolist() == f.steps["lost"].tolist()
    assert f.steps_of(PIPE)[3]["losses"][1]["fate"] == "failed"


def test_per_query_the_same_counts(three_stages):
    _, report = three_stages
    per = query_funnel(report)
    rows = {(r.query_id, r.order, r.stage, r.fate): r.items for r in per.itertuples()}
    assert rows == {
        ("qa", 4, "", "delivered"): 1,
        ("qa", 2, "cut", "reranked_out"): 1,
        ("qa", 1, "kw", "below_depth"): 1,
        ("qa", 1, "kw", "never_retrieved"): 1,
        ("qb", 3, "order", "reranked_out"): 1,
        ("qb", 4, "", "delivered"): 2,
        ("qc", 3, "order", "failed"): 1,
        ("qc", 1, "kw", "never_retrieved"): 1,
    }
    f = funnel(report)
    lost = per[per["fate"] != "delivered"].groupby(["order", "stage", "fate"])["items"].sum()
    assert lost.to_dict() == {(r.order, r.stage, r.fate): r.items for r in f.losses.itertuples()}


def test_the_headlines_are_the_summarys_rows(three_stages):
    _, report = three_stages
    h = funnel(report).headlines
    assert list(h.columns) == HEADLINE_COLUMNS
    shown = [(r.stage, r.metric) for r in h.itertuples()]
    assert shown == [
        ("kw", "recall@depth"),
        ("cut", "ndcg@budget"),
        ("cut", "mrr@budget"),
        ("order", "ndcg@budget"),
        ("order", "mrr@budget"),
        ("order", "recall@budget"),
    ]
    row = h.set_index(["stage", "metric"])
    # recall@depth of kw: qa 2/4, qb 3/3, qc 1/2, qd 0 (no relevant item, scored 0)
    assert row.loc[("kw", "recall@depth"), "mean"] == pytest.approx((0.5 + 1 + 0.5 + 0) / 4)
    # what reached the model: qa a1 of 4, qb b3 b2 of 3, qc failed (0), qd 0
    assert row.loc[("order", "recall@budget"), "mean"] == pytest.approx((1 / 4 + 2 / 3) / 4)
    assert row.loc[("cut", "mrr@budget"), "mean"] == pytest.approx(3 / 4)  # a1, b1, c1 first; qd none
    assert row.loc[("order", "mrr@budget"), "mean"] == pytest.approx((1 / 2 + 1) / 4)
    summary = report.summary.set_index(["stage", "metric"])
    for (stage, metric), r in row.iterrows():
        s = summary.loc[(stage, metric)]
        assert (r["low"], r["high"], r["n"], r["n_nan"]) == (s["ci_low"], s["ci_high"], s["n"], s["n_nan"])
        assert r["interval_method"].startswith("95% percentile bootstrap")


def test_without_a_reranker_the_budget_cuts(three_stages):
    result = Pipeline(functions.retriever(search, name="kw"), depth=3, budget=1).run(QUERIES, progress=False)
    f = funnel(_evaluate(result))
    pipe = f.pipelines[0]
    assert [(r.order, r.role, r.items, r.lost) for r in f.steps.itertuples()] == [
        (0, "relevant", 9, 0),
        (1, "first", 6, 3),
        (2, "budget", 3, 3),  # a1, b1, c1 delivered; a2, b2, b3 cut at the budget
    ]
    assert _losses(f, pipe)[-1] == (2, "", "cut_by_budget", "cut at the budget (budget(1))", 3)


def test_a_failed_first_stage_loses_its_items_as_failed():
    def flaky(query, k):
        if query == "qb":
            raise RuntimeError("index down")
        return RANKINGS[query]

    result = Pipeline(
        functions.retriever(flaky, name="kw"), functions.reranker(cut, name="cut"), depth=3, budget=2
    ).run(QUERIES, progress=False)
    f = funnel(_evaluate(result))
    pipe = f.pipelines[0]
    # qb's three items: failed at kw, not "never retrieved"
    assert (1, "kw", "failed", "failed: 'kw' failed on the query (a stage failure, not a ranking loss)", 3) in _losses(
        f, pipe
    )
    assert ("never_retrieved", 2) in [(r.fate, r.items) for r in f.losses.itertuples()]  # a4, c2


def test_two_pipelines_and_a_result_folder(three_stages, tmp_path):
    result, _ = three_stages
    plain = Pipeline(functions.retriever(search, name="kw"), depth=3, budget=2).run(QUERIES, progress=False)
    report = _evaluate({"three": result, "one": plain})
    f = funnel(report)
    assert f.pipelines == ["three", "one"]
    assert f.steps[f.steps["pipeline"] == "three"]["items"].tolist() == [9, 6, 5, 3, 3]
    # one stage, budget 2: a1 x | b1 b2 | c1 z: a1, b1, b2, c1 delivered; a2, b3 cut at the budget
    assert f.steps[f.steps["pipeline"] == "one"]["items"].tolist() == [9, 6, 4]
    report.save_folder(tmp_path / "folder", qrels=QRELS, runs={"three": result, "one": plain}, plots=False)
    again = funnel(Report.load_folder(tmp_path / "folder"))
    assert again.steps.equals(f.steps) and again.losses.equals(f.losses)
    assert again.headlines.equals(f.headlines)


def test_no_funnel_without_fates_or_stages(three_stages):
    result, _ = three_stages
    f = funnel(_evaluate(result, ["recall@depth", "ndcg@budget"]))
    assert f.steps.empty and f.losses.empty
    assert "fates of its relevant items were not measured" in f.notes[0]
    runs = funnel(_evaluate({"r": Run.from_scores({"qa": {"a1": 2.0, "x": 1.0}})}, ["recall@10"]))
    assert runs.steps.empty and runs.headlines.empty
    assert runs.notes == ("a report of runs, not of a pipeline: no stages, so no funnel",)


def test_a_fusion_funnel_starts_at_the_fused_first_stage():
    from rag_eval.stages import fuse

    one = functions.retriever(lambda q, k: RANKINGS[q][:2], name="one")
    two = functions.retriever(lambda q, k: RANKINGS[q][1:3], name="two")
    result = Pipeline(fuse(one, two), depth=3, budget=2).run(QUERIES, progress=False)
    f = funnel(_evaluate(result))
    steps = [(r.order, r.step, r.role, r.items) for r in f.steps.itertuples()]
    # fused (rrf): qa x a1 a2, qb b2 b1 b3, qc z c1 w; a3, a4, c2 in neither input; budget 2 delivers a1, b1, b2, c1
    assert steps == [
        (0, "relevant (judged relevant in the qrels)", "relevant", 9),
        (1, "returned by 'rrf(one,two)' within depth 3", "first", 6),
        (2, "delivered within budget(2)", "budget", 4),
    ]
    assert {(r.fate, r.items) for r in f.losses.itertuples()} == {("never_retrieved", 3), ("cut_by_budget", 2)}


def test_the_stage_aware_card_and_its_corpus_fingerprint_are_made_when_first_read(three_stages, monkeypatch):
    """The corpus fingerprint sorts every hit's id (issue 28: 5 s of a 9 s evaluate at 20M hits): evaluate leaves
    it until the card is first read, and a report given a query set waits as well."""
    from rag_eval import QuerySet
    from rag_eval.reports import stage_aware

    result, eager = three_stages
    expected = eager.card.hashes
    made = []
    real = stage_aware.content_hashes
    monkeypatch.setattr(stage_aware, "content_hashes", lambda *a, **k: made.append(1) or real(*a, **k))
    report = _evaluate(result)
    weighted = report.with_query_set(QuerySet.from_dict(QUERIES))
    assert made == []
    assert report.card.hashes == expected and expected.corpus_basis == "hits"
    assert made == [1]
    assert weighted.card.hashes == expected and weighted.card.query_set is not None
    assert made == [1]  # the weighted report reads the card its source built
