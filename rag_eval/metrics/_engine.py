"""The metric engine: which queries count, then every requested metric of one run from its grade matrix, each by
the kernel its family registers (:mod:`.catalogue`). See docs/metrics.md."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat

import numpy as np

from ..data.qrels import Qrels
from ..data.run import Run
from ..errors import InputError
from ._grades import GradeMatrix, build_grade_matrix
from ._id_mismatch import DOC_QUERIES_CHECKED, warn_near_misses
from ._qrels_stats import QrelsStats
from ._registry import KernelInputs, kernel_of
from .catalogue import FAMILIES
from .conventions import Conventions
from .grammar import Metric


@dataclass
class QueryAccount:
    """Which queries a run is measured on, and the ones left out, by reason.

    ``qrels_rows`` and ``run_to_row`` are the index of the counted queries, made once and shared by everything the
    evaluation computes after (no map of the query ids again): ``qrels_rows[i]`` is counted query i's row in the
    qrels' :attr:`~rag_eval.data.Qrels.columns`; ``run_to_row[j]`` the counted row of the run's query j (-1 where
    it is not counted)."""

    counted: list[str]
    left_out: dict[str, list[str]] = field(default_factory=dict)  # reason (a key of REASONS) -> query ids
    zeroed: dict[str, list[str]] = field(default_factory=dict)  # counted, but recall-type metrics are 0
    qrels_rows: np.ndarray | None = None
    run_to_row: np.ndarray | None = None


@dataclass
class RunValues:
    """Per-query values of every metric for one run: ``values[j]`` holds metric j's, aligned with
    ``account.counted``."""

    account: QueryAccount
    values: list[np.ndarray]


# Why a query is left out (QueryAccount.left_out) or counted though it can only score 0 (QueryAccount.zeroed).
REASONS = {
    "run_only": "in the run but not in the qrels",
    "missing_run": "in the qrels but not in the run (conventions.missing_run)",
    "no_relevant": "no relevant judgement at the conventions' threshold (conventions.no_relevant)",
    "failed": "the pipeline stage failed on the query (conventions.failed)",
}


def account_queries(qrels: Qrels, run: Run, conventions: Conventions, exclude: Collection[str] = ()) -> QueryAccount:
    """Decide which queries are measured: those in the qrels, less the ones the conventions leave out, less
    ``exclude`` (queries a stage failed on, under ``failed="exclude"``).

    Queries are listed in string order (as trec_eval prints them). Whole-array work over one row index of the
    qrels: no Python call per query.
    """
    if not len(qrels):
        where = qrels.source.path if qrels.source else "qrels"
        raise InputError("the qrels judge no query: there is nothing to measure", source=where)
    ids, order = qrels._derived("ids_in_string_order", lambda: _string_order(qrels))
    n = len(ids)
    run_ids = run.query_ids
    run_rows = qrels.rows_of(run_ids)  # each run query's qrels row (-1: not judged)
    in_run = np.zeros(n, bool)
    in_run[run_rows[run_rows >= 0]] = True
    left: dict[str, list[str]] = {}
    zeroed: dict[str, list[str]] = {}
    keep = np.ones(n, bool)
    if exclude:
        excluded = qrels.rows_of(list(exclude))
        keep[excluded[excluded >= 0]] = False
        if not keep.all():
            left["failed"] = ids[order[~keep[order]]].tolist()
    if (run_rows < 0).any():
        left["run_only"] = sorted(compress(run_ids, (run_rows < 0).tolist()))
    missing = keep & ~in_run
    if missing.any():
        listed = ids[order[missing[order]]].tolist()
        if conventions.missing_run == "skip":
            left["missing_run"] = listed
            keep &= in_run
        else:
            zeroed["missing_run"] = listed
    empty = keep & (qrels._num_relevant(conventions.relevance_threshold) == 0)
    if empty.any():
        listed = ids[order[empty[order]]].tolist()
        if conventions.no_relevant == "skip":
            left["no_relevant"] = listed
            keep &= ~empty
        else:
            zeroed["no_relevant"] = listed
    counted_rows = order[keep[order]]
    position = np.full(n + 1, -1, np.int64)  # qrels row -> counted row; the last slot answers row -1
    position[counted_rows] = np.arange(len(counted_rows))
    return QueryAccount(ids[counted_rows].tolist(), left, zeroed, counted_rows, position[run_rows])


def _string_order(qrels: Qrels) -> tuple[np.ndarray, np.ndarray]:
    """The qrels' query ids as an object array, and their rows in string order (read-only; kept with the qrels)."""
    all_ids = qrels.columns[0]
    ids = np.empty(len(all_ids), object)
    ids[:] = all_ids
    order = np.asarray(sorted(range(len(all_ids)), key=all_ids.__getitem__), np.int64)
    ids.flags.writeable = order.flags.writeable = False
    return ids, order


