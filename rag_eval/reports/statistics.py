"""Paired statistics over per-query values: tests, intervals, effect sizes and multiple-comparison corrections.

Each function takes two aligned arrays of per-query values (or their differences) and is written to be checked
against a reference: the t-test and Wilcoxon against SciPy, the randomization test against exact enumeration,
the corrections against statsmodels' ``multipletests``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .summary import chunk_rows

TESTS = ("randomization", "t", "wilcoxon")
CORRECTIONS = ("holm", "bh", "none")


def randomization_test(diff: np.ndarray, *, permutations: int, seed: int) -> float:
    """Two-sided paired randomization (sign-flip permutation) test of mean(diff) = 0.

    Under the null each query's difference is as likely positive as negative; the p-value is the share of sign
    assignments whose |mean| is at least the observed one. Exact (every one of the 2^n assignments) when
    2^n <= ``permutations``; otherwise ``permutations`` random assignments, seeded, with the observed one counted
    (p = (hits + 1) / (permutations + 1), never 0).
    """
    diff = np.asarray(diff, dtype=np.float64)
    n = len(diff)
    if n == 0:
        return float("nan")
    observed = abs(diff.mean())
    tolerance = 1e-12 * max(1.0, float(np.abs(diff).max()))
    exact = is_exact(n, permutations)
    hits = 0
    for signs in sign_blocks(n, permutations=permutations, seed=seed):
        hits += int(np.count_nonzero(np.abs(signs @ diff) / n >= observed - tolerance))
    return hits / 2**n if exact else (hits + 1) / (permutations + 1)


def is_exact(n: int, permutations: int) -> bool:
    """Whether :func:`randomization_test` enumerates every sign assignment of ``n`` differences (2^n of them)."""
    return n <= 30 and 2**n <= permutations


def sign_blocks(n: int, *, permutations: int, seed: int) -> Iterator[np.ndarray]:
    """The sign assignments :func:`randomization_test` uses for ``n`` differences, a block of rows at a time:
    every one of the 2^n when :func:`is_exact`, else ``permutations`` random ones drawn from a generator seeded
    with ``seed`` (int8 rows of +1 and -1). The same stream for every set of ``n`` differences, which is what lets
    :mod:`rag_eval.reports.power_analysis` simulate the test on many resampled sets at once."""
    if is_exact(n, permutations):
        yield ((np.arange(2**n)[:, None] >> np.arange(n)) & 1) * 2 - 1
        return
    rng = np.random.default_rng(seed)
    # about CHUNK signs at a time (O(n) memory); a multiple of 4 rows per call, because NumPy draws int8 values
    # four to a 32-bit word and drops a word's unused bytes at the end of a call: so the stream of signs is the
    # same however the draws are split (and the same as when they were drawn 1000 rows at a time)
    step = chunk_rows(n, permutations, multiple=4)
    for start in range(0, permutations, step):
        b = min(step, permutations - start)
        signs = rng.integers(0, 2, size=(b, n), dtype=np.int8)
        signs *= 2
        signs -= 1
        yield signs


def t_test(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided paired t-test (SciPy's ``ttest_rel``). When every query differs by the same amount the t statistic
    is infinite (p = 0) or undefined (no difference: p = 1); SciPy would warn and return NaN."""
    from scipy import stats

    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if len(diff) < 2:
        return float("nan")
    if np.all(diff == diff[0]):
        return 1.0 if diff[0] == 0 else 0.0
    return float(stats.ttest_rel(a, b).pvalue)


def wilcoxon_test(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank test (SciPy's ``wilcoxon`` with its defaults; 1.0 when every difference is 0)."""
    from scipy import stats

    diff = np.asarray(a) - np.asarray(b)
    if len(diff) == 0:
        return float("nan")
    if not np.any(diff):
        return 1.0
    return float(stats.wilcoxon(a, b).pvalue)


def p_value(test: str, a: np.ndarray, b: np.ndarray, *, permutations: int, seed: int) -> float:
    if test == "randomization":
        return randomization_test(np.asarray(a) - np.asarray(b), permutations=permutations, seed=seed)
    if test == "t":
        return t_test(a, b)
    if test == "wilcoxon":
        return wilcoxon_test(a, b)
    raise ValueError(f"unknown test {test!r}; choose one of {TESTS}")


def paired_bootstrap_ci(diff: np.ndarray, *, resamples: int, confidence: float, seed: int) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(diff), resampling queries (so the pairing is kept)."""
    diff = np.asarray(diff, dtype=np.float64)
    n = len(diff)
    if n == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    step = chunk_rows(n, resamples)  # about CHUNK indices at a time: O(n) memory, the same stream of indices
    for start in range(0, resamples, step):
        b = min(step, resamples - start)
        means[start : start + b] = diff[rng.integers(0, n, size=(b, n))].mean(axis=1)
    alpha = 1 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def effect_size(diff: np.ndarray) -> float:
    """Cohen's d for paired samples (d_z): mean difference over the standard deviation of the differences."""
    diff = np.asarray(diff, dtype=np.float64)
    if len(diff) < 2:
        return float("nan")
    sd = diff.std(ddof=1)
    if sd == 0:
        return 0.0 if diff.mean() == 0 else float(np.sign(diff.mean()) * np.inf)
    return float(diff.mean() / sd)


def correct(p_values: np.ndarray, method: str) -> np.ndarray:
    """Adjusted p-values: Holm's step-down (family-wise error) or Benjamini-Hochberg (false discovery rate); NaN
    p-values are left out of the family and stay NaN."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(len(p), np.nan)
    keep = ~np.isnan(p)
    q = p[keep]
    m = len(q)
    if m == 0 or method == "none":
        out[keep] = q
        return out
    order = np.argsort(q, kind="stable")
    ranked = q[order]
    if method == "holm":
        adjusted = np.maximum.accumulate((m - np.arange(m)) * ranked)
    elif method == "bh":
        adjusted = np.minimum.accumulate(m / np.arange(m, 0, -1) * ranked[::-1])[::-1]
    else:
        raise ValueError(f"unknown correction {method!r}; choose one of {CORRECTIONS}")
    result = np.empty(m)
    result[order] = np.minimum(adjusted, 1.0)
    out[keep] = result
    return out
