"""Answers attached to a Report: one table (a row per query: the question, the answer, the references, the grades)
and one record on the card (the generator, its fingerprint, the prompt, how many queries were answered and failed,
each grade's mean with its bootstrap interval, and the predictor table when it was computed). A result folder
carries them as ``answers.csv`` and a section of ``report.md``; the gate reads the grades as rules (``answer.f1``).
See docs/answers.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._escape import markdown_code
from .._markdown import markdown_cell
from ..errors import InputError
from ..metrics.answers import ANSWER_COLUMNS, ANSWER_METRICS, grade_answers
from .summary import summarize_values

if TYPE_CHECKING:
    import pandas as pd

    from ..stages.generator import Answers

__all__ = [
    "ANSWER_RULES",
    "ANSWER_TABLE_COLUMNS",
    "GRADE_WORDS",
    "JUDGE_COLUMNS",
    "answer_metric",
    "answer_record",
    "answer_table",
    "answer_values",
    "attached",
    "judge_lines",
    "judge_record",
    "record_html",
    "record_lines",
    "record_markdown",
    "shown_interval",
]

#: the columns of a report's answer table (``Report.answers``), one row per query: the generator's
#: (:data:`~rag_eval.metrics.answers.ANSWER_COLUMNS`, the question after the id, the count of chunks left to the
#: ids), the references and the grades
ANSWER_TABLE_COLUMNS = (
    ANSWER_COLUMNS[0],
    "question",
    *(c for c in ANSWER_COLUMNS[1:] if c != "n_context"),
    "references",
    *ANSWER_METRICS,
)
#: the columns a judge's verdicts add to the answer table (``Report.with_answers(judged=...)``): its grade on its
#: scale, 1.0/0.0 correct (NaN without a verdict) and its failure
JUDGE_COLUMNS = ("judge_grade", "judge_correct", "judge_error")
#: each grade in words (report.md's, the HTML page's)
GRADE_WORDS = {"answer.exact_match": "exact match", "answer.f1": "token F1", "answer.contains": "contains the answer"}
#: the answer grades the gate takes as rules, by their rule names
ANSWER_RULES = {"answer.exact_match": "exact_match", "answer.f1": "f1", "answer.contains": "contains"}
_ALIASES = {
    "answer_exact_match": "answer.exact_match",
    "answer_em": "answer.exact_match",
    "exact_match": "answer.exact_match",
    "answer_f1": "answer.f1",
    "answer_contains": "answer.contains",
    "answer_containment": "answer.contains",
    "containment": "answer.contains",
}
RESAMPLES, CONFIDENCE, SEED = 1000, 0.95, 0


def answer_metric(name: str) -> str | None:
    """The rule name of an answer grade (``answer.f1``; also ``answer_f1``, ``exact_match``, ``containment``, case
    aside), or None when ``name`` is not one."""
    folded = name.strip().lower()
    return folded if folded in ANSWER_RULES else _ALIASES.get(folded)


def answer_table(
    answers: Answers,
    references: Mapping[str, str | Sequence[str]],
    *,
    questions: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """One row per answered query (:data:`ANSWER_TABLE_COLUMNS`): the answer and how it was made, the context ids
    and references as lists, and the grades (:func:`~rag_eval.metrics.answers.grade_answers`: NaN where the answer
    failed or was not asked)."""
    import pandas as pd

    frame = answers.to_frame().drop(columns=["n_context"])
    grades = grade_answers(answers.texts, references)
    frame["question"] = [None if questions is None else questions.get(q) for q in frame["query_id"]]
    given = [references[q] for q in frame["query_id"]]
    refs: list[list[str]] = [[r] if isinstance(r, str) else list(r) for r in given]
    frame["references"] = pd.Series(refs, dtype=object, index=frame.index)
    for metric in ANSWER_METRICS:
        frame[metric] = getattr(grades, metric)
    for name in ("tokens_in", "tokens_out"):  # None where not reported (JSON has no pd.NA)
        frame[name] = pd.Series([None if v is pd.NA else int(v) for v in frame[name]], dtype=object)
    return frame[list(ANSWER_TABLE_COLUMNS)]


def answer_record(
    table: pd.DataFrame,
    answers: Answers,
    *,
    run: str,
    stage: str | None,
    references: str,
    description: str | None = None,
    predictors: Any = None,
) -> dict[str, Any]:
    """The card's record of the answers in ``table`` (:func:`answer_table`): the generator and prompt, the counts,
    each grade's mean with its 95% percentile bootstrap interval over the answered queries (1,000 resamples, seed
    0, as the summary's), and ``predictors`` (an :class:`~rag_eval.statistics.answer_prediction.AnswerPrediction`)
    as its table and what it rests on."""
    values = table[list(ANSWER_METRICS)].to_numpy(dtype=np.float64)
    stats = summarize_values(values, resamples=RESAMPLES, confidence=CONFIDENCE, seed=SEED)
    summary = [
        {
            "metric": f"answer.{m}",
            "mean": _number(stats["mean"][j]),
            "ci_low": _number(stats["ci_low"][j]),
            "ci_high": _number(stats["ci_high"][j]),
            "n": int(stats["n"][j]),
            "n_failed": int(stats["n_nan"][j]),
        }
        for j, m in enumerate(ANSWER_METRICS)
    ]
    skipped = int(table["skipped"].sum())
    record: dict[str, Any] = {
        "run": run,
        "stage": stage,
        "generator": answers.generator,
        "fingerprint": answers.fingerprint,
        "description": description,
        "prompt": answers.prompt,
        "chunk": answers.chunk,
        "references": references,
        "queries": len(table),
        "answered": int((~table["f1"].isna()).sum()),
        "failed": int(table["f1"].isna().sum()) - skipped,
        "skipped": skipped,
        "calls": answers.calls,
        "cache_hits": answers.cache_hits,
        "summary": summary,
        "interval": f"{CONFIDENCE:.0%} percentile bootstrap over the answered queries ({RESAMPLES:,} resamples, "
        f"seed {SEED})",
        "predictors": None,
    }
    if predictors is not None:
        record["predictors"] = {
            "table": [{k: _plain(v) for k, v in row.items()} for row in predictors.table.to_dict("records")],
            "describe": predictors.describe(),
        }
    return record


def attached(
    report: Any,
    answers: Answers,
    references: Mapping[str, str | Sequence[str]],
    questions: Mapping[str, str] | None,
    run: str | None,
    stage: str | None,
    predictors: Any,
    judged: Any = None,
    agreement: Any = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """What :meth:`Report.with_answers <rag_eval.Report.with_answers>` attaches to ``report``: the answer table and
    the card's record, after checking that ``run`` (by default the one run) and ``stage`` (by default the last)
    measured every query answered; with ``judged`` the judge's verdicts beside the grades (:data:`JUDGE_COLUMNS`)
    and the record's ``judge`` (:func:`judge_record`)."""
    run = run or (report.runs[0] if len(report.runs) == 1 else None)
    if run is None or run not in report.runs:
        raise InputError(f"name the run the answers came from (run=...): the report has {report.runs}")
    stage = stage or next((b.stage for b in reversed(report.blocks) if b.run == run and b.stage), None)  # its last
    measured = set(report.query_ids(run, stage))
    alien = [q for q in answers if q not in measured]
    if alien:
        raise InputError(f"query {alien[0]!r} has an answer but {run!r} did not measure it ({len(alien)} such)")
    table = answer_table(answers, references, questions=questions)
    source = getattr(references, "source", None)
    where = getattr(source, "path", None) or "in memory"
    record = answer_record(table, answers, run=run, stage=stage, references=where, predictors=predictors)
    if judged is None:
        if agreement is not None:
            raise InputError("an agreement needs the judge's verdicts it was measured on: give judged= too")
        return table, record
    verdicts = judged.to_frame()
    alien = ~verdicts["query_id"].isin(table["query_id"])
    if alien.any():
        first = verdicts["query_id"][alien].iloc[0]
        raise InputError(f"query {first!r} has a judge's verdict but no answer here ({int(alien.sum())} such)")
    table = table.merge(verdicts, on="query_id", how="left")
    table["judge_error"] = table["judge_error"].astype(object).where(table["judge_error"].notna(), None)
    record["judge"] = judge_record(table, judged, agreement)
    return table, record


