"""Qdrant in local mode (a folder, or ``":memory:"``; never a server), two ways users run it: langchain-qdrant's
``QdrantVectorStore`` through the LangChain adapter, and qdrant-client's own ``query_points`` through the functions
adapter. Local mode searches exactly (brute force), so the pipeline's report equals the exact search's to the digit.

Qdrant accepts only unsigned integers and UUIDs as point ids: each passage's point id is ``uuid5`` of its doc id,
and the doc id rides in the payload (``metadata.doc_id`` for langchain-qdrant, which leaves ``Document.id``
empty; ``doc_id`` for the client's own points), read back by ``id_key="doc_id"`` or by the search function. Ids
returned as ints or UUIDs reach the report as strings (``7`` as ``"7"``, a UUID as ``str(uuid)``)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain_qdrant import QdrantVectorStore
from qdrant_client import QdrantClient, models

import rag_eval
from rag_eval.adapters import functions
from rag_eval.adapters import langchain as lc
from rag_eval.stages import Hit, Pipeline

from . import stores_common as common

pytestmark = pytest.mark.slow  # MiniLM loads once per file (seconds); each test then takes well under a second

DIMENSIONS = 384
NAMESPACE = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")  # uuid.NAMESPACE_URL: any fixed namespace will do


def point_id(doc_id: str) -> uuid.UUID:
    """The Qdrant point id of a passage: a UUID made from its doc id (the same id in every run)."""
    return uuid.uuid5(NAMESPACE, doc_id)


def new_collection(client: QdrantClient, name: str) -> None:
    client.create_collection(name, vectors_config=models.VectorParams(size=DIMENSIONS, distance=models.Distance.COSINE))


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    client = QdrantClient(path=str(tmp_path_factory.mktemp("qdrant")))  # local mode, on disk
    yield client
    client.close()


@pytest.fixture(scope="module")
def store(client: QdrantClient) -> QdrantVectorStore:
    new_collection(client, "tiny_beir")
    store = QdrantVectorStore(client=client, collection_name="tiny_beir", embedding=common.MiniLMEmbeddings())
    ids = common.doc_ids()
    store.add_texts(
        common.texts(),
        ids=[str(point_id(d)) for d in ids],
        metadatas=[{"doc_id": d, "tenant": common.tenant(d)} for d in ids],
    )
    return store


@pytest.fixture(scope="module")
def points(client: QdrantClient) -> str:
    """The same passages as the client's own points: payload ``doc_id``, ``tenant`` and ``text``."""
    new_collection(client, "points")
    client.upsert(
        "points",
        [
            models.PointStruct(
                id=str(point_id(d)), vector=v.tolist(), payload={"doc_id": d, "tenant": common.tenant(d), "text": t}
            )
            for d, t, v in zip(common.doc_ids(), common.texts(), common.corpus_vectors(), strict=True)
        ],
    )
    return "points"


@pytest.fixture(scope="module")
def exact_report() -> rag_eval.Report:
    return common.evaluate(common.run(common.exact_retriever()))


def test_langchain_qdrant_two_stage_pipeline_equals_the_exact_search(
    store: QdrantVectorStore, exact_report: rag_eval.Report
) -> None:
    result = common.run(lc.retriever(store, name=common.FIRST, with_scores=True, id_key="doc_id"))
    returned = common.ranked_ids(result)
    assert returned == common.ranked_ids(common.run(common.exact_retriever()))
    hit = result.stages[common.FIRST].outcomes["q1"].hits[0]
    assert hit.doc_id == "bike-01" and hit.metadata["_id"] == str(point_id("bike-01"))  # the point id, kept as data
    similarities = common.exact_similarities(common.collection().queries, returned)
    for q, found in common.scores(result).items():
        assert found == pytest.approx(similarities[q], abs=1e-5), q  # cosine similarity, descending
    report = common.evaluate(result)
    assert common.compare_reports(report, exact_report) == []  # exact: every value of every stage and query
    assert common.means(report)[(common.FIRST, "recall@depth")] == pytest.approx(0.93)


def search_points(client: QdrantClient, collection: str, query: str, k: int, where: Any = None) -> list[Hit]:
    """qdrant-client's own search, the doc id read back from the payload."""
    response = client.query_points(
        collection, query=common.query_vector(query).tolist(), query_filter=where, limit=k, with_payload=True
    )
    return [
        Hit(p.payload["doc_id"], p.score, p.payload["text"], None, {"tenant": p.payload["tenant"]})
        for p in response.points
    ]


