"""Paired statistics over per-query values: tests, intervals, effect sizes and multiple-comparison corrections.
See docs/gate.md.

Each function takes two aligned arrays of per-query values (or their differences) and is written to be checked
against a reference: the t-test and Wilcoxon against SciPy, the randomization test against exact enumeration,
the corrections against statsmodels' ``multipletests``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .._checks import check_choice
from ..data.joins import user_stacklevel
from ..data.near_miss import near_miss_line, near_misses
from ..errors import DegenerateInterval, InputError, NearMissIds
from ..reports.summary import MIN_N as MIN_N
from ..reports.summary import chunk_rows
from ..reports.summary import method_label as method_label
from ..reports.summary import min_n as min_n

if TYPE_CHECKING:
    import pandas as pd

# MIN_N, min_n and method_label (the fewest values each interval method is trusted on) live a floor below, in
# rag_eval.reports.summary, where the reports' paired intervals read them too; every verdict here takes them as above
TESTS = ("randomization", "t", "wilcoxon")
INTERVAL_TESTS = (*TESTS, "bootstrap")  # the tests with an interval of the mean difference: rag_eval.gate's
CORRECTIONS = ("holm", "bh", "none")


def all_equal(values: np.ndarray) -> bool:
    """Whether ``values`` (2 or more) are all the same: an interval from them has zero width, for want of spread,
    not for certainty (:class:`~rag_eval.errors.DegenerateInterval`)."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) < 2:
        return False
    # equal up to rounding: 0.6 - 0.5 and 0.7 - 0.6 differ in the last bit, and are one difference of 0.1
    return bool(np.ptp(values) <= 1e-12 * max(1.0, float(np.abs(values).max())))


def warn_degenerate(where: str, *, stacklevel: int = 3) -> None:
    """Announce intervals of zero width from a sample, once: ``where`` names them (and their one value)."""
    warnings.warn(
        f"{where}: every value an interval was computed from is the same, so it has zero width: no spread "
        "among these queries, not certainty about others",
        DegenerateInterval,
        stacklevel=stacklevel,
    )


# ----- pairing: the one place every paired comparison (gate, compare, judge_assisted.compare, power) goes through


class UnpairedQueries(InputError):
    """A paired comparison whose two sides hold different queries, where being unpaired was not allowed."""


SHOWN_IDS = 5  # query ids named before "and k more"


def shown_ids(ids: np.ndarray | list[str] | tuple[str, ...], k: int = SHOWN_IDS) -> str:
    """The first ``k`` of ``ids`` (in their order), then "and m more"."""
    ids = [str(q) for q in list(ids[:k])] + ([] if len(ids) <= k else [f"and {len(ids) - k} more"])
    return ", ".join(ids)


@dataclass(frozen=True, eq=False)
class Pairing:
    """Two sides' per-query values paired by query id: ``x`` (the system, the candidate) and ``y`` (the baseline)
    over ``ids``, the queries both sides measured with a value on each; left out: ``nan_ids`` (measured on both,
    NaN on either: 0/0) and the queries measured on one side only, ``only_x`` and ``only_y``. Arrays, in the
    baseline's order."""

    ids: np.ndarray
    x: np.ndarray
    y: np.ndarray
    nan_ids: np.ndarray
    only_x: np.ndarray
    only_y: np.ndarray
    names: tuple[str, str] = ("the candidate", "the baseline")

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def n_nan(self) -> int:
        return len(self.nan_ids)

    @property
    def n_unpaired(self) -> int:
        return len(self.only_x) + len(self.only_y)

    @property
    def diff(self) -> np.ndarray:
        diff: np.ndarray = self.x - self.y
        return diff

    def unpaired_text(self) -> str:
        """ "" when both sides measured the same queries; else who lacks which (some named)."""
        parts = [
            f"{len(ids)} only in {name} ({shown_ids(ids)})"
            for ids, name in ((self.only_y, self.names[1]), (self.only_x, self.names[0]))
            if len(ids)
        ]
        return "; ".join(parts)

    def left_out(self) -> str:
        """What the comparison rests on, in one phrase: ``"n 18 paired; left out: 20 only in the baseline (q21,
        ...); 2 NaN on either side (q3, q7)"``."""
        parts = [self.unpaired_text()] if self.n_unpaired else []
        if self.n_nan:
            parts.append(f"{self.n_nan} NaN on either side ({shown_ids(self.nan_ids)})")
        return f"n {self.n} paired" + ("; left out: " + "; ".join(parts) if parts else "; none left out")


