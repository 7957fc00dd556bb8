"""The plots of a pipeline's report, for the HTML page (inline SVG) and the result folder (PNG): recall@k per stage
with the depth and budget marked, where the relevant items went, and per query first-stage recall@depth against
the final stage's metric (``docs/html-report.md``, "Plots").

Every plot takes the colour-blind-safe palette of :mod:`rag_eval._plot_style`, keeps its legend outside the data
area, says what it shows in its title, and never lets two labels overlap (the counts over the scatter are merged
where values coincide and moved up a row where two would touch). matplotlib is the ``html`` (or ``bench``) extra.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._escape import plot_text
from .._plot_style import FATE_COLOURS, OKABE_ITO, legend_outside, rc, text_colour
from ..reports.funnel import pipelines_of
from .html_queries import budget_chunks

if TYPE_CHECKING:
    import pandas as pd

    from ..reports.report import Report
    from ..stages.result import PipelineResult
    from .html_report import HtmlSide

__all__ = ["FATES", "Panel", "card_panels", "figures", "folder_panels", "svg", "svg_plots"]

#: the loss chart's fates, in the order its bars stack them: delivered first
FATES = ("delivered", "reranked_out", "cut_by_budget", "below_depth", "never_retrieved", "failed")
_FEATURE = "the HTML report (rag-eval report, Report.to_html)"


@dataclass
class Panel:
    """One pipeline of one report, as the plots draw it: its name on the plot, its stages in pipeline order with
    their roles (``first``, ``reranker``, ``input``), its depth and budget, and who cut items (for the legend)."""

    title: str
    report: Any  # a Report, or what a result folder is written from (recall_curves, summary, per_query)
    run: str
    stages: dict[str, str] = field(default_factory=dict)
    depth: int | None = None
    budget: str = ""
    budget_chunks: float | None = None
    cut_by: str | None = None

    @property
    def first(self) -> str | None:
        return next((s for s, role in self.stages.items() if role == "first"), next(iter(self.stages), None))


def card_panels(name: str, report: Report, *, many: bool = False) -> list[Panel]:
    """The panels of the pipelines a report's metric card describes (``name: run`` as their titles if ``many``)."""
    return [
        Panel(
            f"{name}: {p['run']}" if many else str(p["run"]),
            report,
            str(p["run"]),
            dict(p.get("stages", {})),
            int(p["depth"]) if p.get("depth") is not None else None,
            str(p.get("budget") or ""),
            budget_chunks(p.get("budget")),
            " or ".join(s for s, role in p.get("stages", {}).items() if role == "reranker") or None,
        )
        for p in pipelines_of(report)
    ]


def folder_panels(report: Any, results: Mapping[str, PipelineResult]) -> list[Panel]:
    """The panels of a result folder's pipelines, from their results (a token budget drawn at the mean number of
    chunks delivered)."""
    panels = []
    for run, result in results.items():
        budget = result.pipeline.budget
        delivered = list(result.delivered().values())
        chunks = budget.chunks if budget.chunks is not None else float(np.mean(delivered or [0]))
        roles = {stage: out.role for stage, out in result.stages.items()}
        rerankers = " or ".join(s for s, role in roles.items() if role == "reranker") or None
        panels.append(Panel(run, report, run, roles, result.pipeline.depth, str(budget), max(chunks, 1), rerankers))
    return panels


@contextmanager
def _style(svg_text: bool = False, extra: str = "html", feature: str = _FEATURE) -> Iterator[Any]:
    """pyplot under the house style (the palette; SVG text kept as text for the page)."""
    from .._optional import require

    matplotlib = require("matplotlib", extra=extra, feature=feature)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = {**rc(), "font.size": 9}
    if svg_text:
        settings["svg.fonttype"] = "none"
    with matplotlib.rc_context(settings):
        yield plt


def figures(panels: Sequence[Panel], *, extra: str = "html", feature: str = _FEATURE) -> dict[str, Any]:
    """``{"recall": fig, "loss": fig, "scatter": fig}`` for the panels, each left out where nothing is to draw;
    the caller saves and closes them. matplotlib missing: an error naming ``feature`` and the ``extra``."""
    with _style(extra=extra, feature=feature) as plt:
        return _figures(plt, panels)