def evaluate_run(
    qrels: Qrels,
    run: Run,
    metrics: list[Metric],
    conventions: Conventions,
    *,
    cutoffs: Sequence[Mapping[str, int] | None] | None = None,
    exclude: Collection[str] = (),
    warn_ids: bool = True,
) -> RunValues:
    """Every metric in ``metrics`` for every counted query of ``run``.

    ``cutoffs[j]``, when given, replaces metric j's cutoff by one per query (``{query_id: k}``, 0 where absent):
    what a token budget delivers differs between queries. ``warn_ids=False`` skips the near-miss id warnings
    (for a second pass over a run that has been warned about once).
    """
    account = account_queries(qrels, run, conventions, exclude)
    matrix = build_grade_matrix(run, qrels, account.counted, conventions, account.run_to_row, account.qrels_rows)
    if warn_ids:
        _warn_id_mismatches(qrels, run, account, matrix)
    run_rows = None if account.run_to_row is None else (run, account.run_to_row)
    stats = QrelsStats(qrels, account.counted, conventions, account.qrels_rows, run_rows)
    per_query_k = [
        None if c is None else np.fromiter(map(c.get, account.counted, repeat(0)), np.int64, len(account.counted))
        for c in (cutoffs or [None] * len(metrics))
    ]
    matrices: dict[str, GradeMatrix] = {conventions.ties: matrix}

    def ranked_with(ties: str) -> GradeMatrix:  # a metric's own tie rule (ties=, see rag_eval.metrics.dialects)
        if ties not in matrices:
            matrices[ties] = build_grade_matrix(
                run, qrels, account.counted, conventions.replace(ties=ties), account.run_to_row, account.qrels_rows
            )
        return matrices[ties]

    values = _compute(matrix, metrics, conventions, stats, per_query_k, run, ranked_with)
    return RunValues(account, values)


def _warn_id_mismatches(qrels: Qrels, run: Run, account: QueryAccount, matrix: GradeMatrix) -> None:
    """Warn about ids that differ only in whitespace, leading zeros, case or Unicode form (see :mod:`._id_mismatch`)."""
    missing = account.left_out.get("missing_run", []) or account.zeroed.get("missing_run", [])
    has_judged = np.zeros(matrix.num_queries, bool)
    has_judged[matrix.rows] = True
    unjudged_rows = (matrix.lengths > 0) & ~has_judged  # results, none of them judged ...
    judged = np.diff(qrels.columns[1])
    rows = account.qrels_rows if account.qrels_rows is not None else qrels.rows_of(account.counted)
    unjudged_rows &= judged[rows] > 0  # ... though the qrels judge some of the query's documents
    if account.left_out.get("run_only") or unjudged_rows.any():
        at = np.flatnonzero(unjudged_rows)[:DOC_QUERIES_CHECKED]
        unjudged = [account.counted[i] for i in at.tolist()]
        run_index = np.full(matrix.num_queries, -1, np.int64)
        to_row = account.run_to_row
        if to_row is not None:
            inside = to_row >= 0
            run_index[to_row[inside]] = np.flatnonzero(inside)
            positions: list[int] | None = run_index[at].tolist()
        else:
            positions = None
        judged_rows = rows[at].tolist()
        warn_near_misses(run, qrels, account.left_out.get("run_only", []), missing, unjudged, positions, judged_rows)


def _compute(
    matrix: GradeMatrix,
    metrics: list[Metric],
    conv: Conventions,
    stats: QrelsStats,
    cutoffs: list[np.ndarray | None],
    run: Run,
    ranked_with: Callable[[str], GradeMatrix] | None = None,
) -> list[np.ndarray]:
    base = matrix
    rel_cache: dict[tuple[str, int], np.ndarray] = {}
    shared: dict[object, object] = {}  # what the kernels of this evaluation share (nDCG's gains)

    def rel(t: int) -> np.ndarray:
        if (tie_rule, t) not in rel_cache:
            rel_cache[tie_rule, t] = grades >= t
        return rel_cache[tie_rule, t]

    out: list[np.ndarray] = []
    for m, per_query_k in zip(metrics, cutoffs, strict=True):
        # a metric with its own tie rule (ties=) is computed on the run ranked by that rule; a run in given order
        # is never re-sorted, so there it changes nothing
        tie_rule = m.param.get("ties", conv.ties) if run.ranked_by == "score" else conv.ties
        matrix = base if tie_rule == conv.ties or ranked_with is None else ranked_with(tie_rule)
        grades = matrix.grades
        family = FAMILIES[m.family]  # the registration: looked up once per metric
        k = m.k if per_query_k is None else per_query_k
        inputs = KernelInputs(matrix, stats, conv, m, k, m.rel or conv.relevance_threshold, run, rel, shared)
        v = kernel_of(m.family, m)(inputs)
        out.append(np.asarray(v, dtype=object if family.kind == "text" else np.float64))
    return out