def test_qdrant_client_through_the_functions_adapter_equals_the_exact_search(
    client: QdrantClient, points: str, exact_report: rag_eval.Report
) -> None:
    def search(query: str, k: int) -> list[Hit]:
        return search_points(client, points, query, k)

    result = common.run(functions.retriever(search, name=common.FIRST, version="tiny-beir minilm"))
    assert common.ranked_ids(result) == common.ranked_ids(common.run(common.exact_retriever()))
    assert common.compare_reports(common.evaluate(result), exact_report) == []


def test_qdrant_per_query_tenant_filter(client: QdrantClient, points: str) -> None:
    """The query set's ``tenant`` column becomes a payload filter (the functions adapter's ``columns=`` hook)."""

    def search(query: str, k: int, values: dict[str, Any]) -> list[Hit]:
        condition = models.FieldCondition(key="tenant", match=models.MatchValue(value=values["tenant"]))
        return search_points(client, points, query, k, models.Filter(must=[condition]))

    first = functions.retriever(search, name=common.FIRST, columns=["tenant"], queries=common.query_set())
    filtered = common.ranked_ids(common.run(first, common.query_set(), depth=common.FILTERED_DEPTH))
    assert common.foreign(filtered) == set()
    assert all(len(ids) == common.FILTERED_DEPTH for ids in filtered.values())
    unfiltered = common.ranked_ids(common.run(common.exact_retriever()))
    assert common.foreign(unfiltered) == {"q4", "q6", "q10"}  # the filter changed these
    exact = common.run(common.exact_filtered_retriever(), common.query_set(), depth=common.FILTERED_DEPTH)
    assert filtered == common.ranked_ids(exact)
    assert filtered["q4"] == ["bread-02", "bread-01", "bread-06", "bread-03", "bread-04"]  # no plant-07 or plant-01


@pytest.mark.parametrize("kind", ["int", "uuid"])
def test_point_ids_as_qdrant_returns_them_reach_the_report_as_strings(kind: str) -> None:
    """A corpus whose doc ids are the point ids themselves: unsigned ints (returned as ``int``) or UUIDs (returned as
    str by Qdrant, given back here as ``uuid.UUID``): the report names them ``str(n)`` and ``str(uuid)``."""
    ids = common.doc_ids()
    as_point = {d: (n if kind == "int" else point_id(d)) for n, d in enumerate(ids)}
    name = {d: str(p) for d, p in as_point.items()}  # the documented string: "7"; "1b4e28ba-2fa1-..." (lower case)
    client = QdrantClient(":memory:")
    new_collection(client, kind)
    client.upsert(
        kind,
        [
            models.PointStruct(id=as_point[d], vector=v.tolist())  # no payload: the point id is the doc id
            for d, v in zip(ids, common.corpus_vectors(), strict=True)
        ],
    )

    def search(query: str, k: int) -> list[tuple[Any, float]]:
        found = client.query_points(kind, query=common.query_vector(query).tolist(), limit=k).points
        return [(p.id if kind == "int" else uuid.UUID(p.id), p.score) for p in found]

    first = client.query_points(kind, query=common.query_vector("how do I oil a bicycle chain").tolist(), limit=1)
    assert type(first.points[0].id) is (int if kind == "int" else str)  # what Qdrant returns
    result = Pipeline(functions.retriever(search, name=common.FIRST, version=kind), depth=common.DEPTH, budget=3).run(
        common.collection().queries
    )
    exact = common.ranked_ids(common.run(common.exact_retriever()))
    assert common.ranked_ids(result) == {q: [name[d] for d in found] for q, found in exact.items()}
    qrels = {
        q: {name[d]: grade for d, grade in judged.items()} for q, judged in common.collection().qrels.to_dict().items()
    }
    report = rag_eval.evaluate(qrels, {"pipeline": result})
    assert report.values(report.runs[0], "recall@depth", stage=common.FIRST).to_dict() == pytest.approx(
        common.evaluate(common.run(common.exact_retriever()))
        .values("pipeline", "recall@depth", stage=common.FIRST)
        .to_dict()
    )
    client.close()
