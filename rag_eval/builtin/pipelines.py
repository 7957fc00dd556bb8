"""The built-in reference pipelines, each built through rag_eval's own adapters, indexing title and text together
as BEIR does:

- ``bm25``: bm25s (Lucene BM25, k1 1.5, b 0.75, English stemming and stopwords) through
  ``llama-index-retrievers-bm25`` and :mod:`rag_eval.adapters.llamaindex`;
- ``dense``: all-MiniLM-L6-v2 in a LangChain ``InMemoryVectorStore`` through :mod:`rag_eval.adapters.langchain`;
- ``bm25>>dense``: BM25 candidates reranked by MiniLM cosine similarity, a LangChain ``BaseDocumentCompressor``;
- ``hybrid``: reciprocal rank fusion (k = 60) of ``bm25`` and ``dense``.

Chunks are encoded once: the dense store and the reranker read the same on-disk embedding cache. Queries are
encoded as the stages are asked: ``Pipeline.run(..., batch_size=N)`` hands the dense stage and the reranker N
queries a call, which they encode in one model call (``search_batch``/``rerank_batch``) and search in one matrix
product; one query at a time (``batch_size=1``) each is encoded alone.

A user's own pipeline plugs in as ``package.module:function``: a function that takes the :class:`Collection`
(and, if it wants them, ``depth``, ``budget``, ``cache_dir`` keyword arguments) and returns a
:class:`rag_eval.Pipeline`.
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._optional import require
from ..adapters.langchain import LangChainReranker, LangChainRetriever
from ..data.collection import Collection
from ..stages.fusion import fuse
from ..stages.hits import Hit
from ..stages.pipeline import Pipeline
from .embeddings import FEATURE, MODEL_NAME, EmbeddedCorpus, Encoder, search, unit_rows

BUILTIN = ("bm25", "dense", "bm25>>dense", "hybrid")
#: the batch size the benchmark and the demo run pipelines with: the dense stage and the reranker encode this many
#: queries in one model call (the other stages answer query by query whatever the batch)
BATCH_SIZE = 64


class Parts:
    """What the built-in pipelines of one collection share: the corpus texts, the encoder, the embeddings."""

    def __init__(self, collection: Collection, cache_dir: str | os.PathLike[str] | None) -> None:
        self.collection = collection
        self.texts = {d: chunk.content for d, chunk in collection.corpus.items()}
        self.encoder = Encoder(Path(cache_dir) / "embeddings" if cache_dir is not None else None)
        self._embedded: EmbeddedCorpus | None = None

    @property
    def embedded(self) -> EmbeddedCorpus:
        if self._embedded is None:
            self._embedded = EmbeddedCorpus.build(self.texts, self.encoder)
        return self._embedded

    def bm25(self, depth: int):
        from ..adapters import llamaindex

        require("bm25s", extra="models", feature=FEATURE)
        retriever_module = require("llama_index.retrievers.bm25", extra="models", feature=FEATURE)
        schema = require("llama_index.core.schema", extra="models", feature=FEATURE)
        stemmer = require("Stemmer", extra="models", feature=FEATURE).Stemmer("english")
        nodes = [schema.TextNode(id_=d, text=t) for d, t in self.texts.items()]
        bm25 = retriever_module.BM25Retriever.from_defaults(
            nodes=nodes, similarity_top_k=min(depth, len(nodes)), stemmer=stemmer, language="english"
        )
        return llamaindex.retriever(bm25, name="bm25", version=f"bm25s-lucene-en;{self.collection.name};{len(nodes)}")

    def dense(self, depth: int):
        store = _matrix_store_class()(embedding=_langchain_embeddings(self))
        documents = require("langchain_core.documents", extra="models", feature=FEATURE)
        ids = list(self.texts)
        store.add_documents([documents.Document(page_content=self.texts[d], id=d) for d in ids], ids=ids)
        return BuiltinDenseRetriever(
            store, name="dense", with_scores=True, version=f"{MODEL_NAME};{self.collection.name};{len(ids)}"
        )

    def rerank(self):
        return BuiltinMiniLMReranker(_similarity_compressor(self), name="minilm-rerank", version=MODEL_NAME)


def build(
    name: str, collection: Collection, *, depth: int, budget: int | str, cache_dir=None, parts: Parts | None = None
) -> Pipeline:
    """A built-in pipeline (see :data:`BUILTIN`) or a user's ``package.module:function`` one."""
    if ":" in name:
        return _user_pipeline(name, collection, depth=depth, budget=budget, cache_dir=cache_dir)
    if name not in BUILTIN:
        raise ValueError(f"unknown pipeline {name!r}: a built-in one ({', '.join(BUILTIN)}) or package.module:function")
    parts = parts or Parts(collection, cache_dir)
    if name == "bm25":
        return Pipeline(parts.bm25(depth), depth=depth, budget=budget)
    if name == "dense":
        return Pipeline(parts.dense(depth), depth=depth, budget=budget)
    if name == "bm25>>dense":
        return Pipeline(parts.bm25(depth), parts.rerank(), depth=depth, budget=budget)
    return Pipeline(
        fuse(parts.bm25(depth), parts.dense(depth), method="rrf", rrf_k=60, name="hybrid"), depth=depth, budget=budget
    )


