"""How far a judge's verdicts on answers agree with the reference-based grade of the same answers.

The judge's verdicts (:func:`rag_eval.ground_truth.answer_judge.judge_answers`: correct when its grade is at least
its ``correct_at``) and the reference-based grades (:class:`~rag_eval.metrics.answers.AnswerGrades`: exact match,
containment, or token F1 at least ``correct_at``, the rule named in every verdict) are joined by query id; the
queries of one side only, those without an answer and those the judge failed on are counted and said, never
dropped silently. On the queries both graded: the judges feature's agreement
(:func:`~rag_eval.ground_truth.agreement.judge_agreement` on the scale 0-1, the reference as the rater of record:
n, the share of equal verdicts, Cohen's kappa, the confusion matrix, the judge's precision and recall of
"correct") and a percentile bootstrap interval for kappa (the queries resampled, a seeded ``[resamples, n]``
matrix of indices, every resample's kappa at once; a resample where kappa is undefined is counted and left out;
fewer than the bootstrap's minimum n, none). See docs/answers.md, "A judge as grader".
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import check_choice, check_int
from ..data.joins import user_stacklevel
from ..errors import InputError, LowAgreement, LowJoinMatch
from ..ground_truth.agreement import LOW_KAPPA, JudgeAgreement, judge_agreement
from ..metrics.answers import AnswerGrades
from ..reports.summary import chunk_rows
from .paired import method_label, min_n

if TYPE_CHECKING:
    import pandas as pd

    from ..ground_truth.answer_judge import JudgedAnswers

__all__ = ["LEFT_OUT", "REFERENCE_GRADES", "AnswerAgreement", "answer_agreement", "kappa_rows", "reference_rule"]

#: the reference-based grades a judge's verdict can be set against
REFERENCE_GRADES = ("exact_match", "f1", "contains")
CORRECT_AT = 0.5  # the F1 at which an answer counts as correct (as rag_eval.statistics.answer_prediction's)
METHOD = "bootstrap"
#: why a query is not paired, in the order each is decided
LEFT_OUT = ("reference only", "judge only", "no answer", "judge failed", "no verdict")


def reference_rule(against: str, correct_at: float) -> str:
    """The reference-based verdict in words: ``exact match``, ``contains a reference``, ``F1 >= 0.5``."""
    return {"exact_match": "exact match", "contains": "contains a reference"}.get(against, f"F1 >= {correct_at:g}")


def kappa_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Cohen's kappa of each row of two 0/1 matrices ``[resamples, n]`` (rater one's verdicts, rater two's):
    ``(p_o - p_e) / (1 - p_e)``; NaN where the agreement expected by chance is 1 (both raters constant alike)."""
    x, y = np.asarray(x, dtype=bool), np.asarray(y, dtype=bool)
    observed = (x == y).mean(axis=1)
    px, py = x.mean(axis=1), y.mean(axis=1)
    chance = px * py + (1 - px) * (1 - py)
    spread = 1 - chance
    out: np.ndarray = np.where(spread > 1e-15, (observed - chance) / np.where(spread > 1e-15, spread, 1.0), np.nan)
    return out


