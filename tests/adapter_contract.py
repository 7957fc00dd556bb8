"""The contract every adapter keeps, shared by each adapter's test module (LangChain's standard-tests idea).

A test module subclasses :class:`AdapterContract` (its name has no ``Test`` prefix, so pytest collects only the
subclasses) and gives it a class-scoped ``case`` fixture returning an :class:`AdapterCase`: a retriever and a
reranker built by the adapter from real framework objects, the framework's own ranking to compare with, and
what the fingerprint tests need. The tiny corpus and queries here are shared by every module. Every module of
``rag_eval.adapters`` runs it (``tests/test_adapters_package.py`` checks that each has a test module with an
``AdapterContract`` subclass).

What the contract checks:

- a retriever returns Hits with str doc ids, in the framework's rank order; after ``Pipeline.run`` the runner
  keeps at most ``depth`` of them and records the rest as beyond the depth;
- ``Pipeline(retriever, reranker, depth=..., budget=...).run(queries)`` runs every query with no fault, names
  both stages in the result, and the reranker returns a subset of what it was given;
- the reranker leaves its input hits, and the scores held by the framework objects, as they were;
- fingerprints are stable strings, equal for an equal configuration, different for a different one;
- ``asearch``/``arerank`` agree with ``search``/``rerank``; a stage's native async path (``has_async``) carries a
  ``concurrency=4`` run on its own, with the same results (sync stages run on the runner's threads);
- stage outputs survive the JSON cache (metadata is JSON-friendly);
- the batch methods (``search_batch``/``rerank_batch`` and their async twins) give the single calls' answers, and a
  ``Pipeline.run(batch_size=...)`` the unbatched run's results; a query whose framework call raises inside a batch
  fails alone, with its own error, and every other query of the batch gets its answer (``AdapterCase.faulty``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rag_eval.stages import Hit, Pipeline, Reranker, Retriever

# Six source documents cut into 15 chunks: chunk id "docN#cM", its text, and its offsets in the document
_DOCUMENTS = {
    "doc1": [
        "Cats sleep most of the day and hunt small prey at dusk.",
        "A domestic cat purrs when content and kneads soft blankets.",
        "Kittens learn to hunt by watching their mother stalk mice.",
    ],
    "doc2": [
        "Dogs were domesticated from wolves many thousands of years ago.",
        "A loyal dog guards the house and barks at strangers at night.",
        "Puppies need training, patience and plenty of exercise.",
    ],
    "doc3": [
        "The espresso machine forces hot water through finely ground coffee.",
        "Cold brew coffee steeps coarse grounds in cold water overnight.",
    ],
    "doc4": [
        "Photosynthesis turns sunlight, water and carbon dioxide into sugar.",
        "Leaves are green because chlorophyll absorbs red and blue light.",
    ],
    "doc5": [
        "The Roman empire built roads, aqueducts and walled forts.",
        "Roman legions marched on straight stone roads across Europe.",
    ],
    "doc6": [
        "Rain forms when water vapour condenses into droplets in clouds.",
        "Thunderstorms bring heavy rain, lightning and strong wind gusts.",
        "A rainbow appears when sunlight is refracted by rain drops.",
    ],
}


@dataclass(frozen=True)
class Chunk:
    id: str
    source: str
    text: str
    start: int
    end: int


def _chunks() -> list[Chunk]:
    out = []
    for source, texts in _DOCUMENTS.items():
        start = 0
        for i, text in enumerate(texts, start=1):
            out.append(Chunk(f"{source}#c{i}", source, text, start, start + len(text)))
            start += len(text) + 1
    return out


CHUNKS = _chunks()
CORPUS = {c.id: c.text for c in CHUNKS}
BY_TEXT = {c.text: c.id for c in CHUNKS}
QUERIES = {
    "q1": "how does a cat hunt prey",
    "q2": "coffee brewed with water",
    "q3": "roman roads across europe",
    "q4": "why is it raining with lightning",
}


def words(text: str) -> list[str]:
    """Lower-cased words of two letters or more, a crude stem (plural s dropped): the test models' tokenizer."""
    return [w[:-1] if len(w) > 3 and w.endswith("s") else w for w in re.findall(r"[a-z]{2,}", text.lower())]


def overlap(query: str, text: str) -> float:
    """Share of the query's distinct words found in the text: the test rerankers' score."""
    q = set(words(query))
    return len(q & set(words(text))) / len(q) if q else 0.0


def keyword_ranking(query: str, k: int | None = None) -> list[tuple[str, float]]:
    """Every chunk sharing a word with the query, by overlap (ties by chunk id): the test first stage."""
    scored = [(cid, overlap(query, text)) for cid, text in CORPUS.items()]
    ranked = sorted((p for p in scored if p[1] > 0), key=lambda p: (-p[1], p[0]))
    return ranked if k is None else ranked[:k]


