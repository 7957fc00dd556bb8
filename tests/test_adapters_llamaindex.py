"""rag_eval.adapters.llamaindex on real LlamaIndex objects: a VectorStoreIndex built from pre-split TextNodes with
a local hashed embedding, the BM25 retriever, SimilarityPostprocessor, and a postprocessor of our own that
overwrites the scores of the nodes it is given. Nothing downloads: every model is passed explicitly."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import (
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.retrievers.bm25 import BM25Retriever

from rag_eval.adapters import llamaindex as li
from rag_eval.stages import Hit

from .adapter_contract import CHUNKS, CORPUS, QUERIES, AdapterCase, AdapterContract, overlap, words

# -- real LlamaIndex components of our own ---------------------------------------------------------------------


def _vector(text: str, dim: int) -> list[float]:
    vector = [0.0] * dim
    for word in words(text):
        vector[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % dim] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class HashEmbedding(BaseEmbedding):
    """A hashed bag of words, L2-normalised: deterministic, local, no download."""

    dim: int = 256

    def _get_query_embedding(self, query: str) -> list[float]:
        return _vector(query, self.dim)

    def _get_text_embedding(self, text: str) -> list[float]:
        return _vector(text, self.dim)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return _vector(query, self.dim)


RECEIVED: list[list[NodeWithScore]] = []  # what ScoreOverwriter was handed, call by call


class ScoreOverwriter(BaseNodePostprocessor):
    """Scores by keyword overlap by overwriting ``score`` on the nodes it is given (as SentenceTransformerRerank
    does), keeps ``top_n``."""

    top_n: int = 3

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None):
        RECEIVED.append(list(nodes))
        for node in nodes:
            node.score = overlap(query_bundle.query_str, node.node.get_content())
        return sorted(nodes, key=lambda n: -n.score)[: self.top_n]


class FailingRetriever(BaseRetriever):
    """Another retriever's answers, but ValueError for one query text (what a batch must charge to that query)."""

    def __init__(self, inner: BaseRetriever, bad: str) -> None:
        super().__init__()
        self.inner, self.bad = inner, bad

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if query_bundle.query_str == self.bad:
            raise ValueError(f"boom on {self.bad!r}")
        return self.inner.retrieve(query_bundle)


class FailingPostprocessor(BaseNodePostprocessor):
    """Another postprocessor's answers, but ValueError for one query text."""

    inner: Any
    bad: str

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None):
        if query_bundle is not None and query_bundle.query_str == self.bad:
            raise ValueError(f"boom on {self.bad!r}")
        return self.inner.postprocess_nodes(nodes, query_bundle=query_bundle)


def _faulty(retriever: BaseRetriever, postprocessor: BaseNodePostprocessor, names: tuple[str, str]):
    def build(bad: str):
        return (
            li.retriever(FailingRetriever(retriever, bad), name=names[0], version="index-1"),
            li.reranker(FailingPostprocessor(inner=postprocessor, bad=bad), name=names[1]),
        )

    return build


def _nodes() -> list[TextNode]:
    return [
        TextNode(
            id_=c.id,
            text=c.text,
            metadata={"title": f"document {c.source}"},
            start_char_idx=c.start,
            end_char_idx=c.end,
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=c.source)},
        )
        for c in CHUNKS
    ]


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    return VectorStoreIndex(_nodes(), embed_model=HashEmbedding())


@pytest.fixture(scope="module")
def bm25() -> BM25Retriever:
    return BM25Retriever.from_defaults(nodes=_nodes(), similarity_top_k=8)


def _scores(retriever) -> dict[str, list[tuple[str, float]]]:
    return {q: [(n.node.node_id, n.score) for n in retriever.retrieve(t)] for q, t in QUERIES.items()}


# -- the contract, for two pairings ----------------------------------------------------------------------------


