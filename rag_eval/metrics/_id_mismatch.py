"""Run and qrels ids that differ only in how they are written: a classic source of silent zeros.

A run that calls a query ``"001"``, ``"Q1"`` or ``"café"`` (NFD) while the qrels call it ``"1"``, ``"q1"`` or
``"café"`` (NFC) scores 0 on it without an error: the two are different ids. rag_eval keeps them different
(guessing would be worse) but warns, naming the kind of difference (surrounding whitespace, leading zeros, Unicode
normalisation or compatibility forms, case: :mod:`rag_eval.data.near_miss`), for query ids and for the doc ids of
queries with no judged result. Only ids that did not match are looked at.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..data.near_miss import loose, near_miss_line, near_misses
from ..data.qrels import Qrels
from ..data.run import Run
from ..errors import NearMissIds

DOC_QUERIES_CHECKED = 100  # queries without a judged result whose doc ids are compared (the check stays cheap)


def canonical(identifier: str) -> str:
    """``identifier`` as :func:`rag_eval.data.near_miss.loose` writes it (``" 007 "`` -> ``"7"``, ``"D7"`` ->
    ``"d7"``)."""
    return loose(identifier)


def query_near_misses(run_only: list[str], unmatched_qrels: list[str]) -> list[tuple[str, str, str]]:
    """Triples ``(run id, qrels id, how they differ)`` of different query ids written alike."""
    if not run_only or not unmatched_qrels:
        return []
    return near_misses(run_only, unmatched_qrels)


def doc_near_misses(
    run: Run,
    qrels: Qrels,
    unjudged_queries: list[str],
    positions: list[int] | None = None,
    qrels_rows: list[int] | None = None,
) -> list[tuple[str, str, str, str]]:
    """``(query, run doc id, judged doc id, how they differ)`` for queries whose results are all unjudged but would
    match a judgement written alike; at most :data:`DOC_QUERIES_CHECKED` queries are looked at. ``positions`` and
    ``qrels_rows``: each query's index in the run and its row in the qrels' columns, where the caller knows them."""
    out = []
    checked = unjudged_queries[:DOC_QUERIES_CHECKED]
    if positions is None:
        index = dict(zip(run.query_ids, range(len(run.query_ids)), strict=True))
        positions = [index[q] for q in checked]
    if qrels_rows is None:
        qrels_rows = qrels.rows_of(checked).tolist()
    offsets, judged_offsets = run.offsets, qrels.columns[1]
    for qid, i, r in zip(checked, positions, qrels_rows, strict=True):
        docs = run.doc_ids_at(np.arange(offsets[i], offsets[i + 1])).tolist()
        found = near_misses(docs, qrels.doc_column[judged_offsets[r] : judged_offsets[r + 1]].tolist())
        if found:
            out.append((qid, *found[0]))
    return out


def warn_near_misses(
    run: Run,
    qrels: Qrels,
    run_only: list[str],
    missing: list[str],
    unjudged: list[str],
    positions: list[int] | None = None,
    qrels_rows: list[int] | None = None,
) -> None:
    """One warning for query ids, one for doc ids, each with the kind of difference and an example; nothing when
    ids line up."""
    line = near_miss_line(
        query_near_misses(run_only, missing),
        subject=f"run {run.name!r}",
        ids="query id(s)",
        other="a qrels id",
        left="run",
        right="qrels",
        consequence="they are different ids, so those queries score 0",
    )
    if line:
        warnings.warn(line, NearMissIds, stacklevel=5)
    docs = doc_near_misses(run, qrels, unjudged, positions, qrels_rows) if unjudged else []
    if docs:
        q, a, b, kind = docs[0]
        kinds = sorted({k for *_, k in docs})
        warnings.warn(
            f"run {run.name!r}: on {len(docs)} query(ies) with no judged result, doc ids differ from judged ones "
            f"only in {', or in '.join(kinds)} (e.g. query {q!r}: run {a!r} vs qrels {b!r}"
            + (f": {kind}" if len(kinds) > 1 else "")
            + "); they are different ids, so those results are unjudged",
            NearMissIds,
            stacklevel=5,
        )
