"""rag_eval.adapters.functions: plain sync and async callables as stages, and their source fingerprints."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import subprocess
import sys

import pytest

from rag_eval.adapters import functions
from rag_eval.stages import Hit, Pipeline

from .adapter_contract import CORPUS, QUERIES, AdapterCase, AdapterContract, keyword_ranking, overlap

# -- the stages under test: a keyword retriever and an overlap reranker, sync and async -------------------------


def keyword_search(query, k):
    """Every matching chunk, whatever k is: the runner keeps the depth."""
    return keyword_ranking(query)


def keyword_search_with_text(query, k):
    return [Hit(doc_id, score, CORPUS[doc_id]) for doc_id, score in keyword_ranking(query, k)]


def by_length(query, hits):
    """Shortest chunks first, cut to three; ids only (no new score)."""
    return [h.doc_id for h in sorted(hits, key=lambda h: (len(CORPUS[h.doc_id]), h.doc_id))][:3]


async def async_search(query, k):
    await asyncio.sleep(0)
    return [(doc_id, score) for doc_id, score in keyword_ranking(query, k)]


async def async_rerank(query, hits):
    await asyncio.sleep(0)
    scored = sorted(
        ((h.doc_id, overlap(query, CORPUS[h.doc_id]) + len(CORPUS[h.doc_id]) / 1000) for h in hits), key=lambda p: -p[1]
    )
    return scored[:4]


def failing(fn, bad):
    """``fn``, but ValueError when its query text (or one of a batch's texts) is ``bad``."""
    if asyncio.iscoroutinefunction(fn):

        async def afailing(query, second):
            if query == bad or (isinstance(query, list) and bad in query):
                raise ValueError(f"boom on {bad!r}")
            return await fn(query, second)

        return afailing

    def sync_failing(query, second):
        if query == bad or (isinstance(query, list) and bad in query):
            raise ValueError(f"boom on {bad!r}")
        return fn(query, second)

    return sync_failing


def faulty_pair(search, rerank, names, *, batch=False):
    def build(bad):
        return (
            functions.retriever(failing(search, bad), name=names[0], batch=batch),
            functions.reranker(failing(rerank, bad), name=names[1], batch=batch),
        )

    return build


# (which, how many queries) of every call of the batch functions below: a global they change, so their stages are
# given a version (their fingerprint would otherwise cover the list's contents, and change with every call)
BATCH_CALLS: list[tuple[str, int]] = []


def batch_search(queries, k):
    """keyword_search_with_text for a whole batch in one call."""
    BATCH_CALLS.append(("search", len(queries)))
    return [keyword_search_with_text(q, k) for q in queries]


def batch_by_length(queries, hit_lists):
    BATCH_CALLS.append(("rerank", len(queries)))
    return [by_length(q, hits) for q, hits in zip(queries, hit_lists)]


async def async_batch_search(queries, k):
    await asyncio.sleep(0)
    BATCH_CALLS.append(("asearch", len(queries)))
    return [[(d, s) for d, s in keyword_ranking(q, k)] for q in queries]


async def async_batch_rerank(queries, hit_lists):
    BATCH_CALLS.append(("arerank", len(queries)))
    return [await async_rerank(q, hits) for q, hits in zip(queries, hit_lists)]


class TestSyncFunctions(AdapterContract):
    @pytest.fixture(scope="class")
    @classmethod
    def case(cls):
        def build():
            return functions.retriever(keyword_search, name="keywords"), functions.reranker(by_length, name="shortest")

        retriever, reranker = build()
        return AdapterCase(
            retriever=retriever,
            reranker=reranker,
            ranking=lambda text, k: [d for d, _ in keyword_search(text, k)],
            rebuild=build,
            variants=(
                functions.retriever(keyword_search, name="keywords", version="2"),
                functions.reranker(by_length, name="shortest", version="2"),
            ),
            depth=4,
            budget=2,
            has_text=False,
            faulty=faulty_pair(keyword_search, by_length, ("keywords", "shortest")),
        )


class TestAsyncFunctions(AdapterContract):
    @pytest.fixture(scope="class")
    @classmethod
    def case(cls):
        def build():
            return (
                functions.retriever(async_search, name="keywords-async"),
                functions.reranker(async_rerank, name="overlap-async"),
            )

        retriever, reranker = build()
        return AdapterCase(
            retriever=retriever,
            reranker=reranker,
            ranking=lambda text, k: [d for d, _ in keyword_ranking(text, k)],
            rebuild=build,
            variants=(
                functions.retriever(keyword_search_with_text, name="keywords-async"),
                functions.reranker(by_length, name="overlap-async"),
            ),
            depth=5,
            budget=3,
            has_text=False,
            faulty=faulty_pair(async_search, async_rerank, ("keywords-async", "overlap-async")),
        )

    def test_async_stages_say_so(self, case):
        assert case.retriever.has_async and case.reranker.has_async


class TestHitsCarryingText(AdapterContract):
    @pytest.fixture(scope="class")
    @classmethod
    def case(cls):
        def build():
            return (
                functions.retriever(keyword_search_with_text, name="keywords"),
                functions.reranker(async_rerank, name="overlap"),
            )

        retriever, reranker = build()
        return AdapterCase(
            retriever=retriever,
            reranker=reranker,
            ranking=lambda text, k: [d for d, _ in keyword_ranking(text, k)],
            rebuild=build,
            variants=(
                functions.retriever(keyword_search_with_text, name="keywords", version="x"),
                functions.reranker(async_rerank, name="overlap", version="x"),
            ),
            faulty=faulty_pair(keyword_search_with_text, async_rerank, ("keywords", "overlap")),
        )


class TestBatchFunctions(AdapterContract):
    @pytest.fixture(scope="class")
    @classmethod
    def case(cls):
        def build():
            return (
                functions.retriever(batch_search, name="keywords", batch=True, version="1"),
                functions.reranker(batch_by_length, name="shortest", batch=True, version="1"),
            )

        retriever, reranker = build()
        return AdapterCase(
            retriever=retriever,
            reranker=reranker,
            ranking=lambda text, k: [d for d, _ in keyword_ranking(text, k)],
            rebuild=build,
            variants=(  # the same functions read one query at a time are other stages
                functions.retriever(keyword_search_with_text, name="keywords"),
                functions.reranker(by_length, name="shortest"),
            ),
            depth=4,
            budget=2,
            faulty=faulty_pair(batch_search, batch_by_length, ("keywords", "shortest"), batch=True),
        )

    def test_a_batched_run_hands_the_functions_whole_batches(self, case):
        BATCH_CALLS.clear()
        pipe = Pipeline(case.retriever, case.reranker, depth=case.depth, budget=case.budget)
        result = pipe.run(QUERIES, batch_size=3)
        assert result.failures.empty
        assert BATCH_CALLS == [("search", 3), ("search", 1), ("rerank", 3), ("rerank", 1)]
        BATCH_CALLS.clear()
        assert case.retriever.search(QUERIES["q1"], 2) == keyword_search_with_text(QUERIES["q1"], 2)
        assert BATCH_CALLS == [("search", 1)]  # a single query is a batch of one


class TestAsyncBatchFunctions(AdapterContract):
    @pytest.fixture(scope="class")
    @classmethod
    def case(cls):
        def build():
            return (
                functions.retriever(async_batch_search, name="keywords-async", batch=True, version="1"),
                functions.reranker(async_batch_rerank, name="overlap-async", batch=True, version="1"),
            )

        retriever, reranker = build()
        return AdapterCase(
            retriever=retriever,
            reranker=reranker,
            ranking=lambda text, k: [d for d, _ in keyword_ranking(text, k)],
            rebuild=build,
            variants=(
                functions.retriever(async_batch_search, name="keywords-async", batch=True, version="2"),
                functions.reranker(async_batch_rerank, name="overlap-async", batch=True, version="2"),
            ),
            depth=5,
            budget=3,
            has_text=False,
            faulty=faulty_pair(async_batch_search, async_batch_rerank, ("keywords-async", "overlap-async"), batch=True),
        )

    def test_the_async_batch_path_is_the_one_a_batched_run_takes(self, case):
        BATCH_CALLS.clear()
        result = Pipeline(case.retriever, case.reranker, depth=case.depth, budget=case.budget).run(
            QUERIES, batch_size=4
        )
        assert result.failures.empty and case.retriever.has_async and case.reranker.has_async
        assert BATCH_CALLS == [("asearch", 4), ("arerank", 4)]


def test_a_batch_function_returning_another_number_of_answers_is_asked_query_by_query():
    """Two rankings for a batch of three: the batch cannot be matched to its queries, so each query is asked alone
    (a batch of one), and a query whose own answer is still wrong fails alone, naming the counts."""
    calls = []

    def short(queries, k):
        calls.append(list(queries))
        answers = [keyword_ranking(q, k) for q in queries]
        return answers[:2] if len(queries) > 1 else ([] if queries == [QUERIES["q3"]] else answers)

    stage = functions.retriever(short, name="short", batch=True)
    with pytest.raises(ValueError, match=r"'short': the batch function returned 2 rankings for 3 queries"):
        stage.search_batch([QUERIES["q1"], QUERIES["q2"], QUERIES["q3"]], 3)
    calls.clear()
    result = Pipeline(stage, depth=3, budget=1).run(QUERIES, batch_size=3)
    assert calls[0] == [QUERIES["q1"], QUERIES["q2"], QUERIES["q3"]]
    assert sorted(map(tuple, calls[1:])) == sorted((QUERIES[q],) for q in ("q1", "q2", "q3", "q4"))
    assert dict(zip(result.failures.query_id, result.failures.error)) == {
        "q3": "ValueError: stage 'short': the batch function returned 0 rankings for 1 query (one per query, in "
        "their order)"
    }
    assert [h.doc_id for h in result.stages["short"].outcomes["q1"].hits] == [
        d for d, _ in keyword_ranking(QUERIES["q1"], 3)
    ]


# -- what a function may return ------------------------------------------------------------------------------


def test_a_retriever_function_may_return_ids_pairs_hits_or_a_generator():
    forms = {
        "ids": lambda q, k: ["doc1#c1", "doc2#c1"],
        "pairs": lambda q, k: [("doc1#c1", 2), ("doc2#c1", 1.5)],
        "hits": lambda q, k: [Hit("doc1#c1", 2.0, "t"), Hit("doc2#c1")],
        "generator": lambda q, k: (d for d in ["doc1#c1", "doc2#c1"]),
    }
    for form, fn in forms.items():
        hits = functions.retriever(fn, name=form).search("q", 2)
        assert [h.doc_id for h in hits] == ["doc1#c1", "doc2#c1"], form
        assert all(isinstance(h, Hit) for h in hits)
    assert functions.retriever(forms["pairs"], name="p").search("q", 2)[1].score == 1.5


@pytest.mark.parametrize(
    "returned, message",
    [
        (None, "returned NoneType"),
        ("doc1#c1", "returned str"),
        ([7.5], "cannot read 7.5"),  # an int or a UUID is a store's id, read as a str (test_store_ids_as_strings)
        ([("doc1#c1", "high")], "could not convert|score"),
    ],
)
def test_bad_retriever_output_names_the_stage(returned, message):
    stage = functions.retriever(lambda q, k: returned, name="broken")
    with pytest.raises((TypeError, ValueError), match=message) as caught:
        stage.search("q", 3)
    assert "broken" in str(caught.value)


def test_a_bad_output_is_a_fault_of_one_query_in_a_run():
    stage = functions.retriever(lambda q, k: None if "cat" in q else ["doc1#c1"], name="flaky")
    result = Pipeline(stage, depth=3, budget=1).run(QUERIES)
    assert list(result.failures["query_id"]) == ["q1"]
    assert "flaky" in result.failures["error"][0]


GIVEN = [
    Hit("doc1#c1", 0.9, CORPUS["doc1#c1"], 12, {"source_doc_id": "doc1", "tags": ["a"]}),
    Hit("doc2#c2", 0.8, CORPUS["doc2#c2"], None, {"source_doc_id": "doc2"}),
    Hit("doc3#c1", 0.7, CORPUS["doc3#c1"]),
]


def test_a_reranker_function_returning_ids_keeps_the_given_fields_and_drops_the_old_score():
    out = functions.reranker(lambda q, hits: ["doc3#c1", "doc1#c1"], name="r").rerank("q", GIVEN)
    assert [h.doc_id for h in out] == ["doc3#c1", "doc1#c1"]
    assert out[1] == Hit("doc1#c1", None, GIVEN[0].text, 12, GIVEN[0].metadata)


def test_a_reranker_function_returning_pairs_takes_the_new_score():
    out = functions.reranker(lambda q, hits: [("doc2#c2", 5), ("doc1#c1", 1)], name="r").rerank("q", GIVEN)
    assert [(h.doc_id, h.score) for h in out] == [("doc2#c2", 5.0), ("doc1#c1", 1.0)]
    assert out[0].metadata == {"source_doc_id": "doc2"} and out[0].text == GIVEN[1].text


def test_a_reranker_function_returning_hits_fills_what_they_leave_out():
    def rescore(query, hits):
        hits.sort(key=lambda h: h.doc_id, reverse=True)  # its own list: sorting it in place is allowed
        return [Hit(h.doc_id, float(i)) if i else h.with_score(9.0) for i, h in enumerate(hits)]

    out = functions.reranker(rescore, name="r").rerank("q", GIVEN)
    assert [h.doc_id for h in out] == ["doc3#c1", "doc2#c2", "doc1#c1"]
    assert out[0].score == 9.0 and out[2] == Hit("doc1#c1", 2.0, GIVEN[0].text, 12, GIVEN[0].metadata)
    assert [h.doc_id for h in GIVEN] == ["doc1#c1", "doc2#c2", "doc3#c1"]


def test_a_reranker_function_returning_a_new_text_loses_the_old_token_count():
    out = functions.reranker(lambda q, hits: [Hit("doc1#c1", 1.0, "shorter")], name="r").rerank("q", GIVEN)
    assert out == [Hit("doc1#c1", 1.0, "shorter", None, GIVEN[0].metadata)]


def test_a_reranker_function_returning_a_stranger_is_an_error_naming_it():
    stage = functions.reranker(lambda q, hits: ["doc9#c9"], name="liar")
    with pytest.raises(ValueError, match=r"liar.*doc9#c9.*not given"):
        stage.rerank("q", GIVEN)


def test_sync_functions_run_on_threads_and_async_ones_anywhere():
    sync = functions.retriever(keyword_search_with_text, name="s")
    asynchronous = functions.retriever(async_search, name="a")
    assert not sync.has_async and asynchronous.has_async
    expected = [d for d, _ in keyword_ranking(QUERIES["q2"], 3)]
    assert [h.doc_id for h in asyncio.run(sync.asearch(QUERIES["q2"], 3))] == expected  # on a thread
    assert [h.doc_id for h in asynchronous.search(QUERIES["q2"], 3)] == expected  # on a fresh event loop

    async def inside_a_running_loop():  # a notebook: the sync entry point must not nest event loops
        return asynchronous.search(QUERIES["q2"], 3)

    assert [h.doc_id for h in asyncio.run(inside_a_running_loop())] == expected


def test_callables_other_than_functions():
    import functools

    class Searcher:
        def __init__(self, limit):
            self.limit = limit

        def __call__(self, query, k):
            return keyword_ranking(query, self.limit)

        async def search(self, query, k):
            return keyword_ranking(query, self.limit)

    assert len(functions.retriever(Searcher(2), name="obj").search(QUERIES["q1"], 5)) == 2
    bound = functions.retriever(Searcher(2).search, name="bound")
    assert bound.has_async and len(bound.search(QUERIES["q1"], 5)) == 2

    def limited(query, k, limit):
        return keyword_ranking(query, limit)

    partial = functions.retriever(functools.partial(limited, limit=1), name="partial")
    assert len(partial.search(QUERIES["q1"], 5)) == 1
    # what these objects hold is part of the fingerprint
    assert (
        functions.retriever(Searcher(2), name="obj").fingerprint()
        != functions.retriever(Searcher(3), name="obj").fingerprint()
    )
    assert (
        functions.retriever(Searcher(2).search, name="b").fingerprint()
        != functions.retriever(Searcher(3).search, name="b").fingerprint()
    )
    assert (
        functions.retriever(functools.partial(limited, limit=1), name="p").fingerprint()
        != functions.retriever(functools.partial(limited, limit=2), name="p").fingerprint()
    )
    with pytest.raises(TypeError, match="expected a function"):
        functions.retriever("not callable", name="x")


# -- fingerprints ----------------------------------------------------------------------------------------------


def test_the_fingerprint_covers_defaults_and_closures():
    def make(k1):
        def search(query, k, b=0.75):
            return keyword_ranking(query, int(k1 * k))

        return search

    assert (
        functions.retriever(make(1.2), name="s").fingerprint() != functions.retriever(make(0.9), name="s").fingerprint()
    )
    assert (
        functions.retriever(make(1.2), name="s").fingerprint() == functions.retriever(make(1.2), name="s").fingerprint()
    )

    def with_default(query, k, b=0.75):
        return []

    other = with_default.__defaults__
    first = functions.retriever(with_default, name="s").fingerprint()
    with_default.__defaults__ = (0.5,)
    try:
        assert functions.retriever(with_default, name="s").fingerprint() != first
    finally:
        with_default.__defaults__ = other


MODULE = '''
import asyncio

def search(query, k):
    """{doc}"""
    return [(d, 1.0) for d in ("doc1#c1", "doc2#c1") if d in {{"doc1#c1", "doc2#c1", "doc3#c1"}}][:k]

async def rerank(query, hits):
    await asyncio.sleep(0)
    return [h.doc_id for h in hits][::-1]
'''

PRINT_FINGERPRINTS = """
import json, sys
sys.path.insert(0, sys.argv[1])
import {module} as m
from rag_eval.adapters import functions
print(json.dumps([functions.retriever(m.search, name="s").fingerprint(),
                  functions.reranker(m.rerank, name="r").fingerprint()]))
"""

# no source to read: a function made by exec, fingerprinted from its code object (a frozenset constant included)
PRINT_EXEC_FINGERPRINT = """
import json
from rag_eval.adapters import functions
space = {}
exec("def search(q, k):\\n    return [d for d in ('a', 'b', 'c') if d in {'a', 'b', 'c', 'd', 'e'}][:k]", space)
print(json.dumps(functions.retriever(space['search'], name='s').fingerprint()))
"""


def _in_subprocess(code: str, *args: str, seed: str) -> object:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout)