def judge_record(table: pd.DataFrame, judged: Any, agreement: Any = None) -> dict[str, Any]:
    """The card's record of a judge's verdicts on the answers of ``table`` (with :data:`JUDGE_COLUMNS`): who judged
    on what scale, the share it calls correct with its interval (as the grades'), the counts, and ``agreement``
    (an :class:`~rag_eval.statistics.grader_agreement.AnswerAgreement` of the same judge) summarised: Cohen's kappa
    against the reference-based verdict with its interval, n, the method, the queries left out and where the two
    disagree."""
    correct = table["judge_correct"].to_numpy(dtype=np.float64)[:, None]
    stats = summarize_values(correct, resamples=RESAMPLES, confidence=CONFIDENCE, seed=SEED)
    low, high = judged.scale
    record: dict[str, Any] = {
        "judge": judged.judge,
        "fingerprint": judged.fingerprint,
        "scale": [int(low), int(high)],
        "correct_at": int(judged.correct_at),
        "correct": {
            "metric": "judge.correct",
            "mean": _number(stats["mean"][0]),
            "ci_low": _number(stats["ci_low"][0]),
            "ci_high": _number(stats["ci_high"][0]),
            "n": int(stats["n"][0]),
            "n_failed": int(stats["n_nan"][0]),
        },
        "judged": int(np.isfinite(correct).sum()),
        "failed": int(judged.failed),
        "unanswered": len(judged.unanswered),
        "calls": int(judged.calls),
        "from_log": int(judged.from_log),
        "agreement": None,
    }
    if agreement is None:
        return record
    if agreement.judge != judged.judge:
        raise InputError(f"the agreement is of judge {agreement.judge!r}, the verdicts of {judged.judge!r}")
    found = agreement.to_dict()
    frame = agreement.frame[agreement.frame["paired"]]
    differ = frame["query_id"][(frame["reference"] != frame["judge"]).to_numpy()].astype(str).tolist()
    record["agreement"] = {
        "statistic": "Cohen's kappa",
        "value": found["kappa"],
        "ci_low": found["kappa_low"],
        "ci_high": found["kappa_high"],
        "n": found["n"],
        "method": found["method"],
        "confidence": found["confidence"],
        "rule": found["rule"],
        "observed": found["agreement"].get("observed"),
        "left_out": found["left_out"],
        "disagree": len(differ),
        "disagree_ids": differ[:10],
        "describe": agreement.describe(),
    }
    return record


