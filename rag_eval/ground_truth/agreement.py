"""How far a model judge's grades can be trusted: its agreement with people, item by item and where it matters,
in the ranking of the systems evaluated.

The measures, their formulas and references, and the warnings: ``docs/agreement.md``."""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._moved import moved_names
from .._optional import install_hint, require
from ..data.qrels import Qrels
from ..errors import InputError, LowAgreement
from .agreement_text import card_lines, items_line, num
from .judgement_log import JudgementLog
from .merging import Merged, merge

if TYPE_CHECKING:
    import pandas as pd


__all__ = [
    "LOW_KAPPA",
    "LOW_TAU",
    "GradeCut",
    "JudgeAgreement",
    "assessor_summary",
    "card_lines",
    "grades_of",
    "judge_agreement",
    "judge_assessors",
    "kappa_of",
    "log_agreement",
]

LOW_KAPPA = 0.4  # quadratic-weighted kappa below which a judge should not stand in for people (Landis & Koch 1977)
LOW_TAU = 0.9  # Kendall's tau below which two rankings of systems are not equivalent (Voorhees 2000)

Grades = Qrels | Merged | Mapping[str, Mapping[str, int]]


@dataclass(frozen=True)
class GradeCut:
    """The judge's precision and recall of "relevant at ``grade``" (grade ``>= grade``) against people's, on the
    items both graded: ``both`` (people and judge say relevant), ``judge_only``, ``people_only``, ``neither``.
    ``precision = both / (both + judge_only)``, ``recall = both / (both + people_only)``; None with a reason when
    the judge (people) graded no item ``>= grade``."""

    grade: int
    both: int
    judge_only: int
    people_only: int
    neither: int
    precision: float | None
    recall: float | None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "grade": self.grade,
            "both": self.both,
            "judge_only": self.judge_only,
            "people_only": self.people_only,
            "neither": self.neither,
            "precision": self.precision,
            "recall": self.recall,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class JudgeAgreement:
    """What :func:`judge_agreement` returns: the agreement of a judge with people on the items both graded (the
    formulas are in the module's doc). Each number is None where it cannot be computed; ``reasons`` maps its name
    (``"kappa"``, ``"weighted_kappa"``, ``"alpha"``, ``"binary_kappa"``) to why."""

    n: int  # items graded by both
    n_human: int  # items people graded (in common or not)
    n_judge: int  # items the judge graded
    scale: tuple[int, int]
    threshold: int  # the lowest relevant grade, for the binary kappa
    observed: float | None  # share of the items given the same grade
    kappa: float | None  # Cohen's kappa, unweighted
    weighted_kappa: float | None  # Cohen's kappa, quadratic weights
    alpha: float | None  # Krippendorff's alpha, ordinal
    binary_kappa: float | None  # unweighted kappa of grade >= threshold
    counts: tuple[tuple[int, ...], ...] = field(repr=False)  # the confusion matrix: people's grades x judge's
    cuts: tuple[GradeCut, ...] = field(repr=False)
    reasons: Mapping[str, str] = field(default_factory=dict)
    warn_below: float = LOW_KAPPA
    names: tuple[str, str] = ("people", "judge")

    @property
    def grades(self) -> list[int]:
        """Every grade of the scale, lowest first: the confusion matrix's rows and columns."""
        return list(range(self.scale[0], self.scale[1] + 1))

    @property
    def low(self) -> bool:
        """Whether the judge's grades should not stand in for people's: the quadratic-weighted kappa is below
        ``warn_below``, or cannot be measured."""
        return self.weighted_kappa is None or self.weighted_kappa < self.warn_below

    @property
    def confusion(self) -> pd.DataFrame:
        """The counts of the items both graded: people's grade as the row (index ``human``), the judge's as the
        column (``judge``); every grade of the scale is present, used or not."""
        import pandas as pd

        grades = self.grades
        return pd.DataFrame(
            [list(row) for row in self.counts],
            index=pd.Index(grades, name="human"),
            columns=pd.Index(grades, name="judge"),
            dtype="int64",
        )

    @property
    def per_grade(self) -> pd.DataFrame:
        """One row per grade above the lowest: ``grade, precision, recall, both, judge_only, people_only, neither,
        reason`` (see :class:`GradeCut`)."""
        import pandas as pd

        columns = ["grade", "precision", "recall", "both", "judge_only", "people_only", "neither", "reason"]
        return pd.DataFrame([c.to_dict() for c in self.cuts], columns=columns)

    def to_dict(self) -> dict[str, Any]:
        """Every number, JSON-able (None where undefined, never NaN)."""
        return {
            "kind": "items",
            "people": self.names[0],
            "judge": self.names[1],
            "n": self.n,
            "n_human": self.n_human,
            "n_judge": self.n_judge,
            "scale": list(self.scale),
            "threshold": self.threshold,
            "observed": self.observed,
            "kappa": self.kappa,
            "weighted_kappa": self.weighted_kappa,
            "alpha": self.alpha,
            "binary_kappa": self.binary_kappa,
            "confusion": {"grades": self.grades, "counts": [list(row) for row in self.counts]},
            "per_grade": [c.to_dict() for c in self.cuts],
            "reasons": dict(self.reasons),
            "warn_below": self.warn_below,
            "low": self.low,
        }

    def render(self) -> str:
        """A few lines of text: the numbers, the confusion matrix and the per-grade precision and recall."""
        lines = [items_line(self.to_dict())]
        if self.n:
            width = max(len(str(v)) for row in self.counts for v in row) + 2
            width = max(width, max(len(str(g)) for g in self.grades) + 2)
            lines.append(f"  confusion (rows: {self.names[0]}'s grade, columns: {self.names[1]}'s grade)")
            lines.append("    " + " " * 8 + "".join(f"{g:>{width}}" for g in self.grades))
            for g, row in zip(self.grades, self.counts, strict=True):
                lines.append(f"    grade {g:>2}" + "".join(f"{v:>{width}}" for v in row))
            for c in self.cuts:
                lines.append(
                    f"  grade >= {c.grade}: precision {num(c.precision)} ({c.both} of {c.both + c.judge_only}), "
                    f"recall {num(c.recall)} ({c.both} of {c.both + c.people_only})"
                    + (f"; {c.reason}" if c.reason else "")
                )
        lines.extend(f"  {name}: {why}" for name, why in self.reasons.items())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


