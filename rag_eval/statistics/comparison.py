"""``rag_eval.compare``: is a difference between systems (runs, pipelines, stages) real?

Per system and metric against the baseline: the mean difference with a paired bootstrap interval, a corrected
p-value, the effect size and the queries won, tied and lost, with what each row rests on: ``docs/compare.md``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import check_choice, check_int, check_share
from .._escape import plot_text
from .._markdown import html_table, markdown_cell, markdown_table
from ..reports.card import MetricCard
from ..reports.report import Report, is_geometric_metric
from ..reports.summary import MIN_GEO_MEAN, bootstrap_means, summarize_geometric, summarize_values
from .paired import (
    CORRECTIONS,
    MIN_N,
    TESTS,
    all_equal,
    correct,
    effect_size,
    p_value,
    pair,
    paired_bootstrap_ci,
    warn_degenerate,
)
from .power_analysis import t_minimum_detectable_difference
from .systems import resolve_system, with_systems

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Comparison", "compare"]

PAIR_COLUMNS = [
    "system",
    "baseline",
    "metric",
    "n",
    "n_nan",
    "n_unpaired",
    "mean",
    "baseline_mean",
    "diff",
    "ci_low",
    "ci_high",
    "p_value",
    "p_adjusted",
    "rejected",
    "effect_size",
    "wins",
    "ties",
    "losses",
    "only_system",  # queries the system measured and the baseline did not (left out; in n_unpaired)
    "only_baseline",
    "direction",  # "higher", "lower" or "none" (rag_eval.metrics.direction): what wins and losses read
    "degenerate",  # every paired difference the same: a zero-width interval, not certainty
]
INTERVAL = "bootstrap"  # the method of every pair's interval (its minimum n: statistics.MIN_N)
MDD_POWER = 0.8  # the power of the minimum detectable difference the card states
SYSTEM_COLUMNS = ["system", "metric", "mean", "std", "median", "ci_low", "ci_high", "n", "n_nan"]


@dataclass(repr=False)
class Comparison:
    """The result of :func:`compare`: ``table`` (one row per system x metric against the baseline), ``systems``
    (per system and metric), and ``card`` (how it was computed). In a notebook it shows as a table (``repr`` is
    one line)."""

    table: pd.DataFrame
    systems: pd.DataFrame
    card: MetricCard  # the first report's card, with ``comparison`` filled in
    #: what the rows rest on, beyond the table: queries left out (some named), rows below the interval's minimum n,
    #: zero-width intervals, metrics where lower is better
    notes: tuple[str, ...] = ()

    @property
    def settings(self) -> dict[str, Any]:
        """How the comparison was made (``card.comparison``)."""
        return self.card.comparison or {}

    @property
    def alpha(self) -> float:
        return float(self.settings["alpha"])

    def _shown(self) -> pd.DataFrame:
        frame = self.table.copy()
        marked = np.where(frame["rejected"], "*", "")
        out = frame[["system", "metric", "n", "n_nan", "n_unpaired", "mean", "baseline_mean", "diff"]].copy()
        out = out.rename(columns={"n_unpaired": "unpaired"})
        out["95% CI"] = [
            f"[{lo:+.4f}, {hi:+.4f}]" if lo == lo else f"none (n < {MIN_N[INTERVAL]})"
            for lo, hi in zip(frame["ci_low"], frame["ci_high"], strict=True)
        ]
        out["p"] = [_p(v) for v in frame["p_value"]]
        out[f"p ({self.settings['correction']})"] = [
            f"{_p(v)}{m}" for v, m in zip(frame["p_adjusted"], marked, strict=True)
        ]
        out["d_z"] = frame["effect_size"]
        out["W/T/L"] = [
            f"{w}/{t}/{lost}" if way != "none" else "-"
            for w, t, lost, way in zip(frame["wins"], frame["ties"], frame["losses"], frame["direction"], strict=True)
        ]
        if "conclusion" in frame.columns:
            out[f"margin {self.settings['margin']:g}"] = frame["conclusion"]
        return out

    def _heading(self) -> str:
        return (
            f"against {self.settings['baseline']!r}: {self.settings['test']} test, "
            f"{self.settings['correction']} correction, * = significant at alpha {self.alpha}; "
            f"intervals: paired {INTERVAL}, min n {MIN_N[INTERVAL]}"
        )

    def __str__(self) -> str:
        table = self._shown().to_string(index=False, float_format=lambda v: f"{v:.4f}")
        return self._heading() + "\n" + table + "".join(f"\n{note}" for note in self.notes)

    def __repr__(self) -> str:
        s = self.settings
        systems = [x for x in s.get("systems", []) if x != s.get("baseline")]
        significant = int(self.table["rejected"].sum())
        return (
            f"Comparison(baseline={s.get('baseline')!r}, systems={systems}, metrics={s.get('metrics')}, "
            f"{s.get('test')} test, {s.get('correction')}: {significant} of {len(self.table)} significant at "
            f"alpha {s.get('alpha')})"
        )

    def _verdict(self) -> list[tuple[str, str]]:
        """Per system and metric, in the table's order: ``(word, sentence)``; ``word`` is ``better`` or ``worse``
        (significant after the correction, read by the metric's direction), ``not significant``, or ``different``
        (a metric with no better direction); the sentence names the pair and gives the difference, its interval and
        p."""
        out = []
        correction = self.settings["correction"]
        for r in self.table.to_dict("records"):
            interval = f" [{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]" if r["ci_low"] == r["ci_low"] else ""
            numbers = f"{r['diff']:+.4f}{interval}, p ({correction}) {_p(r['p_adjusted'])}, n {int(r['n'])}"
            if not r["rejected"]:
                word = "not significant"
            elif r["direction"] == "none":
                word = "different"
            else:
                word = "better" if (r["diff"] > 0) == (r["direction"] == "higher") else "worse"
            lower = " (lower is better)" if r["direction"] == "lower" else ""
            out.append((word, f"{r['system']} vs {r['baseline']}, {r['metric']}{lower}: {numbers}"))
        return out

    def _verdict_heading(self) -> str:
        significant = int(self.table["rejected"].sum())
        return (
            f"Verdict: {significant} of {len(self.table)} differences significant after "
            f"{self.settings['correction']} correction at alpha {self.alpha}"
        )

    def _repr_html_(self) -> str:
        """The verdict first (each in words and in colour: Okabe-Ito's bluish green better, vermillion worse),
        then the table under its heading, every value escaped (pandas' escaping; the texts by html.escape)."""
        import html

        from .._plot_style import OKABE_ITO

        colours = {"better": OKABE_ITO["bluish green"], "worse": OKABE_ITO["vermillion"]}
        items = "".join(
            f'<li><strong style="color:{colours.get(word, OKABE_ITO["black"])}">{html.escape(word)}</strong>: '
            f"{html.escape(sentence)}</li>"
            for word, sentence in self._verdict()
        )
        verdict = f"<p><strong>{html.escape(self._verdict_heading())}</strong></p><ul>{items}</ul>"
        return verdict + html_table(self._shown(), heading=self._heading())

    def _repr_markdown_(self) -> str:
        """The verdict first (in words: **better**, **worse**), then the table under its heading; cells escaped."""
        lines = [f"**{markdown_cell(self._verdict_heading())}**", ""]
        lines += [f"- **{word}**: {markdown_cell(sentence)}" for word, sentence in self._verdict()]
        return "\n".join(lines) + "\n\n" + markdown_table(self._shown(), heading=self._heading())

    def to_markdown(self) -> str:
        """The table in Markdown (cells escaped: ``&``, ``<``, ``>`` as entities, ``|`` backslashed)."""
        return (
            markdown_table(self._shown())
            + f"\n\\* significant at alpha {self.alpha} after {markdown_cell(self.settings['correction'])} correction\n"
            + "".join(f"\n{markdown_cell(note)}\n" for note in self.notes)
        )

    def to_latex(self) -> str:
        shown = self._shown()

        def cells(row: tuple[Any, ...]) -> str:
            return " & ".join((f"{v:.4f}" if isinstance(v, float) else str(v)).replace("_", r"\_") for v in row)

        lines = [
            r"\begin{tabular}{" + "l" * 2 + "r" * (len(shown.columns) - 2) + "}",
            r"\hline",
            " & ".join(c.replace("_", r"\_") for c in shown.columns) + r" \\",
            r"\hline",
        ]
        lines += [cells(row) + r" \\" for row in shown.itertuples(index=False)]
        lines += [r"\hline", r"\end{tabular}"]
        return "\n".join(lines) + "\n"

    def plot(self, ax: Any = None) -> Any:
        """The mean differences with their intervals, significant ones filled (Okabe-Ito colours, the legend right
        of the axes); returns the matplotlib Axes."""
        import matplotlib.pyplot as plt

        from .._plot_style import OKABE_ITO, legend_outside

        frame = self.table
        own = ax is None
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 0.45 * len(frame) + 1.4))
        y = np.arange(len(frame))[::-1]
        err = np.vstack([frame["diff"] - frame["ci_low"], frame["ci_high"] - frame["diff"]])
        for filled in (True, False):
            pick = frame["rejected"].to_numpy() == filled
            colour = OKABE_ITO["blue"] if filled else OKABE_ITO["orange"]
            ax.errorbar(
                frame["diff"][pick],
                y[pick],
                xerr=err[:, pick],
                fmt="o" if filled else "s",  # told apart by shape as well as colour
                color=colour,
                capsize=3,
                mfc=colour if filled else "white",
                label="significant" if filled else "not significant",
            )
        ax.axvline(0, color=OKABE_ITO["black"], linewidth=0.8)
        ticks = [plot_text(f"{s}: {m}") for s, m in zip(frame["system"], frame["metric"], strict=True)]
        ax.set_yticks(y, ticks, fontsize=8)
        ax.set_ylim(-0.7, len(frame) - 0.3)
        ax.set_xlabel(plot_text(f"difference from {self.settings['baseline']}"))
        level = f"{self.settings.get('confidence', 0.95):.0%}"
        ax.set_title(plot_text(f"difference from {self.settings['baseline']}, with its {level} interval"), fontsize=9)
        legend_outside(ax, fontsize=7)
        if own:
            ax.figure.tight_layout()  # the legend right of the axes kept in the figure
        return ax


def _p(value: float) -> str:
    return "nan" if np.isnan(value) else f"{value:.4g}"


def compare(
    reports: Report | str | os.PathLike[str] | Sequence[Report | str | os.PathLike[str]],
    *,
    baseline: str | None = None,
    metrics: Sequence[str] | None = None,
    test: str = "randomization",
    correction: str = "holm",
    alpha: float = 0.05,
    resamples: int = 1000,
    permutations: int = 10000,
    seed: int = 0,
    confidence: float = 0.95,
    margin: float | None = None,
) -> Comparison:
    """Compare every system of ``reports`` with ``baseline`` (see the module's docstring).

    ``reports``: a :class:`Report` (or several, or paths of saved ones). A system is a run, or ``run/stage`` for
    the stages of a pipeline (a stage name alone works when it is unambiguous). ``baseline`` defaults to the first
    system. ``metrics`` default to those every compared system has.

    ``margin``: the smallest difference that matters to you. Each row then gets a ``conclusion``: for a
    difference that is not significant, ``"no difference of {margin} or more"`` where the interval lies within
    (-margin, margin), else ``"inconclusive: ..."`` naming what the interval includes (the interval decides, not
    a post-hoc power). Either way the card states each pair's minimum detectable difference at the pilot's
    variance (:func:`rag_eval.power`'s paired t, power 0.8, at ``alpha`` over the hypotheses by Bonferroni).
    """
    check_choice(test, "test", TESTS)
    check_choice(correction, "correction", CORRECTIONS)
    alpha = check_share(alpha, "alpha")
    confidence = check_share(confidence, "confidence")
    resamples = check_int(resamples, "resamples")
    if margin is not None and not (math.isfinite(margin) and margin > 0):
        raise ValueError(f"margin must be a finite difference > 0, not {margin}")
    import pandas as pd

    loaded = [
        r if isinstance(r, Report) else Report.load(r)
        for r in ([reports] if isinstance(reports, (Report, str, os.PathLike)) else reports)
    ]
    frames = [r.per_query for r in loaded]
    per_query = pd.concat(frames, ignore_index=True)
    per_query = with_systems(per_query)
    systems = list(dict.fromkeys(per_query["system"]))
    if len(systems) < 2:
        raise ValueError(f"nothing to compare: one system ({systems})")
    base = resolve_system(baseline, systems) if baseline is not None else systems[0]
    available = {s: set(per_query.loc[per_query["system"] == s, "metric"]) for s in systems}
    wanted = (
        list(metrics)
        if metrics is not None
        else [m for m in dict.fromkeys(per_query["metric"]) if all(m in a for a in available.values())]
    )
    if not wanted:
        raise ValueError("no metric is measured for every system: name the metrics to compare (metrics=[...])")
    for m in wanted:
        if m not in available[base]:
            raise ValueError(f"the baseline {base!r} has no values of {m!r}")
    twice = per_query.duplicated(["system", "metric", "query_id"])
    if twice.any():
        s, m, q = per_query.loc[twice, ["system", "metric", "query_id"]].iloc[0]
        raise ValueError(
            f"system {s!r} has two values of {m!r} for query {q!r}: two reports name a system alike; "
            "give the runs distinct names"
        )
    values = per_query.pivot(index=["system", "metric"], columns="query_id", values="value")
    counted = per_query.assign(counted=True).pivot(index=["system", "metric"], columns="query_id", values="counted")
    counted = counted.notna()  # a query the system was measured on (its value may be NaN: 0/0)

    system_rows = []
    for s in systems:
        for m in wanted:
            if (s, m) not in values.index:
                continue
            v = values.loc[(s, m)][counted.loc[(s, m)]].to_numpy(dtype=np.float64)
            summarize = summarize_geometric if is_geometric_metric(m) else summarize_values
            stats = summarize(v[:, None], resamples=resamples, confidence=confidence, seed=seed)
            system_rows.append(
                [s, m] + [stats[c][0] for c in ("mean", "std", "median", "ci_low", "ci_high", "n", "n_nan")]
            )
    pair_rows = []
    notes: list[str] = []
    flat: list[str] = []
    spreads: list[float] = []  # the sd of each pair's differences (of the logs for a geometric metric)
    directions = {m: _direction(m) for m in wanted}
    for s in systems:
        if s == base:
            continue
        for m in wanted:
            if (s, m) not in values.index:
                continue
            a, b = _row(values, (s, m)), _row(values, (base, m))
            in_a, in_b = _row(counted, (s, m)), _row(counted, (base, m))
            paired = pair(a[in_a], b[in_b], allow_unpaired=True, names=(repr(s), repr(base)))  # shown, not refused
            x, y = paired.x, paired.y
            unpaired, nan = paired.n_unpaired, paired.n_nan
            if unpaired:
                notes.append(f"left out of {s} vs {base}, {m}: {paired.unpaired_text()}")
            geometric = is_geometric_metric(m)
            if geometric:
                x, y = np.log(np.maximum(x, MIN_GEO_MEAN)), np.log(np.maximum(y, MIN_GEO_MEAN))
                diff = x - y  # the logs': test, effect size, wins
                mean_x, mean_y, low, high = _geometric_pair(x, y, resamples, confidence, seed)
            else:
                diff = x - y
                low, high = paired_bootstrap_ci(diff, resamples=resamples, confidence=confidence, seed=seed)
                mean_x, mean_y = (float(x.mean()), float(y.mean())) if len(x) else (np.nan, np.nan)
            if 0 < len(diff) < MIN_N[INTERVAL]:
                low = high = np.nan  # below the bootstrap's minimum n: no interval
                notes.append(
                    f"{s} vs {base}, {m}: no interval, n {len(diff)} is below {INTERVAL}'s minimum n {MIN_N[INTERVAL]}"
                )
            degenerate = len(diff) >= MIN_N[INTERVAL] and all_equal(diff)
            if degenerate:
                flat.append(f"{s} vs {base}, {m} ({len(diff)} queries, each {float(diff[0]):+.4f})")
            p = p_value(test, x, y, permutations=permutations, seed=seed)
            spreads.append(float(np.std(diff, ddof=1)) if len(diff) >= 2 else math.nan)
            better = -diff if directions[m] == "lower" else diff
            pair_rows.append(
                [
                    s,
                    base,
                    m,
                    len(diff),
                    nan,
                    unpaired,
                    mean_x,
                    mean_y,
                    (mean_x - mean_y if geometric else float(diff.mean())) if len(diff) else np.nan,
                    low,
                    high,
                    p,
                    np.nan,
                    False,
                    effect_size(diff),
                    int((better > 0).sum()),
                    int((diff == 0).sum()),
                    int((better < 0).sum()),
                    len(paired.only_x),
                    len(paired.only_y),
                    directions[m],
                    degenerate,
                ]
            )
    if flat:
        warn_degenerate(f"compare, {len(flat)} of {len(pair_rows)} pairs: {'; '.join(flat)}")
        notes += [f"zero-width interval (every paired difference the same; not certainty): {f}" for f in flat]
    lower = [m for m in wanted if directions[m] == "lower"]
    if lower:
        notes.append(f"lower is better for {', '.join(lower)}: a drop is a win")
    table = pd.DataFrame(pair_rows, columns=PAIR_COLUMNS)
    table["p_adjusted"] = correct(table["p_value"].to_numpy(), correction)
    table["rejected"] = table["p_adjusted"] < alpha
    hypotheses = int(table["p_value"].notna().sum())
    if margin is not None:
        table["conclusion"] = [_conclusion(row, margin) for row in table.itertuples(index=False)]
    comparison = {
        "baseline": base,
        "systems": systems,
        "metrics": wanted,
        "test": test,
        "correction": correction,
        "alpha": alpha,
        "confidence": confidence,
        "bootstrap_resamples": resamples,
        "interval": f"paired {INTERVAL}",
        "interval_min_n": MIN_N[INTERVAL],
        "directions": directions,
        "permutations": permutations if test == "randomization" else None,
        "seed": seed,
        "hypotheses": hypotheses,
        "margin": margin,
        "minimum_detectable": _minimum_detectable(table, spreads, alpha, correction, hypotheses),
        "geometric": [m for m in wanted if is_geometric_metric(m)],
        "pipelines": [r.card.pipeline for r in loaded if r.card.pipeline],
        **_unjudged(loaded, systems),
        "other_reports": [r.card.model_dump(mode="json") for r in loaded[1:]],
    }
    card = loaded[0].card.model_copy(update={"comparison": comparison})
    return Comparison(table, pd.DataFrame(system_rows, columns=SYSTEM_COLUMNS), card, tuple(notes))


def _direction(metric: str) -> str:
    """Which way ``metric`` is better: "higher", "lower", or "none" (no better side, or a name the grammar does
    not read: its wins are then not shown, never guessed)."""
    from ..metrics.catalogue import direction

    try:
        return direction(metric)
    except ValueError:
        return "none"


def _conclusion(row: Any, margin: float) -> str:
    """What a row's interval says about a difference of ``margin``: significant rows are so; for the others the
    interval decides (within (-margin, margin): no difference that large; otherwise inconclusive)."""
    if row.rejected:
        return "significant"
    low, high = float(row.ci_low), float(row.ci_high)
    if math.isnan(low) or math.isnan(high):
        return "inconclusive: no interval"
    if -margin < low and high < margin:
        return f"no difference of {margin:g} or more"
    reached = [f"{v:g}" for v, hit in ((-margin, low <= -margin), (margin, high >= margin)) if hit]
    if low <= 0 <= high:
        return f"inconclusive: the interval includes both 0 and {' and '.join(reached)}"
    return f"inconclusive: the interval includes {' and '.join(reached)} (and not 0), yet the test is not significant"


def _minimum_detectable(
    table: pd.DataFrame, spreads: list[float], alpha: float, correction: str, hypotheses: int
) -> dict[str, Any]:
    """Each pair's minimum detectable difference at its own number of queries and the sd of its differences: the
    two-sided paired t-test's (noncentral t), power 0.8, at ``alpha`` divided among the hypotheses (Bonferroni,
    a bound for Holm's and BH's methods) unless no correction is made."""
    per_test = alpha if correction == "none" or hypotheses <= 1 else alpha / hypotheses
    rows = []
    columns = zip(table["system"], table["metric"], table["n"].to_numpy(dtype=np.int64), spreads, strict=True)
    for system, metric, count, sd in columns:
        n = int(count)
        mdd = t_minimum_detectable_difference(sd, n, per_test, MDD_POWER) if n >= 2 and sd > 0 else None
        rows.append(
            {
                "system": system,
                "metric": metric,
                "n": n,
                "sd": sd if math.isfinite(sd) else None,
                "difference": mdd if mdd is not None and math.isfinite(mdd) else None,
            }
        )
    return {"power": MDD_POWER, "alpha_per_test": per_test, "method": "paired t, noncentral t", "pairs": rows}


def _geometric_pair(
    x_log: np.ndarray, y_log: np.ndarray, resamples: int, confidence: float, seed: int
) -> tuple[float, float, float, float]:
    """Geometric means of two paired columns of logs, and a paired percentile bootstrap interval of their
    difference (the same resampled queries for both)."""
    if not len(x_log):
        return np.nan, np.nan, np.nan, np.nan
    means = np.exp(bootstrap_means(np.column_stack([x_log, y_log]), resamples=resamples, seed=seed))
    alpha = 1 - confidence
    low, high = np.quantile(means[:, 0] - means[:, 1], [alpha / 2, 1 - alpha / 2])
    return float(np.exp(x_log.mean())), float(np.exp(y_log.mean())), float(low), float(high)


def _row(frame: pd.DataFrame, key: tuple[str, str]) -> pd.Series:
    """One row of a frame indexed by (system, metric), as a Series over the query ids."""
    return frame.loc[[key]].iloc[0]


def _unjudged(reports: Sequence[Report], systems: list[str]) -> dict[str, dict[str, Any]]:
    """Per system, 1 - its judged share as its report's card gives it (``Report.judged``, the same mean over the
    same queries), at the smallest numeric cutoff, else at the budget; None when the report has none."""
    share: dict[str, float | None] = dict.fromkeys(systems)
    at: dict[str, str | None] = dict.fromkeys(systems)
    for r in reports:
        for row in r.judged.to_dict("records"):
            stage = row["stage"] if isinstance(row["stage"], str) else None
            system = str(row["run"]) if stage is None else f"{row['run']}/{stage}"
            value, metric = float(row["share"]), str(row["metric"])
            if system not in share or value != value:
                continue
            held = at[system]
            if held is None or _rank(metric) < _rank(held):
                share[system], at[system] = 1 - value, metric
    return {"unjudged_share": share, "unjudged_at": at}


def _rank(metric: str) -> tuple[int, int]:
    cutoff = metric.split("@", 1)[1]
    return (0, int(cutoff)) if cutoff.isdigit() else (1, 0 if cutoff == "budget" else 1)
