"""Prediction-powered estimates (PPI, PPI++): the mean of a metric over a query set, from a judge's grades on every
query and people's grades on a random sample of them, with an interval that pays for the judge's errors.

The estimator, its finite-population variance, the weighted and stratified forms, the human-only and judge-only
intervals and the minimum n: ``docs/ppi.md``, "What is estimated" and "When to trust it".
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import check_share
from .._markdown import html_table, markdown_cell, markdown_table
from ..data.near_miss import near_miss_hint
from ..errors import InputError
from ..reports.report import Report, is_geometric_metric, is_text_metric
from .paired import MIN_N as _MIN_N
from .paired import pair, warn_degenerate
from .ppi_kernels import MeanEstimate, _p_value, classical_mean, normal_interval, ppi_mean
from .systems import resolve_system

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd

    from ..ground_truth.human_sample import HumanSample

__all__ = [
    "JudgeAssisted",
    "MeanEstimate",
    "PPIInterval",
    "classical_mean",
    "human_interval",
    "judge_assisted",
    "judge_interval",
    "normal_interval",
    "ppi_interval",
    "ppi_mean",
]

METHODS = ("ppi++", "ppi", "human", "judge")
MIN_N = _MIN_N["normal"]  # the fewest human-graded (judge-only: judge-graded) queries an interval is given on
_SHOWN_IDS = 5  # ids named in an error message before "... and k more"


# ----- the primitive on per-query values --------------------------------------------------------------------------


@dataclass(frozen=True)
class PPIInterval:
    """A mean over a query set with its normal interval, as :func:`ppi_interval`, :func:`human_interval` and
    :func:`judge_interval` give it."""

    estimate: float
    low: float
    high: float
    se: float
    lam: float | None  #: the power-tuning parameter (1.0 for plain PPI, 0.0 human-only, None judge-only)
    n_human: int  #: human-graded queries used
    n_judge: int  #: judge-graded queries used (N)
    alpha: float
    method: str  #: "ppi++", "ppi", "human" or "judge"
    finite_population: bool = True  #: the variance of a mean over exactly these N queries (module docstring)
    weighted: bool = False  #: Hajek means with inclusion probabilities
    stratified: bool = False  #: the stratified variance
    #: zero width from a sample (every value alike, not a census): no spread among these queries, not certainty
    degenerate: bool = False
    min_n: int = MIN_N  #: the fewest values this normal interval is given on

    @property
    def width(self) -> float:
        return self.high - self.low

    def __str__(self) -> str:
        lam = "" if self.lam is None else f", lam={self.lam:.3f}"
        flat = "; zero width: every value alike, no spread among these queries, not certainty"
        flat = flat if self.degenerate else ""
        return (
            f"{self.method}: {self.estimate:.4f} [{self.low:.4f}, {self.high:.4f}] at {100 * (1 - self.alpha):g}% "
            f"(normal, min n {self.min_n}; se {self.se:.4f}{lam}; {self.n_human} human-graded of {self.n_judge} "
            f"queries{flat})"
        )


def _shown(ids: Sequence[str]) -> str:
    ids = sorted(ids)
    more = f" ... and {len(ids) - _SHOWN_IDS} more" if len(ids) > _SHOWN_IDS else ""
    return ", ".join(repr(q) for q in ids[:_SHOWN_IDS]) + more


def _values(mapping: Any, what: str, *, finite: bool = True) -> dict[str, float]:
    """``{query_id: value}`` checked: str ids, real values (never bool), finite; else an InputError naming them."""
    if isinstance(mapping, (str, bytes)) or not hasattr(mapping, "keys"):
        raise InputError(f"must map query ids to values, not a {type(mapping).__name__}", source=what)
    out: dict[str, float] = {}
    for qid in list(mapping.keys()):
        if not isinstance(qid, str):
            raise InputError(f"query id {qid!r} is not a str", source=what)
        value = mapping[qid]
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise InputError(f"query {qid!r}: the value {value!r} is not a number", source=what)
        out[qid] = float(value)
    if finite:
        bad = [q for q, v in out.items() if not math.isfinite(v)]
        if bad:
            raise InputError(f"queries {_shown(bad)}: the value is not finite (NaN or infinite)", source=what)
    return out


def _strata(strata: Any, ids: Sequence[str]) -> list[str]:
    """The strata of ``ids``; each stratum must hold 2 or more of them (else its variance is unknown)."""
    if isinstance(strata, (str, bytes)) or not isinstance(strata, Mapping):
        raise InputError(f"must map query ids to strata, not a {type(strata).__name__}", source="strata")
    missing = [q for q in ids if q not in strata]
    if missing:
        raise InputError(f"human-graded queries {_shown(missing)} have no stratum", source="strata")
    labels = [str(strata[q]) for q in ids]
    sizes: dict[str, int] = {}
    for label in labels:
        sizes[label] = sizes.get(label, 0) + 1
    alone = [g for g, k in sizes.items() if k < 2]
    if alone:
        raise InputError(
            f"strata {_shown(alone)} hold one human-graded query: a stratum's variance needs two or more",
            source="strata",
        )
    return labels


def _inclusion(weights: Any, ids: Sequence[str]) -> npt.NDArray[np.float64]:
    """The inclusion probabilities of ``ids`` from ``weights``, each in (0, 1]; else an InputError naming ids."""
    probs = _values(weights, "weights")
    missing = [q for q in ids if q not in probs]
    if missing:
        raise InputError(f"human-graded queries {_shown(missing)} have no inclusion probability", source="weights")
    extra = [q for q in probs if q not in set(ids)]
    if extra:
        raise InputError(f"queries {_shown(extra)} have an inclusion probability but no human value", source="weights")
    bad = [q for q in ids if not 0 < probs[q] <= 1]
    if bad:
        raise InputError(f"queries {_shown(bad)}: an inclusion probability must lie in (0, 1]", source="weights")
    return np.array([probs[q] for q in ids], dtype=np.float64)


def ppi_interval(
    judge: Mapping[str, float],
    human: Mapping[str, float],
    *,
    alpha: float = 0.05,
    tuned: bool = True,
    weights: Mapping[str, float] | None = None,
    strata: Mapping[str, str] | None = None,
    finite_population: bool = True,
) -> PPIInterval:
    """The prediction-powered mean over the query set and its ``1 - alpha`` normal interval.

    ``judge`` maps every query id of the set to its value under the judge's grades; ``human`` maps the
    human-graded query ids (a subset of ``judge``'s, drawn uniformly at random, or with ``weights``: their
    inclusion probabilities; ``strata``: each one's stratum, for the stratified variance) to their value under
    people's grades. ``tuned``: PPI++ (``lam`` tuned to the
    smallest variance, clipped to [0, 1]); False: plain PPI (``lam = 1``). The estimate is
    ``lam * mean_all(judge) + mean_human(human - lam * judge)``, its target the mean of the human values over
    every query of ``judge`` (see the module's docstring for the variance, and ``finite_population``).
    Angelopoulos et al., Science 2023; Angelopoulos, Duchi, Zrnic 2023 (PPI++). Fewer than :data:`MIN_N`
    human-graded queries: an InputError; an interval of zero width: a DegenerateInterval warning.
    """
    return _announce(
        _ppi_interval(
            judge,
            human,
            alpha=check_share(alpha, "alpha"),
            tuned=tuned,
            weights=weights,
            strata=strata,
            finite_population=finite_population,
        ),
        "ppi_interval",
    )


def _announce(result: PPIInterval, where: str) -> PPIInterval:
    if result.degenerate:
        warn_degenerate(f"{where} ({result.method}, {result.n_human or result.n_judge} queries)", stacklevel=4)
    return result


def _at_least(n: int, what: str, source: str) -> None:
    if n < MIN_N:
        raise InputError(
            f"needs at least {MIN_N} {what} queries, not {n}: a normal interval's minimum n (its standard error is "
            f"estimated from them; docs/ppi.md)",
            source=source,
        )


def _ppi_interval(
    judge: Mapping[str, float],
    human: Mapping[str, float],
    *,
    alpha: float,
    tuned: bool,
    weights: Mapping[str, float] | None,
    strata: Mapping[str, str] | None,
    finite_population: bool,
) -> PPIInterval:
    f = _values(judge, "judge")
    h = _values(human, "human")
    outside = [q for q in h if q not in f]
    if outside:
        raise InputError(
            f"queries {_shown(outside)} have a human value but no judge value: the human-graded queries must be "
            "a sample of the judge-graded ones",
            source="human",
        )
    ids = sorted(h)
    pi = None if weights is None else _inclusion(weights, ids)
    labels = None if strata is None else _strata(strata, ids)
    _at_least(len(h), "human-graded", "human")  # after the checks that name queries
    result = ppi_mean(
        np.array([h[q] for q in ids]),
        np.array([f[q] for q in ids]),
        np.fromiter(f.values(), dtype=np.float64, count=len(f)),
        lam=None if tuned else 1.0,
        inclusion=pi,
        strata=labels,
        finite_population=finite_population,
    )
    method = "ppi++" if tuned else "ppi"
    return _interval(result, alpha, len(ids), len(f), method, finite_population, pi is not None, strata is not None)


def _interval(
    result: MeanEstimate,
    alpha: float,
    n_human: int,
    n_judge: int,
    method: str,
    finite: bool,
    weighted: bool,
    stratified: bool = False,
) -> PPIInterval:
    low, high = normal_interval(result.estimate, result.se, alpha)
    # zero width from a sample; a census (finite population, every query human-graded) is exact, not degenerate
    census = finite and n_human == n_judge and method != "judge"
    return PPIInterval(
        estimate=float(result.estimate),
        low=float(low),
        high=float(high),
        se=float(result.se),
        lam=None if method == "judge" else float(result.lam),
        n_human=n_human,
        n_judge=n_judge,
        alpha=alpha,
        method=method,
        finite_population=finite,
        weighted=weighted,
        stratified=stratified,
        # zero up to rounding (a weighted mean of ten equal values may differ from them in the last bit)
        degenerate=bool(float(result.se) <= 1e-12 * max(1.0, abs(float(result.estimate))) and not census),
    )


def human_interval(
    human: Mapping[str, float],
    *,
    alpha: float = 0.05,
    population: int | None = None,
    weights: Mapping[str, float] | None = None,
    strata: Mapping[str, str] | None = None,
) -> PPIInterval:
    """The human-only mean and its normal interval (:func:`classical_mean`): ``mean(h) +- z S_h / sqrt(n)``; with
    ``population`` (N, the size of the query set the sample was drawn from) the finite-population correction
    ``sqrt(1 - n/N)``, as :func:`ppi_interval` applies it; with ``weights`` (inclusion probabilities) Hajek's, with
    ``strata`` stratified. Fewer than :data:`MIN_N` human-graded queries: an InputError."""
    return _announce(
        _human_interval(
            human, alpha=check_share(alpha, "alpha"), population=population, weights=weights, strata=strata
        ),
        "human_interval",
    )


def _human_interval(
    human: Mapping[str, float],
    *,
    alpha: float,
    population: int | None,
    weights: Mapping[str, float] | None,
    strata: Mapping[str, str] | None,
) -> PPIInterval:
    h = _values(human, "human")
    if population is not None and (
        isinstance(population, bool) or not isinstance(population, int) or population < len(h)
    ):
        raise InputError(
            f"population must be an int of at least the {len(h)} human-graded queries, not {population!r}",
            source="population",
        )
    ids = sorted(h)
    pi = None if weights is None else _inclusion(weights, ids)
    labels = None if strata is None else _strata(strata, ids)
    _at_least(len(h), "human-graded", "human")
    result = classical_mean(np.array([h[q] for q in ids]), inclusion=pi, strata=labels, population=population)
    finite = population is not None or pi is not None
    return _interval(result, alpha, len(ids), population or 0, "human", finite, pi is not None, labels is not None)


def judge_interval(judge: Mapping[str, float], *, alpha: float = 0.05) -> PPIInterval:
    """The naive judge-only interval, as if the judge's grades were people's: ``mean(f) +- z S_f / sqrt(N)``
    (n - 1 in ``S_f``). It does not pay for the judge's bias: shown beside the others, never in their place."""
    return _announce(_judge_interval(judge, alpha=check_share(alpha, "alpha")), "judge_interval")


def _judge_interval(judge: Mapping[str, float], *, alpha: float) -> PPIInterval:
    f = _values(judge, "judge")
    _at_least(len(f), "judge-graded", "judge")
    values = np.fromiter(f.values(), dtype=np.float64, count=len(f))
    result = classical_mean(values)
    return _interval(result, alpha, 0, len(f), "judge", False, False)


# ----- on reports -------------------------------------------------------------------------------------------------

TABLE_COLUMNS = [
    "system",
    "metric",
    "n_judge",
    "n_human",
    "n_nan",
    "estimate",
    "ci_low",
    "ci_high",
    "se",
    "lam",
    "human_mean",
    "human_ci_low",
    "human_ci_high",
    "judge_mean",
    "judge_ci_low",
    "judge_ci_high",
    "zero_width",  # the intervals of the row with zero width from a sample ("ppi++, human"; "" when none)
]
COMPARE_COLUMNS = [
    "system",
    "baseline",
    "metric",
    "n_judge",
    "n_human",
    "n_nan",
    "diff",
    "ci_low",
    "ci_high",
    "se",
    "lam",
    "p_value",
    "human_diff",
    "human_ci_low",
    "human_ci_high",
    "human_p_value",
    "judge_diff",
    "judge_ci_low",
    "judge_ci_high",
    "zero_width",
    "n_unpaired",  # queries (judge-graded or human-graded) one system has and the other not: left out
]


@dataclass(frozen=True)
class _Values:
    """One system's values of one metric: judge values of every query, human values of the sample (Series)."""

    judge: pd.Series
    human: pd.Series


@dataclass(frozen=True, repr=False)
class JudgeAssisted:
    """What :func:`judge_assisted` gives: ``table`` (per system and metric, the PPI++ (or PPI) interval with the
    human-only and the naive judge-only ones beside it), :meth:`compare` for paired differences, and ``settings``.
    ``str()`` / :meth:`render` show it as text; ``repr`` is one line."""

    table: pd.DataFrame
    settings: dict[str, Any]
    _values: dict[tuple[str, str], _Values] = field(default_factory=dict)
    _inclusion: dict[str, float] | None = None
    _strata: dict[str, str] | None = None

    @property
    def systems(self) -> list[str]:
        return list(dict.fromkeys(self.table["system"]))

    @property
    def metrics(self) -> list[str]:
        return list(dict.fromkeys(self.table["metric"]))

    def _heading(self) -> str:
        s = self.settings
        sample = "uniform sample" if not s["weighted"] else "sample with inclusion probabilities"
        seed = f", seed {s['seed']}" if s.get("seed") is not None else ""
        variance = "finite-population variance" if s["finite_population"] else "ppi_py's variance"
        return (
            f"judge-assisted means ({s['method']}, {variance}, {100 * (1 - s['alpha']):g}% normal intervals, min n "
            f"{MIN_N}): {s['n_human']} human-graded queries ({sample}{seed}) of {s['n_judge']}"
        )

    def _shown(self) -> pd.DataFrame:
        frame = self.table
        out = frame[["system", "metric", "n_judge", "n_human"]].copy()

        def cell(mean: str, low: str, high: str) -> list[str]:
            return [
                f"{m:.4f} [{lo:.4f}, {hi:.4f}]" for m, lo, hi in zip(frame[mean], frame[low], frame[high], strict=True)
            ]

        out[self.settings["method"]] = cell("estimate", "ci_low", "ci_high")
        out["lam"] = [f"{v:.2f}" for v in frame["lam"]]
        out["human only"] = cell("human_mean", "human_ci_low", "human_ci_high")
        out["judge only (naive)"] = cell("judge_mean", "judge_ci_low", "judge_ci_high")
        return out

    def render(self) -> str:
        """The table as text under its heading, then what it rests on (zero-width intervals)."""
        notes = "".join(f"\n{note}" for note in self.settings.get("notes", ()))
        return self._heading() + "\n" + self._shown().to_string(index=False) + notes

    def __str__(self) -> str:
        return self.render()

    def __repr__(self) -> str:
        s = self.settings
        return (
            f"JudgeAssisted(systems={self.systems}, metrics={self.metrics}, method={s['method']!r}, "
            f"n_human={s['n_human']}, n_judge={s['n_judge']}, alpha={s['alpha']})"
        )

    def _repr_html_(self) -> str:
        return html_table(self._shown(), heading=self._heading())

    def _repr_markdown_(self) -> str:
        notes = "".join(f"\n\n{markdown_cell(note)}" for note in self.settings.get("notes", ()))
        return markdown_table(self._shown(), heading=self._heading()) + notes

    def compare(self, baseline: str | None = None) -> pd.DataFrame:
        """Every other system minus ``baseline`` (default: the first system), per metric: the prediction-powered
        interval of the per-query differences (``diff``, ``ci_low``, ``ci_high``, ``se``, ``lam``), a two-sided
        p-value from ``diff / se``; beside it the human-only difference, interval and p-value, and the naive
        judge-only difference and interval. Queries are paired by id (:func:`rag_eval.statistics.paired.pair`); a
        query whose value is NaN for either system is left out and counted in ``n_nan``, one that either system
        lacks in ``n_unpaired`` (named in ``attrs["notes"]`` of the frame returned, with any zero-width interval)."""
        import pandas as pd

        systems = self.systems
        try:
            base = systems[0] if baseline is None else resolve_system(baseline, systems)
        except ValueError as exc:
            raise InputError(str(exc), source="baseline") from None
        s = self.settings
        rows = []
        notes: list[str] = []
        flat: list[str] = []
        for system in systems:
            if system == base:
                continue
            for metric in self.metrics:
                a, b = self._values[(system, metric)], self._values[(base, metric)]
                names = (repr(system), repr(base))
                pj = pair(a.judge, b.judge, allow_unpaired=True, names=names)
                ph = pair(a.human, b.human, allow_unpaired=True, names=names)
                for what, p in (("judge-graded", pj), ("human-graded", ph)):
                    if p.n_unpaired:
                        notes.append(f"left out of {system} - {base}, {metric} ({what}): {p.unpaired_text()}")
                where = f"{system} - {base}, {metric}"
                ppi, hum, jud, n_nan = _three(
                    _differences(pj),
                    _differences(ph),
                    self._inclusion,
                    self._strata,
                    s["alpha"],
                    s["tuned"],
                    s["finite_population"],
                    where,
                )
                zero = _zero_width(ppi, hum, jud)
                if zero:
                    flat.append(f"{where}: {zero}")
                rows.append(
                    [
                        system,
                        base,
                        metric,
                        ppi.n_judge,
                        ppi.n_human,
                        n_nan,
                        ppi.estimate,
                        ppi.low,
                        ppi.high,
                        ppi.se,
                        ppi.lam,
                        _p_value(ppi.estimate, ppi.se),
                        hum.estimate,
                        hum.low,
                        hum.high,
                        _p_value(hum.estimate, hum.se),
                        jud.estimate,
                        jud.low,
                        jud.high,
                        zero,
                        pj.n_unpaired + ph.n_unpaired,
                    ]
                )
        if flat:
            warn_degenerate(f"judge-assisted differences, {len(flat)} of {len(rows)}: {'; '.join(flat)}")
            notes += [f"zero-width interval (no spread among these queries, not certainty): {f}" for f in flat]
        frame = pd.DataFrame(rows, columns=COMPARE_COLUMNS)
        frame.attrs["notes"] = notes
        return frame


def _differences(paired: Any) -> pd.Series:
    """A pairing's per-query differences (system - baseline) over the queries both have, NaN where either is."""
    import pandas as pd

    ids = np.concatenate([paired.ids, paired.nan_ids])
    values = np.concatenate([paired.x - paired.y, np.full(len(paired.nan_ids), np.nan)])
    return pd.Series(values, index=pd.Index(ids, dtype=object), dtype=np.float64)


def _zero_width(*intervals: PPIInterval) -> str:
    """The methods of ``intervals`` whose width is zero from a sample: ``"ppi++, human"``, or ""."""
    return ", ".join(i.method for i in intervals if i.degenerate)


def _three(
    judge: pd.Series,
    human: pd.Series,
    inclusion: Mapping[str, float] | None,
    strata: Mapping[str, str] | None,
    alpha: float,
    tuned: bool,
    finite: bool,
    where: str,
) -> tuple[PPIInterval, PPIInterval, PPIInterval, int]:
    """The PPI, human-only and judge-only intervals of one system (or difference) and metric, NaN values left out:
    a query whose judge value is NaN leaves the population, one whose human value is NaN leaves the sample. Too few
    queries: an InputError naming ``where`` (the system and metric). Not announced: the caller summarises."""
    nan_ids = set(judge.index[judge.isna()]) | set(human.index[human.isna()])
    f = judge.dropna()
    h = human.dropna()
    h = h[h.index.isin(f.index)]
    fd = dict(zip(f.index, f.to_numpy(), strict=True))
    hd = dict(zip(h.index, h.to_numpy(), strict=True))
    weights = None if inclusion is None else {q: inclusion[q] for q in hd}
    groups = None if strata is None else {q: strata[q] for q in hd}
    try:
        ppi = _ppi_interval(fd, hd, alpha=alpha, tuned=tuned, weights=weights, strata=groups, finite_population=finite)
        hum = _human_interval(hd, alpha=alpha, population=len(fd) if finite else None, weights=weights, strata=groups)
        jud = _judge_interval(fd, alpha=alpha)
    except InputError as exc:
        left = f" ({len(nan_ids)} NaN left out)" if nan_ids else ""
        raise InputError(f"{where}: {exc.problem}{left}", source=exc.source) from None
    return ppi, hum, jud, len(nan_ids)


def _systems(report: Report) -> list[tuple[str, str | None, str]]:
    """``(run, stage, name)`` of every score block: the name is the run, or ``run/stage`` (as compare names them)."""
    out: list[tuple[str, str | None, str]] = []
    for run in report.runs:
        if not report.staged:
            out.append((run, None, run))
            continue
        for stage in report.stages:
            try:
                report.query_ids(run, stage)
            except KeyError:
                continue
            out.append((run, stage, f"{run}/{stage}"))
    return out


def judge_assisted(
    judge_report: Report,
    human_report: Report,
    *,
    sample: HumanSample | None = None,
    metrics: Sequence[str] | None = None,
    alpha: float = 0.05,
    tuned: bool = True,
    finite_population: bool = True,
) -> JudgeAssisted:
    """Prediction-powered means of every system and metric of two reports.

    ``judge_report``: evaluated with the qrels a judge built (or people and a judge together), over every query of
    the set; ``human_report``: the same systems evaluated with people's qrels over the human-graded sample only.
    ``sample``: the :class:`~rag_eval.ground_truth.HumanSample` the human-graded queries were drawn as (its ids
    must be those of ``human_report``, its population those of ``judge_report``; its inclusion probabilities, if
    any, weight the estimate; its strata, if any, make the variance stratified). Without it, the human-graded
    queries are taken to be a uniform random sample of the judge report's queries: the estimate is only as good as
    that claim. Queries graded by people in impact order
    (to improve the qrels) are not a sample: they must not be in ``human_report``.

    ``metrics``: default every numeric metric of ``judge_report`` (geometric means, gm_map and gm_bpref, are not
    arithmetic means and are refused). For the formulas, see the module's docstring and :func:`ppi_interval`.
    """
    import pandas as pd

    alpha = check_share(alpha, "alpha")
    for what, report in (("judge_report", judge_report), ("human_report", human_report)):
        if not isinstance(report, Report):
            raise InputError(f"must be a rag_eval.Report, not {type(report).__name__}", source=what)
    judged = {name: (run, stage) for run, stage, name in _systems(judge_report)}
    humans = {name: (run, stage) for run, stage, name in _systems(human_report)}
    if set(judged) != set(humans):
        only_j = [s for s in judged if s not in humans]
        only_h = [s for s in humans if s not in judged]
        raise InputError(
            "the two reports must hold the same systems: "
            + "; ".join(
                part
                for part in (
                    f"only in judge_report: {only_j}" if only_j else "",
                    f"only in human_report: {only_h}" if only_h else "",
                )
                if part
            ),
            source="human_report",
        )
    chosen = _metrics(judge_report, human_report, metrics)
    inclusion: dict[str, float] | None = None
    strata: dict[str, str] | None = None
    population: set[str] | None = None
    sample_ids: set[str] | None = None
    if sample is not None:
        sample_ids = set(sample.query_ids)
        population = set(sample.population)
        inclusion = dict(sample.inclusion) if sample.inclusion is not None else None
        strata = dict(sample.strata) if sample.strata is not None else None
    values: dict[tuple[str, str], _Values] = {}
    rows = []
    flat: list[str] = []
    n_human = n_judge = 0
    for name, (run, stage) in judged.items():
        j_ids = judge_report.query_ids(run, stage)
        h_ids = human_report.query_ids(*humans[name])
        outside = set(h_ids) - set(j_ids)
        if outside:
            raise InputError(
                f"system {name!r}: human-graded queries {_shown(list(outside))} are not in the judge report: the "
                "human-graded queries must be a sample of the judge-graded ones"
                + near_miss_hint(outside, j_ids, "the judge report's"),
                source="human_report",
            )
        if sample_ids is not None and set(h_ids) != sample_ids:
            raise InputError(
                f"system {name!r}: the human report's queries are not the sample's: "
                + _difference(set(h_ids), sample_ids, "human report", "sample"),
                source="sample",
            )
        if population is not None and set(j_ids) != population:
            raise InputError(
                f"system {name!r}: the judge report's queries are not the sample's population: "
                + _difference(set(j_ids), population, "judge report", "population"),
                source="sample",
            )
        n_human, n_judge = max(n_human, len(h_ids)), max(n_judge, len(j_ids))
        for metric in chosen:
            judge = judge_report.values(run, metric, stage)
            human = human_report.values(*humans[name][:1], metric, humans[name][1])
            values[(name, metric)] = _Values(judge, human)
            where = f"system {name!r}, metric {metric!r}"
            ppi, hum, jud, n_nan = _three(judge, human, inclusion, strata, alpha, tuned, finite_population, where)
            zero = _zero_width(ppi, hum, jud)
            if zero:
                flat.append(f"{name}, {metric}: {zero}")
            rows.append(
                [
                    name,
                    metric,
                    ppi.n_judge,
                    ppi.n_human,
                    n_nan,
                    ppi.estimate,
                    ppi.low,
                    ppi.high,
                    ppi.se,
                    ppi.lam,
                    hum.estimate,
                    hum.low,
                    hum.high,
                    jud.estimate,
                    jud.low,
                    jud.high,
                    zero,
                ]
            )
    if flat:
        warn_degenerate(f"judge-assisted means, {len(flat)} of {len(rows)}: {'; '.join(flat)}")
    settings = {
        "method": "ppi++" if tuned else "ppi",
        "tuned": tuned,
        "alpha": alpha,
        "finite_population": finite_population,
        "weighted": inclusion is not None,
        "stratified": strata is not None,
        "seed": None if sample is None or not sample.redrawn else sample.seed,  # a seed checked by a re-draw
        "n_human": n_human,
        "n_judge": n_judge,
        "metrics": list(chosen),
        "systems": list(judged),
        "interval": "normal",
        "min_n": MIN_N,
        "notes": [f"zero-width interval (no spread among these queries, not certainty): {f}" for f in flat],
    }
    return JudgeAssisted(pd.DataFrame(rows, columns=TABLE_COLUMNS), settings, values, inclusion, strata)


def _difference(have: set[str], want: set[str], left: str, right: str) -> str:
    parts = []
    if have - want:
        parts.append(f"{_shown(list(have - want))} only in the {left}")
    if want - have:
        parts.append(f"{_shown(list(want - have))} only in the {right}")
    return "; ".join(parts)


def _metrics(judge_report: Report, human_report: Report, metrics: Sequence[str] | None) -> list[str]:
    """The metrics to estimate: those asked for (as reported, or any spelling the parser reads), else every
    numeric metric of the judge report; each must be in both reports and be an arithmetic mean."""
    numeric = [m for m in judge_report.metrics if not is_text_metric(m)]
    if metrics is None:
        chosen = [m for m in numeric if not is_geometric_metric(m)]
    else:
        if isinstance(metrics, str):
            metrics = [metrics]
        chosen = []
        for m in metrics:
            name = _canonical(m, judge_report.metrics)
            if name not in judge_report.metrics:
                raise InputError(f"metric {m!r} is not in the judge report; it has {numeric}", source="metrics")
            chosen.append(name)
    for m in chosen:
        if is_text_metric(m):
            raise InputError(f"metric {m!r} holds text, not numbers", source="metrics")
        if is_geometric_metric(m):
            raise InputError(
                f"metric {m!r} is averaged by a geometric mean: a prediction-powered estimate is of an arithmetic mean",
                source="metrics",
            )
    missing = [m for m in chosen if m not in human_report.metrics]
    if missing:
        raise InputError(
            f"metrics {missing} are in the judge report but not in the human report; it has {human_report.metrics}",
            source="metrics",
        )
    if not chosen:
        raise InputError("no numeric metric to estimate", source="metrics")
    return chosen


def _canonical(name: str, reported: list[str]) -> str:
    if name in reported:
        return name
    from ..metrics.grammar import parse_metric

    try:
        return str(parse_metric(name))
    except (ValueError, TypeError):
        return name