def test_the_same_function_has_the_same_fingerprint_in_two_processes(tmp_path):
    (tmp_path / "stages_v1.py").write_text(MODULE.format(doc="v1"))
    code = PRINT_FINGERPRINTS.format(module="stages_v1")
    first = _in_subprocess(code, str(tmp_path), seed="1")
    second = _in_subprocess(code, str(tmp_path), seed="2")
    assert first == second and len(set(first)) == 2
    assert _in_subprocess(PRINT_EXEC_FINGERPRINT, seed="1") == _in_subprocess(PRINT_EXEC_FINGERPRINT, seed="3")


def test_editing_the_source_changes_the_fingerprint_unless_a_version_is_given(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "stages_edit.py"
    path.write_text(MODULE.format(doc="first version"))
    module = importlib.import_module("stages_edit")
    try:
        before = functions.retriever(module.search, name="s")
        pinned_before = functions.retriever(module.search, name="s", version="2024-05")
        assert "code of search" in before.described().covers
        assert pinned_before.described().covers.startswith("version '2024-05'")

        path.write_text(MODULE.format(doc="second version, edited"))
        module = importlib.reload(module)
        after = functions.retriever(module.search, name="s")
        pinned_after = functions.retriever(module.search, name="s", version="2024-05")
        assert after.fingerprint() != before.fingerprint()
        assert pinned_after.fingerprint() == pinned_before.fingerprint()
        bumped = functions.retriever(module.search, name="s", version="2024-06")
        assert bumped.fingerprint() != pinned_after.fingerprint()
    finally:
        sys.modules.pop("stages_edit", None)


# ----- ids as stores return them, and per-query columns (the store tests use both: tests/test_stores_*.py) ------


def test_store_ids_as_strings():
    import uuid

    import numpy as np

    point = uuid.UUID("1B4E28BA-2FA1-11D2-883F-0016D3CCA427")
    returned = [(7, 0.9), (np.int64(8), 0.8), point, ("x-1", 0.5), 0]
    hits = functions.retriever(lambda q, k: returned, name="store").search("q", 5)
    assert [h.doc_id for h in hits] == ["7", "8", "1b4e28ba-2fa1-11d2-883f-0016d3cca427", "x-1", "0"]
    assert [h.score for h in hits] == [0.9, 0.8, None, 0.5, None]
    upper = "1B4E28BA-2FA1-11D2-883F-0016D3CCA427"  # a UUID as a str is the store's own spelling: kept
    assert functions.retriever(lambda q, k: [upper], name="s").search("q", 1)[0].doc_id == upper
    for bad in ([True], [(False, 1.0)], [1.0]):
        with pytest.raises((TypeError, ValueError), match="store"):
            functions.retriever(lambda q, k, bad=bad: bad, name="store").search("q", 1)


def _tenants(**by_id):
    import rag_eval
    from rag_eval.data.queryset import QueryProvenance

    texts = {q: text for q, (text, _) in by_id.items()}
    return rag_eval.QuerySet(
        texts, {q: QueryProvenance(source="t", columns={"tenant": t}) for q, (_, t) in by_id.items()}
    )


def test_per_query_columns_reach_the_function():
    queries = _tenants(q1=("chain oil", "cycles"), q2=("bread flour", "bakery"))
    seen = []

    def search(query, k, values):
        seen.append((query, dict(values)))
        return [f"{values['tenant']}-1"]

    result = Pipeline(functions.retriever(search, name="s", columns=["tenant"], queries=queries), depth=2).run(queries)
    assert sorted(seen) == [("bread flour", {"tenant": "bakery"}), ("chain oil", {"tenant": "cycles"})]
    assert [h.doc_id for h in result.stages["s"].outcomes["q2"].hits] == ["bakery-1"]

    def batch(texts, k, value_list):
        return [[v["tenant"]] for v in value_list]

    stage = functions.retriever(batch, name="b", batch=True, columns=["tenant"], queries=queries)
    assert [[h.doc_id for h in hits] for hits in stage.search_batch(["bread flour", "chain oil"], 1)] == [
        ["bakery"],
        ["cycles"],
    ]
    # a text outside the set is that query's failure, named
    with pytest.raises(LookupError, match="not in the query set"):
        functions.retriever(search, name="s", columns=["tenant"], queries=queries).search("other", 1)


def test_per_query_columns_are_checked_and_in_the_fingerprint():
    from rag_eval.errors import InputError

    def search(query, k, values):
        return []

    queries = _tenants(q1=("chain oil", "cycles"), q2=("bread flour", "bakery"))
    with pytest.raises(InputError, match="together"):
        functions.retriever(search, name="s", columns=["tenant"])
    with pytest.raises(InputError, match="no column 'language'"):
        functions.retriever(search, name="s", columns=["language"], queries=queries)
    with pytest.raises(InputError, match="QuerySet"):
        functions.retriever(search, name="s", columns=["tenant"], queries={"q1": "chain oil"})
    same_text = _tenants(q1=("chain oil", "cycles"), q2=("chain oil", "bakery"))
    with pytest.raises(InputError, match="'q1' and 'q2' have the same text but different columns"):
        functions.retriever(search, name="s", columns=["tenant"], queries=same_text)
    moved = _tenants(q1=("chain oil", "cycles"), q2=("bread flour", "garden"))
    print_ = functions.retriever(search, name="s", columns=["tenant"], queries=queries).fingerprint()
    assert print_ != functions.retriever(search, name="s", columns=["tenant"], queries=moved).fingerprint()
    assert print_ == functions.retriever(search, name="s", columns=["tenant"], queries=queries).fingerprint()


def test_a_retriever_with_per_query_columns_pickles():
    """A stage is pickled for Ray's workers: the columns travel with it."""
    import pickle

    queries = _tenants(q1=("chain oil", "cycles"))
    stage = functions.retriever(_by_tenant, name="s", columns=["tenant"], queries=queries)
    again = pickle.loads(pickle.dumps(stage))
    assert [h.doc_id for h in again.search("chain oil", 1)] == ["cycles"]
    assert again.fingerprint() == stage.fingerprint()


def _by_tenant(query, k, values):
    return [values["tenant"]]
