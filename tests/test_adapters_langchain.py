"""rag_eval.adapters.langchain on real LangChain objects: an InMemoryVectorStore with a local hashed embedding,
a keyword-overlap document compressor, a BaseRetriever of our own, and langchain_classic's
ContextualCompressionRetriever and EnsembleRetriever unfolded by ``pipeline``."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore

from rag_eval.adapters import langchain as lc
from rag_eval.adapters.langchain import POSITION_KEY
from rag_eval.errors import FailingStage
from rag_eval.stages import Fusion, Hit, Pipeline

from .adapter_contract import BY_TEXT, CHUNKS, QUERIES, AdapterCase, AdapterContract, overlap, words

# -- real LangChain components of our own ----------------------------------------------------------------------


class HashEmbeddings(Embeddings):
    """A hashed bag of words, L2-normalised: deterministic, local, no download."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dim
        for word in words(text):
            vector[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % self.dim] += 1.0
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


class KeywordOverlapCompressor(BaseDocumentCompressor):
    """Reranks by the share of query words in the text and keeps ``top_n``; returns NEW documents without ids
    (as many compressors do), with a copy of the metadata and ``relevance_score`` added."""

    top_n: int = 3

    def compress_documents(self, documents: Sequence[Document], query: str, callbacks=None) -> list[Document]:
        scored = sorted(documents, key=lambda d: -overlap(query, d.page_content))[: self.top_n]
        return [
            Document(
                page_content=d.page_content, metadata={**d.metadata, "relevance_score": overlap(query, d.page_content)}
            )
            for d in scored
        ]


class IdKeepingFilter(BaseDocumentCompressor):
    """Keeps the documents sharing a word with the query, as new documents with the ids but no metadata."""

    def compress_documents(self, documents: Sequence[Document], query: str, callbacks=None) -> list[Document]:
        return [Document(page_content=d.page_content, id=d.id) for d in documents if overlap(query, d.page_content)]


class Forgetful(BaseDocumentCompressor):
    """Returns documents with neither the tag nor an id: the adapter cannot tell which input they were."""

    def compress_documents(self, documents: Sequence[Document], query: str, callbacks=None) -> list[Document]:
        return [Document(page_content=d.page_content) for d in documents]


class Scribbler(BaseDocumentCompressor):
    """Writes into the documents it is given (metadata, nested metadata, text) and returns them reversed."""

    def compress_documents(self, documents: Sequence[Document], query: str, callbacks=None) -> list[Document]:
        for d in documents:
            d.metadata["relevance_score"] = 0.5
            d.metadata.setdefault("tags", []).append("scribbled")
            d.page_content = d.page_content.upper()
        return list(documents)[::-1]


class KeywordRetriever(BaseRetriever):
    """Keyword overlap over the corpus, with a ``k`` field, documents carrying their id in metadata["chunk_id"]
    (not in Document.id) and a score in metadata["relevance_score"]."""

    k: int = 4

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        scored = sorted(
            ((overlap(query, c.text), c) for c in CHUNKS if overlap(query, c.text)), key=lambda p: (-p[0], p[1].id)
        )
        return [
            Document(page_content=c.text, metadata={"chunk_id": c.id, "source": c.source, "relevance_score": s})
            for s, c in scored[: self.k]
        ]


class FailingKeywordRetriever(KeywordRetriever):
    """KeywordRetriever, but ValueError for one query text (what a batch must charge to that query)."""

    bad: str = ""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        if query == self.bad:
            raise ValueError(f"boom on {query!r}")
        return super()._get_relevant_documents(query, run_manager=run_manager)


class FailingCompressor(BaseDocumentCompressor):
    """Another compressor's answers, but ValueError for one query text."""

    inner: Any
    bad: str

    def compress_documents(self, documents: Sequence[Document], query: str, callbacks=None) -> list[Document]:
        if query == self.bad:
            raise ValueError(f"boom on {query!r}")
        return self.inner.compress_documents(documents, query)


