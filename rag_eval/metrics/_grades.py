"""The grade matrix: each evaluated query's ranking as the grades of its results, built once per run.

Conceptually a ``[queries x depth]`` matrix of grades in ranked order, where a result without a judgement is
unjudged. Almost every cell of a real run is unjudged, so the matrix is stored as its judged cells (row, rank,
grade; sorted by row, then rank) and the length of each row: every metric is computed from these arrays with
vectorised operations (:mod:`rag_eval.metrics._kernels`), touching only the judged cells.

Under ``negative_grades="unjudged"`` (trec_eval's reading) a result judged below 0 is in the pool but not judged:
it is not a judged cell, but it is kept apart as a *pooled* cell (``pooled_rows``, ``pooled_ranks``,
``pooled_grades``), because infAP, relstring and trec_eval's unj tell "pooled but unjudged" from "not in the pool".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import numpy as np

from .. import _accel
from ..data.packed import PackedIds
from ..data.qrels import Qrels
from ..data.ranking import score_order, search_rows, sort_rows
from ..data.run import Run
from .conventions import Conventions

TIE_RULE_CODES = {"input_order": 0, "trec_eval": 1, "doc_id": 2}  # _speedups.rank_cells' rule argument
UNJUDGED = -(2**30)  # the grade lookup's value for "no judgement": Qrels refuse grades beyond +-GRADE_LIMIT (2^29)
TIE_CHUNK = 1 << 20  # results ranked at a time when placing tied judged results
MATRICES_HELD = 4  # grade matrices a stage's ranking keeps (the last asked), each its judged cells only


@dataclass(frozen=True)
class GradeMatrix:
    """A ``[queries x depth]`` grade matrix in sparse form: its judged cells and each row's length."""

    lengths: np.ndarray  # int64 [queries]: results in each ranking (after any max_depth cut or condensing)
    rows: np.ndarray  # int64 [cells]: query (row) of each judged cell
    ranks: np.ndarray  # int64 [cells]: 0-based rank (column) of each judged cell
    grades: np.ndarray  # int64 [cells]: grade of each judged cell
    # under negative_grades="unjudged": the results judged below 0 (in the pool, not judged), sorted the same way;
    # empty otherwise (then a negative grade is a judged cell, non-relevant)
    pooled_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    pooled_ranks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    pooled_grades: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def num_queries(self) -> int:
        return len(self.lengths)

    def dense(self) -> np.ndarray:
        """The full matrix (int64, ``UNJUDGED`` where there is no judgement or no result); for inspection."""
        out = np.full((self.num_queries, int(self.lengths.max(initial=0))), UNJUDGED, np.int64)
        out[self.rows, self.ranks] = self.grades
        return out


def build_grade_matrix(
    run: Run,
    qrels: Qrels,
    query_ids: list[str],
    conventions: Conventions,
    run_to_row: np.ndarray | None = None,
    qrels_rows: np.ndarray | None = None,
) -> GradeMatrix:
    """The grade matrix of ``run`` with one row per query of ``query_ids``, in that order (a query absent from
    the run gets an empty row). The run is read in place, in its own order: nothing is copied or re-sorted.

    ``run_to_row`` (the row of each run query, -1 where it is not one of ``query_ids``) and ``qrels_rows`` (each
    row's query in the qrels' columns), where the caller has them (:func:`~.engine.account_queries`), spare a map
    of the query ids. A run whose memo holds ``"matrices"`` (a list: a stage's ranking, which its report
    evaluates several times) keeps its last few matrices there, read-only, and answers the same one again."""
    if run_to_row is None:
        row_of = dict(zip(query_ids, range(len(query_ids)), strict=True))
        run_ids = run.query_ids
        run_to_row = np.fromiter(map(row_of.get, run_ids, repeat(-1)), np.int64, len(run_ids))
    if qrels_rows is None:
        qrels_rows = qrels.rows_of(query_ids)
    held: list[tuple[Any, ...]] | None = run._memo.get("matrices")
    if held is None:  # a run that keeps none (only a stage's ranking, asked again by its report, keeps them)
        return _built(run, qrels, query_ids, conventions, run_to_row, qrels_rows)
    key = (conventions.ties, conventions.negative_grades, conventions.max_depth, conventions.unjudged)
    for qrels_held, key_held, to_row, rows, matrix in held:
        if (
            qrels_held is qrels
            and key_held == key
            and np.array_equal(to_row, run_to_row)
            and np.array_equal(rows, qrels_rows)
        ):
            return matrix  # type: ignore[no-any-return]
    matrix = _built(run, qrels, query_ids, conventions, run_to_row, qrels_rows)
    for array in (matrix.lengths, matrix.rows, matrix.ranks, matrix.grades):
        array.flags.writeable = False
    held[:] = [*held[-(MATRICES_HELD - 1) :], (qrels, key, run_to_row.copy(), qrels_rows.copy(), matrix)]
    return matrix