def judge_agreement(
    human: Grades,
    judge: Grades,
    *,
    scale: tuple[int, int] = (0, 3),
    threshold: int = 1,
    warn_below: float = LOW_KAPPA,
    warn: bool = True,
    names: tuple[str, str] = ("people", "judge"),
) -> JudgeAgreement:
    """The agreement of ``judge``'s grades with ``human``'s on the (query, doc) items both graded (see the
    module's doc for the formulas). Each of ``human`` and ``judge`` is :class:`~rag_eval.Qrels`, a
    :class:`~rag_eval.ground_truth.Merged` (its qrels) or ``{query_id: {doc_id: grade}}``; a judgement log's
    grades are :func:`grades_of` it (or use :func:`log_agreement`). Every grade must lie on ``scale`` (an
    :class:`~rag_eval.errors.InputError` names the query and doc otherwise); ``threshold`` is the lowest relevant
    grade, for the binary kappa. Warns :class:`~rag_eval.errors.LowAgreement` where the quadratic-weighted kappa is
    below ``warn_below`` or undefined (``warn=False``: no warning; :attr:`JudgeAgreement.low` still says so).
    Krippendorff's alpha needs the ``krippendorff`` package (``pip install 'rag-eval-stages[judges]'``)."""
    result = _measure(
        human, judge, scale=scale, threshold=threshold, warn_below=warn_below, names=names, with_alpha=True
    )
    if warn and result.low:
        _warn_items(result, stacklevel=3)
    return result