def answer_values(table: pd.DataFrame, record: Mapping[str, Any], metric: str, *, run: str | None = None) -> pd.Series:
    """One grade per query of an answer ``table``, indexed by query id and named by the rule name (NaN where the
    answer failed or was not asked); ``run``: whose, when the table holds several runs' (its ``run`` column)."""
    import pandas as pd

    name = answer_metric(metric)
    if name is None:
        raise InputError(f"{metric!r} is not an answer grade (one of {sorted(ANSWER_RULES)})")
    runs = table["run"].unique().tolist() if "run" in table.columns else [record["run"]]
    if run is None and len(runs) > 1:
        raise InputError(f"the report carries the answers of several runs ({runs}): name one (run=...)")
    if run is not None and run not in runs:
        raise InputError(f"no answers of run {run!r} in the report (answered: {runs})")
    if "run" in table.columns:
        table = table[(table["run"] == (run or runs[0])).to_numpy()]
    column = ANSWER_RULES[name]
    return pd.Series(table[column].to_numpy(dtype=np.float64), index=pd.Index(table["query_id"].astype(str)), name=name)


def record_lines(record: Mapping[str, Any]) -> list[str]:
    """The answers in words, a line each (the card's and report.md's): who answered what, the counts, the grades
    with their intervals."""
    where = record["run"] + (f" / {record['stage']}" if record.get("stage") else "")
    grades = "; ".join(f"{s['metric']} {_ci(s)} (n {s['n']})" for s in record["summary"])
    return [
        f"generator {record['generator']!r} (fingerprint {record['fingerprint']}) on the delivered context of {where}",
        f"{record['queries']} queries: {record['answered']} answered, {record['failed']} failed, {record['skipped']} "
        f"not asked (retrieval failed); {record['calls']} generator calls, {record['cache_hits']} from the cache; "
        f"references {record['references']}",
        f"{grades}; {record['interval']}; a failed answer is left out and counted, never graded wrong",
        *judge_lines(record.get("judge")),
    ]


def judge_lines(judge: Mapping[str, Any] | None) -> list[str]:
    """A judge's verdicts in words, a line each (none without a judge): who judged, the share called correct
    with its interval and the counts; its agreement with the reference-based verdict, once."""
    if not judge:
        return []
    lines = [
        f"judge {judge['judge']!r} (fingerprint {judge['fingerprint']}) graded the answers {_judge_rule(judge)}: "
        f"correct {_ci(judge['correct'])} (n {judge['judged']}); it failed on {judge['failed']}, "
        f"{judge['unanswered']} had no answer; {judge['calls']} judge calls, {judge['from_log']} verdicts from its log"
    ]
    agreement = judge.get("agreement")
    lines.append(agreement["describe"] if agreement else "no agreement with the reference-based grade measured")
    return lines


def _judge_rule(judge: Mapping[str, Any]) -> str:
    low, high = judge["scale"]
    return f"on {low}-{high}, correct at {judge['correct_at']}"


