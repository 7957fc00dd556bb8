"""What the context did to the answers: accuracy and F1 per context condition, paired differences by query, and the
split of the answer gap between retrieval and noise.

The conditions are those of :func:`rag_eval.stages.contexts.build_contexts`. The **gap** is ``A(oracle) -
A(delivered)``, A being mean accuracy (or mean F1) over the queries graded in all of ``oracle``, ``delivered`` and
``delivered relevant``. It splits exactly into

- **retrieval** = ``A(oracle) - A(delivered relevant)``: what the relevant chunks the pipeline did not deliver
  cost (``delivered relevant`` holds the delivered chunks judged relevant, a subset of the oracle's);
- **noise** = ``A(delivered relevant) - A(delivered)``: what the delivered chunks not judged relevant (irrelevant
  or unjudged) cost, the relevant ones being the same.

``gap = retrieval + noise`` holds per query and so in every bootstrap resample (the three share one resample of the
queries). Caveats: order differs (the oracle's is by grade, the others' the pipeline's), and a share can be
negative (irrelevant chunks that help, a missing relevant chunk the generator did better without). Every interval
is a percentile bootstrap over queries (min n 10, below which none is given); see docs/answers-analysis.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from .answer_prediction import CORRECT_AT, EFFECT_COLUMNS, correct_column, correct_rule
from .paired import all_equal, method_label, min_n, paired_bootstrap_means, warn_degenerate

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ConditionEffects", "condition_effects"]

ORACLE, DELIVERED, DELIVERED_RELEVANT = "oracle", "delivered", "delivered relevant"
METHOD = "bootstrap"


@dataclass(frozen=True, eq=False)
class ConditionEffects:
    """What :func:`condition_effects` returns.

    - ``conditions``: per condition ``condition, n, n_failed, accuracy, accuracy_low, accuracy_high, f1, f1_low,
      f1_high`` (``n``: graded answers; ``n_failed``: failed calls, left out);
    - ``differences``: per condition against ``baseline``, paired by query: ``condition, baseline, n, n_left_out,
      accuracy_diff, accuracy_low, accuracy_high, f1_diff, f1_low, f1_high``;
    - ``gap``: rows ``gap, retrieval, noise`` for ``accuracy`` and ``f1`` with intervals, on ``gap_n`` queries
      (None when a condition of the split is absent)."""

    conditions: pd.DataFrame
    differences: pd.DataFrame
    gap: pd.DataFrame | None
    gap_n: int
    baseline: str
    correct_at: float | None
    resamples: int
    confidence: float
    seed: int

    def describe(self) -> str:
        return (
            f"{correct_rule(self.correct_at)}; {self.confidence:.0%} intervals: percentile "
            f"{method_label(METHOD)}, {self.resamples} resamples of the queries, seed {self.seed}; differences "
            f"paired by query against {self.baseline!r}"
        )

    def to_markdown(self, digits: int = 3) -> str:
        def ci(v: float, lo: float, hi: float) -> str:
            if np.isnan(v):
                return "n/a"
            return f"{v:.{digits}f}" + ("" if np.isnan(lo) else f" [{lo:.{digits}f}, {hi:.{digits}f}]")

        out = ["| condition | n | failed | accuracy | F1 |", "|---|---:|---:|---|---|"]
        for r in self.conditions.to_dict("records"):
            acc, f1 = ci(r["accuracy"], r["accuracy_low"], r["accuracy_high"]), ci(r["f1"], r["f1_low"], r["f1_high"])
            out.append(f"| {r['condition']} | {r['n']} | {r['n_failed']} | {acc} | {f1} |")
        out += ["", f"| condition - {self.baseline} | paired n | left out | accuracy | F1 |", "|---|---:|---:|---|---|"]
        for r in self.differences.to_dict("records"):
            acc = ci(r["accuracy_diff"], r["accuracy_low"], r["accuracy_high"])
            f1 = ci(r["f1_diff"], r["f1_low"], r["f1_high"])
            out.append(f"| {r['condition']} | {r['n']} | {r['n_left_out']} | {acc} | {f1} |")
        if self.gap is not None:
            out += ["", f"| answer gap (n {self.gap_n}) | accuracy | F1 |", "|---|---|---|"]
            for r in self.gap.to_dict("records"):
                acc, f1 = (
                    ci(r["accuracy"], r["accuracy_low"], r["accuracy_high"]),
                    ci(r["f1"], r["f1_low"], r["f1_high"]),
                )
                out.append(f"| {r['part']} | {acc} | {f1} |")
        return "\n".join(out) + "\n\n" + self.describe() + "\n"


def _interval(
    values: np.ndarray, resamples: int, confidence: float, seed: int, flat: list[str] | None = None, name: str = ""
) -> tuple[float, float, float]:
    """mean, and its percentile bootstrap interval (NaN below the minimum n); ``name`` is added to ``flat`` when
    every value is the same (an interval of zero width: no spread, not certainty)."""
    if len(values) == 0:
        return float("nan"), float("nan"), float("nan")
    mean = float(values.mean())
    if len(values) < min_n(METHOD):
        return mean, float("nan"), float("nan")
    if flat is not None and all_equal(values):
        flat.append(name)
    means = paired_bootstrap_means(values, resamples=resamples, seed=seed)
    alpha = 1 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return mean, float(low), float(high)


def condition_effects(
    answers: pd.DataFrame,
    *,
    baseline: str = DELIVERED,
    correct_at: float | None = CORRECT_AT,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> ConditionEffects:
    """Accuracy and F1 per condition of ``answers`` (``query_id, condition, f1``, as
    :func:`rag_eval.stages.contexts.answer_contexts` returns; correct: F1 >= ``correct_at``, or with None the
    table's ``correct`` column), each condition's paired difference from ``baseline`` and the gap split (see the
    module's doc)."""
    import pandas as pd

    for column in ("query_id", "condition", "f1"):
        if column not in answers.columns:
            raise InputError(f"answer table: missing column {column!r}")
    if answers.duplicated(["query_id", "condition"]).any():
        row = answers[answers.duplicated(["query_id", "condition"])].iloc[0]
        raise InputError(f"answer table: query {row['query_id']!r} has two answers in condition {row['condition']!r}")
    graded = answers[["query_id", "condition", "f1"]].assign(correct=correct_column(answers, correct_at))
    wide = graded.pivot(index="query_id", columns="condition", values="f1")
    right = graded.pivot(index="query_id", columns="condition", values="correct")
    present = answers.pivot(index="query_id", columns="condition", values="condition").notna()
    names = list(dict.fromkeys(answers["condition"].tolist()))
    flat: list[str] = []
    if baseline not in names:
        raise InputError(f"no condition {baseline!r} (the baseline) in the answer table; conditions: {names}")
    rows = []
    for name in names:
        f1 = wide[name].to_numpy(dtype=np.float64)
        asked = present[name].to_numpy()
        ok = asked & ~np.isnan(f1)
        values = f1[ok]
        acc = _interval(
            right[name].to_numpy(dtype=np.float64)[ok], resamples, confidence, seed, flat, f"{name} accuracy"
        )
        f = _interval(values, resamples, confidence, seed, flat, f"{name} F1")
        rows.append((name, int(ok.sum()), int((asked & np.isnan(f1)).sum()), *acc, *f))
    conditions = pd.DataFrame(
        rows,
        columns=list(EFFECT_COLUMNS),
    )
    base = wide[baseline].to_numpy(dtype=np.float64)
    base_right = right[baseline].to_numpy(dtype=np.float64)
    diffs = []
    for name in names:
        if name == baseline:
            continue
        other = wide[name].to_numpy(dtype=np.float64)
        either = present[name].to_numpy() | present[baseline].to_numpy()
        both = ~np.isnan(other) & ~np.isnan(base)
        d_f1 = other[both] - base[both]
        d_acc = right[name].to_numpy(dtype=np.float64)[both] - base_right[both]
        acc = _interval(d_acc, resamples, confidence, seed, flat, f"{name} - {baseline} accuracy")
        f = _interval(d_f1, resamples, confidence, seed, flat, f"{name} - {baseline} F1")
        diffs.append((name, baseline, int(both.sum()), int((either & ~both).sum()), *acc, *f))
    differences = pd.DataFrame(
        diffs,
        columns=[
            "condition",
            "baseline",
            "n",
            "n_left_out",
            "accuracy_diff",
            "accuracy_low",
            "accuracy_high",
            "f1_diff",
            "f1_low",
            "f1_high",
        ],
    )
    gap, gap_n = _gap(wide, right, names, resamples, confidence, seed)
    if flat:
        shown = ", ".join(flat[:5]) + (f" and {len(flat) - 5} more" if len(flat) > 5 else "")
        warn_degenerate(f"{len(flat)} interval(s) of the answer conditions ({shown})")
    return ConditionEffects(conditions, differences, gap, gap_n, baseline, correct_at, resamples, confidence, seed)


def _gap(
    wide: pd.DataFrame, right: pd.DataFrame, names: list[str], resamples: int, confidence: float, seed: int
) -> tuple[pd.DataFrame | None, int]:
    """The gap split (module doc) over the queries graded in all three conditions: F1 from ``wide``, correctness
    from ``right``."""
    import pandas as pd

    parts_of = (ORACLE, DELIVERED, DELIVERED_RELEVANT)
    if not all(c in names for c in parts_of):
        return None, 0
    o, d, r = (wide[c].to_numpy(dtype=np.float64) for c in parts_of)
    co, cd, cr = (right[c].to_numpy(dtype=np.float64) for c in parts_of)
    keep = ~(np.isnan(o) | np.isnan(d) | np.isnan(r))
    rows = []
    parts = {"gap": ((o, co), (d, cd)), "retrieval": ((o, co), (r, cr)), "noise": ((r, cr), (d, cd))}
    for part, ((f_hi, c_hi), (f_lo, c_lo)) in parts.items():
        acc = _interval(c_hi[keep] - c_lo[keep], resamples, confidence, seed)
        f = _interval(f_hi[keep] - f_lo[keep], resamples, confidence, seed)
        rows.append((part, *acc, *f))
    table = pd.DataFrame(rows, columns=["part", "accuracy", "accuracy_low", "accuracy_high", "f1", "f1_low", "f1_high"])
    return table, int(keep.sum())
