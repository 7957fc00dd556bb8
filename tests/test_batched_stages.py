"""Batched stages and the streaming runner: search_batch/rerank_batch (and their async twins) get batches of
``batch_size``, a batch that cannot be used is asked query by query so a fault stays its query's, queries stream in
blocks through every stage, an executor runs stage by stage to the same result, and the cache key of a reranker's
entry covers the ids it was given, unambiguously."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import types

import pyarrow as pa
import pytest

import rag_eval
from rag_eval.errors import HarnessError
from rag_eval.stages import Hit, Pipeline, Reranker, Retriever, StageCache, _batch, _runner
from rag_eval.stages import hit_table as ht
from rag_eval.stages._batch import StageJob, compute_batch, entry_hash
from rag_eval.stages._executor import Executor, LocalExecutor

QUERIES = {f"q{i}": f"text {i}" for i in range(10)}
QRELS = {q: {f"{t}-d0": 1, f"{t}-d3": 2} for q, t in QUERIES.items()}


def ranking(text: str, k: int) -> list[Hit]:
    return [Hit(f"{text}-d{i}", 1.0 / (i + 1)) for i in range(k)]


class Batched(Retriever):
    """A retriever answering batches: it records the size of every call; ``broken`` texts break a whole batch
    (a batch holding one raises), ``short`` makes every batch answer one list too few."""

    def __init__(self, name="batched", broken=(), bad=None, short=False, **kw):
        super().__init__(name, version="1", **kw)
        self.broken, self.bad, self.short = set(broken), dict(bad or {}), short
        self.batches: list[int] = []
        self.singles: list[str] = []
        self.lock = threading.Lock()

    def search(self, query, k):
        with self.lock:
            self.singles.append(query)
        if query in self.broken:
            raise ConnectionError(f"cannot answer {query!r}")
        return self.bad.get(query, ranking(query, k))

    def search_batch(self, queries, k):
        with self.lock:
            self.batches.append(len(queries))
        if self.broken & set(queries):
            raise ConnectionError("the batch failed")
        answers = [self.bad.get(q, ranking(q, k)) for q in queries]
        return answers[:-1] if self.short else answers


class Reverse(Reranker):
    def __init__(self, name="reverse", **kw):
        super().__init__(name, version="1", **kw)
        self.batches: list[int] = []
        self.singles: list[str] = []

    def rerank(self, query, hits):
        self.singles.append(query)
        return list(reversed(hits))

    def rerank_batch(self, queries, hit_lists):
        self.batches.append(len(queries))
        return [list(reversed(h)) for h in hit_lists]


def per_query(result) -> dict:
    report = rag_eval.evaluate(QRELS, result)
    values = report.per_query.set_index(["stage", "query_id", "metric"])["value"]
    return {k: "nan" if v != v else v for k, v in values.to_dict().items()}  # NaN == NaN here


def test_a_stage_that_answers_batches_gets_batches_of_batch_size_with_the_same_result():
    alone = Pipeline(Batched(), Reverse(), depth=5, budget=2).run(QUERIES)
    first, second = Batched(), Reverse()
    batched = Pipeline(first, second, depth=5, budget=2).run(QUERIES, batch_size=4)
    assert first.batches == [4, 4, 2] and first.singles == [] and second.batches == [4, 4, 2]
    assert per_query(batched) == per_query(alone)
    hits = batched.stages["reverse"].outcomes["q3"].hits
    assert [h.doc_id for h in hits] == [f"text 3-d{i}" for i in (4, 3, 2, 1, 0)]
    assert batched.stages["batched"].table.column("latency").to_pylist() == pytest.approx(
        alone.stages["batched"].table.column("latency").to_pylist(), abs=0.5
    )
    concurrent = Pipeline(Batched(), Reverse(), depth=5, budget=2).run(QUERIES, batch_size=3, concurrency=2)
    assert per_query(concurrent) == per_query(alone)
    assert list(concurrent.stages["reverse"].outcomes) == list(QUERIES)  # query order whatever finished first


def test_the_default_batch_methods_are_the_single_ones():
    class Single(Retriever):
        def search(self, query, k):
            return ranking(query, k)

    stage = Single("single")
    assert stage.search_batch(["a", "b"], 2) == [ranking("a", 2), ranking("b", 2)]
    rev = type("Plain", (Reranker,), {"rerank": lambda self, q, hits: list(reversed(hits))})("plain")
    assert rev.rerank_batch(["a"], [ranking("a", 3)]) == [list(reversed(ranking("a", 3)))]
    with pytest.raises(ValueError):  # one list per query: zip is strict
        rev.rerank_batch(["a", "b"], [ranking("a", 3)])
    result = Pipeline(stage, rev, depth=3).run(QUERIES, batch_size=8)
    assert result.failures.empty and len(result.stages["plain"].outcomes) == len(QUERIES)


def test_a_batch_that_raises_is_asked_query_by_query_and_the_fault_is_its_querys():
    stage = Batched(broken={"text 5"})
    result = Pipeline(stage, depth=3).run(QUERIES, batch_size=4)
    assert stage.batches == [4, 4, 2]  # the second batch (q4..q7) raised ...
    assert stage.singles == ["text 4", "text 5", "text 6", "text 7"]  # ... and its queries were asked alone
    assert result.failures.to_dict("records") == [
        {"stage": "batched", "query_id": "q5", "error": "ConnectionError: cannot answer 'text 5'"}
    ]


def test_a_batch_answering_another_number_of_queries_is_asked_query_by_query():
    stage = Batched(short=True)
    result = Pipeline(stage, depth=3).run(QUERIES, batch_size=4)
    assert stage.batches == [4, 4, 2] and sorted(stage.singles) == sorted(QUERIES.values())
    assert result.failures.empty
    assert [h.doc_id for h in result.stages["batched"].outcomes["q9"].hits] == [f"text 9-d{i}" for i in range(3)]


@pytest.mark.parametrize("retries", [0, 1])
def test_one_bad_answer_in_a_batch_costs_its_query_alone(retries):
    stage = Batched(bad={"text 2": None, "text 6": ["x", "x", "y"]})
    result = Pipeline(stage, depth=3).run(QUERIES, batch_size=4, retries=retries, backoff=0)
    assert stage.batches == [4, 4, 2]
    assert stage.singles == (["text 2"] if retries else [])  # a retry goes through the single-query method
    assert result.failures.to_dict("records") == [
        {"stage": "batched", "query_id": "q2", "error": "returned None instead of a list of hits"}
    ]
    assert result.issues.to_dict("records") == [
        {
            "stage": "batched",
            "query_id": "q6",
            "issue": "returned 1 repeated doc id(s), kept once at the first place (e.g. 'x')",
        }
    ]


def test_a_reranker_batch_with_a_stranger_fails_that_query_only():
    class Inventing(Reverse):
        def rerank_batch(self, queries, hit_lists):
            self.batches.append(len(queries))
            return [[Hit("invented"), *h] if q == "text 1" else h for q, h in zip(queries, hit_lists, strict=True)]

    result = Pipeline(Batched(), Inventing("inventing"), depth=3).run(QUERIES, batch_size=5)
    assert result.failures.to_dict("records") == [
        {"stage": "inventing", "query_id": "q1", "error": "returned doc ids it was not given: ['invented']"}
    ]


def test_an_async_batch_is_awaited_and_a_hanging_batch_times_out_into_single_calls():
    class AsyncBatched(Retriever):
        def __init__(self, name):
            super().__init__(name, version="1")
            self.batches, self.singles = [], []

        @property
        def has_async(self):
            return True

        def search(self, query, k):
            raise AssertionError("the async path should be used")

        async def asearch(self, query, k):
            self.singles.append(query)
            if query == "text 1":
                await asyncio.sleep(3)
            return ranking(query, k)

        async def asearch_batch(self, queries, k):
            self.batches.append(len(queries))
            if "text 1" in queries:
                await asyncio.sleep(3)  # past timeout x 2
            return [ranking(q, k) for q in queries]

    stage = AsyncBatched("async")
    start = time.perf_counter()
    result = Pipeline(stage, depth=2).run(dict(list(QUERIES.items())[:4]), batch_size=2, timeout=0.4)
    assert time.perf_counter() - start < 2.5
    assert stage.batches == [2, 2] and stage.singles == ["text 0", "text 1"]
    assert result.failures.to_dict("records") == [{"stage": "async", "query_id": "q1", "error": "timed out"}]


def test_verify_asks_a_batch_again():
    calls = []

    class Flaky(Batched):
        def search_batch(self, queries, k):
            calls.append(list(queries))
            out = [ranking(q, k) for q in queries]
            if len(calls) == 2:  # the second call of the first batch: q1 answered in another order
                out[1] = list(reversed(out[1]))
            return out

    result = Pipeline(Flaky(), depth=3).run(QUERIES, batch_size=4, verify=2)
    assert calls[:2] == [["text 0", "text 1", "text 2", "text 3"], ["text 0", "text 1"]] and len(calls) == 4
    assert result.issues.to_dict("records") == [
        {
            "stage": "batched",
            "query_id": "q1",
            "issue": "nondeterministic: a second call returned a different ranking (first difference at rank 1)",
        }
    ]


def test_queries_stream_through_every_stage_in_blocks(monkeypatch, tmp_path):
    """Blocks of 3 queries (instead of 1,000): the same result, the cache shared between blocks; each block is a
    batch (or more) of its own."""
    monkeypatch.setattr(_runner, "block_size", lambda batch_size, concurrency: 3)
    whole = Pipeline(Batched(), Reverse(), depth=5, budget=2).run(QUERIES)
    first, second = Batched(), Reverse()
    streamed = Pipeline(first, second, depth=5, budget=2).run(QUERIES, cache=tmp_path, batch_size=2)
    assert first.batches == [2, 1] * 3 + [1] and second.batches == first.batches  # blocks of 3, batches of 2
    assert per_query(streamed) == per_query(whole)
    table = streamed.stages["reverse"].table
    assert table.column("query_id").to_pylist() == list(QUERIES) and table.num_rows == len(QUERIES)
    again = Pipeline(Batched(), Reverse(), depth=5, budget=2).run({**QUERIES, "q10": "text 10"}, cache=tmp_path)
    assert again.stages["batched"].cache_hits == 10 and again.stages["reverse"].cache_hits == 10
    assert again.stages["reverse"].outcomes["q10"].hits[0].doc_id == "text 10-d4"
    stored, computed = again.stages["reverse"].outcomes["q7"], streamed.stages["reverse"].outcomes["q7"]
    assert stored.cached and not computed.cached and stored.hits == computed.hits


def test_a_reranker_after_a_cached_stage_gets_rebuilt_hits_only_for_what_it_computes(tmp_path, monkeypatch):
    built = []
    real = ht.hit_lists

    def counting(table, rows=None):
        out = real(table, rows)
        built.append(len(out))
        return out

    monkeypatch.setattr(ht, "hit_lists", counting)
    Pipeline(Batched(), depth=4).run(QUERIES, cache=tmp_path)
    built.clear()
    second = Reverse()
    result = Pipeline(Batched(), second, depth=4).run(QUERIES, cache=tmp_path)  # retrieval cached, reranker new
    assert result.stages["batched"].cache_hits == 10 and len(second.singles) == 10 and built == [10]
    built.clear()
    Pipeline(Batched(), second, depth=4).run(QUERIES, cache=tmp_path)  # both cached: no Hit is rebuilt
    assert built == []


def test_a_reranker_returning_given_hits_is_taken_and_one_returning_new_hits_is_built():
    class Rescoring(Reranker):
        def rerank(self, query, hits):
            return [h.with_score(10.0 - i) for i, h in enumerate(reversed(hits))]

    taken = Pipeline(Batched(), Reverse(), depth=4).run(QUERIES)
    rescored = Pipeline(Batched(), Rescoring("rescore", version="1"), depth=4).run(QUERIES)
    a, b = taken.stages["reverse"].outcomes["q2"].hits, rescored.stages["rescore"].outcomes["q2"].hits
    assert [h.doc_id for h in a] == [h.doc_id for h in b] == [f"text 2-d{i}" for i in (3, 2, 1, 0)]
    assert [h.score for h in a] == [0.25, 1 / 3, 0.5, 1.0] and [h.score for h in b] == [10.0, 9.0, 8.0, 7.0]
    assert taken.stages["reverse"].table.schema.equals(ht.schema())


def test_compute_batch_returns_rows_in_the_order_given_and_puts_the_good_ones(tmp_path):
    store = StageCache(tmp_path).store("batched", "k")
    stage = Batched(bad={"text 1": None})
    table, hits = compute_batch(
        stage,
        StageJob("first", depth=2),
        ["q2", "q1", "q0"],
        ["text 2", "text 1", "text 0"],
        ["h2", "h1", "h0"],
        store=store,
    )
    assert table.column("query_id").to_pylist() == ["q2", "q1", "q0"]
    assert table.column("error").to_pylist() == [None, "returned None instead of a list of hits", None]
    assert hits[1] is None and [h.doc_id for h in hits[0]] == ["text 2-d0", "text 2-d1"]
    store.flush()
    found = StageCache(tmp_path).store("batched", "k").lookup(["q0", "q1", "q2"], ["h0", "h1", "h2"])
    assert found.column("query_id").to_pylist() == ["q0", "q2"]  # the failed query is not stored


def test_an_executor_runs_stage_by_stage_to_the_same_result(tmp_path):
    class Recording(LocalExecutor):
        def __init__(self):
            self.todo = []

        def run_stage(self, stage, job, todo, store):
            self.todo.append((stage.name, job.role, todo.num_rows, todo.schema.names, store is not None))
            return super().run_stage(stage, job, todo, store)

    local = Pipeline(Batched(broken={"text 4"}), Reverse(), depth=5, budget=2).run(QUERIES, cache=tmp_path / "a")
    executor = Recording()
    assert isinstance(executor, Executor)
    pipe = Pipeline(Batched(broken={"text 4"}), Reverse(), depth=5, budget=2)
    staged = pipe.run(QUERIES, cache=tmp_path / "b", executor=executor)
    assert executor.todo == [
        ("batched", "first", 10, ["query_id", "text", "query_hash"], True),
        ("reverse", "reranker", 9, ["query_id", "text", "query_hash", "hits"], True),  # q4 failed: skipped
    ]
    assert per_query(staged) == per_query(local)
    assert staged.failures.to_dict("records") == local.failures.to_dict("records")
    again = pipe.run(QUERIES, cache=tmp_path / "b", executor=executor)  # the workers' shards are the cache
    assert executor.todo[2:] == [("batched", "first", 1, ["query_id", "text", "query_hash"], True)]  # q4 again
    assert again.stages["reverse"].cache_hits == 9 and per_query(again) == per_query(local)


def test_executor_ray_is_resolved_only_when_asked_for(monkeypatch):
    made = []

    class FakeRay(LocalExecutor):
        def __init__(self):
            made.append(self)

    module = types.ModuleType("rag_eval.stages._ray")
    module.RayExecutor = FakeRay
    monkeypatch.setitem(sys.modules, "rag_eval.stages._ray", module)
    result = Pipeline(Batched(), depth=2).run({"q1": "a"}, executor="ray")
    assert len(made) == 1 and result.failures.empty
    assert _runner.resolve_executor(None) is None


def test_entry_hash_covers_the_text_and_the_given_ids_unambiguously():
    def column(*rows):
        builder = ht.TableBuilder()
        for ids in rows:
            builder.add("q", "", None if ids is None else [Hit(d) for d in ids])
        return builder.table().column("hits")

    first = entry_hash(["a", "a\x00b"])
    assert first == [rag_eval.stages._cache.text_hash("a"), rag_eval.stages._cache.text_hash("a\x00b")]
    hashes = entry_hash(
        ["t", "t", "t", "t\x00a", "t", "t", "t"],
        column(["a\x1fb"], ["a", "b"], ["b", "a"], ["b"], ["a", "b"], None, []),
    )
    assert len(set(hashes[:4])) == 4  # an id holding the separator, an order, a text that looks like an id: apart
    assert hashes[4] == hashes[1] and hashes[5] == "" and hashes[6] not in hashes[:4]
    sliced = column(["x"], ["a", "b"], ["c"]).combine_chunks().slice(1, 1)  # offsets into a larger buffer
    assert entry_hash(["t"], sliced) == [hashes[1]]
    chunked = pa.chunked_array([column(["a\x1fb"]).combine_chunks(), column(["a", "b"]).combine_chunks()])
    assert entry_hash(["t", "t"], chunked) == hashes[:2]


def test_the_gc_thresholds_are_restored_after_a_run():
    import gc

    before = gc.get_threshold()
    seen = []

    class Looking(Batched):
        def search(self, query, k):
            seen.append(gc.get_threshold())
            return super().search(query, k)

    Pipeline(Looking(), depth=2).run({"q1": "a"})
    assert seen[0][2] == max(before[2], _runner.FULL_PASS_EVERY) and gc.get_threshold() == before


def test_a_put_every_second_while_a_slow_block_computes(tmp_path, monkeypatch):
    """A block of slow queries goes to the store as it computes (so a kill loses about a second of it)."""
    monkeypatch.setattr(_batch, "PUT_SECONDS", 0.05)
    puts = []

    class Slow(Batched):
        def search(self, query, k):
            time.sleep(0.03)
            return super().search(query, k)

    store = StageCache(tmp_path, shard_queries=1).store("slow", "k")
    real = store.put
    store.put = lambda table: (puts.append(table.num_rows), real(table))[1]
    ids = list(QUERIES)
    compute_batch(Slow("slow"), StageJob("first", 2), ids, list(QUERIES.values()), ids, store=store)
    assert sum(puts) == 10 and len(puts) >= 3


def test_an_executor_that_loses_rows_is_the_harness_s_fault():
    class Losing:
        def run_stage(self, stage, job, todo, store):
            return LocalExecutor().run_stage(stage, job, todo.slice(1), store)

    with pytest.raises(HarnessError, match=r"returned 9 rows for 10 queries, or in another order"):
        Pipeline(Batched(), depth=2).run(QUERIES, executor=Losing())