def _built(
    run: Run,
    qrels: Qrels,
    query_ids: list[str],
    conventions: Conventions,
    run_to_row: np.ndarray,
    qrels_rows: np.ndarray,
) -> GradeMatrix:
    run_offsets = run.offsets
    run_lengths = np.diff(run_offsets)
    grades = _run_grades(run, qrels, np.where(run_to_row >= 0, np.append(qrels_rows, -1)[run_to_row], -1))
    cells = np.flatnonzero(grades != UNJUDGED)  # judged, and (negative_grades="unjudged") pooled-but-unjudged
    run_rows = np.searchsorted(run_offsets, cells, side="right") - 1
    scores = run.scores
    speedups = _accel.speedups
    if run.ranked_by == "score" and scores is not None:  # a run ranked by score always has scores
        if speedups is not None:  # in C: each query's results placed among its judged ones by binary search
            stored = run.doc_id_column
            ids = (stored.blob, stored.starts) if isinstance(stored, PackedIds) else stored
            rule = TIE_RULE_CODES[conventions.ties]
            ranks = speedups.rank_cells(run_offsets, np.ascontiguousarray(scores), cells, run_rows, rule, ids)
        else:
            ranks = _score_ranks(run_offsets, scores, run.doc_ids_at, cells, run_rows, conventions.ties)
    else:
        ranks = cells - run_offsets[run_rows]
    rows = run_to_row[run_rows]
    cell_grades = grades[cells].astype(np.int64)

    lengths = np.zeros(len(query_ids), np.int64)
    counted = run_to_row >= 0
    lengths[run_to_row[counted]] = run_lengths[counted]
    pooled = None
    if conventions.negative_grades == "unjudged":  # in the pool but not judged, as trec_eval reads them
        negative = cell_grades < 0
        if negative.any():
            pooled = rows[negative], ranks[negative], cell_grades[negative]
            judged = ~negative
            rows, ranks, cell_grades = rows[judged], ranks[judged], cell_grades[judged]
    width = int(lengths.max(initial=0)) + 1
    if conventions.max_depth is not None:
        keep = ranks < conventions.max_depth
        rows, ranks, cell_grades = rows[keep], ranks[keep], cell_grades[keep]
        lengths = np.minimum(lengths, conventions.max_depth)
    order = np.argsort(rows * width + ranks, kind="stable")  # by row, then rank
    rows, ranks, cell_grades = rows[order], ranks[order], cell_grades[order]
    if conventions.unjudged == "remove":  # condensed list: only judged results, ranked as before
        lengths = np.bincount(rows, minlength=len(query_ids)).astype(np.int64)
        ranks = np.arange(len(rows)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        pooled = None  # an unjudged result is dropped, pooled or not (trec_eval -J)
    if pooled is None:
        return GradeMatrix(lengths, rows, ranks, cell_grades)
    p_rows, p_ranks, p_grades = pooled
    if conventions.max_depth is not None:
        keep = p_ranks < conventions.max_depth
        p_rows, p_ranks, p_grades = p_rows[keep], p_ranks[keep], p_grades[keep]
    order = np.argsort(p_rows * width + p_ranks, kind="stable")
    return GradeMatrix(lengths, rows, ranks, cell_grades, p_rows[order], p_ranks[order], p_grades[order])


def _run_grades(run: Run, qrels: Qrels, table_of: np.ndarray) -> np.ndarray:
    """Grade of every result of ``run`` (``UNJUDGED`` where the qrels do not judge it, or where its query is not
    counted): ``table_of`` holds each run query's row in the qrels' columns, -1 where it is not counted. See
    :func:`lookup_values`; where the run holds the judgement each result names (``run._memo["judgements"]``,
    ``(qrels, codes)``: a stage's ranking, whose hits the stage-aware report looked up), the grades are read
    from it."""
    last = run._memo.get("grades")  # the same lookup again (a stage's metrics, its judged share, its recall): once
    if last is not None and last[0] is qrels and np.array_equal(last[1], table_of):
        held: np.ndarray = last[2]
        return held
    named = run._memo.get("judgements")
    if named is not None and named[0] is qrels:  # each result's judgement, looked up already: read its grade
        codes = named[1]
        grades = np.full(len(codes), UNJUDGED, np.int32)
        cells = np.flatnonzero(codes != UNJUDGED)
        cells = cells[table_of[np.searchsorted(run.offsets, cells, side="right") - 1] >= 0]
        grades[cells] = qrels.columns[2][codes[cells]]
    else:
        grades = lookup_values(run.doc_id_column, run.offsets, table_of, qrels, hashes=run._memo.get("hashes"))
    grades.flags.writeable = False
    run._memo["grades"] = (qrels, table_of.copy(), grades)  # one entry: the last qrels asked (4 bytes a result)
    return grades


def lookup_values(
    doc_ids: np.ndarray | PackedIds,
    offsets: np.ndarray,
    rows: np.ndarray,
    qrels: Qrels,
    values: np.ndarray | None = None,
    hashes: np.ndarray | None = None,
) -> np.ndarray:
    """For every result, the value of its query's judgement of its doc id (int32; ``values``: one per judgement
    in the qrels' columns, their grades by default), ``UNJUDGED`` where there is none: query ``i``'s results
    (``doc_ids[offsets[i]:offsets[i+1]]``) are looked up in the qrels' row ``rows[i]`` (none where -1).
    ``hashes``: the doc ids' str hashes, where the caller kept them. In C, a small table of hashes per query
    (``_speedups.lookup``, ``lookup_packed`` for packed ids); else one join over the columns (:func:`_join`)."""
    _, judged_offsets, grades = qrels.columns
    values = grades if values is None else values
    offsets = np.ascontiguousarray(offsets, np.int64)
    rows = np.ascontiguousarray(rows, np.int64)
    speedups = _accel.speedups
    out: np.ndarray
    if speedups is not None:
        args = (rows, qrels.doc_column)
        if isinstance(doc_ids, PackedIds):
            out = speedups.lookup_packed(doc_ids.blob, doc_ids.starts, offsets, *args, judged_offsets, values, UNJUDGED)
        else:
            out = speedups.lookup(doc_ids, hashes, offsets, *args, qrels._doc_hashes, judged_offsets, values, UNJUDGED)
        return out
    if isinstance(doc_ids, PackedIds):
        doc_ids = doc_ids.to_objects()
    return _join(doc_ids, offsets, rows, qrels.doc_column, judged_offsets, values)


def _join(
    doc_ids: np.ndarray,
    offsets: np.ndarray,
    rows: np.ndarray,
    judged_docs: np.ndarray,
    judged_offsets: np.ndarray,
    judged_grades: np.ndarray,
) -> np.ndarray:
    """The grade lookup on whole columns (the pure-Python twin of ``_speedups.lookup``): query ``i``'s results
    (``doc_ids[offsets[i]:offsets[i+1]]``) are looked up in judgement table ``rows[i]`` (none where -1), table
    ``t`` judging ``judged_docs[judged_offsets[t]:judged_offsets[t+1]]``. Every judged doc id gets a code, every
    result and judgement the key ``table * codes + code``, and the run's keys are found among the sorted judgement
    keys with one ``np.searchsorted``."""
    out = np.full(len(doc_ids), UNJUDGED, np.int32)
    if not len(judged_docs) or not len(doc_ids):
        return out
    vocabulary = dict.fromkeys(judged_docs.tolist())
    code_of = dict(zip(vocabulary, range(len(vocabulary)), strict=True))
    width = len(code_of)
    judged_codes = np.fromiter(map(code_of.__getitem__, judged_docs), np.int64, len(judged_docs))
    judged_keys = np.repeat(np.arange(len(judged_offsets) - 1), np.diff(judged_offsets)) * width + judged_codes
    order = np.argsort(judged_keys, kind="stable")
    judged_keys = judged_keys[order]
    entry_rows = np.repeat(rows, np.diff(offsets))
    codes = np.fromiter(map(code_of.get, doc_ids, repeat(-1)), np.int64, len(doc_ids))
    candidates = np.flatnonzero((codes >= 0) & (entry_rows >= 0))
    keys = entry_rows[candidates] * width + codes[candidates]
    at = np.minimum(np.searchsorted(judged_keys, keys), len(judged_keys) - 1)
    found = judged_keys[at] == keys
    out[candidates[found]] = judged_grades[order[at[found]]]
    return out


def _score_ranks(
    offsets: np.ndarray,
    scores: np.ndarray,
    ids_at: Callable[[np.ndarray], np.ndarray],
    cells: np.ndarray,
    rows: np.ndarray,
    rule: str,
) -> np.ndarray:
    """0-based rank of each judged entry ``cells`` (in query ``rows``) in its query's ranking by score.

    Its rank is the number of entries of its query with a higher score, found by binary search in the query's
    sorted scores, plus, when it ties, the number of tied entries that the tie rule puts before it. Only the
    judged entries are placed: elsewhere the order of a tie changes no metric.
    """
    if len(cells) == 0:
        return np.zeros(0, np.int64)
    ordered = sort_rows(offsets, -scores)  # each query's negated scores, ascending
    starts = offsets[rows]
    needles = -scores[cells]
    lo = search_rows(ordered, starts, offsets[rows + 1], needles)
    ranks: np.ndarray = lo - starts
    after = np.minimum(lo + 1, len(ordered) - 1)
    tied = np.flatnonzero((lo + 1 < offsets[rows + 1]) & (ordered[after] == needles))
    if len(tied):
        first = lo[tied]
        last = search_rows(ordered, first, offsets[rows[tied] + 1], needles[tied], side="right")
        del ordered
        owner, members = _tie_members(offsets, scores, rows[tied], first, last)
        me = cells[tied][owner]
        if rule == "input_order":
            before = members < me
        elif rule == "trec_eval":  # doc id descending, as strings
            before = np.greater(ids_at(members), ids_at(me)).astype(bool)
        elif rule == "doc_id":
            before = np.less(ids_at(members), ids_at(me)).astype(bool)
        else:
            raise ValueError(f"unknown tie rule {rule!r}")
        ranks[tied] += np.bincount(owner, weights=before, minlength=len(tied)).astype(np.int64)
    return ranks


def _tie_members(
    offsets: np.ndarray, scores: np.ndarray, rows: np.ndarray, first: np.ndarray, last: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For tie groups given as ranked positions ``first:last`` (in queries ``rows``, ascending), the entries in
    each group: ``members[k]`` is in group ``owner[k]``. Queries are ranked a chunk of about a million results
    at a time, so memory stays small whatever the run's size."""
    size = last - first
    owner = np.repeat(np.arange(len(rows)), size)
    positions = np.repeat(first - (np.cumsum(size) - size), size) + np.arange(int(size.sum()))
    members = np.empty(len(positions), np.int64)
    ends = offsets[rows + 1]
    i = 0
    while i < len(rows):
        start = offsets[rows[i]]
        j = max(int(np.searchsorted(ends, start + TIE_CHUNK, side="right")), i + 1)  # rows[i:j] fit in a chunk
        stop = ends[j - 1]
        local = offsets[rows[i] : rows[j - 1] + 2] - start
        perm = score_order(local, scores[start:stop]) + start  # tie groups are contiguous position ranges
        a, b = np.searchsorted(owner, [i, j])  # owner ascends: the pairs of rows[i:j]
        members[a:b] = perm[positions[a:b] - start]
        i = j
    return owner, members