def _user_pipeline(spec: str, collection: Collection, **settings: Any) -> Pipeline:
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
        function: Callable[..., Pipeline] = getattr(module, attribute)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load pipeline {spec!r}: {exc}") from None
    accepted = inspect.signature(function).parameters
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
    kwargs = {k: v for k, v in settings.items() if takes_all or k in accepted}
    pipeline = function(collection, **kwargs)
    if not isinstance(pipeline, Pipeline):
        raise ValueError(f"pipeline {spec!r} returned a {type(pipeline).__name__}, not a rag_eval.Pipeline")
    return pipeline


def _langchain_embeddings(parts: Parts):
    """A LangChain Embeddings that reads the corpus from the embedding cache and queries from the encoder."""
    base: Any = require("langchain_core.embeddings", extra="models", feature=FEATURE).Embeddings  # known at run time

    class CachedMiniLM(base):
        encoder = parts.encoder  # the batch path of the dense stage encodes through it

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            rows = parts.embedded.row_of
            by_text = {parts.texts[d]: d for d in rows} if len(texts) > 1 else None
            out = []
            for text in texts:
                d = by_text.get(text) if by_text else next((k for k, v in parts.texts.items() if v == text), None)
                out.append(parts.embedded.matrix[rows[d]] if d is not None else parts.encoder.query(text))
            return [v.tolist() for v in out]

        def embed_query(self, text: str) -> list[float]:
            return parts.encoder.query(text).tolist()

    return CachedMiniLM()


