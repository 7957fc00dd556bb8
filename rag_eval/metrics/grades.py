"""The grade matrix: each evaluated query's ranking as the grades of its results, built once per run.

Conceptually a ``[queries x depth]`` matrix of grades in ranked order, where a result without a judgement is
unjudged. Almost every cell of a real run is unjudged, so the matrix is stored as its judged cells (row, rank,
grade; sorted by row, then rank) and the length of each row: every metric is computed from these arrays with
vectorised operations (:mod:`rag_eval.metrics.kernels`), touching only the judged cells.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat

import numpy as np

from ..data.qrels import Qrels
from ..data.ranking import break_ties, score_order, search_rows, sort_rows, tie_groups
from ..data.run import Run
from ..errors import InputError
from .conventions import Conventions

UNJUDGED = -(2**30)  # the grade lookup's value for "no judgement"; judged grades must lie within +-GRADE_LIMIT
GRADE_LIMIT = 2**29


@dataclass(frozen=True)
class GradeMatrix:
    """A ``[queries x depth]`` grade matrix in sparse form: its judged cells and each row's length."""

    lengths: np.ndarray  # int64 [queries]: results in each ranking (after any max_depth cut or condensing)
    rows: np.ndarray  # int64 [cells]: query (row) of each judged cell
    ranks: np.ndarray  # int64 [cells]: 0-based rank (column) of each judged cell
    grades: np.ndarray  # int64 [cells]: grade of each judged cell

    @property
    def num_queries(self) -> int:
        return len(self.lengths)

    def dense(self) -> np.ndarray:
        """The full matrix (int64, ``UNJUDGED`` where there is no judgement or no result); for inspection."""
        out = np.full((self.num_queries, int(self.lengths.max(initial=0))), UNJUDGED, np.int64)
        out[self.rows, self.ranks] = self.grades
        return out