class FailingEmbeddings(HashEmbeddings):
    """HashEmbeddings, but ValueError when asked to embed one query text."""

    def __init__(self, bad: str) -> None:
        super().__init__()
        self.bad = bad

    def embed_query(self, text: str) -> list[float]:
        if text == self.bad:
            raise ValueError(f"boom on {text!r}")
        return super().embed_query(text)


def _store(embeddings: Embeddings) -> InMemoryVectorStore:
    vs = InMemoryVectorStore(embeddings)
    vs.add_documents(
        [
            Document(page_content=c.text, id=c.id, metadata={"source": c.source, "start": c.start, "tags": ["corpus"]})
            for c in CHUNKS
        ]
    )
    return vs


@pytest.fixture(scope="module")
def store() -> InMemoryVectorStore:
    vs = InMemoryVectorStore(HashEmbeddings())
    vs.add_documents(
        [
            Document(page_content=c.text, id=c.id, metadata={"source": c.source, "start": c.start, "tags": ["corpus"]})
            for c in CHUNKS
        ]
    )
    return vs


def _store_scores(vs: InMemoryVectorStore, k: int = 8):
    return {
        q: [(d.id, s, dict(d.metadata)) for d, s in vs.similarity_search_with_score(t, k=k)] for q, t in QUERIES.items()
    }


# -- the contract, for three pairings --------------------------------------------------------------------------


class TestVectorStoreWithScores(AdapterContract):
    @pytest.fixture(scope="class")
    @classmethod
    def case(cls, store):
        def build():
            return (
                lc.retriever(store, name="dense", with_scores=True),
                lc.reranker(KeywordOverlapCompressor(top_n=3), name="overlap"),
            )

        retriever, reranker = build()
        return AdapterCase(
            retriever=retriever,
            reranker=reranker,
            ranking=lambda text, k: [d.id for d, _ in store.similarity_search_with_score(text, k=k)],
            rebuild=build,
            variants=(
                lc.retriever(store, name="dense", with_scores=False),
                lc.reranker(KeywordOverlapCompressor(top_n=2), name="overlap"),
            ),
            framework_scores=lambda: _store_scores(store),
            faulty=lambda bad: (
                lc.retriever(_store(FailingEmbeddings(bad)), name="dense", with_scores=True),
                lc.reranker(FailingCompressor(inner=KeywordOverlapCompressor(top_n=3), bad=bad), name="overlap"),
            ),
        )

    def test_scores_come_from_the_store(self, case, store):
        hits = case.retriever.search(QUERIES["q2"], 4)
        expected = store.similarity_search_with_score(QUERIES["q2"], k=4)
        assert [(h.doc_id, h.score) for h in hits] == [(d.id, s) for d, s in expected]
        chunk = next(c for c in CHUNKS if c.id == hits[0].doc_id)
        assert hits[0].metadata == {"source": chunk.source, "start": chunk.start, "tags": ["corpus"]}


class TestVectorStoreRetriever(AdapterContract):
    @pytest.fixture(scope="class")
    @classmethod
    def case(cls, store):
        def build():
            return (
                lc.retriever(store.as_retriever(search_kwargs={"k": 2}), name="dense"),
                lc.reranker(IdKeepingFilter(), name="filter"),
            )

        retriever, reranker = build()
        return AdapterCase(
            retriever=retriever,
            reranker=reranker,
            ranking=lambda text, k: [d.id for d in store.as_retriever(search_kwargs={"k": k}).invoke(text)],
            rebuild=build,
            variants=(
                lc.retriever(store.as_retriever(search_kwargs={"k": 2}), name="dense", score_key="score"),
                lc.reranker(IdKeepingFilter(), name="filter", score_key="score"),
            ),
            framework_scores=lambda: _store_scores(store),
            depth=6,
            faulty=lambda bad: (
                lc.retriever(_store(FailingEmbeddings(bad)).as_retriever(search_kwargs={"k": 2}), name="dense"),
                lc.reranker(FailingCompressor(inner=IdKeepingFilter(), bad=bad), name="filter"),
            ),
        )

    def test_the_depth_reaches_search_kwargs_without_changing_them(self, case):
        assert len(case.retriever.search(QUERIES["q1"], 7)) == 7  # the retriever was built with k=2
        assert case.retriever.wrapped.search_kwargs == {"k": 2}
        assert all(h.score is None for h in case.retriever.search(QUERIES["q1"], 3))  # VectorStoreRetriever drops them


