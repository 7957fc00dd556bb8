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
from ._id_mismatch import warn_near_misses
from ._qrels_stats import QrelsStats
from ._registry import KernelInputs, kernel_of
from .catalogue import FAMILIES
from .conventions import Conventions
from .grammar import Metric


@dataclass
class QueryAccount:
    """Which queries a run is measured on, and the ones left out, by reason."""

    counted: list[str]
    left_out: dict[str, list[str]] = field(default_factory=dict)  # reason (a key of REASONS) -> query ids
    zeroed: dict[str, list[str]] = field(default_factory=dict)  # counted, but recall-type metrics are 0


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

    Queries are listed in string order (as trec_eval prints them).
    """
    if not len(qrels):
        where = qrels.source.path if qrels.source else "qrels"
        raise InputError("the qrels judge no query: there is nothing to measure", source=where)
    in_run = set(run.query_ids)
    left: dict[str, list[str]] = {}
    excluded = sorted(set(exclude).intersection(qrels.query_ids))
    if excluded:
        left["failed"] = excluded
    not_judged = sorted(in_run.difference(qrels.query_ids))
    if not_judged:
        left["run_only"] = not_judged
    zeroed: dict[str, list[str]] = {}
    candidates = sorted(set(qrels.query_ids).difference(excluded))
    missing = [q for q in candidates if q not in in_run]
    if missing and conventions.missing_run == "skip":
        left["missing_run"] = missing
        candidates = [q for q in candidates if q in in_run]
    elif missing:
        zeroed["missing_run"] = missing
    all_ids, offsets, grades = qrels.columns
    query_of = np.repeat(np.arange(len(all_ids)), np.diff(offsets))
    relevant = np.bincount(query_of, weights=grades >= conventions.relevance_threshold, minlength=len(all_ids))
    none_relevant = {all_ids[i] for i in np.flatnonzero(relevant == 0).tolist()}
    empty = [q for q in candidates if q in none_relevant]
    if empty and conventions.no_relevant == "skip":
        left["no_relevant"] = empty
        dropped = set(empty)
        candidates = [q for q in candidates if q not in dropped]
    elif empty:
        zeroed["no_relevant"] = empty
    return QueryAccount(candidates, left, zeroed)


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
    matrix = build_grade_matrix(run, qrels, account.counted, conventions)
    if warn_ids:
        _warn_id_mismatches(qrels, run, account, matrix)
    stats = QrelsStats(qrels, account.counted, conventions)
    per_query_k = [
        None if c is None else np.fromiter(map(c.get, account.counted, repeat(0)), np.int64, len(account.counted))
        for c in (cutoffs or [None] * len(metrics))
    ]
    matrices: dict[str, GradeMatrix] = {conventions.ties: matrix}

    def ranked_with(ties: str) -> GradeMatrix:  # a metric's own tie rule (ties=, see rag_eval.metrics.dialects)
        if ties not in matrices:
            matrices[ties] = build_grade_matrix(run, qrels, account.counted, conventions.replace(ties=ties))
        return matrices[ties]

    values = _compute(matrix, metrics, conventions, stats, per_query_k, run, ranked_with)
    return RunValues(account, values)


def _warn_id_mismatches(qrels: Qrels, run: Run, account: QueryAccount, matrix: GradeMatrix) -> None:
    """Warn about ids that differ only in whitespace, leading zeros, case or Unicode form (see :mod:`._id_mismatch`)."""
    missing = account.left_out.get("missing_run", []) or account.zeroed.get("missing_run", [])
    has_judged = np.zeros(matrix.num_queries, bool)
    has_judged[matrix.rows] = True
    unjudged = [account.counted[i] for i in np.flatnonzero((matrix.lengths > 0) & ~has_judged).tolist()]
    unjudged = list(compress(unjudged, (qrels.num_judged(unjudged) > 0).tolist()))  # no Python call per query
    if account.left_out.get("run_only") or unjudged:
        warn_near_misses(run, qrels, account.left_out.get("run_only", []), missing, unjudged)


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