def pair(
    x: pd.Series,
    y: pd.Series,
    *,
    allow_unpaired: bool,
    names: tuple[str, str] = ("the candidate", "the baseline"),
    what: str = "",
    hint: str = "",
) -> Pairing:
    """Pair ``x`` (the system's values, indexed by query id: every query it measured, NaN where a value is 0/0)
    with ``y`` (the baseline's), in ``y``'s order. When either side measured a query the other did not and
    ``allow_unpaired`` is False: :class:`UnpairedQueries` naming ``what``, who lacks how many queries (some named)
    and ``hint`` (how to allow it). Whole-column work: no Python call per query."""
    common = y.index.intersection(x.index, sort=False)
    only_y = y.index.difference(x.index, sort=False)
    only_x = x.index.difference(y.index, sort=False)
    if len(only_x) and len(only_y):  # ids on one side only, written like the other's: said, never paired
        line = near_miss_line(
            near_misses([str(q) for q in only_x], [str(q) for q in only_y]),
            subject=what or f"{names[0]} vs {names[1]}",
            ids=f"query id(s) of {names[0]}",
            other=f"one of {names[1]}",
            left=names[0],
            right=names[1],
            consequence="they are different ids, so those queries are not paired",
        )
        if line:
            warnings.warn(line, NearMissIds, stacklevel=user_stacklevel())
    if (len(only_x) or len(only_y)) and not allow_unpaired:
        draft = Pairing(
            np.array([], dtype=object),
            np.array([]),
            np.array([]),
            np.array([], dtype=object),
            only_x.to_numpy(dtype=object),
            only_y.to_numpy(dtype=object),
            names,
        )
        lacks = "the two sides measured different queries: " + draft.unpaired_text()
        raise UnpairedQueries(
            (f"{what}: " if what else "")
            + lacks
            + f"; {len(common)} measured on both. A comparison on those alone would not see the others"
            + (f" ({hint})" if hint else "")
        )
    xv = x.loc[common].to_numpy(dtype=np.float64)
    yv = y.loc[common].to_numpy(dtype=np.float64)
    keep = ~(np.isnan(xv) | np.isnan(yv))
    ids = common.to_numpy(dtype=object)
    return Pairing(
        ids[keep],
        xv[keep],
        yv[keep],
        ids[~keep],
        only_x.to_numpy(dtype=object),
        only_y.to_numpy(dtype=object),
        names,
    )


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
    :mod:`rag_eval.statistics.power_analysis` simulate the test on many resampled sets at once."""
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
    if all_equal(diff):  # (up to rounding: SciPy would warn of catastrophic cancellation)
        return 1.0 if abs(float(diff.mean())) <= 1e-12 else 0.0
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


def p_value(test: str, a: np.ndarray, b: np.ndarray, *, permutations: int, seed: int, resamples: int = 10000) -> float:
    """The two-sided p-value of ``test`` for the paired values ``a`` and ``b``: one of :data:`TESTS`, or
    ``"bootstrap"`` (:func:`bootstrap_test`, with ``resamples`` and ``seed``; the gate's fourth test)."""
    if test == "randomization":
        return randomization_test(np.asarray(a) - np.asarray(b), permutations=permutations, seed=seed)
    if test == "t":
        return t_test(a, b)
    if test == "wilcoxon":
        return wilcoxon_test(a, b)
    if test == "bootstrap":
        return bootstrap_test(
            np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64), resamples=resamples, seed=seed
        )
    check_choice(test, "test", INTERVAL_TESTS)
    raise AssertionError(test)  # every test is a branch above


def paired_bootstrap_means(diff: np.ndarray, *, resamples: int, seed: int) -> np.ndarray:
    """The means of ``resamples`` bootstrap resamples of ``diff`` (queries drawn with replacement, so the pairing is
    kept), from a generator seeded with ``seed``: what :func:`paired_bootstrap_ci` and :func:`bootstrap_test` read."""
    diff = np.asarray(diff, dtype=np.float64)
    n = len(diff)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    step = chunk_rows(n, resamples)  # about CHUNK indices at a time: O(n) memory, the same stream of indices
    for start in range(0, resamples, step):
        b = min(step, resamples - start)
        means[start : start + b] = diff[rng.integers(0, n, size=(b, n))].mean(axis=1)
    return means