@dataclass(frozen=True, eq=False)
class AnswerAgreement:
    """What :func:`answer_agreement` returns. ``agreement``: the judges feature's numbers on the ``n`` queries both
    graded (its people are the reference-based grade); ``kappa_low``/``kappa_high``: the interval (NaN below the
    method's minimum n, or when kappa is undefined); ``left_out``: the queries not paired, by why; ``frame``: one
    row per query of either side (``query_id, reference, judge, paired, why``)."""

    judge: str
    against: str
    correct_at: float
    agreement: JudgeAgreement
    kappa_low: float
    kappa_high: float
    undefined_resamples: int
    confidence: float
    resamples: int
    seed: int
    left_out: dict[str, int]
    frame: pd.DataFrame

    @property
    def n(self) -> int:
        return self.agreement.n

    @property
    def kappa(self) -> float | None:
        return self.agreement.kappa

    @property
    def rule(self) -> str:
        return reference_rule(self.against, self.correct_at)

    def describe(self) -> str:
        """What the agreement rests on, in two sentences."""
        a = self.agreement
        left = ", ".join(f"{v} {k}" for k, v in self.left_out.items() if v) or "none"
        if a.kappa is None:
            kappa = f"kappa undefined ({a.reasons.get('kappa', 'no item')})"
        elif math.isnan(self.kappa_low):
            kappa = f"kappa {a.kappa:.3f} (no interval: {self._no_interval()})"
        else:
            kappa = f"kappa {a.kappa:.3f} [{self.kappa_low:.3f}, {self.kappa_high:.3f}]"
        same = "" if a.observed is None else f"same verdict {a.observed:.1%}, "
        return (
            f"judge {self.judge!r} against the reference ({self.rule}) on {a.n} answers both graded: {same}{kappa}"
            f"{' (low: its verdicts should not stand in for the reference)' if a.low else ''}. "
            f"{self.confidence:.0%} interval: percentile {method_label(METHOD)}, {self.resamples} resamples of the "
            f"queries, seed {self.seed}"
            + (f", {self.undefined_resamples} with kappa undefined left out" if self.undefined_resamples else "")
            + f"; left out: {left}"
        )

    def _no_interval(self) -> str:
        need = min_n(METHOD)
        return f"{self.n} answers, fewer than {need}" if self.n < need else "every resample's kappa undefined"

    def to_dict(self) -> dict[str, Any]:
        """Every number, JSON-able (None where undefined, never NaN)."""

        def fin(v: float) -> float | None:
            return None if math.isnan(v) else v

        return {
            "judge": self.judge,
            "against": self.against,
            "rule": self.rule,
            "correct_at": self.correct_at,
            "n": self.n,
            "kappa": self.kappa,
            "kappa_low": fin(self.kappa_low),
            "kappa_high": fin(self.kappa_high),
            "method": method_label(METHOD),
            "confidence": self.confidence,
            "resamples": self.resamples,
            "seed": self.seed,
            "undefined_resamples": self.undefined_resamples,
            "left_out": dict(self.left_out),
            "agreement": self.agreement.to_dict(),
        }

    def __str__(self) -> str:
        return self.describe()


def _verdicts(grades: AnswerGrades, against: str, correct_at: float) -> np.ndarray:
    values = np.asarray(getattr(grades, against), dtype=np.float64)
    if against == "f1":
        return np.where(np.isnan(values), np.nan, (values >= correct_at).astype(np.float64))
    return values