def _measure(
    human: Grades,
    judge: Grades,
    *,
    scale: tuple[int, int],
    threshold: int,
    warn_below: float,
    names: tuple[str, str],
    with_alpha: bool,
) -> JudgeAgreement:
    """:func:`judge_agreement` without the warning; ``with_alpha=False`` leaves alpha out (None, with a reason)."""
    low, high = _check_scale(scale)
    if isinstance(threshold, bool) or not isinstance(threshold, int) or not low < threshold <= high:
        raise InputError(f"threshold {threshold!r}: expected an int grade above {low} and at most {high}")
    if isinstance(warn_below, bool) or not isinstance(warn_below, (int, float)) or not math.isfinite(warn_below):
        raise InputError(f"warn_below {warn_below!r}: expected a number (a kappa, at most 1)")
    people = _grades(human, "human", (low, high))
    judged = _grades(judge, "judge", (low, high))
    common = sorted(set(people) & set(judged))
    k = high - low + 1
    counts = np.zeros((k, k), dtype=np.int64)
    for pair in common:
        counts[people[pair] - low, judged[pair] - low] += 1
    x = np.array([people[p] for p in common], dtype=np.int64)
    y = np.array([judged[p] for p in common], dtype=np.int64)
    reasons: dict[str, str] = {}
    n = len(common)
    why: str | None
    observed: float | None
    alpha: float | None
    if n == 0:
        none = f"{names[0]} and {names[1]} graded no item in common"
        reasons = dict.fromkeys(("kappa", "weighted_kappa", "alpha", "binary_kappa"), none)
        observed = kappa = weighted = alpha = binary = None
    else:
        observed = float(np.trace(counts)) / n
        kappa, why = kappa_of(counts)
        if why:
            reasons["kappa"] = why
        weighted, why = kappa_of(counts, weights="quadratic")
        if why:
            reasons["weighted_kappa"] = why
        relevant = np.array(
            [
                [
                    counts[: threshold - low, : threshold - low].sum(),
                    counts[: threshold - low, threshold - low :].sum(),
                ],
                [
                    counts[threshold - low :, : threshold - low].sum(),
                    counts[threshold - low :, threshold - low :].sum(),
                ],
            ]
        )
        binary, why = kappa_of(relevant)
        if why:
            reasons["binary_kappa"] = f"at grade >= {threshold}: {why}"
        if with_alpha:
            alpha, why = _alpha(x, y, (low, high))
            if why:
                reasons["alpha"] = why
        else:
            alpha = None
            reasons["alpha"] = f"krippendorff is not installed: {install_hint('judges')}"
    cuts = tuple(_cut(x, y, g) for g in range(low + 1, high + 1))
    return JudgeAgreement(
        n=n,
        n_human=len(people),
        n_judge=len(judged),
        scale=(low, high),
        threshold=threshold,
        observed=observed,
        kappa=kappa,
        weighted_kappa=weighted,
        alpha=alpha,
        binary_kappa=binary,
        counts=tuple(tuple(int(v) for v in row) for row in counts),
        cuts=cuts,
        reasons=reasons,
        warn_below=float(warn_below),
        names=names,
    )


def kappa_of(table: np.ndarray, *, weights: str | None = None) -> tuple[float | None, str | None]:
    """Cohen's kappa of a square contingency table of counts (one rater's categories as rows, the other's as
    columns, in the scale's order): unweighted (Cohen 1960) or with ``weights="quadratic"`` (Cohen 1968)
    disagreement weights ``(i - j)^2 / (k - 1)^2``; ``1 - sum(W * P) / sum(W * E)``, which for ``W = 1 - I`` is
    the unweighted ``(p_o - p_e) / (1 - p_e)``. ``(None, reason)`` where chance disagreement is 0 (every item in
    one and the same category for both raters)."""
    table = np.asarray(table, dtype=np.float64)
    k = table.shape[0]
    n = table.sum()
    if n == 0:
        return None, "no item"
    p = table / n
    expected = np.outer(p.sum(axis=1), p.sum(axis=0))
    i, j = np.indices((k, k))
    if weights is None:
        w = (i != j).astype(np.float64)
    elif weights == "quadratic":
        w = (i - j) ** 2 / (k - 1) ** 2
    else:
        raise ValueError(f"weights must be None or 'quadratic', not {weights!r}")
    chance = float((w * expected).sum())
    if chance <= 1e-15:
        return None, (
            f"every one of the {int(n)} item(s) is in one and the same category for both, so the agreement "
            "expected by chance is 1 and kappa is undefined"
        )
    return 1.0 - float((w * p).sum()) / chance, None


