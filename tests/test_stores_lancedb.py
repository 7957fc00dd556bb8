"""LanceDB, as users run it: an embedded database in a folder (``lancedb.connect(path)``), a table holding each
passage's doc id, tenant, text and MiniLM vector, searched by its own client through the functions adapter. A
table without a vector index is searched exhaustively (exact), so the pipeline's report equals the exact search's
to the digit. LanceDB returns cosine distances (``_distance``, ascending): kept as the scores, never re-sorted.
Per-query filters are SQL ``where`` clauses applied before the search (``prefilter=True``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lancedb
import pytest

import rag_eval
from rag_eval.adapters import functions
from rag_eval.stages import Hit

from . import stores_common as common

pytestmark = pytest.mark.slow  # MiniLM loads once per file (seconds); each test then takes well under a second


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Any:
    db = lancedb.connect(str(tmp_path_factory.mktemp("lancedb")))
    rows = [
        {"doc_id": d, "tenant": common.tenant(d), "text": t, "vector": v.tolist()}
        for d, t, v in zip(common.doc_ids(), common.texts(), common.corpus_vectors(), strict=True)
    ]
    return db.create_table("tiny_beir", data=rows)


def search(table: Any, query: str, k: int, where: str | None = None) -> list[Hit]:
    """LanceDB's own search: cosine distance, exhaustive (no index), best first; the where clause before it."""
    builder = table.search(common.query_vector(query).tolist()).distance_type("cosine").limit(k)
    if where is not None:
        builder = builder.where(where, prefilter=True)
    return [Hit(r["doc_id"], r["_distance"], r["text"], None, {"tenant": r["tenant"]}) for r in builder.to_list()]


def test_lancedb_two_stage_pipeline_equals_the_exact_search(table: Any) -> None:
    def dense(query: str, k: int) -> list[Hit]:
        return search(table, query, k)

    result = common.run(functions.retriever(dense, name=common.FIRST, version="tiny-beir minilm"))
    exact = common.run(common.exact_retriever())
    returned = common.ranked_ids(result)
    assert returned == common.ranked_ids(exact)
    similarities = common.exact_similarities(common.collection().queries, returned)
    for q, distances in common.scores(result).items():
        assert distances == sorted(distances), q  # distances, in LanceDB's order
        assert distances == pytest.approx([1 - s for s in similarities[q]], abs=1e-5), q
    report = common.evaluate(result)
    assert common.compare_reports(report, common.evaluate(exact)) == []
    assert common.means(report)[(common.FIRST, "recall@depth")] == pytest.approx(0.93)


def test_lancedb_per_query_tenant_filter(table: Any) -> None:
    def dense(query: str, k: int, values: dict[str, Any]) -> list[Hit]:
        tenant = str(values["tenant"]).replace("'", "''")  # a SQL string literal
        return search(table, query, k, where=f"tenant = '{tenant}'")

    first = functions.retriever(
        dense, name=common.FIRST, columns=["tenant"], queries=common.query_set(), version="tiny-beir minilm"
    )
    filtered = common.run(first, common.query_set(), depth=common.FILTERED_DEPTH)
    ids = common.ranked_ids(filtered)
    assert common.foreign(ids) == set() and all(len(found) == common.FILTERED_DEPTH for found in ids.values())
    exact = common.run(common.exact_filtered_retriever(), common.query_set(), depth=common.FILTERED_DEPTH)
    assert ids == common.ranked_ids(exact)
    assert common.compare_reports(common.evaluate(filtered), common.evaluate(exact)) == []
    # the hits carry their tenant as LanceDB returned it
    assert {h.metadata["tenant"] for h in filtered.stages[common.FIRST].outcomes["q10"].hits} == {"kitchen"}


def test_lancedb_int_ids_reach_the_report_as_strings(tmp_path: Path) -> None:
    """A table whose id column is an int64 (LanceDB returns Python ints): the report names them ``str(n)``."""
    db = lancedb.connect(str(tmp_path))
    ids = common.doc_ids()
    numbered = db.create_table(
        "numbered", data=[{"n": n, "vector": v.tolist()} for n, v in enumerate(common.corpus_vectors())]
    )

    def dense(query: str, k: int) -> list[tuple[Any, float]]:
        rows = numbered.search(common.query_vector(query).tolist()).distance_type("cosine").limit(k).to_list()
        assert all(type(r["n"]) is int for r in rows)
        return [(r["n"], r["_distance"]) for r in rows]

    result = rag_eval.Pipeline(functions.retriever(dense, name=common.FIRST, version="n"), depth=5, budget=3).run(
        common.collection().queries
    )
    exact = common.ranked_ids(common.run(common.exact_retriever()))
    row = {d: str(n) for n, d in enumerate(ids)}
    assert common.ranked_ids(result) == {q: [row[d] for d in found] for q, found in exact.items()}
