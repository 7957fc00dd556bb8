"""The answers of several runs in one report: each run's attached by its own :meth:`Report.with_answers
<rag_eval.Report.with_answers>` and kept by run name (``card.answers_by_run``; ``card.answers`` stays the first
run's, the one record of a report answered once), and each later run's paired difference from the first in every
grade, over the queries both answered and graded. See docs/answers.md, "Several pipelines".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .._markdown import markdown_cell
from ..errors import InputError
from ..metrics.answers import ANSWER_METRICS
from .answered import (
    CONFIDENCE,
    GRADE_WORDS,
    RESAMPLES,
    SEED,
    record_html,
    record_lines,
    record_markdown,
    shown_interval,
)
from .summary import method_label, min_n, summarize_values

if TYPE_CHECKING:
    import pandas as pd

    from .card import MetricCard

__all__ = [
    "accumulated",
    "answer_records",
    "answers_html",
    "answers_lines",
    "answers_markdown",
    "paired_lines",
    "paired_record",
    "side_by_side",
]

#: the interval of a paired difference: the percentile bootstrap of the card's grades, over the paired queries
METHOD = "bootstrap"


def answer_records(card: MetricCard) -> list[dict[str, Any]]:
    """Every answered run's record, in the order attached: ``card.answers`` alone for a report answered once, none
    without answers."""
    if card.answers_by_run:
        return list(card.answers_by_run.values())
    return [] if card.answers is None else [card.answers]


def accumulated(
    report: Any, table: pd.DataFrame, record: dict[str, Any], *, replace: bool = False
) -> tuple[pd.DataFrame, dict[str, Any], dict[str, dict[str, Any]] | None]:
    """``report``'s answers with one run's (``table`` and ``record``, :func:`~rag_eval.reports.answered.attached`)
    added: (the answer table, ``card.answers``, ``card.answers_by_run``). One run answered: its table and record, as
    ever, and no ``answers_by_run``. Several: one table, a row per run and query (a ``run`` column first), and every
    record by run, each after the first with its ``paired`` difference from the first (:func:`paired_record`). A run
    answered already is an InputError, unless ``replace`` (it then keeps its place)."""
    import pandas as pd

    kept = {r["run"]: r for r in answer_records(report.card)}
    run = record["run"]
    if run in kept and not replace:
        where = run + (f" / {kept[run]['stage']}" if kept[run].get("stage") else "")
        raise InputError(
            f"the report carries answers of run {run!r} already (of {where}): one set of answers per run "
            "(replace=True replaces them)"
        )
    old = report.answers
    tables = {r: old[(old["run"] == r).to_numpy()].drop(columns="run") for r in kept} if "run" in old else {}
    if kept and not tables:  # one run answered before: its table has no run column
        tables = {next(iter(kept)): old}
    kept[run], tables[run] = record, table
    if len(kept) == 1:
        return table, record, None
    base = next(iter(kept))
    by_run: dict[str, dict[str, Any]] = {}
    for name, found in kept.items():
        found = {k: v for k, v in found.items() if k != "paired"}
        if name != base:
            found["paired"] = paired_record(tables[base], tables[name], against=base)
        by_run[name] = found
    frames = [tables[name].reset_index(drop=True).assign(run=name) for name in kept]
    columns = ["run", *dict.fromkeys(c for f in frames for c in f.columns if c != "run")]
    joined = pd.concat(frames, ignore_index=True)[columns]
    if "judge_error" in joined:  # a run without a judge: no verdict, no failure (None, as JSON has it)
        joined["judge_error"] = joined["judge_error"].astype(object).where(joined["judge_error"].notna(), None)
    return joined, by_run[base], by_run


def paired_record(baseline: pd.DataFrame, other: pd.DataFrame, *, against: str) -> dict[str, Any]:
    """``other``'s answers less ``baseline``'s (both answer tables), paired by query over those graded in both: per
    grade the two means and the mean difference with its percentile bootstrap interval (as the card's grades: 95%,
    1,000 resamples of the paired queries, seed 0; the queries in ``baseline``'s order, as
    :func:`rag_eval.statistics.paired.pair` pairs them, so that the gate's bootstrap draws the same resamples), none
    below the bootstrap's minimum n; how many queries were paired and left out, and why."""
    import pandas as pd

    grades = list(ANSWER_METRICS)
    at = pd.Index(other["query_id"].astype(str)).get_indexer(pd.Index(baseline["query_id"].astype(str)))  # -1: none
    both = at >= 0
    a = baseline[grades].to_numpy(dtype=np.float64)[both]
    b = other[grades].to_numpy(dtype=np.float64)[at[both]]
    paired = ~np.isnan(a).any(axis=1) & ~np.isnan(b).any(axis=1)
    a, b = a[paired], b[paired]  # in the baseline's order, as rag_eval.statistics.paired.pair pairs
    diff = b - a
    n, least = len(diff), min_n(METHOD)
    one_run_only = len(baseline) + len(other) - 2 * int(both.sum())
    stats = summarize_values(diff, resamples=RESAMPLES, confidence=CONFIDENCE, seed=SEED)
    trusted = n >= least
    rows = []
    for j, g in enumerate(grades):
        flat = trusted and bool(np.ptp(diff[:, j]) <= 1e-12)
        rows.append(
            {
                "metric": f"answer.{g}",
                "mean": _mean(b[:, j]),
                "baseline_mean": _mean(a[:, j]),
                "diff": _mean(diff[:, j]),
                "ci_low": float(stats["ci_low"][j]) if trusted else None,
                "ci_high": float(stats["ci_high"][j]) if trusted else None,
                "zero_width": flat,
            }
        )
    return {
        "against": against,
        "n": n,
        "left_out": one_run_only + int((~paired).sum()),
        "one_run_only": one_run_only,
        "not_graded": int((~paired).sum()),
        "method": method_label(METHOD),
        "min_n": least,
        "interval": f"{CONFIDENCE:.0%} percentile bootstrap of the paired differences ({RESAMPLES:,} resamples of "
        f"the queries, seed {SEED})",
        "refused": None if trusted else f"no interval: {n} paired queries, fewer than the minimum n {least}",
        "rows": rows,
    }


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if len(values) else None


def _signed(row: dict[str, Any]) -> str:
    if row["diff"] is None:
        return "n/a"
    low, high = row["ci_low"], row["ci_high"]
    shown = f"{row['diff']:+.3f}" + (" (no interval)" if low is None else f" [{low:+.3f}, {high:+.3f}]")
    return shown + (" (zero width: every paired difference the same)" if row["zero_width"] else "")


def paired_lines(run: str, paired: dict[str, Any]) -> list[str]:
    """A paired difference in words: what it rests on (paired, left out and why, the interval and its minimum n),
    then each grade's difference."""
    rest = (
        f"{run!r} - {paired['against']!r}, paired by query: {paired['n']} queries graded in both, "
        f"{paired['left_out']} left out ({paired['not_graded']} failed or not asked in one or both, "
        f"{paired['one_run_only']} answered by one run only); {paired['interval']}, {paired['method']}"
        + (f"; {paired['refused']}" if paired["refused"] else "")
    )
    return [rest, "; ".join(f"{r['metric']} {_signed(r)}" for r in paired["rows"])]


def answers_lines(card: MetricCard) -> list[str]:
    """The answers in words, a line each (the card's): each run's (:func:`record_lines`), then each paired
    difference."""
    records = answer_records(card)
    lines = [line for r in records for line in record_lines(r)]
    return lines + [line for r in records if r.get("paired") for line in paired_lines(r["run"], r["paired"])]


def side_by_side(card: MetricCard) -> dict[str, Any] | None:
    """Several runs' answers side by side (None for one run or none): ``columns`` (each run, then each later run
    less the first), ``rows`` (per grade: ``metric``, ``words`` and ``cells``, each run's mean with its interval and
    each paired difference with its own; last the counts answered and paired) and ``lines`` (what each difference
    rests on)."""
    records = answer_records(card)
    if len(records) < 2:
        return None
    base, others = records[0], records[1:]
    columns = [r["run"] for r in records] + [f"{r['run']} - {base['run']} (paired)" for r in others]
    means = [{s["metric"]: s for s in r["summary"]} for r in records]
    rows = []
    for j, row in enumerate(base["summary"]):
        metric = row["metric"]
        cells = [shown_interval(m[metric]["mean"], m[metric]["ci_low"], m[metric]["ci_high"]) for m in means]
        cells += [_signed(r["paired"]["rows"][j]) for r in others]
        rows.append({"metric": metric, "words": GRADE_WORDS.get(metric, metric), "cells": cells})
    counts = [f"{r['answered']} of {r['queries']}" for r in records]
    counts += [f"{r['paired']['n']} paired, {r['paired']['left_out']} left out" for r in others]
    rows.append({"metric": None, "words": "answered", "cells": counts})
    lines = [line for r in others for line in paired_lines(r["run"], r["paired"])[:1]]
    return {"columns": columns, "rows": rows, "lines": [*lines, f"each run's grades: {base['interval']}"]}


def answers_markdown(card: MetricCard, *, level: int = 2, file: str | None = None) -> list[str]:
    """The Answers section in Markdown (report.md's, a notebook's): one run's as ever; several runs' side by side
    (:func:`side_by_side`), then each run's own section."""
    records = answer_records(card)
    found = side_by_side(card)
    if found is None:
        return record_markdown(records[0], level=level, file=file) if records else []
    lines = ["#" * level + " Answers", "", f"The answers of {len(records)} runs, side by side.", ""]
    lines += ["| grade | " + " | ".join(markdown_cell(c) for c in found["columns"]) + " |"]
    lines.append("|---|" + "---:|" * len(records) + "---|" * (len(records) - 1))
    for row in found["rows"]:
        name = row["words"] + (f" (`{row['metric']}`)" if row["metric"] else "")
        lines.append(f"| {name} | " + " | ".join(row["cells"]) + " |")
    lines += ["", *(f"- {markdown_cell(line)}" for line in found["lines"]), ""]
    for r in records:
        lines += record_markdown(r, level=level + 1, title=f"Answers of {r['run']}")
    return lines + ([f"Per query, a row per run and query: `{file}`.", ""] if file else [])


def answers_html(card: MetricCard) -> str:
    """The answers as HTML (a Report in a notebook): one run's as ever; several runs' paired differences, then each
    run's, every text escaped."""
    import html

    records = answer_records(card)
    if len(records) < 2:
        return record_html(records[0]) if records else ""
    lines = "".join(
        f"<li>{html.escape(line)}</li>" for r in records[1:] for line in paired_lines(r["run"], r["paired"])
    )
    found = "".join(record_html(r, title=f"Answers of {r['run']}") for r in records)
    return f"<p><strong>Answers of {len(records)} runs, paired</strong></p><ul>{lines}</ul>{found}"