def build_grade_matrix(run: Run, qrels: Qrels, query_ids: list[str], conventions: Conventions) -> GradeMatrix:
    """Rank ``run`` for ``query_ids`` (a query absent from the run gets an empty row) and look up every grade."""
    check_grade_range(qrels)
    index = {q: i for i, q in enumerate(run.query_ids)}
    run_rows = np.fromiter((index.get(q, -1) for q in query_ids), np.int64, len(query_ids))
    run_offsets = run.offsets
    present = run_rows >= 0
    starts = np.zeros(len(query_ids), np.int64)
    lengths = np.zeros(len(query_ids), np.int64)
    starts[present] = run_offsets[run_rows[present]]
    lengths[present] = np.diff(run_offsets)[run_rows[present]]
    offsets = np.zeros(len(query_ids) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    every_row = len(run_rows) == len(run_offsets) - 1 and bool((run_rows == np.arange(len(run_rows))).all())
    entries = None if every_row else _ranges(starts, lengths)
    doc_ids = run.doc_ids if entries is None else run.doc_ids[entries]

    grades = _lookup(doc_ids, offsets, [qrels.judgements[q] for q in query_ids])
    cells = np.flatnonzero(grades != UNJUDGED)
    if conventions.negative_grades == "unjudged":  # in the pool but not judged, as trec_eval reads them
        negative = cells[grades[cells] < 0]
        grades[negative] = UNJUDGED
        cells = cells[grades[cells] != UNJUDGED]
    rows = np.searchsorted(offsets, cells, side="right") - 1
    if run.ranked_by == "score":
        scores = run.scores if entries is None else run.scores[entries]
        ranks = _score_ranks(offsets, scores, doc_ids, grades, cells, rows, conventions.ties)
    else:
        ranks = cells - offsets[rows]
    cell_grades = grades[cells].astype(np.int64)

    lengths = lengths.astype(np.int64)
    if conventions.max_depth is not None:
        keep = ranks < conventions.max_depth
        rows, ranks, cell_grades = rows[keep], ranks[keep], cell_grades[keep]
        lengths = np.minimum(lengths, conventions.max_depth)
    order = np.lexsort((ranks, rows))
    rows, ranks, cell_grades = rows[order], ranks[order], cell_grades[order]
    if conventions.unjudged == "remove":  # condensed list: only judged results, ranked as before
        lengths = np.bincount(rows, minlength=len(query_ids)).astype(np.int64)
        ranks = np.arange(len(rows)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return GradeMatrix(lengths, rows, ranks, cell_grades)


def check_grade_range(qrels: Qrels) -> None:
    grades = qrels.columns[2]
    if len(grades) and (grades.min() <= -GRADE_LIMIT or grades.max() >= GRADE_LIMIT):
        bad = grades[np.abs(grades) >= GRADE_LIMIT][0]
        raise InputError(f"grade {bad} is out of range (grades must lie within +-{GRADE_LIMIT})", source="qrels")


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(starts[i], starts[i] + lengths[i])``."""
    shift = starts - (np.cumsum(lengths) - lengths)
    return np.repeat(shift, lengths) + np.arange(int(lengths.sum()))


def _lookup(doc_ids: np.ndarray, offsets: np.ndarray, judgements: list[dict[str, int]]) -> np.ndarray:
    """Grade of every entry (UNJUDGED where the query's judgements do not name the doc).

    Joined one query at a time: each query's small judgement dict stays in cache, which measured 8x faster
    than one hash join over all queries at 10M results; the work inside each query is a C-level ``map``.
    """
    out = np.empty(len(doc_ids), np.int32)
    o = offsets.tolist()
    for i, judged in enumerate(judgements):
        a, b = o[i], o[i + 1]
        if b > a:
            out[a:b] = np.fromiter(map(judged.get, doc_ids[a:b], repeat(UNJUDGED)), np.int32, b - a)
    return out


def _score_ranks(
    offsets: np.ndarray, scores: np.ndarray, doc_ids: np.ndarray, grades: np.ndarray,
    cells: np.ndarray, rows: np.ndarray, rule: str,
) -> np.ndarray:
    """0-based rank of each judged entry ``cells`` in its query's ranking by score descending.

    A judged entry that shares its score with no other entry of its query is placed by binary search in the
    query's sorted scores. Queries where a judged entry ties with another are ranked in full, and the tie rule
    is applied to each tie group that holds a judged entry (elsewhere the order of a tie changes no metric).
    """
    ordered = sort_rows(offsets, -scores)  # each query's negated scores, ascending
    row_starts, row_ends = offsets[rows], offsets[rows + 1]
    needles = -scores[cells]
    lo = search_rows(ordered, row_starts, row_ends, needles)
    ranks = lo - row_starts
    after = np.minimum(lo + 1, len(ordered) - 1)
    tied = (lo + 1 < row_ends) & (ordered[after] == needles)  # another entry has the same score
    if tied.any():
        tied_rows = np.unique(rows[tied])
        sub_lengths = offsets[tied_rows + 1] - offsets[tied_rows]
        sub_offsets = np.zeros(len(tied_rows) + 1, np.int64)
        np.cumsum(sub_lengths, out=sub_offsets[1:])
        entries = _ranges(offsets[tied_rows], sub_lengths)
        sub_scores = scores[entries]
        perm = score_order(sub_offsets, sub_scores)
        t_starts, t_ends = tie_groups(sub_offsets, sub_scores[perm])
        judged_pos = np.flatnonzero(grades[entries][perm] != UNJUDGED)
        group = np.searchsorted(t_starts, judged_pos, side="right") - 1
        g = np.maximum(group, 0)
        holds = np.unique(group[(group >= 0) & (judged_pos < t_ends[g])])
        if len(holds):
            perm = break_ties(perm, t_starts[holds], t_ends[holds], doc_ids[entries], rule)
        rank_of = np.empty(len(entries), np.int64)
        rank_of[perm] = np.arange(len(entries)) - np.repeat(sub_offsets[:-1], sub_lengths)
        position = np.full(len(scores), -1, np.int64)
        position[entries] = rank_of
        in_tied = np.isin(rows, tied_rows)
        ranks[in_tied] = position[cells[in_tied]]
    return ranks