def _matrix_store_class():
    """LangChain's ``InMemoryVectorStore``, searching one NumPy matrix of its vectors (built once) instead of
    turning every stored vector from a list into an array for each query: the same scores (to the last bit or two:
    its matrix product sums in another order); equal scores in the order the documents were added.
    :meth:`search_vectors` searches a batch of query vectors in one product."""
    store: Any = require("langchain_core.vectorstores", extra="models", feature=FEATURE).InMemoryVectorStore
    documents = require("langchain_core.documents", extra="models", feature=FEATURE)

    class MatrixInMemoryVectorStore(store):
        def _similarity_search_with_score_by_vector(self, embedding, k=4, filter=None):
            if filter is not None:
                return super()._similarity_search_with_score_by_vector(embedding, k, filter)
            docs = self._rag_eval_docs()
            indices, scores = self.search_vectors(np.asarray([embedding]), k)
            return [
                (
                    documents.Document(id=docs[i]["id"], page_content=docs[i]["text"], metadata=docs[i]["metadata"]),
                    score,
                    docs[i]["vector"],
                )
                for i, score in zip(indices[0].tolist(), scores[0].tolist(), strict=True)
            ]

        def search_vectors(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
            """The top k stored documents (row numbers of :meth:`_rag_eval_docs`) and their cosine similarity, for
            each row of ``vectors``: :func:`rag_eval.builtin.embeddings.search` over the stored vectors."""
            docs = self._rag_eval_docs()
            if not docs:
                return np.zeros((len(vectors), 0), np.intp), np.zeros((len(vectors), 0))
            cached = getattr(self, "_rag_eval_matrix", None)
            if cached is None or cached[0] != len(docs):
                cached = (len(docs), unit_rows(np.asarray([doc["vector"] for doc in docs], dtype=np.float64)))
                object.__setattr__(self, "_rag_eval_matrix", cached)
            return search(cached[1], vectors, k)

        def _rag_eval_docs(self) -> list[dict[str, Any]]:
            return list(self.store.values())

    return MatrixInMemoryVectorStore


class BuiltinDenseRetriever(LangChainRetriever):
    """The built-in dense stage: a LangChain retriever (``with_scores``) over the matrix store, whose batch encodes
    its queries in one model call and searches them in one matrix product; :meth:`search` is the store's own
    ``similarity_search_with_score``, one query of the same search."""

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        store = self.wrapped
        vectors = store.embedding.encoder.encode_queries(list(queries))
        indices, scores = store.search_vectors(vectors, k)
        hits = self._stored_hits(store)
        return [
            [hits[i].with_score(score) for i, score in zip(row, row_scores, strict=True)]
            for row, row_scores in zip(indices.tolist(), scores.tolist(), strict=True)
        ]

    async def asearch_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        return self.search_batch(queries, k)  # one model call: nothing to interleave

    def _stored_hits(self, store: Any) -> list[Hit]:
        """Each stored document as the hit :meth:`search` makes of it (its id, text and metadata, read and
        checked by the adapter), made once per store: a batch's hits are these with their scores."""
        docs = store._rag_eval_docs()
        cached = getattr(self, "_hits_of", None)
        if cached is None or cached[0] is not store or len(cached[1]) != len(docs):
            cached = self._hits_of = (store, [self._hit(_Stored(doc), None) for doc in docs])
        return cached[1]


class _Stored:
    """A stored document of the matrix store seen as a LangChain Document (what the adapter reads of one)."""

    __slots__ = ("id", "metadata", "page_content")

    def __init__(self, doc: dict[str, Any]) -> None:
        self.id, self.page_content, self.metadata = doc["id"], doc["text"], doc["metadata"]


class BuiltinMiniLMReranker(LangChainReranker):
    """The built-in MiniLM reranker: a LangChain reranker of the similarity compressor, whose batch encodes its
    queries in one model call (the documents' embeddings come from the corpus cache); :meth:`rerank` encodes its
    query alone."""

    def rerank_batch(self, queries: Sequence[str], hit_lists: Sequence[Sequence[Hit]]) -> list[list[Hit]]:
        compressor = self.compressor
        vectors = compressor.encoder.encode_queries(list(queries))
        out = []
        for vector, hits in zip(vectors, hit_lists, strict=True):
            given = list(hits)
            out.append(self._map(given, compressor.ranked(self._documents(given), vector)) if given else [])
        return out

    async def arerank_batch(self, queries: Sequence[str], hit_lists: Sequence[Sequence[Hit]]) -> list[list[Hit]]:
        return self.rerank_batch(queries, hit_lists)


def _similarity_compressor(parts: Parts):
    """A LangChain BaseDocumentCompressor that orders documents by MiniLM cosine similarity to the query, reading
    the documents' embeddings from the corpus cache (by Document.id): no document is encoded again."""
    base: Any = require("langchain_core.documents.compressor", extra="models", feature=FEATURE).BaseDocumentCompressor

    class MiniLMSimilarity(base):
        @property
        def encoder(self) -> Encoder:
            return parts.encoder

        def compress_documents(self, documents, query, callbacks=None):
            if not documents:
                return []
            return self.ranked(documents, parts.encoder.query(query))

        def ranked(self, documents, query_vector: np.ndarray):
            """The documents by cosine similarity to ``query_vector`` (equal scores in the given order), each with
            its ``relevance_score``."""
            if not documents:
                return []
            vectors = np.stack([_vector(parts, doc) for doc in documents])
            scores = vectors @ query_vector
            order = np.argsort(-scores, kind="stable")
            out = []
            for i in order.tolist():
                doc = documents[i]
                doc.metadata = dict(doc.metadata, relevance_score=float(scores[i]))
                out.append(doc)
            return out

    return MiniLMSimilarity()


def _vector(parts: Parts, document) -> np.ndarray:
    row = parts.embedded.row_of.get(document.id) if document.id is not None else None
    return parts.embedded.matrix[row] if row is not None else parts.encoder.query(document.page_content)
