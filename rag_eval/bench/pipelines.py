"""The built-in reference pipelines, each built through rag_eval's own adapters, indexing title and text together
as BEIR does:

- ``bm25``: bm25s (Lucene BM25, k1 1.5, b 0.75, English stemming and stopwords) through
  ``llama-index-retrievers-bm25`` and :mod:`rag_eval.adapters.llamaindex`;
- ``dense``: all-MiniLM-L6-v2 in a LangChain ``InMemoryVectorStore`` through :mod:`rag_eval.adapters.langchain`;
- ``bm25>>dense``: BM25 candidates reranked by MiniLM cosine similarity, a LangChain ``BaseDocumentCompressor``;
- ``hybrid``: reciprocal rank fusion (k = 60) of ``bm25`` and ``dense``.

Chunks are encoded once: the dense store and the reranker read the same on-disk embedding cache.

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
from ..data.collection import Collection
from ..stages.fusion import fuse
from ..stages.pipeline import Pipeline
from .embeddings import FEATURE, MODEL_NAME, EmbeddedCorpus, Encoder

BUILTIN = ("bm25", "dense", "bm25>>dense", "hybrid")


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
        from ..adapters import langchain

        store = _matrix_store_class()(embedding=_langchain_embeddings(self))
        documents = require("langchain_core.documents", extra="models", feature=FEATURE)
        ids = list(self.texts)
        store.add_documents([documents.Document(page_content=self.texts[d], id=d) for d in ids], ids=ids)
        return langchain.retriever(
            store, name="dense", with_scores=True, version=f"{MODEL_NAME};{self.collection.name};{len(ids)}"
        )

    def rerank(self):
        from ..adapters import langchain

        return langchain.reranker(_similarity_compressor(self), name="minilm-rerank", version=MODEL_NAME)


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


def prefetch(pipeline: Pipeline, parts: Parts | None, queries: Sequence[str]) -> None:
    """Encode every query in one batch before a run that embeds queries (the dense stages, the reranker)."""
    if parts is not None and any(s.name in ("dense", "minilm-rerank") for s in pipeline.stages):
        parts.encoder.prefetch(list(queries))


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
    turning every stored vector from a list into an array for each query; the same scores and order."""
    store: Any = require("langchain_core.vectorstores", extra="models", feature=FEATURE).InMemoryVectorStore
    documents = require("langchain_core.documents", extra="models", feature=FEATURE)

    class MatrixInMemoryVectorStore(store):
        def _similarity_search_with_score_by_vector(self, embedding, k=4, filter=None):
            if filter is not None:
                return super()._similarity_search_with_score_by_vector(embedding, k, filter)
            docs = list(self.store.values())
            if not docs:
                return []
            cached = getattr(self, "_rag_eval_matrix", None)
            if cached is None or cached[0] != len(docs):
                matrix = np.asarray([doc["vector"] for doc in docs], dtype=np.float64)
                norms = np.linalg.norm(matrix, axis=1)
                cached = (len(docs), matrix / np.where(norms == 0, 1.0, norms)[:, None])
                object.__setattr__(self, "_rag_eval_matrix", cached)
            query = np.asarray(embedding, dtype=np.float64)
            similarity = cached[1] @ (query / (np.linalg.norm(query) or 1.0))
            top_k_idx = similarity.argsort()[::-1][:k]
            return [
                (
                    documents.Document(id=docs[i]["id"], page_content=docs[i]["text"], metadata=docs[i]["metadata"]),
                    float(similarity[i]),
                    docs[i]["vector"],
                )
                for i in top_k_idx
            ]

    return MatrixInMemoryVectorStore


def _similarity_compressor(parts: Parts):
    """A LangChain BaseDocumentCompressor that orders documents by MiniLM cosine similarity to the query, reading
    the documents' embeddings from the corpus cache (by Document.id): no document is encoded again."""
    base: Any = require("langchain_core.documents.compressor", extra="models", feature=FEATURE).BaseDocumentCompressor

    class MiniLMSimilarity(base):
        def compress_documents(self, documents, query, callbacks=None):
            if not documents:
                return []
            q = parts.encoder.query(query)
            vectors = np.stack([_vector(parts, doc) for doc in documents])
            scores = vectors @ q
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
