"""Does retrieval predict the answer? Per query, how well each retrieval number ranks the answers' quality.

For each retrieval metric of a Report (recall, precision, hit, nDCG, MRR at each cutoff, and any other per-query
number given, such as answer-span containment from a projection), against a table of graded answers
(``query_id, condition, answer, em, f1, correct``):

- **Spearman's rho** between the metric and the answer's token F1 (average ranks for ties; NaN where either side
  is constant);
- **ROC AUC** of the metric for "the answer is correct" (``correct``, by default F1 >= 0.5): the chance that a
  correctly answered query, drawn at random, has a higher metric value than an incorrectly answered one, ties
  counting one half (Mann-Whitney U / (n1 n0)); NaN when every query is correct or every one is not;

each with a percentile bootstrap interval over queries: the same seeded ``[resamples, n]`` matrix of query indices
for every metric, the ranks of all resamples taken at once (``scipy.stats.rankdata(axis=1)``), no Python loop per
resample. A resample where the statistic is undefined (a constant side, one class only) is left out of the
percentiles and counted. Fewer than :data:`~rag_eval.statistics.paired.MIN_N` ``["bootstrap"]`` (10) queries:
refused. The budget curve is the accuracy (and F1) of answers given the top k chunks, for each k, with intervals.
See docs/answers-analysis.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .._checks import check_choice
from ..errors import InputError
from ..metrics.grammar import parse_metric
from ..reports.summary import chunk_rows
from .paired import all_equal, method_label, min_n, paired_bootstrap_ci, warn_degenerate

if TYPE_CHECKING:
    import pandas as pd

    from ..reports.report import Report

__all__ = [
    "ANSWER_COLUMNS",
    "PREDICTOR_FAMILIES",
    "AnswerPrediction",
    "answer_predictors",
    "auc_rows",
    "budget_curve",
    "correct_column",
    "correct_of",
    "spearman_rows",
]

#: the columns of an answer table (one row per query and condition)
ANSWER_COLUMNS = ("query_id", "condition", "answer", "em", "f1", "correct")
#: the metric families read from a Report by default
PREDICTOR_FAMILIES = ("recall", "precision", "hit", "ndcg", "mrr")
#: an answer is correct when its token F1 is at least this (Rajpurkar et al. grade F1; 0.5 is the usual cut)
#: the columns of a table of answers per condition (condition_effects; budget_curve adds k first)
EFFECT_COLUMNS = ("condition", "n", "n_failed", "accuracy", "accuracy_low", "accuracy_high", "f1", "f1_low", "f1_high")
CORRECT_AT = 0.5
METHOD = "bootstrap"


def correct_of(f1: np.ndarray, *, correct_at: float = CORRECT_AT) -> np.ndarray:
    """1.0 where ``f1 >= correct_at``, 0.0 below, NaN where F1 is NaN (a failed answer)."""
    f1 = np.asarray(f1, dtype=np.float64)
    return np.where(np.isnan(f1), np.nan, (f1 >= correct_at).astype(np.float64))


def correct_column(answers: pd.DataFrame, correct_at: float | None) -> np.ndarray:
    """Each row's correctness as 1.0, 0.0 or NaN (a failed answer: F1 NaN): ``f1 >= correct_at``, or, with
    ``correct_at=None``, the table's own ``correct`` column (another grade, e.g. a judge's: True/False or 1/0)."""
    f1 = answers["f1"].to_numpy(dtype=np.float64)
    if correct_at is not None:
        if isinstance(correct_at, bool) or not 0 <= correct_at <= 1:
            raise InputError(f"correct_at {correct_at!r}: expected an F1 between 0 and 1, or None")
        return correct_of(f1, correct_at=correct_at)
    if "correct" not in answers.columns:
        raise InputError("correct_at=None reads the answer table's 'correct' column, and it has none")
    try:
        given = answers["correct"].astype("float64").to_numpy()
    except (TypeError, ValueError):
        raise InputError("answer table: column 'correct' holds a value that is not True, False, 1, 0 or NaN") from None
    if np.any(~np.isnan(given) & (given != 0) & (given != 1)):
        raise InputError("answer table: column 'correct' holds a number other than 0 and 1")
    lacking = np.isnan(given) & ~np.isnan(f1)
    if lacking.any():
        row = answers.iloc[int(np.flatnonzero(lacking)[0])]
        raise InputError(
            f"answer table: {int(lacking.sum())} graded answer(s) without a 'correct' value, e.g. query "
            f"{row['query_id']!r} in condition {row['condition']!r}"
        )
    out: np.ndarray = np.where(np.isnan(f1), np.nan, given)
    return out


def correct_rule(correct_at: float | None) -> str:
    """How correctness was decided, in words."""
    return "correct as the table's 'correct' column says" if correct_at is None else f"correct at F1 >= {correct_at:g}"


# ----- kernels: one statistic per row of a [replicates, n] matrix --------------------------------------------------


def _ranks(values: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    ranks: np.ndarray = rankdata(values, axis=1)  # average ranks for ties, every row at once
    return ranks


def spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row of ``x`` with the same row of ``y`` (both ``[rows, n]``): Pearson's r of their
    average ranks; NaN for a row where either side is constant."""
    return _rho_of_ranks(_ranks(x), _ranks(y))