class TestVectorIndexWithScoreOverwriter(AdapterContract):
    @pytest.fixture(scope="class")
    @classmethod
    def case(cls, index):
        framework = index.as_retriever(similarity_top_k=8)

        def build():  # a fresh index from the same nodes: new uuids inside, the same fingerprint
            again = VectorStoreIndex(_nodes(), embed_model=HashEmbedding())
            return (
                li.retriever(again.as_retriever(similarity_top_k=8), name="dense", version="index-1"),
                li.reranker(ScoreOverwriter(top_n=3), name="overwriter"),
            )

        return AdapterCase(
            retriever=li.retriever(framework, name="dense", version="index-1"),
            reranker=li.reranker(ScoreOverwriter(top_n=3), name="overwriter"),
            ranking=lambda text, k: [n.node.node_id for n in framework.retrieve(text)],
            rebuild=build,
            variants=(
                li.retriever(index.as_retriever(similarity_top_k=6), name="dense", version="index-1"),
                li.reranker(ScoreOverwriter(top_n=2), name="overwriter"),
            ),
            framework_scores=lambda: _scores(framework),
            depth=5,
            faulty=_faulty(framework, ScoreOverwriter(top_n=3), ("dense", "overwriter")),
        )

    def test_the_vector_retriever_has_a_native_async_path(self, case):
        assert case.retriever.has_async and case.reranker.has_async

    def test_hits_carry_the_source_document_and_offsets(self, case):
        hits = case.retriever.search(QUERIES["q3"], 5)
        by_id = {c.id: c for c in CHUNKS}
        for hit in hits:
            chunk = by_id[hit.doc_id]
            assert dict(hit.metadata) == {
                "title": f"document {chunk.source}",
                "source_doc_id": chunk.source,
                "start_char": chunk.start,
                "end_char": chunk.end,
            }
            assert hit.text == chunk.text and isinstance(hit.score, float)

    def test_the_postprocessor_gets_fresh_nodes_and_its_writes_stay_there(self, case):
        hits = case.retriever.search(QUERIES["q1"], 5)
        RECEIVED.clear()
        out = case.reranker.rerank(QUERIES["q1"], hits)
        again = case.reranker.rerank(QUERIES["q1"], hits)
        first_call, second_call = RECEIVED
        assert not {id(n) for n in first_call} & {id(n) for n in second_call}
        # what it was handed: each hit's id, text, first-stage score (before it overwrote it), source and offsets
        node = first_call[0].node
        assert (node.node_id, node.get_content(), node.ref_doc_id, node.start_char_idx, node.end_char_idx) == (
            hits[0].doc_id,
            hits[0].text,
            hits[0].metadata["source_doc_id"],
            hits[0].metadata["start_char"],
            hits[0].metadata["end_char"],
        )
        assert node.metadata == {"title": hits[0].metadata["title"]}
        assert [h.score for h in out] == [overlap(QUERIES["q1"], h.text) for h in out]  # the new scores
        assert out == again
        assert [h.score for h in hits] == [s for _, s in _scores(case.retriever.wrapped)["q1"]]
        assert dict(out[0].metadata) == dict(next(h for h in hits if h.doc_id == out[0].doc_id).metadata)


class TestBM25WithSimilarityCutoff(AdapterContract):
    @pytest.fixture(scope="class")
    @classmethod
    def case(cls, bm25):
        def build():
            return (
                li.retriever(
                    BM25Retriever.from_defaults(nodes=_nodes(), similarity_top_k=8), name="bm25", version="index-1"
                ),
                li.reranker(SimilarityPostprocessor(similarity_cutoff=0.5), name="cutoff"),
            )

        return AdapterCase(
            retriever=li.retriever(bm25, name="bm25", version="index-1"),
            reranker=li.reranker(SimilarityPostprocessor(similarity_cutoff=0.5), name="cutoff"),
            ranking=lambda text, k: [n.node.node_id for n in bm25.retrieve(text)],
            rebuild=build,
            variants=(
                li.retriever(
                    BM25Retriever.from_defaults(nodes=_nodes(), similarity_top_k=7), name="bm25", version="index-1"
                ),
                li.reranker(SimilarityPostprocessor(similarity_cutoff=0.6), name="cutoff"),
            ),
            framework_scores=lambda: _scores(bm25),
            depth=4,
            faulty=_faulty(bm25, SimilarityPostprocessor(similarity_cutoff=0.5), ("bm25", "cutoff")),
        )

    def test_bm25_runs_on_threads(self, case):
        assert not case.retriever.has_async  # its _aretrieve is LlamaIndex's synchronous default

    def test_the_cutoff_keeps_the_first_stage_scores_above_it(self, case):
        hits = case.retriever.search(QUERIES["q2"], 8)
        out = case.reranker.rerank(QUERIES["q2"], hits)
        assert out == [h for h in hits if h.score >= 0.5] and out

    def test_a_query_matching_nothing_is_padded_with_zero_scores_by_bm25(self, case):
        hits = case.retriever.search("zebra quasar", 4)  # the framework's own behaviour, passed through as data
        assert len(hits) == 8 and all(h.score == 0.0 for h in hits)
        assert case.reranker.rerank("zebra quasar", hits) == []


