"""The stage harness: pipelines, faults, concurrency, the cache and resuming, and stage-aware values by hand."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import rag_eval
from rag_eval.stages import Budget, Hit, Pipeline, Reranker, Retriever, fuse

from .conftest import ROOT


class ListRetriever(Retriever):
    """Returns a fixed ranking per query text (or raises / misbehaves on purpose)."""

    def __init__(self, name: str, rankings: dict[str, list], delay: float = 0.0, **kw):
        super().__init__(name, **kw)
        self.rankings, self.delay, self.calls = rankings, delay, []
        self._lock = threading.Lock()

    def config(self):
        return {"rankings": self.rankings}

    def search(self, query, k):
        with self._lock:
            self.calls.append(query)
        if self.delay:
            time.sleep(self.delay)
        value = self.rankings[query]
        if isinstance(value, Exception):
            raise value
        return value


class Reverse(Reranker):
    def __init__(self, name="reverse", cut=None, fail_on=(), **kw):
        super().__init__(name, **kw)
        self.cut, self.fail_on, self.calls = cut, set(fail_on), []

    def config(self):
        return {"cut": self.cut, "fail_on": sorted(self.fail_on)}

    def rerank(self, query, hits):
        self.calls.append(query)
        if query in self.fail_on:
            raise RuntimeError("model down")
        out = list(reversed(hits))
        return out[: self.cut] if self.cut else out


def docs(*ids):
    return [Hit(d, float(len(ids) - i)) for i, d in enumerate(ids)]


QUERIES = {"q1": "alpha", "q2": "beta", "q3": "gamma"}
RANKINGS = {
    "alpha": docs("a", "b", "c", "d", "e", "f"),
    "beta": docs("g", "h"),
    "gamma": docs("i", "j", "k"),
}


# ----- building ---------------------------------------------------------------------------------------------
def test_pipeline_prints_as_its_structure():
    p = Pipeline(ListRetriever("bm25", RANKINGS), Reverse("minilm-rerank"), depth=100, budget=5)
    assert repr(p) == "bm25 %100 >> minilm-rerank %budget(5)"
    q = Pipeline(fuse(ListRetriever("bm25", RANKINGS), ListRetriever("dense", RANKINGS)), depth=20, budget="512tok")
    assert repr(q) == "rrf(bm25, dense) %20 %budget(512tok)"
    assert [s.name for s in q.stages] == ["bm25", "dense", "rrf(bm25,dense)"]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"depth": 0}, ValueError),
        ({"depth": "10"}, ValueError),
        ({"budget": 0}, ValueError),
        ({"budget": "512 words"}, ValueError),
        ({"budget": True}, ValueError),
    ],
)
def test_configuration_errors_come_before_any_run(kwargs, error):
    retriever = ListRetriever("bm25", RANKINGS)
    with pytest.raises(error):
        Pipeline(retriever, Reverse(), **kwargs)
    assert retriever.calls == []


def test_stage_names_must_differ_and_stages_must_be_stages():
    with pytest.raises(ValueError, match="repeated"):
        Pipeline(ListRetriever("x", RANKINGS), Reverse("x"))
    with pytest.raises(TypeError):
        Pipeline(Reverse("r"))  # a reranker cannot come first
    with pytest.raises(TypeError):
        Pipeline(ListRetriever("x", RANKINGS), ListRetriever("y", RANKINGS))


# ----- running ----------------------------------------------------------------------------------------------
def test_every_stage_output_is_kept_and_truncated_to_the_depth():
    retriever = ListRetriever("bm25", RANKINGS)
    result = Pipeline(retriever, Reverse(cut=2), depth=4, budget=1).run(QUERIES)
    first = result.stages["bm25"].outcomes["q1"]
    assert [h.doc_id for h in first.hits] == ["a", "b", "c", "d"]
    assert first.beyond_depth == ("e", "f")
    assert [h.doc_id for h in result.stages["reverse"].outcomes["q1"].hits] == ["d", "c"]
    assert result.runs["reverse"].ranking("q1") == [("d", 3.0), ("c", 4.0)]  # scores are data: never re-sorted
    assert result.delivered() == {"q1": 1, "q2": 1, "q3": 1}


def test_faults_are_recorded_per_query_and_stage_and_the_run_goes_on():
    rankings = dict(RANKINGS, beta=None, gamma=ValueError("index offline"))
    rankings["delta"] = [("x", 1.0), (5, 0.5)]  # a non-string id
    rankings["eps"] = docs("zz")
    queries = {"q1": "alpha", "q2": "beta", "q3": "gamma", "q4": "delta", "q5": "eps"}
    stranger = type(
        "Stranger", (Reranker,), {"rerank": lambda self, q, hits: [Hit("not-given")] if q == "eps" else hits}
    )
    with pytest.warns(rag_eval.errors.FailingStage, match="stage 'bm25' failed on 3 of 5 queries"):
        result = Pipeline(ListRetriever("bm25", rankings), stranger("stranger"), depth=10).run(queries)
    failures = {(r.stage, r.query_id): r.error for r in result.failures.itertuples()}
    assert failures[("bm25", "q2")] == "returned None instead of a list of hits"
    assert failures[("bm25", "q3")] == "ValueError: index offline"
    assert "doc_id must be a str" in failures[("bm25", "q4")]
    assert failures[("stranger", "q2")] == "not run: bm25 failed on this query"
    assert "returned doc ids it was not given: ['not-given']" in failures[("stranger", "q5")]
    assert not result.stages["stranger"].outcomes["q1"].failed


def test_corpus_check_and_retries_and_timeout():
    flaky_calls = []

    class Flaky(Retriever):
        def search(self, query, k):
            flaky_calls.append(query)
            if len(flaky_calls) < 3:
                raise ConnectionError("try again")
            return docs("a", "b")

    ok = Pipeline(Flaky("flaky"), depth=5, corpus={"a", "b"}).run({"q": "x"}, retries=2, backoff=0.0)
    assert not ok.stages["flaky"].outcomes["q"].failed and len(flaky_calls) == 3
    with pytest.warns(rag_eval.errors.FailingStage):  # 1 of 1 query failed: said once
        outside = Pipeline(ListRetriever("r", {"x": docs("a", "zz")}), depth=5, corpus={"a"}).run({"q": "x"})
    assert "not in the corpus: ['zz']" in outside.failures.error[0]
    with pytest.warns(rag_eval.errors.FailingStage):
        slow = Pipeline(ListRetriever("slow", {"x": docs("a")}, delay=0.5), depth=5).run({"q": "x"}, timeout=0.05)
    assert slow.failures.error.tolist() == ["timed out"]


def test_concurrency_keeps_query_order_threads_and_async():
    rng = np.random.default_rng(0)
    delays = {f"t{i}": float(rng.uniform(0, 0.02)) for i in range(24)}

    class Sleepy(Retriever):
        def search(self, query, k):
            time.sleep(delays[query])
            return [Hit(query)]

    class AsyncSleepy(Retriever):
        @property
        def has_async(self):
            return True

        def search(self, query, k):
            raise AssertionError("the async path should be used")

        async def asearch(self, query, k):
            await asyncio.sleep(delays[query])
            return [Hit(query)]

    queries = {f"q{i}": f"t{i}" for i in range(24)}
    for stage in (Sleepy("threads"), AsyncSleepy("async")):
        result = Pipeline(stage, depth=1).run(queries, concurrency=8)
        outcomes = result.stages[stage.name].outcomes
        assert list(outcomes) == list(queries)
        assert [o.hits[0].doc_id for o in outcomes.values()] == list(queries.values())


# ----- the cache --------------------------------------------------------------------------------------------
def test_a_rerun_from_the_cache_recomputes_nothing_and_a_new_reranker_reuses_retrieval(tmp_path):
    retriever, reranker = ListRetriever("bm25", RANKINGS), Reverse()
    first = Pipeline(retriever, reranker, depth=4).run(QUERIES, cache=tmp_path)
    again = Pipeline(retriever, reranker, depth=4).run(QUERIES, cache=tmp_path)
    assert len(retriever.calls) == 3 and len(reranker.calls) == 3
    assert again.stages["reverse"].cache_hits == 3
    assert rag_eval.evaluate({"q1": {"a": 1}}, again).per_query.equals(
        rag_eval.evaluate({"q1": {"a": 1}}, first).per_query
    )
    other = Reverse(cut=1)  # a changed reranker: same name, different configuration
    Pipeline(retriever, other, depth=4).run(QUERIES, cache=tmp_path)
    assert len(retriever.calls) == 3 and len(other.calls) == 3
    Pipeline(retriever, reranker, depth=3).run(QUERIES, cache=tmp_path)  # another depth: retrieval again
    assert len(retriever.calls) == 6
    Pipeline(retriever, reranker, depth=4).run({"q1": "alpha", "q2": "gamma"}, cache=tmp_path)  # q2's text changed
    assert retriever.calls[-1] == "gamma" and len(retriever.calls) == 7


def _one_shard_per_query(retriever: Retriever, cache) -> list:
    """Run each query on its own (one shard each, in query order) and return the shards."""
    for q, text in QUERIES.items():
        Pipeline(retriever, depth=4).run({q: text}, cache=cache)
    paths = sorted(cache.glob(f"{retriever.name}-*/shard-*.arrow"))
    assert len(paths) == len(QUERIES)
    return paths


def test_a_shard_cut_short_is_set_aside_and_the_next_shard_is_clean(tmp_path):
    retriever = ListRetriever("bm25", RANKINGS)
    *_, path = _one_shard_per_query(retriever, tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 10])  # the last query's shard, cut short
    with pytest.warns(rag_eval.errors.DamagedShard, match=r"1 damaged shard\(s\) not read .* recomputed"):
        result = Pipeline(retriever, depth=4).run(QUERIES, cache=tmp_path)
    assert len(retriever.calls) == 4 and retriever.calls[-1] == "gamma"
    assert result.stages["bm25"].cache_hits == 2
    assert len(list(tmp_path.glob("bm25-*/shard-*.arrow"))) == 3 and path.with_name(path.name + ".damaged").exists()


SLOW_STAGE = """
import time
import warnings
from rag_eval.stages import Hit, Retriever

