"""Ids that differ only by surrounding whitespace or leading zeros: a classic source of silent zeros.

A run that calls a query ``"001"`` while the qrels call it ``"1"`` scores 0 on it without an error: the two are
different ids. rag_eval keeps them different (guessing would be worse) but warns when the only difference is
surrounding whitespace or leading zeros, for query ids and for the doc ids of queries with no judged result.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..data.qrels import Qrels
from ..data.run import Run
from ..errors import NearMissIds

DOC_QUERIES_CHECKED = 100  # queries without a judged result whose doc ids are compared (the check stays cheap)


def canonical(identifier: str) -> str:
    """``identifier`` without surrounding whitespace and leading zeros (``" 007 "`` -> ``"7"``)."""
    text = identifier.strip()
    return text.lstrip("0") or text[:1]


def query_near_misses(run_only: list[str], unmatched_qrels: list[str]) -> list[tuple[str, str]]:
    """Pairs ``(run id, qrels id)`` of different query ids with the same :func:`canonical` form."""
    if not run_only or not unmatched_qrels:
        return []
    by_form = {canonical(q): q for q in unmatched_qrels}
    return [(q, by_form[canonical(q)]) for q in run_only if canonical(q) in by_form]


def doc_near_misses(run: Run, qrels: Qrels, unjudged_queries: list[str]) -> list[tuple[str, str, str]]:
    """Triples ``(query, run doc id, judged doc id)`` for queries whose results are all unjudged but would match
    a judgement after :func:`canonical`; at most :data:`DOC_QUERIES_CHECKED` queries are looked at."""
    out = []
    index = {q: i for i, q in enumerate(run.query_ids)}
    offsets = run.offsets
    for qid in unjudged_queries[:DOC_QUERIES_CHECKED]:
        judged = {canonical(d): d for d in qrels[qid]}
        i = index[qid]
        for doc in run.doc_ids_at(np.arange(offsets[i], offsets[i + 1])).tolist():
            match = judged.get(canonical(doc))
            if match is not None and match != doc:
                out.append((qid, doc, match))
                break
    return out


def warn_near_misses(run: Run, qrels: Qrels, run_only: list[str], missing: list[str], unjudged: list[str]) -> None:
    """One warning for query ids, one for doc ids, each with an example; nothing when ids line up."""
    queries = query_near_misses(run_only, missing)
    if queries:
        a, b = queries[0]
        warnings.warn(
            f"run {run.name!r}: {len(queries)} query id(s) match a qrels id only after stripping whitespace or "
            f"leading zeros (e.g. run {a!r} vs qrels {b!r}); they are different ids, so those queries score 0",
            NearMissIds,
            stacklevel=5,
        )
    docs = doc_near_misses(run, qrels, unjudged) if unjudged else []
    if docs:
        q, a, b = docs[0]
        warnings.warn(
            f"run {run.name!r}: on {len(docs)} query(ies) with no judged result, doc ids match judged ones only "
            f"after stripping whitespace or leading zeros (e.g. query {q!r}: run {a!r} vs qrels {b!r})",
            NearMissIds,
            stacklevel=5,
        )