def answer_agreement(
    judged: JudgedAnswers,
    grades: AnswerGrades,
    *,
    against: str = "f1",
    correct_at: float = CORRECT_AT,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    warn_below: float = LOW_KAPPA,
    warn: bool = True,
) -> AnswerAgreement:
    """The agreement of ``judged``'s verdicts with ``grades``' reference-based verdict ``against`` (``"f1"``: F1 at
    least ``correct_at``; ``"exact_match"``; ``"contains"``) on the queries both graded (see the module's doc).
    Queries of one side only are announced once (:class:`~rag_eval.errors.LowJoinMatch`); no query in common is an
    :class:`~rag_eval.errors.InputError`. ``warn``: a kappa below ``warn_below`` warns
    (:class:`~rag_eval.errors.LowAgreement`), as the judges feature's agreement does. Krippendorff's alpha needs
    the ``judges`` extra."""
    import pandas as pd

    check_choice(against, "against", REFERENCE_GRADES)
    if isinstance(correct_at, bool) or not isinstance(correct_at, (int, float)) or not 0 <= correct_at <= 1:
        raise InputError(f"correct_at {correct_at!r}: expected an F1 between 0 and 1")
    if isinstance(confidence, bool) or not isinstance(confidence, float) or not 0 < confidence < 1:
        raise InputError(f"confidence {confidence!r}: expected a number between 0 and 1")
    resamples = check_int(resamples, "resamples", low=1, high=None)
    theirs, mine = pd.Index(grades.query_ids, dtype=object), pd.Index(judged.query_ids, dtype=object)
    reference = pd.Series(_verdicts(grades, against, float(correct_at)), index=theirs)
    frame = pd.concat({"reference": reference, "judge": pd.Series(judged.correct, index=mine)}, axis=1, sort=False)
    frame.index.name = "query_id"
    keys = frame.index  # whole columns (hashed look-ups), no Python call per query
    graded, judged_here = keys.isin(theirs), keys.isin(mine)
    why = np.select(
        [
            ~judged_here,
            ~graded,
            frame["reference"].isna().to_numpy(),  # the answer failed (or is missing): no grade on either side
            keys.isin(list(judged.errors)),
            frame["judge"].isna().to_numpy(),  # graded by the reference, but not given to the judge
        ],
        list(LEFT_OUT),
        default="",
    )
    frame["paired"] = why == ""
    frame["why"] = why
    frame = frame.reset_index()
    left_out = {k: int(np.sum(why == k)) for k in LEFT_OUT}
    only_graded, only_judged = int((~judged_here).sum()), int((~graded).sum())
    if only_graded or only_judged:
        first = keys[~judged_here | ~graded][0]
        warnings.warn(
            f"judge {judged.judge!r}'s verdicts and the reference-based grades: {only_judged} of {len(mine)} judged "
            f"queries have no reference-based grade and {only_graded} of {len(theirs)} graded queries have no "
            f"verdict (e.g. {first!r}); they are left out of the agreement",
            LowJoinMatch,
            stacklevel=user_stacklevel(),
        )
    paired = frame[frame["paired"]]
    if paired.empty:
        raise InputError(
            f"judge {judged.judge!r} and the reference-based grades have no answer both graded (left out: "
            f"{', '.join(f'{v} {k}' for k, v in left_out.items() if v) or 'none'})",
            source="answer_agreement",
        )
    x = paired["reference"].to_numpy(dtype=np.int64)
    y = paired["judge"].to_numpy(dtype=np.int64)
    ids = paired["query_id"].tolist()
    result = judge_agreement(
        {q: {"answer": int(v)} for q, v in zip(ids, x.tolist(), strict=True)},
        {q: {"answer": int(v)} for q, v in zip(ids, y.tolist(), strict=True)},
        scale=(0, 1),
        threshold=1,
        warn_below=warn_below,
        warn=False,  # said below, of the reference rather than of people
        names=(f"the reference ({reference_rule(against, float(correct_at))})", judged.judge),
    )
    if warn and result.low:
        said = "cannot be measured" if result.kappa is None else f"is {result.kappa:.3f}, below {warn_below:g}"
        warnings.warn(
            f"the kappa of judge {judged.judge!r} against the reference ({reference_rule(against, correct_at)}) on "
            f"{result.n} answers {said}: its verdicts should not stand in for the reference-based grade",
            LowAgreement,
            stacklevel=user_stacklevel(),
        )
    low = high = math.nan
    undefined = 0
    if len(x) >= min_n(METHOD) and result.kappa is not None:
        kappas = _bootstrap(x, y, resamples=resamples, seed=seed)
        defined = kappas[~np.isnan(kappas)]
        undefined = len(kappas) - len(defined)
        if len(defined):
            alpha = 1 - confidence
            low, high = (float(v) for v in np.quantile(defined, [alpha / 2, 1 - alpha / 2]))
    return AnswerAgreement(
        judge=judged.judge,
        against=against,
        correct_at=float(correct_at),
        agreement=result,
        kappa_low=low,
        kappa_high=high,
        undefined_resamples=undefined,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        left_out=left_out,
        frame=frame,
    )


def _bootstrap(x: np.ndarray, y: np.ndarray, *, resamples: int, seed: int) -> np.ndarray:
    """Kappa on ``resamples`` resamples of the paired queries, a block of rows at a time (O(block x n) memory)."""
    n = len(x)
    rng = np.random.default_rng(seed)
    out = np.empty(resamples)
    step = chunk_rows(n, resamples)
    for start in range(0, resamples, step):
        b = min(step, resamples - start)
        idx = rng.integers(0, n, size=(b, n))
        out[start : start + b] = kappa_rows(x[idx], y[idx])
    return out