def _figures(plt: Any, panels: Sequence[Panel]) -> dict[str, Any]:
    made = {
        "recall": _recall_figure(plt, panels),
        "loss": _loss_figure(plt, panels),
        "scatter": _scatter_figure(plt, panels),
    }
    return {k: v for k, v in made.items() if v is not None}


def svg(fig: Any, name: str) -> str:
    """The figure as an ``<svg>`` element for the page: no XML prolog, DOCTYPE or RDF metadata, no namespace URIs
    (an HTML parser puts inline SVG in its namespace), ids salted with ``name`` so that two plots share none."""
    import matplotlib
    import matplotlib.pyplot as plt

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": f"rag_eval-{name}", "svg.fonttype": "none"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    plt.close(fig)
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.DOTALL)
    return re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text)


def svg_plots(sides: Sequence[HtmlSide]) -> dict[str, str]:
    """The page's plots of ``sides`` (each a name and a report) as inline SVG."""
    many = len(sides) > 1
    panels = [p for s in sides for p in card_panels(s.name, s.report, many=many)]
    with _style(svg_text=True) as plt:
        return {name: svg(fig, name) for name, fig in _figures(plt, panels).items()}


# ----- the figures -----------------------------------------------------------------------------------------------


def _recall_figure(plt: Any, panels: Sequence[Panel]) -> Any:
    """recall@k per stage, as the report measured it at evaluation (``recall_curves``); the legend right of each
    panel."""
    drawn = [p for p in panels if p.depth is not None and p.run in set(p.report.recall_curves["run"])]
    if not drawn:
        return None
    fig, axes = plt.subplots(1, len(drawn), figsize=(6.4 * len(drawn), 3.6), squeeze=False)
    for ax, p in zip(axes[0], drawn, strict=True):
        table = p.report.recall_curves
        table = table[table["run"] == p.run]
        for stage in p.stages:
            rows = table[table["stage"] == stage]
            if len(rows):
                ax.plot(rows["k"].tolist(), rows["recall"].tolist(), marker=".", label=plot_text(stage))
        ax.axvline(p.depth, color=OKABE_ITO["black"], linestyle=":", label=f"depth {p.depth}")
        if p.budget_chunks is not None:
            ax.axvline(p.budget_chunks, color=OKABE_ITO["black"], linestyle="--", label=plot_text(p.budget))
        ax.set(xscale="log", xlabel="k", ylabel="recall@k", title=plot_text(p.title), ylim=(0, 1.02))
        legend_outside(ax, fontsize=7)
    fig.suptitle("recall@k of each stage: the share of relevant items in its top k")
    fig.tight_layout()
    return fig


def _shares(p: Panel) -> list[float] | None:
    """The mean share of the pipeline's relevant items per fate (:data:`FATES` order), None without them."""
    summary = p.report.summary
    rows = summary[summary["run"] == p.run]
    present = set(rows["metric"])
    if "loss.delivered" not in present:
        return None
    # each pipeline reports one of the cut fates (reranked out, or cut by the budget): the other is 0
    shares = [
        float(rows[rows["metric"] == f"loss.{f}"]["mean"].mean()) if f"loss.{f}" in present else 0.0 for f in FATES
    ]
    return shares if np.isfinite(shares).all() else None


def _loss_figure(plt: Any, panels: Sequence[Panel]) -> Any:
    """One horizontal bar per pipeline, its relevant items' shares stacked: delivered first, then the losses; the
    legend below the axes, outside them."""
    from ..reports.fates import fate_label

    bars = [(p, s) for p in panels if (s := _shares(p)) is not None]
    if not bars:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 1.5 + 0.45 * len(bars)))
    left = np.zeros(len(bars))
    names = [plot_text(p.title) for p, _ in bars][::-1]
    cut_by = {p.cut_by for p, _ in bars if p.cut_by}
    at = np.arange(len(names))  # by position: two names alike once shortened stay two bars
    for i, fate in enumerate(FATES):
        values = np.array([shares[i] for _, shares in bars][::-1])
        label = fate_label(fate, cut_by.pop() if fate == "reranked_out" and len(cut_by) == 1 else None)
        colour = FATE_COLOURS[fate]
        ax.barh(at, values, left=left, color=colour, label=plot_text(label.replace("'", "")), height=0.6)
        for y, (x0, w) in enumerate(zip(left, values, strict=True)):
            if w >= 0.06:
                ax.text(x0 + w / 2, y, f"{w:.0%}", ha="center", va="center", fontsize=7, color=text_colour(colour))
        left += values
    ax.set_yticks(at, names)
    ax.set(xlim=(0, 1), xlabel="share of relevant items (mean per query)")
    ax.set_title("where the relevant items went: delivered to the model, or lost and why")
    legend_outside(ax, below=True, ncol=3, fontsize=7)
    fig.tight_layout()
    return fig


