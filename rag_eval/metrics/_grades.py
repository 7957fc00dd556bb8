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

import numpy as np

from .. import _accel
from ..data._packed import PackedIds
from ..data._ranking import score_order, search_rows, sort_rows
from ..data.qrels import Qrels
from ..data.run import Run
from .conventions import Conventions

UNJUDGED = -(2**30)  # the grade lookup's value for "no judgement": Qrels refuse grades beyond +-GRADE_LIMIT (2^29)
TIE_CHUNK = 1 << 20  # results ranked at a time when placing tied judged results


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


def build_grade_matrix(run: Run, qrels: Qrels, query_ids: list[str], conventions: Conventions) -> GradeMatrix:
    """The grade matrix of ``run`` with one row per query of ``query_ids``, in that order (a query absent from
    the run gets an empty row). The run is read in place, in its own order: nothing is copied or re-sorted."""
    row_of = {q: i for i, q in enumerate(query_ids)}
    run_ids = run.query_ids
    run_to_row = np.fromiter((row_of.get(q, -1) for q in run_ids), np.int64, len(run_ids))
    run_offsets = run.offsets
    run_lengths = np.diff(run_offsets)
    judgements = qrels._tables()  # the dicts themselves: the C lookup takes dicts
    wanted = [judgements[q] if r >= 0 else None for q, r in zip(run_ids, run_to_row.tolist(), strict=True)]
    grades = _lookup(run.doc_id_column, run_offsets, wanted)
    cells = np.flatnonzero(grades != UNJUDGED)  # judged, and (negative_grades="unjudged") pooled-but-unjudged
    run_rows = np.searchsorted(run_offsets, cells, side="right") - 1
    scores = run.scores
    if run.ranked_by == "score" and scores is not None:  # a run ranked by score always has scores
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


def _lookup(
    doc_ids: np.ndarray | PackedIds, offsets: np.ndarray, judgements: list[dict[str, int] | None]
) -> np.ndarray:
    """Grade of every entry (UNJUDGED where the query's judgements do not name the doc, or are None).

    Joined one query at a time: each query's small judgement dict stays in cache, which measured 8x faster
    than one hash join over all queries at 10M results; the work inside each query is a C-level ``map``.
    """
    speedups = _accel.speedups
    grades: np.ndarray
    if isinstance(doc_ids, PackedIds):  # ids stay packed only where the C lookup is loaded (Run._from_csr)
        if speedups is None:
            raise RuntimeError("doc ids packed by the C reader, but rag_eval._speedups is not loaded")
        grades = speedups.lookup_packed(doc_ids.blob, doc_ids.starts, offsets, judgements, UNJUDGED)
        return grades
    out = np.full(len(doc_ids), UNJUDGED, np.int32)
    o = offsets.tolist()
    for i, judged in enumerate(judgements):
        a, b = o[i], o[i + 1]
        if judged and b > a:
            out[a:b] = np.fromiter(map(judged.get, doc_ids[a:b], repeat(UNJUDGED)), np.int32, b - a)
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