CALLS = []
PAUSE = [0.05]

class Slow(Retriever):
    def config(self):
        return {"v": 1}

    def search(self, query, k):
        CALLS.append(query)
        time.sleep(PAUSE[0])
        return [Hit(query + "-doc", 1.0)]
"""
KILLABLE = """
import sys
sys.path[:0] = [{root!r}, {here!r}]
from rag_eval.stages import Pipeline, StageCache
from slowstage import Slow

queries = {{f"q{{i}}": f"text {{i}}" for i in range(200)}}
cache = StageCache(sys.argv[1], shard_queries=10)  # a shard every 10 queries: a kill loses fewer
Pipeline(Slow("slow", version="1"), depth=5).run(queries, cache=cache, progress=False)
"""


def _rows_in(shard) -> int:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    try:
        return ipc.open_file(pa.OSFile(str(shard))).read_all().num_rows
    except (OSError, pa.ArrowException):
        return 0


@pytest.mark.sigkill
def test_a_run_killed_with_sigkill_resumes_without_recomputing(tmp_path, monkeypatch):
    (tmp_path / "slowstage.py").write_text(SLOW_STAGE)
    script = tmp_path / "killable.py"
    script.write_text(KILLABLE.format(root=str(ROOT), here=str(tmp_path)))
    cache = tmp_path / "cache"
    child = subprocess.Popen([sys.executable, str(script), str(cache)])
    deadline = time.time() + 60
    stored = 0
    while time.time() < deadline:
        stored = sum(_rows_in(path) for path in cache.glob("slow-*/shard-*.arrow"))
        if stored >= 20:
            break
        time.sleep(0.02)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert 20 <= stored < 200, "the child should be killed part-way through"

    monkeypatch.syspath_prepend(str(tmp_path))
    import slowstage

    slowstage.PAUSE[0] = 0.0
    queries = {f"q{i}": f"text {i}" for i in range(200)}
    with pytest.warns(rag_eval.errors.CappedResults):  # 1 hit per query for a depth of 5, said once per run
        result = Pipeline(slowstage.Slow("slow", version="1"), depth=5).run(queries, cache=cache)  # PAUSE changes
    outcomes = result.stages["slow"].outcomes
    kept = result.stages["slow"].cache_hits
    assert kept >= stored and kept + len(slowstage.CALLS) == 200  # nothing stored was lost or recomputed
    assert not set(slowstage.CALLS) & {queries[q] for q, o in outcomes.items() if o.cached}
    assert [o.hits[0].doc_id for o in outcomes.values()] == [f"{t}-doc" for t in queries.values()]
    with pytest.warns(rag_eval.errors.CappedResults):  # once per run
        uninterrupted = Pipeline(slowstage.Slow("slow"), depth=5).run(queries)
    with pytest.warns(rag_eval.errors.CappedResults):  # and once per report
        resumed_report = rag_eval.evaluate({"q1": {"text 1-doc": 1}}, result)
    with pytest.warns(rag_eval.errors.CappedResults):
        uninterrupted_report = rag_eval.evaluate({"q1": {"text 1-doc": 1}}, uninterrupted)
    assert resumed_report.per_query.equals(uninterrupted_report.per_query)
    sys.modules.pop("slowstage", None)


# ----- budgets and fusion -----------------------------------------------------------------------------------
def test_a_token_budget_delivers_the_longest_prefix_that_fits():
    budget = Budget.parse("10tok")
    hits = [Hit("a", text="one two three four"), Hit("b", tokens=5), Hit("c", text="x y")]
    assert budget.cut(hits, rag_eval.stages.count_tokens) == 2  # 4 + 5 fit, + 2 would be 11
    assert Budget.parse(3).cut(hits, len) == 3
    assert rag_eval.stages.count_tokens("Hello, world!") == 4
    with pytest.raises(ValueError, match="neither text nor a token count"):
        budget.cut([Hit("z")], len)


def test_rrf_fusion_by_hand_and_inputs_reported_as_stages():
    one = ListRetriever("one", {"x": docs("a", "b", "c")})
    two = ListRetriever("two", {"x": docs("c", "a")})
    result = Pipeline(fuse(one, two, rrf_k=1), depth=3, budget=2).run({"q": "x"})
    fused = result.stages["rrf(one,two)"].outcomes["q"].hits
    # a: 1/(1+1) + 1/(1+2) = 0.8333; c: 1/(1+3) + 1/(1+1) = 0.75; b: 1/(1+2) = 0.3333
    assert [(h.doc_id, round(h.score, 4)) for h in fused] == [("a", 0.8333), ("c", 0.75), ("b", 0.3333)]
    assert list(result.stages) == ["one", "two", "rrf(one,two)"]
    report = rag_eval.evaluate({"q": {"b": 1}}, result)
    assert report.stages == ["one", "two", "rrf(one,two)"]
    assert report.values(report.runs[0], "recall@budget", stage="one")["q"] == 1.0  # b is 2nd of one
    # no reranker: b, a candidate at rank 3 of a budget of 2, was cut by the budget, not "reranked out"
    assert report.values(report.runs[0], "loss.cut_by_budget", stage="rrf(one,two)")["q"] == 1.0
    assert "loss.reranked_out" not in report.metrics
    assert report.loss_items[["fate", "cut_by"]].values.tolist() == [["cut_by_budget", "budget"]]


# ----- stage-aware values, by hand --------------------------------------------------------------------------
QRELS = {"q1": {"a": 2, "d": 1, "e": 3, "z": 1}, "q2": {"g": 0}, "q3": {"i": 1, "k": 2}}


def test_stage_aware_report_by_hand():
    # bm25 (depth 4): q1 a b c d | e f beyond; q2 g h; q3 i j k.  reverse: q1 d c b a; q3 k j i.  budget 2.
    result = Pipeline(ListRetriever("bm25", RANKINGS), Reverse(), depth=4, budget=2).run(QUERIES)
    report = rag_eval.evaluate(QRELS, result)
    run = report.runs[0]
    assert run == "bm25 %4 >> reverse %budget(2)"
    v = lambda metric, stage: report.values(run, metric, stage=stage).to_dict()  # noqa: E731
    # q1 relevant a, d, e, z (R = 4); q2 none; q3 i, k (R = 2)
    assert v("recall@depth", "bm25") == {"q1": 2 / 4, "q2": 0.0, "q3": 2 / 2}
    assert v("recall@budget", "bm25") == {"q1": 1 / 4, "q2": 0.0, "q3": 1 / 2}
    assert v("precision@budget", "bm25") == {"q1": 1 / 2, "q2": 0.0, "q3": 1 / 2}
    assert v("recall_ceiling@budget", "bm25") == {"q1": 2 / 4, "q2": 0.0, "q3": 2 / 2}
    assert v("recall@budget", "reverse") == {"q1": 1 / 4, "q2": 0.0, "q3": 1 / 2}  # d; k
    assert v("rerank_gain@budget", "reverse") == {"q1": 0.0, "q2": 0.0, "q3": 0.0}
    assert v("mrr@budget", "reverse") == {"q1": 1.0, "q2": 0.0, "q3": 1.0}
    # nDCG@2 with exp gains: q1 ranks d (1 -> gain 1) c (0); ideal over all judged: e (7), a (3)
    idcg_q1 = 7 + 3 / np.log2(3)
    assert v("ndcg@budget", "reverse")["q1"] == pytest.approx(1 / idcg_q1)
    # candidates of q1 were a b c d: best order a (3), d (1) -> 3 + 1/log2(3)
    assert v("cand_ndcg@budget", "reverse")["q1"] == pytest.approx(1 / (3 + 1 / np.log2(3)))
    assert np.isnan(v("cand_ndcg@budget", "reverse")["q2"])  # 0/0: no relevant candidate
    # loss of q1: a reranked out, d delivered, e below the depth, z never retrieved
    assert v("loss.delivered", "reverse")["q1"] == 0.25 and v("loss.never_retrieved", "reverse")["q1"] == 0.25
    assert v("loss.below_depth", "reverse")["q1"] == 0.25 and v("loss.reranked_out", "reverse")["q1"] == 0.25
    assert v("loss.delivered", "reverse")["q3"] == 0.5 and v("loss.reranked_out", "reverse")["q3"] == 0.5
    assert np.isnan(v("loss.delivered", "reverse")["q2"])
    items = report.loss_items.set_index(["query_id", "doc_id"]).fate.to_dict()
    assert items[("q1", "z")] == "never_retrieved" and items[("q1", "e")] == "below_depth"
    summary = report.summary.set_index(["stage", "metric"])
    assert summary.loc[("reverse", "loss.delivered"), "n_nan"] == 1
    assert summary.loc[("reverse", "loss.delivered"), "mean"] == pytest.approx((0.25 + 0.5) / 2)
    assert list(report.per_query.columns) == ["run", "stage", "query_id", "metric", "value"]


def test_a_pipeline_report_survives_save_and_load(tmp_path):
    result = Pipeline(ListRetriever("bm25", RANKINGS), Reverse(fail_on={"gamma"}), depth=4, budget=2).run(QUERIES)
    report = rag_eval.evaluate(QRELS, result)
    report.save(tmp_path / "r.parquet")
    again = rag_eval.Report.load(tmp_path / "r.parquet")
    assert again.per_query.equals(report.per_query)
    assert again.summary.equals(report.summary)
    assert again.loss_items.to_dict("records") == report.loss_items.to_dict("records")
    assert again.failures.to_dict("records") == report.failures.to_dict("records") != []
    assert again.card == report.card


def test_failed_queries_score_zero_or_are_left_out_and_are_counted():
    pipeline = Pipeline(ListRetriever("bm25", RANKINGS), Reverse(fail_on={"gamma"}), depth=4, budget=2)
    result = pipeline.run(QUERIES)
    zero = rag_eval.evaluate(QRELS, result)
    row = zero.summary.set_index(["stage", "metric"]).loc[("reverse", "recall@budget")]
    assert row.n == 3 and row.n_failed == 1 and row["mean"] == pytest.approx((1 / 4 + 0 + 0) / 3)
    assert zero.card.queries[1].counted_as_zero["failed"] == ["q3"]
    excluded = rag_eval.evaluate(QRELS, result, conventions=rag_eval.Conventions(failed="exclude"))
    row = excluded.summary.set_index(["stage", "metric"]).loc[("reverse", "recall@budget")]
    assert row.n == 2 and row.n_failed == 1 and row["mean"] == pytest.approx((1 / 4 + 0) / 2)
    assert excluded.card.queries[1].left_out["failed"] == ["q3"]
    assert excluded.failures.error.tolist() == ["RuntimeError: model down"]


def test_any_engine_metric_at_budget_or_depth_with_a_token_budget(tmp_path):
    texts = {"alpha": [Hit("a", text="w " * 6), Hit("b", text="w " * 6), Hit("c", text="w")]}
    result = Pipeline(ListRetriever("bm25", texts), depth=3, budget="10tok").run({"q1": "alpha"})
    report = rag_eval.evaluate(
        {"q1": {"a": 1, "b": 1}}, result, ["precision@budget", "ap@depth", "ndcg@budget", "recall_ceiling@budget"]
    )
    assert report.metrics == ["precision@budget", "ap@depth", "ndcg@budget"]  # no ceiling with a token budget
    assert report.values(report.runs[0], "precision@budget", stage="bm25")["q1"] == 1.0  # one chunk fits, relevant
    assert report.values(report.runs[0], "ndcg@budget", stage="bm25")["q1"] == 1.0  # ideal cut at 1 too
    path = tmp_path / "report.parquet"
    report.save(path)
    again = rag_eval.Report.load(path)
    assert again.per_query.equals(report.per_query) and again.stages == ["bm25"]
    assert again.loss_items.empty and report.loss_items.empty  # no loss metric was asked for


def test_infinite_scores_survive_the_cache(tmp_path):
    retriever = ListRetriever("r", {"x": [Hit("a", float("inf")), Hit("b", float("-inf"))]})
    first = Pipeline(retriever, depth=5).run({"q": "x"}, cache=tmp_path)
    again = Pipeline(retriever, depth=5).run({"q": "x"}, cache=tmp_path)
    assert again.stages["r"].cache_hits == 1 and len(retriever.calls) == 1
    assert [h.score for h in again.stages["r"].outcomes["q"].hits] == [float("inf"), float("-inf")]
    assert first.failures.empty


def test_a_damaged_shard_in_the_middle_costs_only_its_query(tmp_path):
    retriever = ListRetriever("bm25", RANKINGS)
    _, path, _ = _one_shard_per_query(retriever, tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x04  # one bit flipped in q2's shard
    path.write_bytes(bytes(data))
    with pytest.warns(rag_eval.errors.DamagedShard, match=r"1 damaged shard\(s\) not read"):
        result = Pipeline(retriever, depth=4).run(QUERIES, cache=tmp_path)
    assert retriever.calls[3:] == ["beta"] and result.stages["bm25"].cache_hits == 2
    # the shard was set aside: the next run is told nothing and computes nothing
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = Pipeline(retriever, depth=4).run(QUERIES, cache=tmp_path)
    assert len(retriever.calls) == 4 and again.stages["bm25"].cache_hits == 3
