"""FAISS, two ways users run it: LlamaIndex's ``VectorStoreIndex`` over llama-index-vector-stores-faiss's
``FaissVectorStore`` through the LlamaIndex adapter, and a FAISS index searched directly through the functions
adapter. Both use ``IndexFlatIP`` over unit vectors (inner product = cosine similarity), which is exhaustive
(exact): the pipeline's report equals the exact search's to the digit.

FAISS knows rows, not ids: it returns int positions. LlamaIndex maps them back to the nodes it stored (node ids =
the doc ids); searched directly, the user maps them (``ids[position]``); a position of -1 (fewer vectors than k)
is no hit. The LlamaIndex embedding is ours (LlamaIndex's default would be OpenAI's, over the network)."""

from __future__ import annotations

from typing import Any

import faiss
import numpy as np
import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.schema import TextNode
from llama_index.vector_stores.faiss import FaissVectorStore

from rag_eval.adapters import functions
from rag_eval.adapters import llamaindex as li
from rag_eval.stages import Hit

from . import stores_common as common

pytestmark = pytest.mark.slow  # MiniLM loads once per file (seconds); each test then takes well under a second


class MiniLMEmbedding(BaseEmbedding):
    """LlamaIndex embeddings giving the shared vectors (tests/stores_common.py)."""

    def _get_query_embedding(self, query: str) -> list[float]:
        return common.query_vector(query).tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return common.passage_vector(text).tolist()


def flat_index() -> Any:
    index = faiss.IndexFlatIP(common.corpus_vectors().shape[1])
    index.add(np.ascontiguousarray(common.corpus_vectors(), dtype=np.float32))
    return index


def test_llamaindex_faiss_two_stage_pipeline_equals_the_exact_search() -> None:
    nodes = [
        # the tenant is left out of the text embedded (LlamaIndex prepends metadata by default)
        TextNode(id_=d, text=t, metadata={"tenant": common.tenant(d)}, excluded_embed_metadata_keys=["tenant"])
        for d, t in zip(common.doc_ids(), common.texts(), strict=True)
    ]
    store = FaissVectorStore(faiss_index=faiss.IndexFlatIP(common.corpus_vectors().shape[1]))
    index = VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=MiniLMEmbedding()
    )
    retriever = index.as_retriever(similarity_top_k=common.DEPTH)
    result = common.run(li.retriever(retriever, name=common.FIRST))
    exact = common.run(common.exact_retriever())
    returned = common.ranked_ids(result)
    assert returned == common.ranked_ids(exact)
    similarities = common.exact_similarities(common.collection().queries, returned)
    for q, found in common.scores(result).items():
        assert found == pytest.approx(similarities[q], abs=1e-5), q  # inner products, descending
    report = common.evaluate(result)
    assert common.compare_reports(report, common.evaluate(exact)) == []
    assert common.means(report)[(common.FIRST, "recall@depth")] == pytest.approx(0.93)


def test_faiss_searched_directly_maps_positions_to_ids() -> None:
    index, ids = flat_index(), common.doc_ids()

    def dense(query: str, k: int) -> list[Hit]:
        scores, positions = index.search(common.query_vector(query)[None, :], k)
        content = dict(zip(ids, common.texts(), strict=True))
        return [Hit(ids[p], float(s), content[ids[p]]) for p, s in zip(positions[0], scores[0]) if p >= 0]

    result = common.run(functions.retriever(dense, name=common.FIRST, version="tiny-beir flat"))
    exact = common.run(common.exact_retriever())
    assert common.ranked_ids(result) == common.ranked_ids(exact)
    assert common.compare_reports(common.evaluate(result), common.evaluate(exact)) == []
    # asked for more than it holds, FAISS pads with -1: no hit (30 hits, not 32)
    _, positions = index.search(common.query_vector("how do I oil a bicycle chain")[None, :], 32)
    assert list(positions[0][-2:]) == [-1, -1] and len(dense("how do I oil a bicycle chain", 32)) == 30
