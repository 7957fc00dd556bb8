"""Averaging per-query values, with their spread: never the mean alone. NaN (a 0/0 value) is left out and counted.

Every summary (of runs, pipeline stages, projections and comparisons) has ``n``, the values the statistics are
taken over, and ``n_nan``, the counted queries whose value is NaN: ``n + n_nan`` is the number of queries the
metric card says were counted for that run (or stage).
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import check_choice

MIN_GEO_MEAN = 1e-5  # trec_eval's floor under each value of a geometric mean (trec_eval.h): log(0) is -inf

SUMMARY_COLUMNS = ["run", "metric", "mean", "sum", "std", "median", "ci_low", "ci_high", "n", "n_nan"]
STAGE_SUMMARY_COLUMNS = [
    "run",
    "stage",
    "metric",
    "mean",
    "sum",
    "std",
    "median",
    "ci_low",
    "ci_high",
    "n",
    "n_failed",
    "n_nan",
]


# The fewest values (paired queries; human-graded queries for a normal interval) each interval method is trusted
# on; below it a gate's rule is inconclusive and an estimate refuses (docs/gate.md, "Minimum n"). Why each:
# - t: 2, the fewest with a spread (n - 1 degrees of freedom); Student's interval is exact for normal differences
#   at any n >= 2 and as wide as t(n - 1) makes it (12.7 sd / sqrt(2) at n = 2 and 95%).
# - randomization: 6, the fewest at which any result can be significant at 0.05: the exact test's smallest p is
#   2 / 2^n (0.0625 at n = 5); below it the inverted interval is infinite.
# - bootstrap: 10. The percentile interval of a mean resamples n values: about sqrt((n-1)/n) z / t(n-1) as wide as
#   Student's, so it covers about P(|t(n-1)| < z sqrt((n-1)/n)) of the time for normal differences: 90.4% at
#   n = 10 for a nominal 95% (89.8% at 9, 86% at 5; at n = 1 it is a point).
# - wilcoxon: 10: the gate decides on the bootstrap interval of the mean (its own exact test needs 6, as above).
# - normal (PPI, PPI++, human-only, judge-only): 10. z with a standard error estimated from n values covers
#   P(|t(n-1)| < z): 91.8% at n = 10 for a nominal 95% (89.3% at 6); PPI++ also tunes lam on the same n.
MIN_N = {"t": 2, "randomization": 6, "bootstrap": 10, "wilcoxon": 10, "normal": 10}


def min_n(method: str) -> int:
    """The fewest values the interval of ``method`` is trusted on (:data:`MIN_N`; PPI's methods are "normal")."""
    key = "normal" if method in ("ppi", "ppi++", "human", "judge") else method
    if key not in MIN_N:
        check_choice(method, "interval method", sorted(MIN_N))
    return MIN_N[key]


def method_label(method: str) -> str:
    """``"bootstrap, min n 10"``: the method and its minimum, as every verdict shows them."""
    return f"{method}, min n {min_n(method)}"


CHUNK = 1 << 20  # random draws held at once by the bootstrap and the randomization test (8 MB of int64 indices)


def chunk_rows(n: int, total: int, *, multiple: int = 1) -> int:
    """Rows of ``n`` draws each to generate per call so that a call holds about :data:`CHUNK` draws (at least
    ``multiple`` rows, and a multiple of it: see :func:`rag_eval.statistics.paired.randomization_test`)."""
    rows = max(multiple, CHUNK // max(n, 1) // multiple * multiple)
    return min(rows, max(total, 1))


def bootstrap_means(values: np.ndarray, *, resamples: int, seed: int) -> np.ndarray:
    """Means of ``resamples`` bootstrap resamples of the rows of ``values`` ``[queries, metrics]``.

    All metrics share the same resampled queries (the resamples are paired), drawn from a generator seeded
    with ``seed``, so the same inputs always give the same intervals. The resamples are drawn a few at a time
    (about :data:`CHUNK` indices at once), so the memory is O(n + resamples x metrics) whatever the number of
    queries; NumPy's generator gives the same stream of indices however the draws are split into calls.
    """
    n, m = values.shape
    rng = np.random.default_rng(seed)
    out = np.empty((resamples, m))
    step = chunk_rows(n, resamples)
    for start in range(0, resamples, step):
        b = min(step, resamples - start)
        picks = rng.integers(0, n, size=(b, n))
        picks += np.arange(b)[:, None] * n
        counts = np.bincount(picks.ravel(), minlength=b * n).reshape(b, n)
        out[start : start + b] = counts @ values / n
    return out


def summarize_values(
    values: np.ndarray, *, resamples: int, confidence: float, seed: int, sequential: bool = False
) -> dict[str, np.ndarray]:
    """Mean, sum, sample std, median, bootstrap CI of the mean, n and n_nan, per column of ``values``; NaN values
    are left out of every statistic (each column then has its own n).

    ``sequential``: the sum (and so the mean) adds the values one by one in row order, as trec_eval does (its
    printed mean can differ in the 4th decimal from the more exact pairwise sum NumPy uses by default)."""
    m = values.shape[1]  # resamples and confidence: checked by the public callers (Report.summarize, compare)
    finite = ~np.isnan(values)
    if finite.all():
        return _summarize(values, resamples, confidence, seed, sequential) | {"n_nan": np.zeros(m, np.int64)}
    out: dict[str, np.ndarray] = {}
    for j in range(m):
        column = values[finite[:, j], j][:, None]
        for key, value in _summarize(column, resamples, confidence, seed, sequential).items():
            out.setdefault(key, np.empty(m, value.dtype))[j] = value[0]
    out["n_nan"] = (~finite).sum(axis=0).astype(np.int64)
    return out


def summarize_geometric(
    values: np.ndarray, *, resamples: int, confidence: float, seed: int, sequential: bool = False
) -> dict[str, np.ndarray]:
    """:func:`summarize_values` for the families averaged by a geometric mean (gm_map, gm_bpref): each value is
    floored at :data:`MIN_GEO_MEAN` (1e-5, as trec_eval), ``mean`` is ``exp(mean(log(value)))`` and ``ci_low`` /
    ``ci_high`` its bootstrap interval (the interval of the mean log, exponentiated); ``median`` and ``std`` are those
    of the floored values; ``sum`` is NaN (no sum is what a geometric mean summarises). NaN values are left out and
    counted in ``n_nan``. ``sequential``: the logs are added one by one in row order, as trec_eval adds them."""
    floored = np.where(np.isnan(values), np.nan, np.maximum(values, MIN_GEO_MEAN))
    logs = np.log(floored)
    if sequential:  # trec_eval calls the C library's log value by value: so do we, to print its digits
        logs = np.array(
            [[math.log(v) if v == v else v for v in row] for row in floored.tolist()], dtype=np.float64
        ).reshape(values.shape)
    out = summarize_values(logs, resamples=resamples, confidence=confidence, seed=seed, sequential=sequential)
    plain = summarize_values(floored, resamples=1, confidence=confidence, seed=seed)
    if sequential:
        out["mean"] = np.array([math.exp(v) if v == v else v for v in out["mean"].tolist()], dtype=np.float64)
    else:
        out["mean"] = np.exp(out["mean"])
    out["ci_low"], out["ci_high"] = np.exp(out["ci_low"]), np.exp(out["ci_high"])
    out["median"], out["std"] = plain["median"], plain["std"]
    out["sum"] = np.full(values.shape[1], np.nan)
    return out


def _summarize(
    values: np.ndarray, resamples: int, confidence: float, seed: int, sequential: bool
) -> dict[str, np.ndarray]:
    n, m = values.shape
    nan = np.full(m, np.nan)
    if n == 0:
        return {
            "mean": nan,
            "sum": np.zeros(m),
            "std": nan,
            "median": nan,
            "ci_low": nan,
            "ci_high": nan,
            "n": np.zeros(m, np.int64),
        }
    means = bootstrap_means(values, resamples=resamples, seed=seed)
    alpha = 1 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2], axis=0)
    total = np.cumsum(values, axis=0)[-1] if sequential else values.sum(axis=0)  # cumsum adds in row order
    return {
        "mean": total / n,
        "sum": total,
        "std": values.std(axis=0, ddof=1) if n > 1 else nan,
        "median": np.median(values, axis=0),
        "ci_low": low,
        "ci_high": high,
        "n": np.full(m, n, np.int64),
    }