class TestOwnRetrieverWithIdKey(AdapterContract):
    @pytest.fixture(scope="class")
    @classmethod
    def case(cls):
        def build():
            return (
                lc.retriever(KeywordRetriever(k=2), name="keywords", id_key="chunk_id"),
                lc.reranker(KeywordOverlapCompressor(top_n=4), name="overlap"),
            )

        retriever, reranker = build()
        return AdapterCase(
            retriever=retriever,
            reranker=reranker,
            ranking=lambda text, k: [d.metadata["chunk_id"] for d in KeywordRetriever(k=k).invoke(text)],
            rebuild=build,
            variants=(
                lc.retriever(KeywordRetriever(k=2), name="keywords", id_key="chunk_id", score_key="s"),
                lc.reranker(KeywordOverlapCompressor(top_n=4), name="overlap", score_key="other"),
            ),
            faulty=lambda bad: (
                lc.retriever(FailingKeywordRetriever(k=2, bad=bad), name="keywords", id_key="chunk_id"),
                lc.reranker(FailingCompressor(inner=KeywordOverlapCompressor(top_n=4), bad=bad), name="overlap"),
            ),
        )

    def test_the_depth_reaches_the_k_field_on_a_copy(self, case):
        query = "a cat, a dog and water"
        assert len(case.retriever.search(query, 5)) == 5 < len(KeywordRetriever(k=99).invoke(query))
        assert case.retriever.wrapped.k == 2

    def test_the_k_it_overrides_is_not_part_of_the_fingerprint(self, case, store):
        assert lc.retriever(KeywordRetriever(k=9), name="keywords", id_key="chunk_id").fingerprint() == (
            case.retriever.fingerprint()
        )
        dense = lc.retriever(store.as_retriever(search_kwargs={"k": 2}), name="d").fingerprint()
        assert lc.retriever(store.as_retriever(search_kwargs={"k": 9}), name="d").fingerprint() == dense
        assert lc.retriever(store.as_retriever(search_type="mmr"), name="d").fingerprint() != dense

    def test_scores_come_from_the_score_key(self, case):
        hits = case.retriever.search(QUERIES["q1"], 3)
        assert [h.score for h in hits] == [overlap(QUERIES["q1"], h.text) for h in hits]
        assert hits[0].metadata["chunk_id"] == hits[0].doc_id


# -- ids ---------------------------------------------------------------------------------------------------------


def test_a_document_without_an_id_is_a_clear_fault_naming_the_stage():
    stage = lc.retriever(KeywordRetriever(k=3), name="no-ids")
    with pytest.raises(ValueError, match=r"'no-ids'.*without an id.*id_key="):
        stage.search(QUERIES["q1"], 3)
    with pytest.warns(FailingStage) as caught:  # every query fails: said once, with the count and the first error
        result = Pipeline(stage, depth=3, budget=1).run(QUERIES)
    assert len(caught) == 1 and str(caught[0].message).startswith(
        f"stage 'no-ids' failed on {len(QUERIES)} of {len(QUERIES)} queries (first: query 'q1': ValueError: stage "
        "'no-ids': the retriever returned a document without an id"
    )
    assert len(result.failures) == len(QUERIES)
    assert all("id_key" in e and "no-ids" in e for e in result.failures["error"])
    with pytest.raises(ValueError, match=r"'wrong-key'.*no metadata\['chunk'\]"):
        lc.retriever(KeywordRetriever(k=3), name="wrong-key", id_key="chunk").search(QUERIES["q1"], 3)


def test_what_is_not_a_retriever_is_refused_early(store):
    with pytest.raises(TypeError, match="not a vector store"):
        lc.retriever(KeywordRetriever(), name="x", with_scores=True)
    with pytest.raises(ValueError, match="search_type 'mmr'"):
        lc.retriever(store.as_retriever(search_type="mmr"), name="x", with_scores=True)
    with pytest.raises(TypeError, match="expected a LangChain"):
        lc.retriever(object(), name="x")
    with pytest.raises(ValueError, match=r"k_param='top_k'.*silently ignored"):
        lc.retriever(KeywordRetriever(), name="x", k_param="top_k")
    with pytest.raises(TypeError, match="BaseDocumentCompressor"):
        lc.reranker(KeywordRetriever(), name="x")