def _alpha(x: np.ndarray, y: np.ndarray, scale: tuple[int, int]) -> tuple[float | None, str | None]:
    """Krippendorff's ordinal alpha of two raters' grades (the ``krippendorff`` package)."""
    krippendorff = require("krippendorff", extra="judges", feature="Krippendorff's alpha (judge_agreement)")
    values = np.unique(np.concatenate([x, y]))
    if len(values) < 2:
        return None, (
            f"every grade given is {int(values[0])}: with one value there is no expected disagreement, and "
            "alpha is undefined"
        )
    if len(x) < 2:
        return None, "one item in common: alpha needs at least two"
    with np.errstate(all="ignore"):
        value = float(
            krippendorff.alpha(
                reliability_data=np.vstack([x, y]).astype(np.float64),
                value_domain=list(range(scale[0], scale[1] + 1)),
                level_of_measurement="ordinal",
            )
        )
    if not math.isfinite(value):
        return None, "Krippendorff's alpha is undefined on these grades (no expected disagreement)"
    return value, None


def _cut(x: np.ndarray, y: np.ndarray, grade: int) -> GradeCut:
    h, j = x >= grade, y >= grade
    both, judge_only = int(np.sum(h & j)), int(np.sum(~h & j))
    people_only, neither = int(np.sum(h & ~j)), int(np.sum(~h & ~j))
    why = []
    if both + judge_only == 0:
        why.append(f"the judge graded no item >= {grade}: precision undefined")
    if both + people_only == 0:
        why.append(f"people graded no item >= {grade}: recall undefined")
    return GradeCut(
        grade,
        both,
        judge_only,
        people_only,
        neither,
        both / (both + judge_only) if both + judge_only else None,
        both / (both + people_only) if both + people_only else None,
        "; ".join(why) or None,
    )


def _check_scale(scale: object) -> tuple[int, int]:
    if (
        not isinstance(scale, (tuple, list))
        or len(scale) != 2
        or any(isinstance(v, bool) or not isinstance(v, int) for v in scale)
        or not scale[0] < scale[1]
    ):
        raise InputError(f"scale {scale!r}: expected two ints (lowest, highest grade), lowest < highest")
    return (scale[0], scale[1])


def _grades(source: Grades, role: str, scale: tuple[int, int]) -> dict[tuple[str, str], int]:
    """``{(query_id, doc_id): grade}`` of qrels, a merge or a mapping, every grade checked against the scale."""
    if isinstance(source, Merged):
        source = source.qrels
    if isinstance(source, Qrels):
        nested: Mapping[str, Mapping[str, int]] = source.to_dict()
    elif isinstance(source, Mapping):
        nested = source
    elif isinstance(source, JudgementLog):
        raise InputError(f"{role}: a judgement log holds several assessors: give grades_of(log, assessor)")
    else:
        raise InputError(f"{role}: expected Qrels or {{query_id: {{doc_id: grade}}}}, not {type(source).__name__}")
    out: dict[tuple[str, str], int] = {}
    low, high = scale
    for q, docs in nested.items():
        if not isinstance(q, str) or not isinstance(docs, Mapping):
            raise InputError(f"{role}: query {q!r}: expected a str query id mapped to {{doc_id: grade}}")
        for d, g in docs.items():
            if not isinstance(d, str):
                raise InputError(f"{role}: query {q!r}: doc id {d!r} is not a str")
            if isinstance(g, bool) or not isinstance(g, (int, np.integer)):
                raise InputError(f"{role}: query {q!r}, doc {d!r}: grade {g!r} is not an int")
            if not low <= g <= high:
                raise InputError(f"{role}: query {q!r}, doc {d!r}: grade {g} is outside the scale {low}..{high}")
            out[(q, d)] = int(g)
    return out


# ----- judgement logs ---------------------------------------------------------------------------------------------


def _open(log: JudgementLog | str | os.PathLike[str]) -> JudgementLog:
    return log if isinstance(log, JudgementLog) else JudgementLog.load(log)


def judge_assessors(log: JudgementLog | str | os.PathLike[str]) -> list[str]:
    """The assessors of ``log`` that are model judges: those whose judgements carry a judge's fingerprint (the
    ``judge`` field of a judged line), sorted."""
    return sorted(_open(log).judges)


def grades_of(log: JudgementLog | str | os.PathLike[str], assessors: str | Sequence[str]) -> dict[str, dict[str, int]]:
    """``{query_id: {doc_id: grade}}`` of the ``assessors`` of ``log``: each one's latest grade of each pair; where
    several graded a pair, their lower median (as :func:`~rag_eval.ground_truth.merge` resolves it). An assessor
    the log does not hold, or a model judge graded under two fingerprints, is an InputError naming the log."""
    opened = _open(log)
    wanted = [assessors] if isinstance(assessors, str) else list(assessors)
    missing = [a for a in wanted if a not in opened.assessors]
    if missing or not wanted:
        raise InputError(
            f"assessor(s) {missing or wanted!r} not in the log; it holds {opened.assessors}", source=str(opened.path)
        )
    for name in wanted:
        opened.one_judge(name)  # a model judge's grades are of one judge, not two versions under one name
    chosen = JudgementLog(opened.path, [j for j in opened if j.assessor in wanted])
    return merge(None, chosen).qrels.to_dict()


