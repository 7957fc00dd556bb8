"""Chroma, as users run it: a persistent client in a folder, telemetry off, their own embedding function (Chroma's
default one downloads a model), through langchain-chroma's ``Chroma`` vector store and the LangChain adapter
(``with_scores=True``: Chroma returns cosine distances, kept as the scores and never used to re-sort). Checked
against the same pipeline over the exact search (tests/stores_common.py). Chroma's index is HNSW, approximate: the
stated tolerance is one relevant passage of one query (every mean of the report within 0.05), although on 30
passages HNSW finds the exact top 5, which the test asserts too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings
from langchain_chroma import Chroma

from rag_eval.adapters import functions
from rag_eval.adapters import langchain as lc
from rag_eval.stages import Hit

from . import stores_common as common

pytestmark = pytest.mark.slow  # MiniLM loads once per file (seconds); each test then takes well under a second

#: how far an approximate index may move a mean metric from the exact search's (one relevant passage in ten
#: queries: recall@depth of a query with two relevant passages moves by 0.5, the mean of ten by 0.05)
HNSW_TOLERANCE = 0.05


def chroma_client(path: Path) -> Any:
    """A persistent client with Chroma's telemetry off (the setting, besides ANONYMIZED_TELEMETRY in conftest)."""
    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Chroma:
    client = chroma_client(tmp_path_factory.mktemp("chroma"))
    store = Chroma(
        collection_name="tiny_beir",
        embedding_function=common.MiniLMEmbeddings(),  # ours: Chroma's default would download a model
        client=client,
        collection_metadata={"hnsw:space": "cosine"},  # the default space is squared L2
    )
    ids = common.doc_ids()
    store.add_texts(common.texts(), ids=ids, metadatas=[{"tenant": common.tenant(d)} for d in ids])
    return store


@pytest.fixture(scope="module")
def exact_report() -> Any:
    return common.evaluate(common.run(common.exact_retriever()))


def test_chroma_two_stage_pipeline_matches_the_exact_search(store: Chroma, exact_report: Any) -> None:
    result = common.run(lc.retriever(store, name=common.FIRST, with_scores=True))
    exact = common.run(common.exact_retriever())
    report = common.evaluate(result)
    # the rank is Chroma's order; its scores are cosine distances (1 - cosine similarity), ascending
    returned = common.ranked_ids(result)
    similarities = common.exact_similarities(common.collection().queries, returned)
    for q, distances in common.scores(result).items():
        assert distances == sorted(distances), q  # distances, never re-sorted into descending "scores"
        assert distances == pytest.approx([1 - s for s in similarities[q]], abs=1e-5), q
    # the stated tolerance of an approximate index, on every mean of the stage-aware report
    mine, theirs = common.means(report), common.means(exact_report)
    assert mine.keys() == theirs.keys()
    assert all(abs(mine[key] - theirs[key]) <= HNSW_TOLERANCE for key in mine), (mine, theirs)
    # on 30 passages HNSW finds the exact top 5: the same ids in the same order, the same report to the digit
    assert returned == common.ranked_ids(exact)
    assert common.compare_reports(report, exact_report) == []
    assert mine[(common.FIRST, "recall@depth")] == pytest.approx(0.93)
    assert mine[(common.RERANK, "ndcg@budget")] == pytest.approx(0.918678, abs=1e-6)


def test_chroma_persists_and_a_new_client_reads_the_same_index(tmp_path: Path) -> None:
    ids = common.doc_ids()
    first = Chroma(
        collection_name="persisted",
        embedding_function=common.MiniLMEmbeddings(),
        client=chroma_client(tmp_path),
        collection_metadata={"hnsw:space": "cosine"},
    )
    first.add_texts(common.texts(), ids=ids)
    again = Chroma(
        collection_name="persisted", embedding_function=common.MiniLMEmbeddings(), client=chroma_client(tmp_path)
    )
    query = common.collection().queries["q1"]
    assert [d.id for d, _ in again.similarity_search_with_score(query, k=5)] == [
        d for d, _ in common.exact_ranking(query, 5)
    ]


def test_chroma_per_query_tenant_filter(store: Chroma) -> None:
    """The query set's ``tenant`` column reaches Chroma's ``filter`` through the functions adapter's hook."""

    def search(query: str, k: int, values: dict[str, Any]) -> list[Hit]:
        found = store.similarity_search_with_score(query, k=k, filter={"tenant": values["tenant"]})
        return [Hit(d.id, s, d.page_content, None, d.metadata) for d, s in found]

    first = functions.retriever(search, name=common.FIRST, columns=["tenant"], queries=common.query_set())
    filtered = common.run(first, common.query_set(), depth=common.FILTERED_DEPTH)
    for q, ids in common.ranked_ids(filtered).items():
        assert ids and {common.tenant(d) for d in ids} == {common.QUERY_TENANTS[q]}, q
    # the filter did something: unfiltered, three queries' top 5 hold another tenant's passages
    unfiltered = common.ranked_ids(common.run(lc.retriever(store, name=common.FIRST, with_scores=True)))
    assert common.foreign(unfiltered) == {"q4", "q6", "q10"}
    assert common.foreign(common.ranked_ids(filtered)) == set()
    # and equals the exact search within the tenant
    assert common.ranked_ids(filtered) == common.ranked_ids(
        common.run(common.exact_filtered_retriever(), common.query_set(), depth=common.FILTERED_DEPTH)
    )