def paired_bootstrap_ci(diff: np.ndarray, *, resamples: int, confidence: float, seed: int) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(diff), resampling queries (so the pairing is kept)."""
    diff = np.asarray(diff, dtype=np.float64)
    if len(diff) == 0:
        return float("nan"), float("nan")
    means = paired_bootstrap_means(diff, resamples=resamples, seed=seed)
    alpha = 1 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def bootstrap_test(diff: np.ndarray, *, resamples: int, seed: int) -> float:
    """Two-sided paired bootstrap test of mean(diff) = 0, the inversion of :func:`paired_bootstrap_ci` (the same
    resampled means): p = min(1, 2 · min(share of means <= 0, share of means >= 0)). So p < alpha exactly when 0
    lies outside the percentile interval at confidence 1 - alpha (up to the quantiles' interpolation); 0 means
    below 1 / ``resamples``. Every difference 0: p = 1."""
    diff = np.asarray(diff, dtype=np.float64)
    if len(diff) == 0:
        return float("nan")
    means = paired_bootstrap_means(diff, resamples=resamples, seed=seed)
    below, above = float(np.mean(means <= 0)), float(np.mean(means >= 0))
    return min(1.0, 2 * min(below, above))


def t_interval(diff: np.ndarray, *, confidence: float) -> tuple[float, float]:
    """Student's t interval of mean(diff): mean ± t(1 - alpha/2, n - 1) · sd / sqrt(n), the inversion of
    :func:`t_test`; a single point when every difference is the same; NaN below 2 differences."""
    from scipy import stats

    diff = np.asarray(diff, dtype=np.float64)
    n = len(diff)
    if n < 2:
        return float("nan"), float("nan")
    mean = float(diff.mean())
    if all_equal(diff):
        return mean, mean
    half = float(stats.t.ppf(1 - (1 - confidence) / 2, n - 1)) * float(diff.std(ddof=1)) / np.sqrt(n)
    return mean - half, mean + half


def randomization_interval(diff: np.ndarray, *, confidence: float, permutations: int, seed: int) -> tuple[float, float]:
    """The interval of shifts d that :func:`randomization_test` does not reject at 1 - ``confidence`` when applied
    to ``diff - d`` (the inversion of the test, with the very sign assignments it draws for ``len(diff)``
    differences): its bounds are found by bisection from the mean outward, to 1e-9. A bound is infinite where the
    test cannot reject at that level however far the shift (at 5 queries, exact, p >= 2/32)."""
    diff = np.asarray(diff, dtype=np.float64)
    n = len(diff)
    if n == 0:
        return float("nan"), float("nan")
    alpha = 1 - confidence
    blocks = list(sign_blocks(n, permutations=permutations, seed=seed))
    signed = np.concatenate([b @ diff for b in blocks])
    ones = np.concatenate([b.sum(axis=1, dtype=np.int64) for b in blocks]).astype(np.float64)
    exact = is_exact(n, permutations)
    total = float(diff.sum())

    def accepted(delta: float) -> bool:
        observed = abs(total - n * delta) / n
        tolerance = 1e-12 * max(1.0, float(np.abs(diff - delta).max()))
        hits = int(np.count_nonzero(np.abs(signed - delta * ones) / n >= observed - tolerance))
        p = hits / 2**n if exact else (hits + 1) / (permutations + 1)
        return p >= alpha

    mean = float(diff.mean())
    width = max(float(diff.max() - diff.min()), 1e-6)
    bounds = []
    for direction in (-1.0, 1.0):
        step = width
        while accepted(mean + direction * step):
            step *= 2
            if step > 1e6 * (width + abs(mean)):
                bounds.append(direction * np.inf)
                break
        else:
            inside, outside = 0.0, step  # distances from the mean: accepted, rejected
            while outside - inside > 1e-9 * max(1.0, abs(mean)):
                middle = (inside + outside) / 2
                if accepted(mean + direction * middle):
                    inside = middle
                else:
                    outside = middle
            bounds.append(mean + direction * inside)
    return float(bounds[0]), float(bounds[1])


def paired_interval(
    test: str, diff: np.ndarray, *, confidence: float, resamples: int, permutations: int, seed: int
) -> tuple[float, float]:
    """The interval of mean(diff) that goes with ``test`` (the gate's decision interval): ``"randomization"``, the
    inversion of the randomization test (:func:`randomization_interval`); ``"t"``, Student's t interval;
    ``"bootstrap"`` and ``"wilcoxon"``, the paired percentile bootstrap interval (the signed-rank test's own
    inversion, Hodges-Lehmann's, bounds the pseudo-median, not the mean: 0 whenever most queries do not change,
    however much the mean drops)."""
    if test == "randomization":
        return randomization_interval(diff, confidence=confidence, permutations=permutations, seed=seed)
    if test == "t":
        return t_interval(diff, confidence=confidence)
    if test in ("bootstrap", "wilcoxon"):
        return paired_bootstrap_ci(diff, resamples=resamples, confidence=confidence, seed=seed)
    check_choice(test, "test", INTERVAL_TESTS)
    raise AssertionError(test)  # every test is a branch above


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
        check_choice(method, "correction", CORRECTIONS)
    result = np.empty(m)
    result[order] = np.minimum(adjusted, 1.0)
    out[keep] = result
    return out