def log_agreement(
    log: JudgementLog | str | os.PathLike[str],
    *,
    judge: str,
    people: str | Sequence[str] | None = None,
    scale: tuple[int, int] | None = None,
    threshold: int = 1,
    warn_below: float = LOW_KAPPA,
    warn: bool = True,
) -> JudgeAgreement:
    """:func:`judge_agreement` of the assessor ``judge`` of a judgement log with ``people`` (by default every
    other assessor of the log that is not a model judge, see :func:`judge_assessors`; their grades combined by
    :func:`grades_of`). ``scale`` defaults to the log's (the scale its judgements were given on)."""
    opened = _open(log)
    if judge not in opened.assessors:
        raise InputError(
            f"judge {judge!r} is not an assessor of the log; it holds {opened.assessors}", source=str(opened.path)
        )
    if people is None:
        people = [a for a in opened.people if a != judge]
        if not people:
            raise InputError(
                f"no person graded in the log besides the judge(s) {sorted({judge, *opened.judges})}",
                source=str(opened.path),
            )
    humans = [people] if isinstance(people, str) else list(people)
    if judge in humans:
        raise InputError(f"assessor {judge!r} is both the judge and one of the people", source=str(opened.path))
    if scale is None:
        scales = sorted({j.scale for j in opened if j.assessor in (judge, *humans)})
        if len(scales) > 1:
            raise InputError(f"the judgements are on several scales {scales}: give scale=", source=str(opened.path))
        scale = scales[0] if scales else (0, 3)
    return judge_agreement(
        grades_of(opened, humans),
        grades_of(opened, judge),
        scale=scale,
        threshold=threshold,
        warn_below=warn_below,
        warn=warn,
        names=(", ".join(humans), judge),
    )


def assessor_summary(log: JudgementLog, assessor: str, *, scale: tuple[int, int], threshold: int = 1) -> dict[str, Any]:
    """What the labelling page shows: the agreement of ``assessor`` with each model judge of ``log``
    (:func:`judge_assessors`), without warning (each entry's ``low`` says it). Krippendorff's alpha is left out
    (None, with the reason) where its package is not installed, so that the page needs no extra."""
    import importlib.util

    with_alpha = importlib.util.find_spec("krippendorff") is not None
    judges = [j for j in judge_assessors(log) if j != assessor]
    mine = grades_of(log, assessor) if assessor in log.assessors else {}  # an assessor who has judged nothing yet
    out = []
    for name in judges:
        result = _measure(
            mine,
            grades_of(log, name),
            scale=scale,
            threshold=threshold,
            warn_below=LOW_KAPPA,
            names=(assessor, name),
            with_alpha=with_alpha,
        )
        entry = result.to_dict()
        entry["line"] = items_line(entry)
        out.append(entry)
    return {"assessor": assessor, "judges": out, "warn_below": LOW_KAPPA}


# ----- text ------------------------------------------------------------------------------------------------------


def _warn_items(result: JudgeAgreement, *, stacklevel: int) -> None:
    if result.weighted_kappa is None:
        why = result.reasons.get("weighted_kappa", "")
        problem = f"the agreement of judge {result.names[1]!r} with {result.names[0]} cannot be measured ({why})"
    else:
        problem = (
            f"judge {result.names[1]!r} agrees with {result.names[0]} at a quadratic-weighted kappa of "
            f"{result.weighted_kappa:.3f} on {result.n} item(s), below {result.warn_below:g}"
        )
    warnings.warn(problem + ": its grades should not stand in for people's", LowAgreement, stacklevel=stacklevel)


# moved to rag_eval.statistics.rankings: the old path warns (DeprecationWarning) and goes in a later release
__getattr__ = moved_names(__name__, dict.fromkeys(["RankingAgreement", "ranking_agreement"], "rag_eval.statistics"))