# -- edges ---------------------------------------------------------------------------------------------------------


def test_hits_from_elsewhere_rerank_too():
    """Hits without text, score or LlamaIndex metadata (a function retriever's) still become valid nodes."""

    class Reverse(BaseNodePostprocessor):
        def _postprocess_nodes(self, nodes, query_bundle=None):
            return nodes[::-1]

    given = [Hit("doc1#c1"), Hit("doc2#c1", 0.7, CORPUS["doc2#c1"], 9, {"nested": {"a": [1]}})]
    out = li.reranker(Reverse(), name="reverse").rerank("q", given)
    assert out == given[::-1]


def test_a_postprocessor_returning_a_stranger_is_an_error_naming_the_stage():
    class Inventor(BaseNodePostprocessor):
        def _postprocess_nodes(self, nodes, query_bundle=None):
            return [NodeWithScore(node=TextNode(id_="doc9#c9", text="made up"), score=1.0)]

    with pytest.raises(ValueError, match=r"'inventor'.*doc9#c9.*not given"):
        li.reranker(Inventor(), name="inventor").rerank("q", [Hit("doc1#c1", 1.0, "x")])


def test_what_is_not_a_llamaindex_stage_is_refused_early():
    with pytest.raises(TypeError, match="expected a LlamaIndex BaseRetriever"):
        li.retriever(object(), name="x")
    with pytest.raises(TypeError, match="expected a LlamaIndex BaseNodePostprocessor"):
        li.reranker(object(), name="x")


PRINT_FINGERPRINT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from tests.test_adapters_llamaindex import HashEmbedding, _nodes, ScoreOverwriter
from llama_index.core import VectorStoreIndex
from rag_eval.adapters import llamaindex as li
retriever = VectorStoreIndex(_nodes(), embed_model=HashEmbedding()).as_retriever(similarity_top_k=8)
print(json.dumps([li.retriever(retriever, name="dense", version="index-1").fingerprint(),
                  li.reranker(ScoreOverwriter(top_n=3), name="overwriter").fingerprint()]))
"""


def test_fingerprints_are_the_same_in_another_process(index):
    from .conftest import ROOT

    out = subprocess.run(
        [sys.executable, "-c", PRINT_FINGERPRINT, str(ROOT)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    here = [
        li.retriever(index.as_retriever(similarity_top_k=8), name="dense", version="index-1").fingerprint(),
        li.reranker(ScoreOverwriter(top_n=3), name="overwriter").fingerprint(),
    ]
    assert json.loads(out.stdout) == here


def test_no_default_model_was_ever_resolved(index, bm25):
    """LlamaIndex resolves Settings.embed_model and Settings.llm to OpenAI on first use: nothing here used them."""
    from llama_index.core import Settings

    index.as_retriever(similarity_top_k=2).retrieve(QUERIES["q1"])
    assert Settings._embed_model is None and Settings._llm is None


def test_a_retriever_without_a_version_refuses_the_cache_but_runs_without_one(index, tmp_path):
    """Its index is not in its settings (two indexes of one size share them all): keyed by a partial description,
    a cache could hand one index's results to another, so it is cached only with version=."""
    from rag_eval import Pipeline
    from rag_eval.stages.fingerprint import Uncacheable

    stage = li.retriever(index.as_retriever(similarity_top_k=3), name="dense")
    pipe = Pipeline(stage, depth=3)
    with pytest.raises(Uncacheable, match=r"stage 'dense': the index behind a LlamaIndex retriever .* pass version="):
        pipe.run({"q1": QUERIES["q1"]}, cache=tmp_path, progress=False)
    result = pipe.run({"q1": QUERIES["q1"]}, progress=False)
    assert len(result.stages["dense"].outcomes["q1"].hits) == 3
