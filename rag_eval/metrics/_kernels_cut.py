"""Kernels for interpolated precision and cutoffs that are not ranks: iprec_at_recall, 11pt_avg, rprec_mult,
relative_precision; and gm_map, gm_bpref, as trec_eval 10.0 computes them. See docs/metrics.md ("How the code
reads names and computes values").
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from . import _kernels as K
from ._registry import KernelInputs
from .conventions import follows_trec_eval

if TYPE_CHECKING:
    from ._grades import GradeMatrix

__all__ = [
    "DEFAULT_LEVELS",
    "eleven_point_average",
    "interpolated_precision",
    "relative_precision",
    "rprec_mult",
    "trec_round",
]

DEFAULT_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)  # m_11pt_avg.c, m_iprec_at_recall.c


# ----- reading parameters -------------------------------------------------------------------------------------------


def decimals(ki: KernelInputs, key: str, default: tuple[float, ...] | None) -> tuple[float, ...]:
    """The ``;``-separated decimals of parameter ``key`` (the grammar's canonical strings), or ``default`` when the
    metric has none; an InputError naming the metric when it is absent without a default, or not finite numbers."""
    text = ki.metric.param.get(key)
    if text is None:
        if default is None:
            raise InputError(f"metric {str(ki.metric)!r} needs the parameter {key}=")
        return default
    try:
        values = tuple(float(part) for part in text.split(";"))
    except ValueError:
        raise InputError(f"metric {str(ki.metric)!r}: {key}={text!r} is not a list of decimals") from None
    if not values or not all(math.isfinite(v) for v in values):
        raise InputError(f"metric {str(ki.metric)!r}: {key}={text!r}: every value must be a finite decimal")
    return values


def cut_ranking(ki: KernelInputs) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, ranks, grades, lengths)`` of the matrix, each ranking cut at the metric's cutoff when it has one (a
    per-query budget's: the rest of the ranking was not delivered)."""
    m = ki.matrix
    if ki.k is None:
        return m.rows, m.ranks, m.grades, m.lengths
    keep = K.within(m.rows, m.ranks, ki.k)
    return m.rows[keep], m.ranks[keep], m.grades[keep], np.minimum(m.lengths, ki.k)


def trec_round(x: np.ndarray) -> np.ndarray:
    """C's ``lround``: to the nearest integer, halves away from zero (NumPy's ``round`` takes halves to even, and
    ``floor(x + 0.5)`` rounds 0.49999999999999994 up). The fraction ``|x| - floor(|x|)`` is exact in doubles."""
    a = np.abs(x)
    whole = np.floor(a)
    up = (a - whole) >= 0.5
    rounded: np.ndarray = (np.sign(x) * (whole + up)).astype(np.int64)
    return rounded


# ----- interpolated precision ---------------------------------------------------------------------------------------


def _best_precision_after(
    rows: np.ndarray, ranks: np.ndarray, rel: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """For each query's relevant cells in rank order, the best precision at or after it: ``max over m' >= m of
    m' / r_m'`` (a suffix maximum within each query), and ``start``: where each query's relevant cells begin.

    The maximum is taken over the values' order (integer ranks of the distinct values, offset per query so that
    one running maximum over the reversed array stays within each query), so it is one of the exact values."""
    r, p = rows[rel], ranks[rel]
    count = np.bincount(r, minlength=n)
    start = np.cumsum(count) - count
    if not len(r):
        return np.zeros(0), start
    precision = K._position_among(r, n) / (p + 1.0)  # (double) rel_so_far / (double) rank, as trec_eval divides
    distinct, order = np.unique(precision, return_inverse=True)
    span = len(distinct)
    key = (n - 1 - r) * span + order  # later queries first once reversed: their keys are smaller
    best = np.maximum.accumulate(key[::-1])[::-1] - (n - 1 - r) * span
    return distinct[best], start


def _best_overall(best: np.ndarray, start: np.ndarray, found: np.ndarray, empty: np.ndarray | None) -> np.ndarray:
    """Per query, the best precision anywhere in its ranking (0 when nothing relevant is retrieved), NaN where
    ``empty`` says trec_eval divides 0 by 0 (see :func:`trec_eval_empty`)."""
    overall = np.zeros(len(found))
    some = found > 0
    overall[some] = best[start[some]]
    if empty is not None:
        overall[empty] = np.nan
    return overall


def _at_cutoffs(
    best: np.ndarray, start: np.ndarray, found: np.ndarray, overall: np.ndarray, c: np.ndarray
) -> np.ndarray:
    """Per query, the interpolated precision for a cutoff of ``c`` relevant documents (see the module's docstring):
    0 above ``found`` (relevant retrieved), ``best`` at the c-th relevant cell from 1 on, ``overall`` below 1."""
    out = np.zeros(len(c))
    reached = (c >= 1) & (c <= found)
    out[reached] = best[start[reached] + c[reached] - 1]
    low = c < 1
    out[low] = overall[low]
    return out


def interpolated_precision(
    rows: np.ndarray,
    ranks: np.ndarray,
    rel: np.ndarray,
    R: np.ndarray,
    levels: tuple[float, ...],
    empty: np.ndarray | None = None,
    *,
    best: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """``[queries x levels]`` interpolated precision at each recall level, as trec_eval's iprec_at_recall (whose
    levels are sorted, so each level's value is that of the module docstring); NaN at a level whose cutoff is
    below 1 where ``empty`` (trec_eval's 0 / 0 for an empty ranking). ``best``: :func:`_best_precision_after`
    of these cells, when already computed."""
    n = len(R)
    after, start = best if best is not None else _best_precision_after(rows, ranks, rel, n)
    found = np.bincount(rows[rel], minlength=n)
    overall = _best_overall(after, start, found, empty)
    Rf = R.astype(np.float64)
    out = np.zeros((n, len(levels)))
    for j, level in enumerate(levels):  # a loop over levels, not queries
        out[:, j] = _at_cutoffs(after, start, found, overall, trec_round(level * Rf))
    return out


def eleven_point_average(
    rows: np.ndarray,
    ranks: np.ndarray,
    rel: np.ndarray,
    R: np.ndarray,
    levels: tuple[float, ...],
    empty: np.ndarray | None = None,
    *,
    best: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """trec_eval's 11pt_avg at ``levels`` in the order given: the interpolated precisions added from the last
    level to the first, divided by the number of levels (``m_11pt_avg.c``).

    trec_eval does not sort these levels, and its loop then gives a level out of order the best precision overall
    (or 0, for levels left above the relevant retrieved before any level it reaches): that is replayed here, a
    level at a time over all queries, so unsorted levels give trec_eval's number too."""
    n = len(R)
    after, start = best if best is not None else _best_precision_after(rows, ranks, rel, n)
    found = np.bincount(rows[rel], minlength=n)
    overall = _best_overall(after, start, found, empty)
    Rf = R.astype(np.float64)
    total = np.zeros(n)
    skipping = np.ones(n, bool)  # trec_eval's first loop: levels from the last one, while above what was found
    stuck = np.zeros(n, bool)  # a level its backward sweep has passed: it and every level before it take the end's
    at = found.copy()  # the relevant count the sweep has come down to
    for level in reversed(levels):
        c = trec_round(level * Rf)
        skipped = skipping & (c > found)
        skipping &= c > found
        matched = ~skipped & ~stuck & (c >= 1) & (c <= at)
        stuck |= ~skipped & ~matched
        at = np.where(matched, c, at)
        # a cutoff of 0 gives the best overall
        value = _at_cutoffs(after, start, found, overall, np.where(matched, c, 0))
        total = total + np.where(skipped, 0.0, value)
    return total / float(len(levels))


# ----- precision at cutoffs that are not ranks ----------------------------------------------------------------------


def rprec_mult(rows: np.ndarray, ranks: np.ndarray, rel: np.ndarray, R: np.ndarray, mult: float) -> np.ndarray:
    """Precision at rank ``(long)(mult x R + 0.9)`` (C's truncation, ``m_Rprec_mult.c``), counting a ranking
    shorter than that as filled with non-relevant results; 0 where that rank is below 1 (no relevant judged)."""
    c = np.trunc(mult * R.astype(np.float64) + 0.9).astype(np.int64)
    return K.precision(rows, ranks, rel, c, len(R))


def relative_precision(rows: np.ndarray, ranks: np.ndarray, rel: np.ndarray, R: np.ndarray, k: K.Cutoff) -> np.ndarray:
    """Relevant in the top k / min(k, R) (``m_rel_P.c``); 0 for a query with no relevant judged, or a cutoff of 0."""
    found = K.count_per_query(rows, rel & K.within(rows, ranks, k), len(R))
    return K._safe_div(found, np.minimum(K.bound(k), R))


# ----- the registered kernels ---------------------------------------------------------------------------------------


def _inputs(ki: KernelInputs) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rows, ranks, grades, lengths = cut_ranking(ki)
    return rows, ranks, grades >= ki.threshold, lengths, ki.stats.num_relevant(ki.threshold)


def trec_eval_empty(ki: KernelInputs) -> np.ndarray | None:
    """Where trec_eval measures an empty ranking (under conventions that follow it; None otherwise): a query whose
    results -J removed every one of, or a query missing from the run under -c -J (-c's phantom result is not
    judged, so -J removes it too). Its interpolated precision there is 0 / 0: NaN, printed ``-nan``. Elsewhere an
    empty ranking's interpolated precision is 0."""
    conv = ki.conventions
    if not follows_trec_eval(conv):
        return None
    empty: np.ndarray = ki.matrix.lengths == 0
    if conv.unjudged == "remove":
        return empty
    phantom: np.ndarray = empty & (ki.stats.returned(ki.run) > 0)
    return phantom  # -c's phantom result keeps a missing query's ranking non-empty


def _iprec_at_recall(ki: KernelInputs) -> np.ndarray:
    (level,) = _one(ki, "level")
    rows, ranks, rel, _, R = _inputs(ki)
    best = _cached_best(ki, rows, ranks, rel)
    return interpolated_precision(rows, ranks, rel, R, (level,), trec_eval_empty(ki), best=best)[:, 0]


def _cached_best(
    ki: KernelInputs, rows: np.ndarray, ranks: np.ndarray, rel: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_best_precision_after` once per matrix and threshold for this evaluation (iprec_at_recall comes in
    elevens): kept in the evaluation's QrelsStats cache with the matrix it belongs to (a metric with its own tie
    rule has a matrix of its own), and recomputed for a per-query cutoff."""
    if ki.k is not None:
        return _best_precision_after(rows, ranks, rel, len(ki.matrix.lengths))
    key = ("_kernels_cut.best_precision_after", ki.threshold, id(ki.matrix))
    held: tuple[GradeMatrix, tuple[np.ndarray, np.ndarray]] | None = ki.stats._cache.get(key)
    if held is None or held[0] is not ki.matrix:
        held = (ki.matrix, _best_precision_after(rows, ranks, rel, len(ki.matrix.lengths)))
        ki.stats._cache[key] = held
    return held[1]


def _eleven_point_average(ki: KernelInputs) -> np.ndarray:
    levels = decimals(ki, "levels", DEFAULT_LEVELS)
    rows, ranks, rel, _, R = _inputs(ki)
    return eleven_point_average(
        rows, ranks, rel, R, levels, trec_eval_empty(ki), best=_cached_best(ki, rows, ranks, rel)
    )


def _rprec_mult(ki: KernelInputs) -> np.ndarray:
    (mult,) = _one(ki, "mult")
    rows, ranks, rel, _, R = _inputs(ki)
    return rprec_mult(rows, ranks, rel, R, mult)


def _relative_precision(ki: KernelInputs) -> np.ndarray:
    if ki.k is None:
        raise InputError(f"metric {str(ki.metric)!r} needs a cutoff, e.g. 'relative_precision@10'")
    m = ki.matrix
    rel = ki.relevant(ki.threshold)
    return relative_precision(m.rows, m.ranks, rel, ki.stats.num_relevant(ki.threshold), ki.k)


def _gm_map(ki: KernelInputs) -> np.ndarray:
    """AP per query (``m_gm_map.c`` before its log): the geometric mean over queries is the summary's."""
    rows, ranks, rel, _, R = _inputs(ki)
    return K.average_precision(rows, ranks, rel, None, R)


def _gm_bpref(ki: KernelInputs) -> np.ndarray:
    """bpref per query (``m_gm_bpref.c`` before its log): the geometric mean over queries is the summary's."""
    rows, _ranks, rel, _, R = _inputs(ki)
    return K.bpref(rows, rel, ~rel, R, ki.stats.judged_nonrelevant(ki.threshold))


def _one(ki: KernelInputs, key: str) -> tuple[float]:
    values = decimals(ki, key, None)
    if len(values) != 1:
        raise InputError(f"metric {str(ki.metric)!r}: {key}= takes one decimal (one metric per value)")
    return (values[0],)
