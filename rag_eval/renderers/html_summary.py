"""The HTML report's Summary, as rows for its template (``docs/html-report.md``, "The first screen"): each
pipeline's funnel and its stages' headline numbers (from :mod:`rag_eval.reports.funnel`), and the stage x metric
pivot of the summary. Numbers are read, never measured here: a bar's width is the step's items over the relevant
ones, as the counts beside it say."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..reports.funnel import Funnel, pipelines_of

if TYPE_CHECKING:
    from ..reports.card import MetricCard
    from .html_report import HtmlSide


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def interval(mean: Any, low: Any, high: Any) -> str:
    """``0.512 [0.451, 0.570]``; ``n/a`` for a mean that is NaN (no query with a value)."""
    m, lo, hi = _number(mean), _number(low), _number(high)
    if m is None:
        return "n/a"
    return f"{m:.3f} [{_three(lo)}, {_three(hi)}]"


def _three(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def funnel_blocks(side: HtmlSide, f: Funnel, many: bool, colours: dict[str, str]) -> list[dict[str, Any]]:
    """One block per pipeline of the side: its funnel's steps (items, share of the relevant items, losses by
    cause, each with its ``colours`` swatch) and its headline numbers with their intervals."""
    blocks = []
    structure = {str(p["run"]): p for p in pipelines_of(side.report)}
    for pipeline in f.pipelines:
        steps = f.steps_of(pipeline)
        total = int(steps[0]["items"])
        rows = []
        for step in steps:
            items = int(step["items"])
            share = items / total if total else 0.0
            rows.append(
                {
                    "order": int(step["order"]),
                    "step": step["step"],
                    "role": step["role"],
                    "count": items,
                    "percent": f"{share:.0%}" if total else "n/a",
                    "width": f"{100 * share:.1f}",
                    "lost": int(step["lost"]),
                    "losses": [
                        {
                            "fate": loss["fate"],
                            "cause": loss["cause"],
                            "count": int(loss["items"]),
                            "colour": colours.get(str(loss["fate"]), "#999999"),
                        }
                        for loss in step["losses"]
                    ],
                }
            )
        heads = [
            {
                "stage": h["stage"],
                "metric": h["metric"],
                "shown": interval(h["mean"], h["low"], h["high"]),
                "mean": _number(h["mean"]),
                "n": int(h["n"]),
                "n_nan": int(h["n_nan"]),
            }
            for h in f.headlines_of(pipeline)
        ]
        p = structure.get(pipeline, {})
        blocks.append(
            {
                "pipeline": pipeline,
                "title": f"{side.name}: {pipeline}" if many else pipeline,
                "structure": p.get("structure", pipeline),
                "total": total,
                "delivered": int(steps[-1]["items"]),
                "steps": rows,
                "headlines": heads,
                "method": f.headlines_of(pipeline)[0]["interval_method"] if heads else "",
            }
        )
    return blocks


def pivots(side: HtmlSide) -> list[dict[str, Any]]:
    """Per run (pipeline) of the side: its stages as columns in pipeline order, one metric a row, each cell the
    mean with its interval and n (None where the stage has no such metric)."""
    summary = side.report.summary
    staged = "stage" in summary.columns
    order = {str(p["run"]): list(p.get("stages", {})) for p in pipelines_of(side.report)}
    out = []
    for run in side.report.runs:
        rows = summary[summary["run"] == run]
        stages: list[str | None] = [None]
        if staged:
            present = list(dict.fromkeys(rows["stage"]))
            stages = [s for s in order.get(run, []) if s in present] + [
                s for s in present if s not in order.get(run, [])
            ]
        cells = {(r["stage"] if staged else None, r["metric"]): r for r in rows.to_dict("records")}
        metrics = list(dict.fromkeys(rows["metric"]))
        table = []
        for metric in metrics:
            line: list[dict[str, Any] | None] = []
            for stage in stages:
                r = cells.get((stage, metric))
                if r is None:
                    line.append(None)
                    continue
                line.append(
                    {
                        "shown": interval(r["mean"], r["ci_low"], r["ci_high"]),
                        "mean": _number(r["mean"]),
                        "n": int(r["n"]),
                        "n_nan": int(r["n_nan"]),
                    }
                )
            table.append({"metric": metric, "cells": line})
        out.append({"run": run, "stages": [s or "" for s in stages], "rows": table})
    return out


def csv_rows(side: HtmlSide) -> dict[str, Any]:
    """The flat summary as columns and rows (every digit), for the page's CSV download."""
    summary = side.report.summary
    columns = [str(c) for c in summary.columns]
    rows = [
        [None if isinstance(v, float) and math.isnan(v) else _plain(v) for v in r]
        for r in summary.itertuples(index=False)
    ]
    return {"columns": columns, "rows": rows}


def _plain(value: Any) -> Any:
    """A value JSON can hold: NumPy scalars as Python's."""
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def answers_section(record: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The Answers section of a side whose report carries answers (``card.answers``): the record as the card has it,
    its grades and predictor rows with their intervals as shown (None without answers)."""
    if record is None:
        return None
    from ..reports.answered import GRADE_WORDS, shown_interval

    grades = [
        {
            "metric": g["metric"],
            "words": GRADE_WORDS.get(g["metric"], g["metric"]),
            "shown": shown_interval(g["mean"], g["ci_low"], g["ci_high"]),
            "n": g["n"],
            "n_failed": g["n_failed"],
        }
        for g in record["summary"]
    ]
    judge = record.get("judge")
    if judge:  # the judge's share called correct, as a row beside the grades; its agreement said once below
        from ..reports.answered import judge_lines

        c = judge["correct"]
        grades.append(
            {
                "metric": "judge.correct",
                "words": f"judge {judge['judge']!r} says correct",
                "shown": shown_interval(c["mean"], c["ci_low"], c["ci_high"]),
                "n": c["n"],
                "n_failed": c["n_failed"],
            }
        )
    found = record.get("predictors")
    predictors = None
    if found:
        rows = [
            {
                "predictor": r["predictor"],
                "n": r["n"],
                "n_correct": r["n_correct"],
                "rho": shown_interval(r["spearman"], r["spearman_low"], r["spearman_high"]),
                "auc": shown_interval(r["auc"], r["auc_low"], r["auc_high"]),
            }
            for r in found["table"]
        ]
        predictors = {"rows": rows, "describe": found["describe"]}
    lines = judge_lines(judge) if judge else []
    return {**record, "grades": grades, "predictors": predictors, "judge_lines": lines}


def answers_sections(card: MetricCard) -> dict[str, Any] | None:
    """A side's answers (None without): ``runs``, each answered run's section (:func:`answers_section`, named by its
    run when there are several), and ``compare``, several runs side by side with their paired differences
    (:func:`rag_eval.reports.answer_runs.side_by_side`; None for one run)."""
    from ..reports.answer_runs import answer_records, side_by_side

    records = answer_records(card)
    if not records:
        return None
    runs = [{**(answers_section(r) or {}), "name": r["run"] if len(records) > 1 else None} for r in records]
    return {"runs": runs, "compare": side_by_side(card)}
