"""The funnel (:mod:`rag_eval.reports.funnel`) in words, for the faces that open with it: the terminal (``rag-eval
bench``, ``rag-eval evaluate``, the demo), ``report.md`` and a notebook's rich display of a Report. Each pipeline:
its relevant items step by step, each loss named by its cause, then each stage's headline number with its interval.

Names from the data are escaped for their medium (:mod:`rag_eval._escape`, ``html.escape``).
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any

from .._escape import markdown_cell, visible
from .funnel import Funnel, funnel

if TYPE_CHECKING:
    from .report import Report

__all__ = ["FUNNEL_TITLE", "funnel_html", "funnel_markdown", "funnel_of", "funnel_text"]

#: the words every face opens with
FUNNEL_TITLE = "Where the relevant items went"


def funnel_of(report: Report) -> Funnel | None:
    """The report's funnel, or None for a report without one (plain runs, or fates not measured)."""
    if not report.card.pipeline:
        return None
    found = funnel(report)
    return found if found.pipelines else None


def _number(value: Any) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def _headline(row: dict[str, Any]) -> str:
    interval = "" if math.isnan(row["low"]) else f" [{_number(row['low'])}, {_number(row['high'])}]"
    nan = f", n_nan={int(row['n_nan'])}" if row["n_nan"] else ""
    return f"{_number(row['mean'])}{interval} (n={int(row['n'])}{nan})"


def _rows(found: Funnel, pipeline: str) -> tuple[list[tuple[str, int, str]], int, int]:
    """``(step, items, what was lost there and why)`` per step, and the relevant and delivered counts."""
    steps = found.steps_of(pipeline)
    rows = []
    for step in steps:
        causes = [x for x in step["losses"] if x["items"]]
        if len(causes) == 1:
            lost = f"lost {int(step['lost'])}: {causes[0]['cause']}"
        else:
            lost = f"lost {int(step['lost'])}: " + "; ".join(f"{int(x['items'])} {x['cause']}" for x in causes)
        rows.append((str(step["step"]), int(step["items"]), lost if causes else ""))
    return rows, int(steps[0]["items"]), int(steps[-1]["items"])


def _share(delivered: int, relevant: int) -> str:
    return f"{delivered / relevant:.1%}" if relevant else "n/a"


def _method(found: Funnel) -> str:
    methods = found.headlines["interval_method"].dropna().unique().tolist()
    return methods[0] if len(methods) == 1 else "see each row"


def funnel_text(found: Funnel) -> str:
    """The funnel for a terminal: a block per pipeline, names made visible (control characters escaped)."""
    lines = []
    for pipeline in found.pipelines:
        rows, relevant, delivered = _rows(found, pipeline)
        lines.append(
            f"{FUNNEL_TITLE}: {visible(pipeline)}: {delivered} of {relevant} relevant items "
            f"({_share(delivered, relevant)}) reached the model, summed over the queries"
        )
        width = max(len(visible(step)) for step, _, _ in rows)
        count = max(len(str(items)) for _, items, _ in rows)
        lines += [
            f"  {visible(step):<{width}}  {items:>{count}}  {visible(lost)}".rstrip() for step, items, lost in rows
        ]
        heads = found.headlines_of(pipeline)
        if heads:
            lines.append(f"  headline numbers, mean [interval: {_method(found)}]:")
            stage_width = max(len(visible(str(h["stage"]))) for h in heads)
            metric_width = max(len(str(h["metric"])) for h in heads)
            lines += [
                f"    {visible(str(h['stage'])):<{stage_width}}  {h['metric']:<{metric_width}}  {_headline(h)}"
                for h in heads
            ]
        lines.append("")
    lines += [f"note: {visible(n)}" for n in found.notes]
    return "\n".join(lines).rstrip("\n") + "\n"


def funnel_markdown(found: Funnel, *, level: int = 2) -> str:
    """The funnel in Markdown: a heading and a table per pipeline, then its headline numbers; cells escaped."""
    hashes = "#" * level
    out = []
    for pipeline in found.pipelines:
        rows, relevant, delivered = _rows(found, pipeline)
        out += [
            f"{hashes} {FUNNEL_TITLE}: {markdown_cell(pipeline)}",
            "",
            f"{delivered} of {relevant} relevant items ({_share(delivered, relevant)}) reached the model, summed "
            "over the queries; each loss named by its cause.",
            "",
            "| step | relevant items | lost there, and why |",
            "|---|---:|---|",
        ]
        out += [f"| {markdown_cell(step)} | {items} | {markdown_cell(lost)} |" for step, items, lost in rows]
        heads = found.headlines_of(pipeline)
        if heads:
            out += ["", f"Headline numbers: mean [interval: {markdown_cell(_method(found))}]", ""]
            out += ["| stage | metric | value |", "|---|---|---:|"]
            out += [
                f"| {markdown_cell(str(h['stage']))} | {markdown_cell(str(h['metric']))} | {_headline(h)} |"
                for h in heads
            ]
        out.append("")
    out += [f"Note: {markdown_cell(n)}" for n in found.notes]
    return "\n".join(out).rstrip("\n") + "\n"


def funnel_html(found: Funnel) -> str:
    """The funnel as HTML for a notebook: a heading, a table of the steps and one of the headline numbers per
    pipeline; every text escaped."""
    e = html.escape
    out = []
    for pipeline in found.pipelines:
        rows, relevant, delivered = _rows(found, pipeline)
        out.append(
            f"<p><strong>{e(FUNNEL_TITLE)}: {e(pipeline)}</strong>: {delivered} of {relevant} relevant items "
            f"({_share(delivered, relevant)}) reached the model, summed over the queries.</p>"
        )
        body = "".join(
            f'<tr><td>{e(step)}</td><td style="text-align:right">{items}</td><td>{e(lost)}</td></tr>'
            for step, items, lost in rows
        )
        out.append(
            '<table class="rag-eval-funnel"><thead><tr><th>step</th><th>relevant items</th>'
            f"<th>lost there, and why</th></tr></thead><tbody>{body}</tbody></table>"
        )
        heads = found.headlines_of(pipeline)
        if heads:
            cells = "".join(
                f"<tr><td>{e(str(h['stage']))}</td><td>{e(str(h['metric']))}</td><td>{e(_headline(h))}</td></tr>"
                for h in heads
            )
            out.append(
                f"<p>Headline numbers: mean [interval: {e(_method(found))}]</p>"
                f"<table><thead><tr><th>stage</th><th>metric</th><th>value</th></tr></thead><tbody>{cells}"
                "</tbody></table>"
            )
    out += [f"<p>Note: {e(n)}</p>" for n in found.notes]
    return "".join(out)