def _rho_of_ranks(rx: np.ndarray, ry: np.ndarray) -> np.ndarray:
    """Pearson's r of each row of two rank matrices (overwritten: centred in place)."""
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    num = (rx * ry).sum(axis=1)
    den = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        out: np.ndarray = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return out


def auc_rows(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """ROC AUC of each row of ``scores`` for the 0/1 ``labels`` of the same row (both ``[rows, n]``): the
    Mann-Whitney U of the positives' average ranks over ``n1 * n0``; NaN for a row with one class only."""
    return _auc_of_ranks(_ranks(scores), labels)


def _auc_of_ranks(ranks: np.ndarray, labels: np.ndarray) -> np.ndarray:
    positive = labels > 0.5
    n1 = positive.sum(axis=1).astype(np.float64)
    n0 = labels.shape[1] - n1
    u = (ranks * positive).sum(axis=1) - n1 * (n1 + 1) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        out: np.ndarray = np.where(n1 * n0 > 0, u / np.where(n1 * n0 > 0, n1 * n0, 1.0), np.nan)
    return out


def _bootstrap(
    x: np.ndarray, f1: np.ndarray, correct: np.ndarray, *, resamples: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Spearman(x, f1) and AUC(x, correct) on ``resamples`` resamples of the queries (the same index stream for
    every metric, given ``seed`` and n), a block of rows at a time (O(block x n) memory)."""
    n = len(x)
    rng = np.random.default_rng(seed)
    rho = np.empty(resamples)
    auc = np.empty(resamples)
    step = chunk_rows(n, resamples)
    for start in range(0, resamples, step):
        b = min(step, resamples - start)
        idx = rng.integers(0, n, size=(b, n))
        rx = _ranks(x[idx])  # ranked once for both statistics (AUC first: rho centres its ranks in place)
        auc[start : start + b] = _auc_of_ranks(rx, correct[idx])
        rho[start : start + b] = _rho_of_ranks(rx, _ranks(f1[idx]))
    return rho, auc


def _percentiles(values: np.ndarray, confidence: float) -> tuple[float, float, int]:
    """The percentile interval of the defined replicates, and how many were undefined (NaN)."""
    defined = values[~np.isnan(values)]
    if len(defined) == 0:
        return float("nan"), float("nan"), len(values)
    alpha = 1 - confidence
    low, high = np.quantile(defined, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high), len(values) - len(defined)


# ----- the predictor table -----------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class AnswerPrediction:
    """What :func:`answer_predictors` returns. ``table``: one row per predictor, best first (by ``ranked_by``):
    ``predictor, n, n_nan, n_correct, spearman, spearman_low, spearman_high, auc, auc_low, auc_high,
    undefined_resamples, note``. ``n``: queries with an answer graded and a metric value; ``n_nan``: queries whose
    metric is NaN (0/0); ``left_out``: queries of the run without a graded answer (``no answer``) and answers
    without the run's query (``not in the report``)."""

    table: pd.DataFrame
    condition: str
    correct_at: float | None
    method: str
    resamples: int
    confidence: float
    seed: int
    ranked_by: str
    left_out: Mapping[str, int]

    def describe(self) -> str:
        """What the table rests on, in one sentence."""
        left = ", ".join(f"{v} {k}" for k, v in self.left_out.items() if v) or "none"
        return (
            f"answers of condition {self.condition!r}, {correct_rule(self.correct_at)}; "
            f"{self.confidence:.0%} intervals: percentile {method_label(self.method)}, {self.resamples} resamples of "
            f"the queries, seed {self.seed}; ranked by {self.ranked_by}; left out: {left}"
        )

    def to_markdown(self, digits: int = 3) -> str:
        """The table as Markdown, with :meth:`describe` under it."""
        rows = [
            "| predictor | n | NaN | correct | Spearman rho (F1) | AUC (correct) |",
            "|---|---:|---:|---:|---|---|",
        ]
        for r in self.table.to_dict("records"):
            rho = _ci(r["spearman"], r["spearman_low"], r["spearman_high"], digits)
            auc = _ci(r["auc"], r["auc_low"], r["auc_high"], digits)
            rows.append(f"| {r['predictor']} | {r['n']} | {r['n_nan']} | {r['n_correct']} | {rho} | {auc} |")
        return "\n".join(rows) + "\n\n" + self.describe() + "\n"


def _ci(value: float, low: float, high: float, digits: int) -> str:
    if np.isnan(value):
        return "n/a"
    if np.isnan(low):
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _graded(answers: pd.DataFrame, condition: str, correct_at: float | None) -> pd.DataFrame:
    """The rows of ``condition``, indexed by query id, with ``f1`` and ``correct`` (:func:`correct_column`);
    failed answers (F1 NaN) dropped."""
    missing = [c for c in ("query_id", "condition", "f1") if c not in answers.columns]
    if missing:
        raise InputError(f"answer table: missing column(s) {missing}; expected {list(ANSWER_COLUMNS)}")
    rows = answers[answers["condition"] == condition]
    if rows.empty:
        conditions = sorted({str(c) for c in answers["condition"].unique()})
        raise InputError(f"answer table: no row of condition {condition!r}; conditions: {conditions}")
    if rows["query_id"].duplicated().any():
        dup = rows.loc[rows["query_id"].duplicated(), "query_id"].iloc[0]
        raise InputError(f"answer table: query {dup!r} has two answers in condition {condition!r}")
    f1 = rows["f1"].to_numpy(dtype=np.float64)
    if np.any((f1 < 0) | (f1 > 1)):
        raise InputError(f"answer table, condition {condition!r}: an F1 outside [0, 1]")
    import pandas as pd

    frame = pd.DataFrame(
        {"f1": f1, "correct": correct_column(rows, correct_at)},
        index=pd.Index(rows["query_id"].astype(str).to_numpy(), name="query_id"),
    )
    kept: pd.DataFrame = frame[~np.isnan(f1)]
    return kept


def _family(name: str) -> str:
    """A metric's family; a pipeline stage's ``recall@budget``, ``ndcg@depth`` by the name before its ``@``."""
    try:
        return parse_metric(name).family
    except ValueError:
        return name.split("@", 1)[0]


def _report_predictors(
    report: Report, run: str, stage: str | None, metrics: Sequence[str] | None
) -> dict[str, pd.Series]:
    block = report.block(run, stage)
    if metrics is None:
        names = [m for m in block.metrics if _family(m) in PREDICTOR_FAMILIES]
    else:
        names = [str(parse_metric(m)) if m not in block.metrics else m for m in metrics]
    return {name: report.values(run, name, stage) for name in names}


def answer_predictors(
    report: Report | None,
    answers: pd.DataFrame,
    *,
    run: str | None = None,
    stage: str | None = None,
    metrics: Sequence[str] | None = None,
    extra: Mapping[str, pd.Series] | None = None,
    condition: str = "delivered",
    correct_at: float | None = CORRECT_AT,
    ranked_by: str = "auc",
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> AnswerPrediction:
    """Which retrieval number predicts the answers (see the module's doc): every metric of ``report``'s ``run``
    (``stage``; by default the metrics of :data:`PREDICTOR_FAMILIES` it measured, or ``metrics``), and each
    ``extra`` series (``{name: values indexed by query id}``, e.g. a projection's hit@k as answer-span
    containment), against the answers of ``condition`` in ``answers``. Queries are paired by id; a query without
    a graded answer, or an answer without the query, is left out and counted. Raises
    :class:`~rag_eval.errors.InputError` when fewer than the bootstrap's minimum n (10) queries pair; a predictor
    with fewer non-NaN values gets no interval (``note`` says so)."""
    import pandas as pd

    check_choice(ranked_by, "ranked_by", ["auc", "spearman"])
    if not 0 < confidence < 1:
        raise InputError(f"confidence {confidence!r}: expected a number between 0 and 1")
    graded = _graded(answers, condition, correct_at)
    series: dict[str, pd.Series] = {}
    if report is not None:
        if run is None:
            if len(report.runs) != 1:
                raise InputError(f"the report has runs {report.runs}: name the one the answers came from (run=...)")
            run = report.runs[0]
        series.update(_report_predictors(report, run, stage, metrics))
    for name, values in (extra or {}).items():
        if name in series:
            raise InputError(f"extra predictor {name!r} has the name of a report metric")
        series[name] = values
    if not series:
        raise InputError("no predictor: the report measured none of " + ", ".join(PREDICTOR_FAMILIES))
    all_ids = pd.Index([])
    for values in series.values():
        all_ids = all_ids.union(pd.Index(values.index.astype(str)))
    failed = answers[(answers["condition"] == condition) & answers["f1"].isna()]["query_id"].astype(str)
    common = all_ids.intersection(graded.index)
    left_out = {
        "failed answers": int(failed.isin(all_ids).sum()),
        "no answer": len(all_ids.difference(graded.index).difference(pd.Index(failed))),
        "not in the report": len(graded.index.difference(all_ids)),
    }
    need = min_n(METHOD)
    if len(common) < need:
        raise InputError(
            f"{len(common)} queries have both a graded answer of {condition!r} and a retrieval value: the "
            f"bootstrap interval needs at least {need} ({method_label(METHOD)})"
        )
    rows = []
    constant: list[str] = []
    for name, values in series.items():
        values = pd.Series(values.to_numpy(dtype=np.float64), index=values.index.astype(str))
        x_all = values.reindex(common).to_numpy(dtype=np.float64)
        keep = ~np.isnan(x_all)
        x = x_all[keep]
        f1 = graded["f1"].reindex(common).to_numpy()[keep]
        correct = graded["correct"].reindex(common).to_numpy()[keep]
        n = len(x)
        rho = float(spearman_rows(x[None], f1[None])[0]) if n else float("nan")
        auc = float(auc_rows(x[None], correct[None])[0]) if n else float("nan")
        note = ""
        if n < need:
            lo_r = hi_r = lo_a = hi_a = float("nan")
            undefined = 0
            note = f"n {n} < {need}: no interval"
        else:
            rhos, aucs = _bootstrap(x, f1, correct, resamples=resamples, seed=seed)
            lo_r, hi_r, und_r = _percentiles(rhos, confidence)
            lo_a, hi_a, und_a = _percentiles(aucs, confidence)
            undefined = max(und_r, und_a)
            reasons = []
            if all_equal(x):
                constant.append(name)
                reasons.append("the predictor is constant on these queries")
            if np.isnan(rho):
                reasons.append("metric or F1 constant: rho undefined")
            if np.isnan(auc):
                reasons.append("answers all correct or all wrong: AUC undefined")
            if undefined:
                reasons.append(f"{undefined} resample(s) undefined, left out of the percentiles")
            note = "; ".join(reasons)
        rows.append(
            (name, n, int((~keep).sum()), int(correct.sum()), rho, lo_r, hi_r, auc, lo_a, hi_a, undefined, note)
        )
    table = pd.DataFrame(
        rows,
        columns=[
            "predictor",
            "n",
            "n_nan",
            "n_correct",
            "spearman",
            "spearman_low",
            "spearman_high",
            "auc",
            "auc_low",
            "auc_high",
            "undefined_resamples",
            "note",
        ],
    )
    if constant:
        shown = ", ".join(constant[:5]) + (f" and {len(constant) - 5} more" if len(constant) > 5 else "")
        warn_degenerate(f"{len(constant)} predictor(s) of the answers ({shown})")
    other = "spearman" if ranked_by == "auc" else "auc"
    table = table.sort_values([ranked_by, other], ascending=False, na_position="last", kind="stable")
    return AnswerPrediction(
        table=table.reset_index(drop=True),
        condition=condition,
        correct_at=correct_at,
        method=METHOD,
        resamples=resamples,
        confidence=confidence,
        seed=seed,
        ranked_by=ranked_by,
        left_out=left_out,
    )


# ----- accuracy against the budget ---------------------------------------------------------------------------------


def budget_curve(
    answers: pd.DataFrame,
    *,
    ks: Sequence[int] = (1, 2, 3, 5, 10),
    condition: str = "top {k}",
    correct_at: float | None = CORRECT_AT,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Answer accuracy and mean F1 against the budget: for each k, the answers of ``condition.format(k=k)`` (the
    top k chunks of the ranking, see :func:`rag_eval.stages.contexts.build_contexts`), with percentile bootstrap
    intervals (``resamples``, ``seed``; none below n 10). Columns ``k, condition, n, n_failed, accuracy,
    accuracy_low, accuracy_high, f1, f1_low, f1_high``. Each k's queries are its own: compare ks on the queries
    all of them answered with :func:`rag_eval.statistics.answer_conditions.condition_effects`."""
    import pandas as pd

    need = min_n(METHOD)
    rows = []
    for k in ks:
        name = condition.format(k=k)
        part = answers[answers["condition"] == name]
        if part.empty:
            raise InputError(f"answer table: no row of condition {name!r} (the budget curve's k = {k})")
        f1 = part["f1"].to_numpy(dtype=np.float64)
        ok = ~np.isnan(f1)
        f1 = f1[ok]
        correct = correct_column(part, correct_at)[ok]
        n = len(f1)
        if n >= need:
            a_lo, a_hi = paired_bootstrap_ci(correct, resamples=resamples, confidence=confidence, seed=seed)
            f_lo, f_hi = paired_bootstrap_ci(f1, resamples=resamples, confidence=confidence, seed=seed)
        else:
            a_lo = a_hi = f_lo = f_hi = float("nan")
        mean_c = float(correct.mean()) if n else float("nan")
        mean_f = float(f1.mean()) if n else float("nan")
        rows.append((k, name, n, int((~ok).sum()), mean_c, a_lo, a_hi, mean_f, f_lo, f_hi))
    return pd.DataFrame(
        rows,
        columns=["k", *EFFECT_COLUMNS],
    )