def test_with_scores_reaches_the_store_behind_a_similarity_retriever(store):
    stage = lc.retriever(store.as_retriever(search_kwargs={"k": 2}), name="dense", with_scores=True)
    hits = stage.search(QUERIES["q3"], 4)
    expected = store.similarity_search_with_score(QUERIES["q3"], k=4)
    assert [(h.doc_id, h.score) for h in hits] == [(d.id, s) for d, s in expected]


# -- rerankers ---------------------------------------------------------------------------------------------------

GIVEN = [
    Hit(c.id, 1.0 - i / 10, c.text, 11, {"source": c.source, "tags": ["x"], "relevance_score": 0.9})
    for i, c in enumerate(CHUNKS[:6])
]


def test_new_documents_without_ids_map_back_by_the_position_tag():
    out = lc.reranker(KeywordOverlapCompressor(top_n=2), name="overlap").rerank(QUERIES["q1"], GIVEN)
    expected = sorted(GIVEN, key=lambda h: -overlap(QUERIES["q1"], h.text))[:2]
    assert [h.doc_id for h in out] == [h.doc_id for h in expected]
    assert [h.score for h in out] == [overlap(QUERIES["q1"], h.text) for h in expected]
    assert all(POSITION_KEY not in h.metadata for h in out)
    assert out[0].tokens == 11 and out[0].metadata["source"] == "doc1"


def test_documents_without_the_tag_map_back_by_id_and_a_filter_has_no_score():
    out = lc.reranker(IdKeepingFilter(), name="filter").rerank(QUERIES["q1"], GIVEN)
    assert [h.doc_id for h in out] == [h.doc_id for h in GIVEN if overlap(QUERIES["q1"], h.text)]
    assert all(h.score is None for h in out)  # the input's relevance_score was the previous stage's
    assert all(h.metadata == {} for h in out)  # the compressor returned none


def test_documents_that_cannot_be_mapped_back_are_an_error_naming_the_stage():
    with pytest.raises(ValueError, match=r"'forgetful'.*none of its inputs"):
        lc.reranker(Forgetful(), name="forgetful").rerank(QUERIES["q1"], GIVEN)


def test_a_compressor_writing_into_its_documents_does_not_reach_the_hits():
    snapshot = [h.to_json() for h in GIVEN]
    out = lc.reranker(Scribbler(), name="scribbler").rerank(QUERIES["q1"], GIVEN)
    assert [h.to_json() for h in GIVEN] == snapshot
    assert [h.doc_id for h in out] == [h.doc_id for h in GIVEN][::-1]
    assert out[0].text == GIVEN[-1].text.upper() and out[0].tokens is None  # the compressor's text, counted anew
    assert out[0].score == 0.5 and out[0].metadata["tags"] == ["x", "scribbled"]


def test_a_reranker_needs_text():
    with pytest.raises(ValueError, match=r"'overlap'.*has no text"):
        lc.reranker(KeywordOverlapCompressor(), name="overlap").rerank("q", [Hit("doc1#c1", 1.0)])
    assert lc.reranker(KeywordOverlapCompressor(), name="overlap").rerank("q", []) == []


# -- pipeline(obj): langchain_classic's composite retrievers unfolded --------------------------------------------


def test_a_contextual_compression_retriever_unfolds_into_two_stages_with_the_same_output(store):
    from langchain_classic.retrievers import ContextualCompressionRetriever

    compression = ContextualCompressionRetriever(
        base_compressor=KeywordOverlapCompressor(top_n=3),
        base_retriever=store.as_retriever(search_kwargs={"k": 6}),
    )
    pipe = lc.pipeline(compression, depth=6, budget=2, name="cc")
    assert [s.name for s in pipe.stages] == ["cc/VectorStoreRetriever", "cc/KeywordOverlapCompressor"]
    result = pipe.run(QUERIES)
    assert result.failures.empty, result.failures
    for qid, text in QUERIES.items():
        theirs = [BY_TEXT[d.page_content] for d in compression.invoke(text)]
        assert [h.doc_id for h in result.stages["cc/KeywordOverlapCompressor"].outcomes[qid].hits] == theirs
        assert [h.doc_id for h in result.stages["cc/VectorStoreRetriever"].outcomes[qid].hits] == [
            d.id for d in store.as_retriever(search_kwargs={"k": 6}).invoke(text)
        ]