def record_markdown(
    record: Mapping[str, Any], *, level: int = 2, file: str | None = None, title: str = "Answers"
) -> list[str]:
    """The answers as Markdown lines (report.md's Answers section, a notebook's): who answered from what, the
    counts, each grade with its interval, the predictor table when computed, the prompt, and where the per-query
    ``file`` is."""
    lines = ["#" * level + f" {markdown_cell(title)}", ""]
    lines += [f"- {markdown_cell(line)}" for line in record_lines(record)[:2]]
    lines += ["", "| grade | mean [95% CI] | n | failed |", "|---|---:|---:|---:|"]
    for row in record["summary"]:
        shown = shown_interval(row["mean"], row["ci_low"], row["ci_high"])
        words = GRADE_WORDS.get(row["metric"], row["metric"])
        lines.append(f"| {words} (`{row['metric']}`) | {shown} | {row['n']} | {row['n_failed']} |")
    judge = record.get("judge")
    if judge:
        c = judge["correct"]
        words = markdown_cell(f"judge {judge['judge']!r} says correct ({_judge_rule(judge)})")
        shown = shown_interval(c["mean"], c["ci_low"], c["ci_high"])
        lines.append(f"| {words} (`judge.correct`) | {shown} | {c['n']} | {c['n_failed']} |")
    lines += ["", f"Intervals: {record['interval']}. A failed answer is left out and counted, never graded wrong.", ""]
    if judge:
        lines += [f"- {markdown_cell(line)}" for line in judge_lines(judge)]
        agreement = judge.get("agreement")
        if agreement and agreement["disagree"]:
            shown_ids = ", ".join(markdown_cell(q) for q in agreement["disagree_ids"])
            more = agreement["disagree"] - len(agreement["disagree_ids"])
            lines.append(
                f"- the judge and the reference disagree on {agreement['disagree']} answers: {shown_ids}"
                + (f" and {more} more" if more > 0 else "")
                + (f"; per query: the `judge_grade` column of `{file}`" if file else "")
            )
        lines.append("")
    found = record.get("predictors")
    if found:
        lines += [
            "Which retrieval number predicts the answers:",
            "",
            "| predictor | n | correct | Spearman rho (F1) [95% CI] | AUC (correct) [95% CI] |",
            "|---|---:|---:|---|---|",
        ]
        for r in found["table"]:
            rho = shown_interval(r["spearman"], r["spearman_low"], r["spearman_high"])
            auc = shown_interval(r["auc"], r["auc_low"], r["auc_high"])
            lines.append(f"| {markdown_cell(r['predictor'])} | {r['n']} | {r['n_correct']} | {rho} | {auc} |")
        lines += ["", markdown_cell(found["describe"]), ""]
    lines += ["The prompt:", "", markdown_code(record["prompt"])]
    lines += [f"Per query: `{file}`.", ""] if file else [""]
    return lines


def record_html(record: Mapping[str, Any], *, title: str = "Answers") -> str:
    """The answers as HTML (a Report in a notebook): the lines of :func:`record_lines` and each grade with its
    interval, every text escaped."""
    import html

    judge = judge_lines(record.get("judge"))
    lines = "".join(f"<li>{html.escape(line)}</li>" for line in [*record_lines(record)[:2], *judge])
    rows = "".join(
        f"<tr><td>{html.escape(GRADE_WORDS.get(g['metric'], g['metric']))} <code>{html.escape(g['metric'])}</code></td>"
        f"<td>{shown_interval(g['mean'], g['ci_low'], g['ci_high'])}</td><td>{g['n']}</td><td>{g['n_failed']}</td></tr>"
        for g in record["summary"]
    )
    return (
        f"<p><strong>{html.escape(title)}</strong></p><ul>{lines}</ul><table><thead><tr><th>grade</th>"
        f"<th>mean [95% CI]</th><th>n</th><th>failed</th></tr></thead><tbody>{rows}</tbody></table>"
        f"<p>{html.escape(record['interval'])}</p>"
    )


def shown_interval(value: float | None, low: float | None, high: float | None) -> str:
    """``0.512 [0.431, 0.590]``; the value alone without an interval; n/a without a value (None)."""
    if value is None:
        return "n/a"
    return f"{value:.3f}" if low is None or high is None else f"{value:.3f} [{low:.3f}, {high:.3f}]"


def _ci(row: Mapping[str, Any]) -> str:
    mean, low, high = row["mean"], row["ci_low"], row["ci_high"]
    if mean is None:
        return "n/a"
    return f"{mean:.3f}" if low is None else f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def _number(value: float) -> float | None:
    return None if not math.isfinite(float(value)) else float(value)


def _plain(value: Any) -> Any:
    """A JSON value: NaN as None, NumPy scalars as Python's."""
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _number(float(value))
    return value