@dataclass
class AdapterCase:
    """What a contract run needs from one adapter pairing."""

    retriever: Retriever
    reranker: Reranker
    ranking: Callable[[str, int], list[str]]  # the framework asked directly, as the adapter asks it, for k ids
    rebuild: Callable[[], tuple[Retriever, Reranker]]  # the same configuration built again (from new objects)
    variants: tuple[Retriever, Reranker]  # the same stages configured differently
    framework_scores: Callable[[], Any] | None = None  # the scores the framework objects hold, to see them unchanged
    depth: int = 5
    budget: int = 3
    has_text: bool = True  # whether the retriever's hits carry the chunk text
    # the same two stages built over framework objects (or functions) that raise ValueError("boom ...") for the
    # query text given and answer every other query as the case's own stages do
    faulty: Callable[[str], tuple[Retriever, Reranker]] | None = None


class AdapterContract:
    """Subclass me with a class-scoped ``case`` fixture returning an :class:`AdapterCase`."""

    queries = QUERIES

    def test_retriever_returns_hits_in_the_framework_rank_order(self, case: AdapterCase):
        for text in self.queries.values():
            hits = list(case.retriever.search(text, case.depth))
            assert hits and all(isinstance(h, Hit) for h in hits)
            assert all(isinstance(h.doc_id, str) and h.doc_id in CORPUS for h in hits)
            assert [h.doc_id for h in hits] == case.ranking(text, case.depth)
            if case.has_text:
                assert all(h.text == CORPUS[h.doc_id] for h in hits)

    def test_runner_keeps_at_most_depth(self, case: AdapterCase):
        result = Pipeline(case.retriever, depth=case.depth, budget=case.budget).run(self.queries)
        assert result.failures.empty, result.failures
        for qid, text in self.queries.items():
            outcome = result.stages[case.retriever.name].outcomes[qid]
            returned = list(dict.fromkeys(case.ranking(text, case.depth)))
            assert len(outcome.hits) <= case.depth
            assert [h.doc_id for h in outcome.hits] == returned[: case.depth]
            assert list(outcome.beyond_depth) == returned[case.depth :]

    def test_two_stage_pipeline_reranks_a_subset(self, case: AdapterCase):
        pipe = Pipeline(case.retriever, case.reranker, depth=case.depth, budget=case.budget)
        result = pipe.run(self.queries)
        assert result.failures.empty, result.failures
        assert list(result.stages) == [case.retriever.name, case.reranker.name]
        assert result.final_stage == case.reranker.name
        for qid in self.queries:
            given = [h.doc_id for h in result.stages[case.retriever.name].outcomes[qid].hits]
            reranked = [h.doc_id for h in result.stages[case.reranker.name].outcomes[qid].hits]
            assert set(reranked) <= set(given)
            assert len(reranked) == len(set(reranked))
        assert all(n <= case.budget for n in result.delivered().values())
        assert set(result.runs) == {case.retriever.name, case.reranker.name}

    def test_reranker_leaves_its_input_and_the_framework_alone(self, case: AdapterCase):
        before = case.framework_scores() if case.framework_scores else None
        for text in self.queries.values():
            hits = list(case.retriever.search(text, case.depth))[: case.depth]
            given = list(hits)
            snapshot = [h.to_json() for h in hits]
            first = case.reranker.rerank(text, hits)
            assert hits == given and all(a is b for a, b in zip(hits, given))
            assert [h.to_json() for h in hits] == snapshot
            again = case.reranker.rerank(text, hits)  # nothing the first call wrote leaks into the second
            assert [h.to_json() for h in again] == [h.to_json() for h in first]
        if case.framework_scores:
            assert case.framework_scores() == before

    def test_fingerprints_are_stable_and_follow_the_configuration(self, case: AdapterCase):
        retriever, reranker = case.retriever, case.reranker
        for stage in (retriever, reranker):
            assert isinstance(stage.fingerprint(), str) and stage.fingerprint() == stage.fingerprint()
        same_retriever, same_reranker = case.rebuild()
        assert same_retriever.fingerprint() == retriever.fingerprint()
        assert same_reranker.fingerprint() == reranker.fingerprint()
        other_retriever, other_reranker = case.variants
        assert other_retriever.fingerprint() != retriever.fingerprint()
        assert other_reranker.fingerprint() != reranker.fingerprint()
        assert retriever.fingerprint() != reranker.fingerprint()

    def test_concurrency_gives_the_same_results(self, case: AdapterCase):
        pipe = Pipeline(case.retriever, case.reranker, depth=case.depth, budget=case.budget)
        one = pipe.run(self.queries, concurrency=1)
        four = pipe.run(self.queries, concurrency=4)
        assert four.failures.empty, four.failures
        assert _ids(four) == _ids(one)

    def test_async_entry_points_agree_with_the_sync_ones(self, case: AdapterCase):
        for text in self.queries.values():
            hits = list(case.retriever.search(text, case.depth))
            ahits = asyncio.run(case.retriever.asearch(text, case.depth))
            assert [h.to_json() for h in ahits] == [h.to_json() for h in hits]
            given = hits[: case.depth]
            reranked = asyncio.run(case.reranker.arerank(text, given))
            assert [h.to_json() for h in reranked] == [h.to_json() for h in case.reranker.rerank(text, given)]

    def test_the_async_path_carries_a_concurrent_run_on_its_own(self, case: AdapterCase, monkeypatch):
        """Every stage claiming a native async path (``has_async``) is driven by it at ``concurrency=4``: with its
        sync entry point disabled, the run still succeeds with the same results."""
        pipe = Pipeline(case.retriever, case.reranker, depth=case.depth, budget=case.budget)
        expected = _ids(pipe.run(self.queries))

        def no_sync_call(*args, **kwargs):
            raise AssertionError("the sync path was called where the async one should run")

        for stage in (case.retriever, case.reranker):
            if stage.has_async:
                monkeypatch.setattr(stage, "search" if isinstance(stage, Retriever) else "rerank", no_sync_call)
        result = pipe.run(self.queries, concurrency=4)
        assert result.failures.empty, result.failures
        assert _ids(result) == expected

    def test_outputs_survive_the_cache(self, case: AdapterCase, tmp_path):
        pipe = Pipeline(case.retriever, case.reranker, depth=case.depth, budget=case.budget)
        fresh = pipe.run(self.queries, cache=tmp_path)
        cached = pipe.run(self.queries, cache=tmp_path)
        assert fresh.failures.empty, fresh.failures
        assert all(out.cache_hits == len(self.queries) for out in cached.stages.values())
        for name, out in fresh.stages.items():
            for qid, outcome in out.outcomes.items():
                assert [h.to_json() for h in cached.stages[name].outcomes[qid].hits] == [
                    h.to_json() for h in outcome.hits
                ]

    def test_the_batch_methods_give_the_single_calls_answers(self, case: AdapterCase):
        texts = list(self.queries.values())
        single = [[h.to_json() for h in case.retriever.search(t, case.depth)] for t in texts]
        assert [[h.to_json() for h in hits] for hits in case.retriever.search_batch(texts, case.depth)] == single
        batch = asyncio.run(case.retriever.asearch_batch(texts, case.depth))
        assert [[h.to_json() for h in hits] for hits in batch] == single
        given = [list(case.retriever.search(t, case.depth))[: case.depth] for t in texts]
        snapshot = [list(hits) for hits in given]
        reranked = [[h.to_json() for h in case.reranker.rerank(t, hits)] for t, hits in zip(texts, given)]
        assert [[h.to_json() for h in hits] for hits in case.reranker.rerank_batch(texts, given)] == reranked
        batch = asyncio.run(case.reranker.arerank_batch(texts, given))
        assert [[h.to_json() for h in hits] for hits in batch] == reranked
        assert given == snapshot  # the batch left its input lists alone
        assert case.retriever.search_batch([], case.depth) == [] and case.reranker.rerank_batch([], []) == []

    def test_a_batched_run_gives_the_unbatched_results(self, case: AdapterCase):
        pipe = Pipeline(case.retriever, case.reranker, depth=case.depth, budget=case.budget)
        one = _hits(pipe.run(self.queries))
        for batch_size, concurrency in ((3, 1), (2, 2), (len(self.queries), 4)):
            result = pipe.run(self.queries, batch_size=batch_size, concurrency=concurrency)
            assert result.failures.empty, result.failures
            assert _hits(result) == one, (batch_size, concurrency)

    def test_a_fault_in_a_batch_is_charged_to_its_own_query(self, case: AdapterCase):
        assert case.faulty is not None, "give the case a faulty builder: the contract checks per-query faults"
        bad_id = "q2"
        bad_retriever, bad_reranker = case.faulty(self.queries[bad_id])
        healthy = Pipeline(case.retriever, case.reranker, depth=case.depth, budget=case.budget).run(self.queries)
        expected = list(_hits(healthy).values())
        for first, second, failing in ((bad_retriever, case.reranker, 0), (case.retriever, bad_reranker, 1)):
            pipe = Pipeline(first, second, depth=case.depth, budget=case.budget)
            result = pipe.run(self.queries, batch_size=3)  # q1, q2, q3 in one batch, q4 alone
            outputs = list(result.stages.values())
            outcome = outputs[failing].outcomes[bad_id]
            assert outcome.failed and "ValueError" in outcome.error and "boom" in outcome.error, outcome
            assert list(result.failures.query_id.unique()) == [bad_id]
            for position, out in enumerate(outputs):
                for qid, outcome in out.outcomes.items():
                    if qid != bad_id:
                        assert not outcome.failed
                        assert [h.to_json() for h in outcome.hits] == expected[position][qid]


def _hits(result) -> dict[str, dict[str, list[dict[str, Any]]]]:
    return {
        name: {q: [h.to_json() for h in o.hits or ()] for q, o in out.outcomes.items()}
        for name, out in result.stages.items()
    }


def _ids(result) -> dict[str, dict[str, list[str]]]:
    return {
        name: {q: [h.doc_id for h in o.hits] for q, o in out.outcomes.items()} for name, out in result.stages.items()
    }