def test_an_ensemble_retriever_becomes_a_fused_first_stage_ranking_as_it_does():
    from langchain_classic.retrievers import EnsembleRetriever

    # both retrievers carry the chunk id in metadata["chunk_id"]: the ensemble's id_key, used by the adapter too
    store = InMemoryVectorStore(HashEmbeddings())
    store.add_documents([Document(page_content=c.text, metadata={"chunk_id": c.id}) for c in CHUNKS])
    ensemble = EnsembleRetriever(
        retrievers=[store.as_retriever(search_kwargs={"k": 5}), KeywordRetriever(k=5)],
        weights=[0.7, 0.3],
        c=10,
        id_key="chunk_id",
    )
    pipe = lc.pipeline(ensemble, depth=5, budget=3)
    fused = pipe.retriever
    assert isinstance(fused, Fusion) and fused.method == "rrf" and fused.rrf_k == 10 and fused.weights == (0.7, 0.3)
    assert [s.name for s in pipe.stages] == ["VectorStoreRetriever", "KeywordRetriever", fused.name]
    result = pipe.run(QUERIES)
    assert result.failures.empty, result.failures
    for qid, text in QUERIES.items():
        theirs = [d.metadata["chunk_id"] for d in ensemble.invoke(text)]
        assert [h.doc_id for h in result.stages[fused.name].outcomes[qid].hits] == theirs[:5]


def test_nested_composites_unfold_all_the_way(store):
    from langchain_classic.retrievers import ContextualCompressionRetriever, EnsembleRetriever

    ensemble = EnsembleRetriever(
        retrievers=[
            store.as_retriever(search_kwargs={"k": 5}),
            store.as_retriever(search_kwargs={"k": 5, "filter": None}),
        ],
    )
    compression = ContextualCompressionRetriever(base_compressor=IdKeepingFilter(), base_retriever=ensemble)
    pipe = lc.pipeline(compression, depth=5, budget=2)
    assert [s.name for s in pipe.stages] == [
        "VectorStoreRetriever[0]",
        "VectorStoreRetriever[1]",
        "rrf(VectorStoreRetriever[0],VectorStoreRetriever[1])",
        "IdKeepingFilter",
    ]
    result = pipe.run(QUERIES, concurrency=4)
    assert result.failures.empty, result.failures
    for qid, text in QUERIES.items():
        theirs = [d.id for d in compression.invoke(text)]
        assert [h.doc_id for h in result.stages["IdKeepingFilter"].outcomes[qid].hits] == theirs


def test_a_plain_retriever_or_store_is_a_one_stage_pipeline(store):
    pipe = lc.pipeline(store, depth=4, budget=2, name="plain")
    assert [s.name for s in pipe.stages] == ["plain/InMemoryVectorStore"]
    assert pipe.run(QUERIES).failures.empty


def test_two_stores_of_the_same_size_never_share_a_key(tmp_path):
    """The key covers what a vector store holds (texts, vectors, ids), not only its settings and size."""

    def build(texts):
        vs = InMemoryVectorStore(HashEmbeddings())
        vs.add_documents([Document(page_content=t, id=f"d{i}") for i, t in enumerate(texts)])
        return lc.retriever(vs, name="store")

    a, b = build(["apples and pears", "stones"]), build(["stones and rocks", "apples"])
    assert a.fingerprint() != b.fingerprint()
    assert a.fingerprint() == build(["apples and pears", "stones"]).fingerprint()
    first = Pipeline(a, depth=1).run({"q1": "apples"}, cache=tmp_path)
    second = Pipeline(b, depth=1).run({"q1": "apples"}, cache=tmp_path)
    assert second.stages["store"].cache_hits == 0
    assert (
        first.stages["store"].outcomes["q1"].hits[0].doc_id,
        second.stages["store"].outcomes["q1"].hits[0].doc_id,
    ) == ("d0", "d1")


