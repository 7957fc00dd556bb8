"""Bad input to the Haystack adapter (docs/bad-input/pipelines.md, "Haystack adapter"): each refused when the stage is
built, or failing its query, with an error naming the stage. Real Haystack components
(tests/test_adapters_haystack.py)."""

from __future__ import annotations

import pytest
from haystack import Document, component
from haystack import Pipeline as HaystackPipeline
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever, InMemoryEmbeddingRetriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from rag_eval.adapters import haystack as hs
from rag_eval.stages import Hit

from .adapter_contract import CHUNKS, QUERIES
from .test_adapters_haystack import NoDepth, OverlapRanker, _bm25_ids, _store


@pytest.fixture(scope="module")
def store() -> InMemoryDocumentStore:
    return _store()


@pytest.fixture(scope="module")
def dense_store() -> InMemoryDocumentStore:
    store = InMemoryDocumentStore(shared=False)  # embeddings are not read by these refusals
    store.write_documents([Document(id=c.id, content=c.text, embedding=[1.0, 0.0]) for c in CHUNKS])
    return store


@component
class TextEmbedder:
    """A stand-in text embedder (these tests never run it)."""

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, list[float]]:
        return {"embedding": [1.0, 0.0]}


def _dense_pipeline(store: InMemoryDocumentStore) -> HaystackPipeline:
    pipe = HaystackPipeline()
    pipe.add_component("embedder", TextEmbedder())
    pipe.add_component("retriever", InMemoryEmbeddingRetriever(store))
    pipe.connect("embedder.embedding", "retriever.query_embedding")
    return pipe


def test_a_haystack_component_without_top_k_is_refused_naming_the_stage():
    with pytest.raises(TypeError, match=r"stage 'fixed': NoDepth.run\(\) declares no 'top_k' input.*k_param="):
        hs.retriever(NoDepth(), name="fixed")
    with pytest.raises(TypeError, match=r"stage 'b': .*declares no 'depth' input"):
        hs.retriever(InMemoryBM25Retriever(InMemoryDocumentStore(shared=False)), name="b", k_param="depth")


def test_what_is_not_a_haystack_retriever_or_ranker_is_refused(dense_store, store):
    with pytest.raises(TypeError, match=r"stage 'x': expected a Haystack component"):
        hs.retriever(object(), name="x")
    with pytest.raises(TypeError, match=r"stage 'x': expected a Haystack component"):
        hs.reranker(lambda q, d: d, name="x")
    with pytest.raises(TypeError, match=r"stage 'e': .*query_embedding: put it in a Haystack Pipeline"):
        hs.retriever(InMemoryEmbeddingRetriever(dense_store), name="e")
    with pytest.raises(TypeError, match=r"stage 'p': a Haystack Pipeline needs component="):
        hs.retriever(_dense_pipeline(dense_store), name="p")
    with pytest.raises(ValueError, match=r"stage 'p': the pipeline has no component 'bm25' \(it has \['embedder'"):
        hs.retriever(_dense_pipeline(dense_store), component="bm25", name="p")
    with pytest.raises(TypeError, match=r"stage 'r': .*declares no 'documents' input"):
        hs.reranker(InMemoryBM25Retriever(store), name="r")
    with pytest.raises(TypeError, match=r"stage 'r': the ranker TextEmbedder declares the outputs \['embedding'"):
        hs.reranker(TextEmbedder(), name="r")
    with pytest.raises(ValueError, match=r"stage 'p': query_inputs \['nowhere.text'\] are not inputs"):
        hs.retriever(_dense_pipeline(dense_store), component="retriever", name="p", query_inputs=["nowhere.text"])


def test_a_haystack_pipeline_needing_more_than_the_query_is_refused(store):
    pipe = HaystackPipeline()
    pipe.add_component("bm25", InMemoryBM25Retriever(store))
    pipe.add_component("ranker", OverlapRanker())  # its query is open too: the routing feeds it
    pipe.connect("bm25.documents", "ranker.documents")
    stage = hs.retriever(pipe, component="bm25", name="bm25")
    assert stage.query_inputs == ("bm25.query", "ranker.query")
    assert [h.doc_id for h in stage.search(QUERIES["q1"], 3)] == _bm25_ids(
        InMemoryBM25Retriever(store), QUERIES["q1"], 3
    )

    @component
    class NeedsTenant:
        @component.output_types(documents=list[Document])
        def run(self, query: str, tenant: str, top_k: int | None = None) -> dict[str, list[Document]]:
            return {"documents": []}

    lone = HaystackPipeline()
    lone.add_component("r", NeedsTenant())
    with pytest.raises(ValueError, match=r"stage 'r': the pipeline needs the inputs \['r.tenant'\]"):
        hs.retriever(lone, component="r", name="r")


def test_a_haystack_ranker_returning_a_stranger_is_an_error_naming_the_stage():
    @component
    class Inventor:
        @component.output_types(documents=list[Document])
        def run(self, query: str, documents: list[Document]) -> dict[str, list[Document]]:
            return {"documents": [Document(id="doc9#c9", content="made up")]}

    with pytest.raises(ValueError, match=r"stage 'inventor': the ranker returned document 'doc9#c9'.*not given"):
        hs.reranker(Inventor(), name="inventor").rerank("q", [Hit("doc1#c1", 1.0, "x")])
    assert hs.reranker(Inventor(), name="inventor").rerank("q", []) == []


def test_a_haystack_document_without_its_id_key_fails_its_query():
    store = InMemoryDocumentStore(shared=False)
    store.write_documents([Document(content=c.text, meta={"chunk_id": c.id}) for c in CHUNKS])
    with pytest.raises(ValueError, match=r"stage 'b': a document has no meta\['chunk'\] to read its id from"):
        hs.retriever(InMemoryBM25Retriever(store), name="b", id_key="chunk").search(QUERIES["q3"], 3)
