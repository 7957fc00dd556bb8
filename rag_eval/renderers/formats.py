"""Output formats: a Report or a Comparison as text, the way ``rag-eval evaluate`` and ``rag-eval compare`` print it.
See docs/cli.md.

    >>> print(format_report(report, "markdown"))        # the summary, one row per run and metric
    >>> print(format_report(report, "csv", per_query=True))  # the tidy per-query table, full precision
    >>> print(format_comparison(comparison, "json"))    # card, comparison rows and systems

Formats (:data:`FORMATS`): ``table`` (aligned text, 4 decimals), ``csv`` (full precision: each float reads back
as itself), ``json`` (the metric card under ``"card"``; NaN and infinities as ``null``) and ``markdown`` (a pipe
table, cells escaped). trec_eval's own printout is :func:`rag_eval.format_trec_eval`. The bootstrap interval of a
summary is computed with ``resamples`` and ``seed`` only by the formats that print a summary.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from .._checks import check_choice
from .._escape import csv_text
from .._markdown import markdown_table
from ..reports.report import Report

if TYPE_CHECKING:  # pandas is imported on use: import rag_eval stays light
    import pandas as pd

    from ..statistics.comparison import Comparison

__all__ = ["FORMATS", "format_comparison", "format_report", "format_summary_table"]

FORMATS = ("table", "csv", "json", "markdown")

_SUMMARY_COLUMNS = ("run", "stage", "metric", "mean", "std", "ci_low", "ci_high", "n", "n_nan", "n_failed")
_TEXT_COLUMNS = ("run", "stage", "metric")
_COUNT_COLUMNS = ("n", "n_nan", "n_failed")


def format_report(
    report: Report, format: str = "table", *, per_query: bool = False, resamples: int = 1000, seed: int = 0
) -> str:
    """``report`` as text in ``format`` (one of :data:`FORMATS`), ending with a newline.

    A pipeline's report opens with its funnel (:mod:`rag_eval.reports.funnel_text`) in ``table`` and ``markdown``.
    ``table``: with ``per_query``, a run x query table of every metric (the text metrics beside the numbers), then
    the summary. ``csv``: the summary, or with ``per_query`` the tidy per-query table (``run, query_id, metric,
    value``). ``json``: ``{"card", "summary"}``, with ``per_query`` also ``"per_query"`` (and ``"per_query_text"``
    where there are text metrics). ``markdown``: the summary as a pipe table under a heading, with ``per_query``
    the per-query table after it. A report carrying answers (``Report.with_answers``) ends with them in ``table``
    and ``markdown``; ``json`` has them on the card.
    """
    _check_format(format)

    def summary() -> pd.DataFrame:  # the bootstrap runs only for the formats that print it
        return report.summarize(resamples=resamples, seed=seed)

    if format == "json":
        payload: dict[str, Any] = {"card": json.loads(report.card.model_dump_json()), "summary": _records(summary())}
        if per_query:
            payload["per_query"] = _records(report.per_query)
            if report.text_metrics:
                payload["per_query_text"] = _records(report.per_query_text)
        return _json(payload)
    if format == "csv":
        return csv_text(report.per_query if per_query else summary(), float_format=None)
    from ..reports.funnel_text import funnel_markdown, funnel_of, funnel_text

    shown = _shown_summary(summary())
    found = funnel_of(report)  # a pipeline's report opens with its funnel, then the detail
    if format == "markdown":
        text = (funnel_markdown(found) + "\n" if found else "") + markdown_table(shown, heading=_heading(report))
        if per_query:
            text += "\n" + markdown_table(_per_query_table(report).reset_index())
        if report.card.answers is not None:
            from ..reports.answer_runs import answers_markdown  # loaded only where a report carries answers

            text += "\n" + "\n".join(answers_markdown(report.card, level=3))
        return text
    table = _per_query_table(report).to_string(float_format=_four) + "\n\n" if per_query else ""
    first = funnel_text(found) + "\n" if found else ""
    last = ""
    if report.card.answers is not None:
        from ..reports.answer_runs import answers_lines

        last = "".join(f"answers: {line}\n" for line in answers_lines(report.card))
    return first + table + shown.to_string(index=False, float_format=_four) + "\n" + last


def format_summary_table(report: Report, *, resamples: int = 1000, seed: int = 0) -> str:
    """``format_report(report, "table")``, the same text, without pandas (the command line's summary): columns
    right-aligned under their names, one space apart, numbers with 4 decimals and NaN as pandas prints them."""
    if report.staged:  # the stage column holds None for no stage: left to pandas
        return format_report(report, "table", resamples=resamples, seed=seed)
    columns, rows = report.summary_rows(resamples=resamples, seed=seed)
    if not rows:  # pandas prints an empty frame its own way
        return format_report(report, "table", resamples=resamples, seed=seed)
    cells = []
    for c in _SUMMARY_COLUMNS:
        if c not in columns:
            continue
        values = [row[columns.index(c)] for row in rows]
        if c in _TEXT_COLUMNS:  # as pandas prints a str: tabs and line breaks escaped, no space before
            shown = [str(v).replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r") for v in values]
            head = c
        else:  # a number's heading has a space before it, as pandas writes it
            shown = [str(int(v)) if c in _COUNT_COLUMNS else ("NaN" if v != v else _four(v)) for v in values]
            head = " " + c
        width = max(len(head), *map(len, shown))
        cells.append([head.rjust(width)] + [v.rjust(width) for v in shown])
    return "\n".join(" ".join(line) for line in zip(*cells, strict=True)) + "\n"


def format_comparison(comparison: Comparison, format: str = "table") -> str:
    """``comparison`` as text in ``format`` (one of :data:`FORMATS`), ending with a newline.

    ``table``: the heading and one row per system and metric (what ``str(comparison)`` gives). ``csv``: the full
    ``Comparison.table``. ``json``: ``{"card", "comparison", "systems"}``. ``markdown``:
    :meth:`Comparison.to_markdown`.
    """
    _check_format(format)
    if format == "csv":
        return csv_text(comparison.table)
    if format == "json":
        return _json(
            {
                "card": json.loads(comparison.card.model_dump_json()),
                "comparison": _records(comparison.table),
                "systems": _records(comparison.systems),
            }
        )
    if format == "markdown":
        return comparison.to_markdown()
    return str(comparison) + "\n"


def _check_format(format: str) -> None:
    check_choice(format, "format", FORMATS)


def _four(value: float) -> str:
    return f"{value:.4f}"


def _heading(report: Report) -> str:
    card = report.card
    return (
        f"rag_eval {card.rag_eval_version} report: {len(report.runs)} run(s), {len(report.metrics)} metric(s), "
        f"{card.preset or 'custom'} conventions"
    )


def _shown_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary's columns a reader needs (n + n_nan: the queries counted)."""
    return summary[[c for c in _SUMMARY_COLUMNS if c in summary.columns]]


def _per_query_table(report: Report) -> pd.DataFrame:
    """One row per (run[, stage], query), one column per metric, the text metrics (relstring, runid) last."""
    keys = ["run", "stage", "query_id"] if report.staged else ["run", "query_id"]
    long = report.per_query
    table = long.pivot_table(index=keys, columns="metric", values="value", sort=False)
    numbers = [m for m in dict.fromkeys(long["metric"]) if m not in report.text_metrics]
    table = table[numbers]
    if report.text_metrics:
        texts = report.per_query_text.pivot(index=keys, columns="metric", values="text")[report.text_metrics]
        table = table.join(texts) if len(table.columns) else texts
    return table


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts, NaN and infinities as None (JSON has no NaN)."""
    records = [{str(k): v for k, v in row.items()} for row in frame.to_dict(orient="records")]
    for record in records:
        for key, value in record.items():
            if isinstance(value, float) and not math.isfinite(value):
                record[key] = None
    return records


def _json(payload: dict[str, Any]) -> str:
    return json.dumps(payload, indent=2, allow_nan=False, default=_json_default) + "\n"


def _json_default(value: object) -> object:
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        return item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