# -- batches -------------------------------------------------------------------------------------------------------

seen_batches: list[tuple[str, list[str], Any, dict[str, Any], int]] = []  # (method, inputs, config, kwargs, k field)


class BatchRecordingRetriever(KeywordRetriever):
    """KeywordRetriever recording every batch/abatch call it gets (LangChain's own batch then runs it)."""

    def batch(self, inputs, config=None, *, return_exceptions=False, **kwargs):
        seen_batches.append(("batch", list(inputs), config, {"return_exceptions": return_exceptions, **kwargs}, self.k))
        return super().batch(inputs, config, return_exceptions=return_exceptions, **kwargs)

    async def abatch(self, inputs, config=None, *, return_exceptions=False, **kwargs):
        seen_batches.append(
            ("abatch", list(inputs), config, {"return_exceptions": return_exceptions, **kwargs}, self.k)
        )
        return await super().abatch(inputs, config, return_exceptions=return_exceptions, **kwargs)


def test_a_batched_run_is_one_call_of_the_retrievers_batch_with_k_and_max_concurrency():
    stage = lc.retriever(BatchRecordingRetriever(k=2), name="kw", id_key="chunk_id", max_concurrency=3)
    seen_batches.clear()
    result = Pipeline(stage, depth=5, budget=1).run(QUERIES, batch_size=len(QUERIES))
    assert result.failures.empty
    # the runner takes the async path of a stage that has one: abatch, given every query, on a copy with k = depth
    assert seen_batches == [("abatch", list(QUERIES.values()), {"max_concurrency": 3}, {"return_exceptions": True}, 5)]
    seen_batches.clear()
    hits = stage.search_batch(list(QUERIES.values()), 4)
    assert seen_batches == [("batch", list(QUERIES.values()), {"max_concurrency": 3}, {"return_exceptions": True}, 4)]
    assert [[h.doc_id for h in one] for one in hits] == [
        [d.metadata["chunk_id"] for d in KeywordRetriever(k=4).invoke(q)] for q in QUERIES.values()
    ]
    seen_batches.clear()
    lc.retriever(BatchRecordingRetriever(), name="kw", id_key="chunk_id").search_batch(["cat"], 2)
    assert seen_batches[0][2] == {}  # no max_concurrency: LangChain's default


def test_a_batch_passes_k_as_the_keyword_a_vector_store_retriever_takes(store):
    stage = lc.retriever(store.as_retriever(search_kwargs={"k": 2}), name="dense")
    hits = stage.search_batch(list(QUERIES.values()), 6)
    assert [len(one) for one in hits] == [6] * len(QUERIES)
    assert stage.wrapped.search_kwargs == {"k": 2}


def test_a_document_failing_a_check_inside_a_batch_fails_its_query_alone():
    """A document without an id for one query only: the batch's other queries keep their answers."""

    class SometimesNoIds(KeywordRetriever):
        def _get_relevant_documents(self, query, *, run_manager):
            documents = super()._get_relevant_documents(query, run_manager=run_manager)
            if query == QUERIES["q3"]:
                documents[0].metadata.pop("chunk_id")
            return documents

    stage = lc.retriever(SometimesNoIds(k=3), name="patchy", id_key="chunk_id")
    with pytest.raises(ValueError, match=r"'patchy': a document has no metadata\['chunk_id'\]"):
        stage.search_batch(list(QUERIES.values()), 3)
    result = Pipeline(stage, depth=3, budget=1).run(QUERIES, batch_size=4)
    assert list(result.failures.query_id) == ["q3"]
    assert "no metadata['chunk_id']" in result.failures.error[0]
    assert [h.doc_id for h in result.stages["patchy"].outcomes["q1"].hits] == [
        d.metadata["chunk_id"] for d in KeywordRetriever(k=3).invoke(QUERIES["q1"])
    ]
