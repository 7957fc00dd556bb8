"""``rag_eval.power``: how many queries a comparison needs, from a pilot.

The minimum detectable difference at the pilot's n, and the queries needed for a given effect, by the paired t-test
(``"t"``) or a simulation of ``compare``'s test (``"resample"``), with a Bonferroni bound for several comparisons:
``docs/power.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import check_choice, check_number, check_share
from ..reports.report import Report, is_geometric_metric
from ..reports.summary import MIN_GEO_MEAN
from .paired import TESTS, is_exact, pair, shown_ids, sign_blocks, wilcoxon_test
from .systems import resolve_system, with_systems

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "METHODS",
    "PowerAnalysis",
    "power",
    "t_minimum_detectable_difference",
    "t_power",
    "t_queries_needed",
]

METHODS = ("t", "resample")
MAX_QUERIES = 2**40  # the largest number of queries searched for


@dataclass(frozen=True)
class PowerAnalysis:
    """What :func:`power` found. Every difference is in the metric's units (for gm_map and gm_bpref, of the mean
    log of the values floored at 1e-5, as ``compare`` tests them)."""

    n: int  #: the pilot's queries (paired, with a value for both systems)
    minimum_detectable_difference: float  #: at ``n`` (inf when no difference is detectable at ``n``)
    queries_needed: int | None  #: the smallest n reaching ``power`` for ``effect``; None without ``effect``
    effect: float | None  #: the difference to detect, as given
    method: str  #: "t" or "resample"
    alpha: float  #: the significance level asked for, over all ``comparisons``
    alpha_per_test: float  #: the level each test is held to: alpha / comparisons (Bonferroni)
    power: float  #: the power asked for
    comparisons: int  #: how many tests the correction accounts for (Bonferroni)
    sd: float  #: the standard deviation of the per-query differences (n - 1 in the denominator)
    mean_difference: float | None  #: the pilot's mean difference (None from one system and a correlation)
    power_at_effect: float | None = None  #: the power at ``n`` for ``effect`` (None without ``effect``)
    metric: str | None = None
    system: str | None = None
    baseline: str | None = None
    correlation: float | None = None  #: the assumed correlation, from one system's values
    test: str = "t"  #: the paired test whose power this is
    simulations: int | None = None  #: resample: query sets simulated per point
    permutations: int | None = None  #: resample, randomization test: its permutations
    seed: int | None = None  #: resample: the seed of the draws and of the randomization test
    geometric: bool = False  #: a geometric-mean metric: differences of logs
    n_nan: int = 0  #: from a report: queries both systems measured, NaN (0/0) for either: left out
    n_unpaired: int = 0  #: from a report: queries one system measured and the other not: left out
    left_out: str = ""  #: which were left out (some named), as statistics.Pairing says it; "" when none

    def to_text(self) -> str:
        """The analysis in a few lines, alpha and power stated."""
        what = f"{self.metric}: " if self.metric else ""
        if self.system is not None and self.baseline is not None:
            what += f"{self.system!r} against {self.baseline!r}"
        elif self.system is not None:
            what += f"{self.system!r} against a system correlated at {self.correlation:g}"
        else:
            what += "paired per-query differences"
        if self.method == "t":
            how = "two-sided paired t-test, noncentral t (as statsmodels' TTestPower)"
        else:
            extra = f", {self.permutations} permutations" if self.test == "randomization" else ""
            how = (
                f"resampling the pilot's differences: {self.simulations} simulated query sets per point, "
                f"{self.test} test{extra}, seed {self.seed}"
            )
        level = f"alpha {self.alpha:g}"
        if self.comparisons > 1:
            level += f" over {self.comparisons} comparisons (Bonferroni: {self.alpha_per_test:.4g} per test)"
        units = " (of the mean log, floored at 1e-5)" if self.geometric else ""
        spread = f"sd of the differences {self.sd:.4g}"
        if self.correlation is not None:
            spread += f" (assumed correlation {self.correlation:g})"
        if self.mean_difference is not None:
            spread += f", mean difference {self.mean_difference:+.4g}"
        lines = [
            f"power analysis, {what}",
            f"  method: {how}",
            f"  {level}, power {self.power:g}",
            f"  pilot: {self.n} queries, {spread}{units}",
            *([f"  left out of the pilot: {self.left_out}"] if self.left_out else []),
            f"  minimum detectable difference at {self.n} queries: {_number(self.minimum_detectable_difference)}",
        ]
        if self.effect is not None:
            needed = "more than " + f"{MAX_QUERIES:,}" if self.queries_needed is None else f"{self.queries_needed:,}"
            lines.append(f"  queries needed to detect a difference of {self.effect:g}: {needed}")
            if self.power_at_effect is not None:
                lines.append(
                    f"  power at {self.n} queries for a difference of {self.effect:g}: {self.power_at_effect:.3f}"
                )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()


def _number(value: float) -> str:
    return (
        "none at any difference (the test cannot reject at this many queries)" if math.isinf(value) else f"{value:.4g}"
    )


# ----- the paired t-test, analytically ----------------------------------------------------------------------------


def t_power(effect: float, sd: float, n: float, alpha: float) -> float:
    """Power of the two-sided paired t-test at ``n`` pairs for a true mean difference ``effect`` when the
    differences have standard deviation ``sd``: with d = effect / sd, nc = d·sqrt(n), df = n - 1 and
    crit = t.ppf(1 - alpha/2, df), ``nct.sf(crit, df, nc) + nct.cdf(-crit, df, nc)`` (statsmodels' ``ttest_power``)."""
    from scipy import stats

    df = n - 1
    nc = effect / sd * math.sqrt(n)
    crit = float(stats.t.ppf(1 - alpha / 2, df))
    # nct.cdf(-crit, df, nc) is nct.sf(crit, df, -nc); SciPy's cdf gives NaN where that tail underflows (e.g. at
    # n = 200, d = 1: statsmodels gives NaN there too), its sf gives the tiny value
    upper, lower = (_tail(crit, df, x) for x in (nc, -nc))
    return upper + lower


def _tail(crit: float, df: float, nc: float) -> float:
    """P(T > crit) for T noncentral t, by ``nct.sf``, else by ``1 - nct.cdf``; 0 where both fail (a tail beyond
    double precision)."""
    from scipy import stats

    value = float(stats.nct.sf(crit, df, nc))
    if math.isnan(value):
        value = 1.0 - float(stats.nct.cdf(crit, df, nc))
    return 0.0 if math.isnan(value) else value


def t_minimum_detectable_difference(sd: float, n: int, alpha: float, power: float) -> float:
    """The difference at which the two-sided paired t-test at ``n`` pairs has power ``power`` (brentq)."""
    return sd * _root(lambda d: t_power(d, 1.0, n, alpha) - power)


def t_queries_needed(effect: float, sd: float, alpha: float, power: float) -> int | None:
    """The smallest n >= 2 at which the two-sided paired t-test reaches ``power`` for ``effect`` (the ceiling of
    statsmodels' ``TTestPower().solve_power(effect_size=effect / sd, ...)``); None beyond :data:`MAX_QUERIES`."""
    return _smallest_n(lambda n: t_power(abs(effect), sd, n, alpha) >= power, start=2)


def _root(excess: Callable[[float], float]) -> float:
    """The effect (>= 0) where the increasing ``excess`` crosses 0, or inf where it never does."""
    from scipy.optimize import brentq

    high = 1.0
    while excess(high) < 0:
        high *= 2
        if high > 2.0**60:
            return math.inf
    low = 0.0 if high == 1.0 else high / 2
    return float(brentq(excess, low, high, xtol=1e-12, rtol=1e-12))


def _smallest_n(reaches: Callable[[int], bool], *, start: int) -> int | None:
    """The smallest integer n >= 2 for which ``reaches(n)`` holds, taking it as monotone in n: from ``start``, down
    or doubling up, then by bisection. None when it does not hold by :data:`MAX_QUERIES`."""
    start = max(2, start)
    if reaches(start):
        low, high = 1, start  # reaches(low) is false or low < 2
    else:
        low, high = start, start * 2
        while not reaches(high):
            low, high = high, high * 2
            if high > MAX_QUERIES:
                return None
    while high - low > 1:
        middle = (low + high) // 2
        if middle >= 2 and reaches(middle):
            high = middle
        else:
            low = middle
    return high


# ----- the test compare runs, by resampling -----------------------------------------------------------------------


class _Simulated:
    """``simulations`` sets of ``m`` differences drawn with replacement from the pilot's centred differences, and
    the p-values ``test`` gives each set shifted by a difference ``delta`` (the randomization test's sign
    assignments are the ones ``compare`` would draw for ``m`` queries with ``seed``)."""

    def __init__(
        self, centred: np.ndarray, m: int, *, test: str, simulations: int, permutations: int, seed: int
    ) -> None:
        rng = np.random.default_rng([seed, m])
        self.m, self.test = m, test
        self.sets = centred[rng.integers(0, len(centred), size=(simulations, m))]
        self.sums = self.sets.sum(axis=1)
        self.high, self.low = self.sets.max(axis=1), self.sets.min(axis=1)
        if test == "randomization":
            self.exact = is_exact(m, permutations)
            self.permutations = permutations
            # every sign assignment's sum of the differences (S @ set) and of the shift (S @ 1)
            blocks = list(sign_blocks(m, permutations=permutations, seed=seed))
            self.signed = np.vstack([b @ self.sets.T for b in blocks])  # [assignments, simulations]
            self.signs = np.concatenate([b.sum(axis=1, dtype=np.int64) for b in blocks]).astype(np.float64)
        elif test == "t":
            self.sd = self.sets.std(axis=1, ddof=1)

    def p_values(self, delta: float) -> np.ndarray:
        m = self.m
        if self.test == "randomization":
            observed = np.abs(self.sums + delta * m) / m
            tolerance = 1e-12 * np.maximum(1.0, np.maximum(np.abs(self.high + delta), np.abs(self.low + delta)))
            hits = np.zeros(len(observed), dtype=np.int64)
            step = 1024
            for start in range(0, len(self.signs), step):
                means = np.abs(self.signed[start : start + step] + delta * self.signs[start : start + step, None]) / m
                hits += np.count_nonzero(means >= observed - tolerance, axis=0)
            return hits / 2.0**m if self.exact else (hits + 1) / (self.permutations + 1)
        if self.test == "t":
            from scipy import stats

            mean = self.sums / m + delta
            with np.errstate(divide="ignore", invalid="ignore"):
                t = mean / (self.sd / math.sqrt(m))
            p = 2 * stats.t.sf(np.abs(t), m - 1)
            constant = self.sd == 0  # as statistics.t_test: every difference alike
            p[constant] = np.where(mean[constant] == 0, 1.0, 0.0)
            return np.asarray(p, dtype=np.float64)
        zeros = np.zeros(m)
        return np.array([wilcoxon_test(row + delta, zeros) for row in self.sets])

    def power(self, delta: float, alpha: float) -> float:
        return float(np.mean(self.p_values(delta) < alpha))


def _resample_mdd(simulated: _Simulated, alpha: float, power: float, guess: float) -> float:
    """The smallest difference the simulated test detects with ``power`` (bisection on the simulated power, the
    same query sets at every difference)."""
    if simulated.power(0.0, alpha) >= power:
        return 0.0
    high = guess if guess > 0 and math.isfinite(guess) else 1.0
    while simulated.power(high, alpha) < power:
        high *= 2
        if high > guess * 2.0**40 + 2.0**40:
            return math.inf
    low = 0.0
    while high - low > 1e-6 * high:
        middle = (low + high) / 2
        if simulated.power(middle, alpha) >= power:
            high = middle
        else:
            low = middle
    return high


# ----- the entry point ---------------------------------------------------------------------------------------------


def power(
    pilot: Report | Mapping[str, float],
    *,
    baseline: str | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    effect: float | None = None,
    method: str = "t",
    system: str | None = None,
    metric: str | None = None,
    comparisons: int | None = None,
    correlation: float | None = None,
    test: str = "randomization",
    simulations: int = 1000,
    permutations: int = 10000,
    seed: int = 0,
) -> PowerAnalysis:
    """How many queries a paired comparison needs (see the module's docstring).

    ``pilot``: a :class:`Report` (systems are runs, or ``run/stage``, as in :func:`rag_eval.compare`) or a
    ``{query_id: difference}`` mapping of paired per-query differences.

    From a report: ``baseline`` names the system compared against (by default the first, as in ``compare``),
    ``system`` the other one (needed when the report has more than one besides the baseline) and ``metric`` the
    metric (needed when the report has more than one); queries are paired by id and a query with a NaN value for
    either is left out, as ``compare`` does. Or, with ``correlation`` (and no baseline): one system's values and
    an assumed correlation rho between its per-query values and those of the system it will be compared with (of
    the same spread), so that the differences' standard deviation is sd·sqrt(2·(1 - rho)); the ``t`` method only.

    ``comparisons``: how many tests the multiple-comparison correction will span (Bonferroni: each at
    ``alpha / comparisons``). By default, from a report with a baseline, the hypotheses ``compare(report,
    baseline=...)`` tests (every other system x every metric all systems have); otherwise 1.

    ``method``: ``"t"`` (the two-sided paired t-test, noncentral t) or ``"resample"`` (``simulations`` query sets
    resampled from the pilot's differences and tested by ``test``, compare's test: ``"randomization"`` with
    ``permutations`` and ``seed`` as compare draws them, ``"t"`` or ``"wilcoxon"``).

    Returns a :class:`PowerAnalysis`: ``n``, ``minimum_detectable_difference`` at ``n`` and, with ``effect``,
    ``queries_needed``. Bad input (too few queries, differences that do not vary, a level out of range, an unknown
    system or metric) raises ValueError.
    """
    target = power
    check_choice(method, "method", METHODS)
    check_choice(test, "test", TESTS)
    alpha = check_share(alpha, "alpha")
    if effect is not None and (not math.isfinite(effect) or effect == 0):
        raise ValueError(f"effect must be a finite, nonzero difference, not {effect}")
    if correlation is not None:
        correlation = check_number(correlation, "correlation", low=-1, high=1, closed="left")
    if comparisons is not None and (
        isinstance(comparisons, bool) or int(comparisons) != comparisons or comparisons < 1
    ):
        raise ValueError(f"comparisons must be a whole number >= 1, not {comparisons}")
    if method == "resample":
        for name, value in (("simulations", simulations), ("permutations", permutations)):
            if int(value) != value or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1, not {value}")

    found: dict[str, Any]
    if isinstance(pilot, Report):
        found = _from_report(pilot, baseline, system, metric, correlation)
    elif isinstance(pilot, Mapping):
        if baseline is not None or system is not None or metric is not None:
            raise ValueError("baseline=, system= and metric= name parts of a report; a mapping is the differences")
        if correlation is not None:
            raise ValueError("correlation= is for a report of one system; a mapping already holds the differences")
        found = {"diffs": _differences(pilot), "hypotheses": 1}
    else:
        raise TypeError(f"pilot must be a Report or a {{query_id: difference}} mapping, not {type(pilot).__name__}")
    if found.get("correlation") is not None and method == "resample":
        raise ValueError(
            "method='resample' resamples paired differences: give a report with a baseline, not correlation="
        )

    diffs = found.pop("diffs", None)
    if diffs is not None:
        n = len(diffs)
        if n < 2:
            raise ValueError(f"a power analysis needs at least 2 paired queries; the pilot has {n}")
        sd = 0.0 if np.all(diffs == diffs[0]) else float(np.std(diffs, ddof=1))
        mean_difference: float | None = float(np.mean(diffs))
        if not sd > 0:
            raise ValueError(
                f"the pilot's per-query differences do not vary (all {diffs[0]:g}, sd 0): no power analysis"
            )
    else:
        n, sd, mean_difference = found.pop("n"), found.pop("sd"), None
    m = int(comparisons) if comparisons is not None else int(found.pop("hypotheses"))
    found.pop("hypotheses", None)
    per_test = alpha / m
    target = check_number(
        target, "power", low=per_test, high=1, closed="neither", why=" (above the level of each test)"
    )

    mdd = t_minimum_detectable_difference(sd, n, per_test, target)
    needed: int | None = None
    at_effect: float | None = None
    if method == "t":
        if effect is not None:
            needed = t_queries_needed(effect, sd, per_test, target)
            at_effect = t_power(abs(effect), sd, n, per_test)
        settings: dict[str, Any] = {"test": "t"}
    else:
        assert diffs is not None
        direction = 1.0 if np.mean(diffs) >= 0 else -1.0
        centred = direction * (diffs - np.mean(diffs))  # shifted by +delta: the pilot's direction

        def simulate(size: int) -> _Simulated:
            return _Simulated(centred, size, test=test, simulations=simulations, permutations=permutations, seed=seed)

        here = simulate(n)
        mdd = _resample_mdd(here, per_test, target, mdd)
        if effect is not None:
            at_effect = here.power(abs(effect), per_test)
            guess = t_queries_needed(effect, sd, per_test, target) or MAX_QUERIES
            needed = _smallest_n(lambda size: simulate(size).power(abs(effect), per_test) >= target, start=guess)
        settings = {
            "test": test,
            "simulations": simulations,
            "permutations": permutations if test == "randomization" else None,
            "seed": seed,
        }
    return PowerAnalysis(
        n=n,
        minimum_detectable_difference=mdd,
        queries_needed=needed,
        effect=effect,
        method=method,
        alpha=alpha,
        alpha_per_test=per_test,
        power=target,
        comparisons=m,
        sd=sd,
        mean_difference=mean_difference,
        power_at_effect=at_effect,
        **found,
        **settings,
    )


def _differences(pilot: Mapping[str, float]) -> np.ndarray:
    if not pilot:
        raise ValueError("the pilot has no queries: give {query_id: difference} for at least 2 queries")
    values = np.array([_float(q, v) for q, v in pilot.items()], dtype=np.float64)
    return values


def _float(query: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"query {query!r}: the difference {value!r} is not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"query {query!r}: the difference {value!r} is not finite")
    return number


def _from_report(
    report: Report, baseline: str | None, system: str | None, metric: str | None, correlation: float | None
) -> dict[str, Any]:
    per_query = with_systems(report.per_query)
    systems = list(dict.fromkeys(per_query["system"]))
    if not systems:
        raise ValueError("the report has no systems")
    available = {s: list(dict.fromkeys(per_query.loc[per_query["system"] == s, "metric"])) for s in systems}
    if correlation is not None:
        if baseline is not None:
            raise ValueError(
                "give either baseline= (the pilot pairs two systems) or correlation= (one system), not both"
            )
        if system is not None:
            chosen = resolve_system(system, systems, role="system")
        elif len(systems) == 1:
            chosen = systems[0]
        else:
            raise ValueError(f"the report has {len(systems)} systems: name the one to use (system=...) from {systems}")
        name = _metric(metric, available[chosen], f"system {chosen!r}")
        values = _values(per_query, chosen, name).dropna().to_numpy(dtype=np.float64)
        geometric = is_geometric_metric(name)
        if geometric:
            values = np.log(np.maximum(values, MIN_GEO_MEAN))
        if len(values) < 2:
            raise ValueError(f"a power analysis needs at least 2 queries; {chosen!r} has {len(values)} for {name!r}")
        spread = 0.0 if np.all(values == values[0]) else float(np.std(values, ddof=1))
        sd = spread * math.sqrt(2 * (1 - correlation))
        if not sd > 0:
            raise ValueError(f"the values of {name!r} for {chosen!r} do not vary (sd 0): no power analysis")
        return {
            "n": len(values),
            "sd": sd,
            "hypotheses": 1,
            "metric": name,
            "system": chosen,
            "correlation": correlation,
            "geometric": geometric,
        }
    if len(systems) == 1 and baseline is None:
        raise ValueError(
            f"nothing to compare: the report has one system ({systems[0]!r}); give correlation= to assume how its "
            "values correlate with those of the system it will be compared with"
        )
    base = resolve_system(baseline, systems) if baseline is not None else systems[0]
    others = [s for s in systems if s != base]
    if not others:
        raise ValueError(f"nothing to compare: the report has the baseline {base!r} alone (give correlation= instead)")
    if system is not None:
        chosen = resolve_system(system, others, role="system")
    elif len(others) == 1:
        chosen = others[0]
    else:
        raise ValueError(f"the report has {len(others)} systems besides {base!r}: name one (system=...) from {others}")
    shared = [m for m in available[chosen] if m in available[base]]
    name = _metric(metric, shared, f"both {chosen!r} and {base!r}")
    # paired as compare and the gate pair them (statistics.pair): one side's queries and NaN left out, counted
    paired = pair(
        _values(per_query, chosen, name),
        _values(per_query, base, name),
        allow_unpaired=True,
        names=(repr(chosen), repr(base)),
    )
    a, b = paired.x, paired.y
    parts = [paired.unpaired_text()] if paired.n_unpaired else []
    parts += [f"{paired.n_nan} NaN on either side ({shown_ids(paired.nan_ids)})"] if paired.n_nan else []
    geometric = is_geometric_metric(name)
    if geometric:  # as compare tests them: the logs of the values floored at 1e-5
        a, b = np.log(np.maximum(a, MIN_GEO_MEAN)), np.log(np.maximum(b, MIN_GEO_MEAN))
    every = [m for m in available[systems[0]] if all(m in available[s] for s in systems)]
    return {
        "diffs": a - b,
        "hypotheses": max(1, len(others) * len(every)),
        "metric": name,
        "system": chosen,
        "baseline": base,
        "geometric": geometric,
        "n_nan": paired.n_nan,
        "n_unpaired": paired.n_unpaired,
        "left_out": "; ".join(parts),
    }


def _metric(metric: str | None, available: list[str], whose: str) -> str:
    if metric is None:
        if len(available) == 1:
            return available[0]
        raise ValueError(
            f"name the metric (metric=...): {whose} have {available}" if available else f"{whose}: no metric"
        )
    if metric in available:
        return metric
    try:
        from ..metrics.grammar import parse_metric

        canonical = str(parse_metric(metric))
    except (ValueError, TypeError):
        canonical = metric
    if canonical in available:
        return canonical
    raise ValueError(f"metric {metric!r} is not measured for {whose}; measured: {available}")


def _values(per_query: pd.DataFrame, system: str, metric: str) -> pd.Series:
    rows = per_query[(per_query["system"] == system) & (per_query["metric"] == metric)]
    return rows.set_index("query_id")["value"]