def _column(per_query: pd.DataFrame, run: str, stage: str, metric: str) -> pd.Series:
    """One stage's per-query values of one metric, indexed by query id."""
    if "stage" not in per_query.columns:
        return per_query.iloc[0:0].set_index("query_id")["value"]
    rows = per_query[(per_query["run"] == run) & (per_query["stage"] == stage) & (per_query["metric"] == metric)]
    return rows.set_index("query_id")["value"]


def _scatter_figure(plt: Any, panels: Sequence[Panel]) -> Any:
    """Per query, the first stage's recall@depth against the final stage's nDCG (or recall) at the budget,
    jittered, with the number of queries at each recall value above it."""
    drawn = []
    for p in panels:
        first = p.first
        if first is None:
            continue
        final = list(p.stages)[-1]
        metric = "ndcg@budget" if final != first else "recall@budget"
        x = _column(p.report.per_query, p.run, first, "recall@depth")
        y = _column(p.report.per_query, p.run, final, metric)
        both = x.to_frame("x").join(y.to_frame("y"), how="inner").dropna()
        if len(both):
            drawn.append((p, first, final, metric, both))
    if not drawn:
        return None
    fig, axes = plt.subplots(1, len(drawn), figsize=(5 * len(drawn), 4.2), squeeze=False)
    rng = np.random.default_rng(0)
    counted = []
    for ax, (p, first, final, metric, both) in zip(axes[0], drawn, strict=True):
        xs, ys = both["x"].to_numpy(), both["y"].to_numpy()
        # jitter: most queries sit at recall 0 or 1; the counts say how many
        ax.scatter(xs + rng.uniform(-0.025, 0.025, len(xs)), ys + rng.uniform(-0.015, 0.015, len(ys)), s=9, alpha=0.45)
        labels = []
        for at, n in _counts(xs):
            if n >= max(3, len(xs) // 20):
                labels.append(
                    ax.annotate(
                        f"n={n}",
                        (at, 1.045),
                        xytext=(0, 0),
                        textcoords="offset points",  # moved up by points where two would touch
                        ha="center",
                        fontsize=7,
                        annotation_clip=False,
                    )
                )
        counted.append(labels)
        ax.set(
            xlabel=plot_text(f"{first} recall@depth (jittered)"),
            ylabel=plot_text(f"{final} {metric}"),
            title=plot_text(p.title),
            xlim=(-0.06, 1.06),
            ylim=(-0.04, 1.2),
        )
    fig.suptitle("per query: what the first stage found (x), what reached the model (y)")
    fig.tight_layout()
    for labels in counted:
        _unstack(fig, labels)
    return fig


def _counts(xs: np.ndarray) -> list[tuple[float, int]]:
    """The distinct values of ``xs`` with how many queries have each; values within 1e-6 of each other are one
    (2/3 computed two ways), so that one value never gets two labels."""
    values = np.sort(xs)
    if not len(values):
        return []
    starts = np.flatnonzero(np.r_[True, np.diff(values) > 1e-6])
    sizes = np.diff(np.r_[starts, len(values)])
    return [(float(values[s]), int(n)) for s, n in zip(starts, sizes, strict=True)]


def _unstack(fig: Any, labels: list[Any]) -> None:
    """Move each count label that would touch one before it up by its own height, so that no two overlap; the
    axes' title then moves above the highest."""
    if not labels:
        return
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = labels[0].axes
    placed: list[Any] = []
    for label in labels:
        box = label.get_window_extent(renderer)
        while any(box.overlaps(b) for b in placed):
            label.xyann = (0, label.xyann[1] + box.height * 72 / fig.dpi + 1)
            box = label.get_window_extent(renderer)
        placed.append(box)
    above = max(b.y1 for b in placed) - ax.get_window_extent(renderer).y1
    if above > 0:  # the title clears the labels
        ax.set_title(ax.get_title(), pad=6.0 + above * 72 / fig.dpi)
        fig.tight_layout()
