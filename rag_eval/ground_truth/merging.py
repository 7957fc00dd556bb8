"""Merging judgement logs into qrels, and the assessors' agreement.

:func:`merge` folds qrels and logs (:mod:`.judgement_log`) into new qrels. Where grades differ for a pair, nothing
is overwritten silently: every such pair is listed in :attr:`Merged.conflicts`, and the grade that goes into the
qrels is

- the existing qrels grade, where the qrels given to :func:`merge` judge the pair (the labelling page never
  changes a grade it was not asked for);
- otherwise, where a person graded the pair, the lower median of the people's latest grades (``resolve="median"``,
  the default: with two assessors the lower grade, with three the middle one), or their ``"max"`` or ``"min"``: a
  model judge's grade never overwrites a person's;
- otherwise (only model judges graded the pair) the same over the judges' grades; the merged qrels then carry a
  :class:`~rag_eval.data.GradedBy` saying how many judgements each judge decided, which every card made with them
  shows (and :func:`~rag_eval.ground_truth.write_qrels` keeps beside the file).

:func:`cohen_kappa` measures the assessors' agreement beyond chance on the pairs both judged; :attr:`Merged.kappa`
gives it on the grades and at the relevance threshold, for every two assessors.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from itertools import combinations
from typing import TYPE_CHECKING, Any, Literal

from .._checks import check_choice, check_int
from ..data.graded_by import GradedBy, JudgeShare
from ..data.joins import user_stacklevel
from ..data.near_miss import warn_near_misses
from ..data.qrels import Qrels
from ..errors import InputError
from .judgement_log import RESERVED_NAMES, Judgement, JudgementLog, _parse_time

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Agreement", "Kappa", "Merged", "cohen_kappa", "merge"]

Resolve = Literal["median", "max", "min"]


@dataclass(frozen=True)
class Agreement:
    """Agreement of two assessors on the pairs both judged: Cohen's kappa on the grades (unweighted) and on
    relevant/not relevant at the threshold. A kappa is None where it cannot be computed, and ``reason`` says why."""

    assessors: tuple[str, str]
    n: int  # pairs judged by both
    observed: float | None  # share of those pairs given the same grade
    kappa: float | None
    binary_kappa: float | None
    reason: str | None = None


@dataclass(frozen=True)
class Kappa:
    """Cohen's kappa of the assessors of a merge. With exactly two assessors (who judged some pairs in
    common) ``value`` and ``binary`` are their kappas; otherwise they are None and ``reason`` says why.
    ``pairwise`` holds one :class:`Agreement` for every two assessors (the only kappas with three or more)."""

    value: float | None
    binary: float | None
    n: int
    threshold: int
    pairwise: tuple[Agreement, ...] = ()
    reason: str | None = None

    def to_frame(self) -> pd.DataFrame:
        """One row per two assessors: ``assessor_a, assessor_b, n, observed, kappa, binary_kappa, reason``."""
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "assessor_a": a.assessors[0],
                    "assessor_b": a.assessors[1],
                    "n": a.n,
                    "observed": a.observed,
                    "kappa": a.kappa,
                    "binary_kappa": a.binary_kappa,
                    "reason": a.reason,
                }
                for a in self.pairwise
            ],
            columns=["assessor_a", "assessor_b", "n", "observed", "kappa", "binary_kappa", "reason"],
        )

    def __repr__(self) -> str:
        if self.value is None:
            return f"Kappa(None: {self.reason})"
        return (
            f"Kappa({self.value:.3f} on grades, {self.binary:.3f} at grade >= {self.threshold}, n={self.n})"
            if self.binary is not None
            else f"Kappa({self.value:.3f}, n={self.n})"
        )


@dataclass(frozen=True)
class Merged:
    """What :func:`merge` returns: the merged ``qrels``, the ``conflicts`` and the assessors' ``kappa``."""

    qrels: Qrels
    grades: Mapping[tuple[str, str], Mapping[str, int]] = field(repr=False)  # pair -> {assessor: latest grade}
    base: Mapping[tuple[str, str], int] = field(repr=False)  # pair -> grade in the qrels given
    assessors: tuple[str, ...]
    resolve: Resolve
    threshold: int
    judges: Mapping[str, str] = field(default_factory=dict)  # model judges among the assessors: name -> fingerprint

    @cached_property
    def conflicts(self) -> pd.DataFrame:
        """Every pair whose grades differ (between assessors, or between an assessor and the qrels given):
        ``query_id, doc_id, grade`` (what went into :attr:`qrels`), ``qrels`` (the grade in the qrels given,
        or missing), then one column per assessor (missing where that assessor did not judge the pair)."""
        import pandas as pd

        rows = []
        for pair, by_assessor in self.grades.items():
            values = set(by_assessor.values())
            if pair in self.base:
                values.add(self.base[pair])
            if len(values) > 1:
                row: dict[str, Any] = {
                    "query_id": pair[0],
                    "doc_id": pair[1],
                    "grade": self.qrels[pair[0]][pair[1]],
                    "qrels": self.base.get(pair),
                }
                row.update(by_assessor)
                rows.append(row)
        columns = ["query_id", "doc_id", "grade", "qrels", *self.assessors]
        frame = pd.DataFrame(rows, columns=columns)
        for name in columns[2:]:
            frame[name] = frame[name].astype("Int64")
        return frame

    @cached_property
    def kappa(self) -> Kappa:
        """Cohen's kappa on the pairs judged by two assessors (see :class:`Kappa`)."""
        if len(self.assessors) < 2:
            return Kappa(
                None,
                None,
                0,
                self.threshold,
                reason=f"{len(self.assessors)} assessor(s): kappa needs two who judged the same pairs",
            )
        pairwise = tuple(self._agreement(a, b) for a, b in combinations(self.assessors, 2))
        if len(self.assessors) > 2:
            return Kappa(
                None,
                None,
                0,
                self.threshold,
                pairwise,
                reason=f"{len(self.assessors)} assessors: see .pairwise for every two of them",
            )
        only = pairwise[0]
        return Kappa(only.kappa, only.binary_kappa, only.n, self.threshold, pairwise, only.reason)

    def _agreement(self, a: str, b: str) -> Agreement:
        both = [(g[a], g[b]) for g in self.grades.values() if a in g and b in g]
        if not both:
            return Agreement((a, b), 0, None, None, None, reason=f"{a} and {b} judged no pair in common")
        x, y = zip(*both, strict=True)
        kappa = cohen_kappa(x, y)
        binary = cohen_kappa([int(v >= self.threshold) for v in x], [int(v >= self.threshold) for v in y])
        observed = sum(p == q for p, q in both) / len(both)
        reason = None
        if math.isnan(kappa) or math.isnan(binary):
            reason = (
                f"on the {len(both)} pair(s) {a} and {b} both judged, chance agreement is 1 (every grade "
                "the same category), so kappa is undefined"
            )
        return Agreement(
            (a, b),
            len(both),
            observed,
            None if math.isnan(kappa) else kappa,
            None if math.isnan(binary) else binary,
            reason,
        )

    def __repr__(self) -> str:
        return (
            f"Merged({self.qrels!r}, {len(self.assessors)} assessor(s), {len(self.conflicts)} conflict(s), "
            f"{self.kappa!r})"
        )


def merge(
    qrels: Qrels | Mapping[str, Mapping[str, int]] | None,
    *logs: JudgementLog | str | os.PathLike[str],
    resolve: Resolve = "median",
    threshold: int = 1,
) -> Merged:
    """Merge judgement logs into ``qrels`` (or into nothing). Each assessor's latest judgement of a pair counts
    (the later line in a log; across logs, the later ``time``, then the later log given). A pair the qrels judge
    keeps its qrels grade; otherwise the assessors' grades are combined by ``resolve`` (``"median"``: the lower
    median). Differences are listed in :attr:`Merged.conflicts`, never resolved silently. ``threshold`` is the
    lowest relevant grade for the binary kappa."""
    check_choice(resolve, "resolve", ("median", "max", "min"))
    threshold = check_int(threshold, "threshold", low=None, high=None)
    base_qrels = qrels if qrels is None or isinstance(qrels, Qrels) else Qrels.from_dict(qrels)
    opened = [log if isinstance(log, JudgementLog) else JudgementLog.load(log) for log in logs]

    latest: dict[tuple[str, str, str], tuple[datetime, int, Judgement]] = {}
    for order, log in enumerate(opened):
        for j in log.judgements:
            key = (j.assessor, j.query_id, j.doc_id)
            when = _parse_time(j.time)
            kept = latest.get(key)
            # a later line of the same log always supersedes; across logs, the later time (ties: the later log)
            if kept is None or kept[1] == order or (when, order) >= (kept[0], kept[1]):
                latest[key] = (when, order, j)
    grades: dict[tuple[str, str], dict[str, int]] = {}
    fingerprints: dict[str, set[str]] = {}  # model judges: name -> every fingerprint its counted grades carry
    people: set[str] = set()
    for (assessor, q, d), (_, _, j) in latest.items():
        grades.setdefault((q, d), {})[assessor] = j.grade
        if j.judge is not None:
            fingerprints.setdefault(assessor, set()).add(j.judge["fingerprint"])
        else:
            people.add(assessor)
    assessors = tuple(sorted({a for a, _, _ in latest}))
    clash = RESERVED_NAMES & set(assessors)
    if clash:
        raise ValueError(f"assessor name {sorted(clash)[0]!r} is reserved (a column of Merged.conflicts)")
    both = people & set(fingerprints)
    if both:
        raise InputError(
            f"assessor {sorted(both)[0]!r} is both a person (judgements without a judge object) and a model judge "
            "in the logs merged: give the judge another name, so that its grades can never pass for a person's"
        )

    merged = base_qrels.to_dict() if base_qrels is not None else {}
    base = {(q, d): g for q, docs in merged.items() for d, g in docs.items()}
    if base and grades:  # ids of the logs written like the qrels' but not the same: said, never merged
        for ids, logged, judged in (
            ("query id(s)", {q for q, _ in grades}, merged.keys()),
            ("doc id(s)", {d for _, d in grades}, {d for _, d in base}),
        ):
            warn_near_misses(
                logged,
                judged,
                subject="judgement logs",
                ids=ids,
                other="one of the qrels",
                left_name="log",
                right_name="qrels",
                consequence="they are different ids, so their judgements are merged as pairs of their own",
                stacklevel=user_stacklevel(),
            )
    # the base qrels' pairs keep their grades, and so who decided them (a base graded in part by judges says so)
    earlier = base_qrels.graded_by if base_qrels is not None else None
    by_people = len(base) if earlier is None else earlier.people
    by_judge: dict[str, set[tuple[str, str]]] = {j.name: set(j.pairs) for j in earlier.judges} if earlier else {}
    for share in earlier.judges if earlier else ():
        fingerprints.setdefault(share.name, set()).update(share.fingerprint.split(","))
    for (q, d), by_assessor in grades.items():
        if (q, d) in base:
            continue
        human = [g for a, g in by_assessor.items() if a not in fingerprints]
        if human:  # a judge's grade never overwrites a person's
            merged.setdefault(q, {})[d] = _combine(human, resolve)
            by_people += 1
        else:
            merged.setdefault(q, {})[d] = _combine(list(by_assessor.values()), resolve)
            # several judges on one pair decide it together
            by_judge.setdefault(" + ".join(sorted(by_assessor)), set()).add((q, d))
    judges = {name: ",".join(sorted(fps)) for name, fps in sorted(fingerprints.items())}
    graded_by = None
    if judges:
        graded_by = GradedBy(
            by_people,
            tuple(
                JudgeShare(name, ",".join(judges[n] for n in name.split(" + ")), frozenset(pairs))
                for name, pairs in sorted(by_judge.items())
            ),
        )
    return Merged(
        Qrels(merged, graded_by=graded_by),
        {p: dict(sorted(g.items())) for p, g in grades.items()},
        base,
        assessors,
        resolve,
        threshold,
        judges,
    )


def cohen_kappa(a: Sequence[int], b: Sequence[int]) -> float:
    """Cohen's kappa of two raters' labels of the same items, unweighted: ``(p_o - p_e) / (1 - p_e)``, where
    ``p_o`` is the share of items given the same label and ``p_e`` the agreement expected by chance from each
    rater's own label frequencies (Cohen 1960). NaN where ``p_e`` is 1 (both raters gave every item one and the
    same label: kappa is undefined)."""
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"the two raters labelled {len(a)} and {len(b)} items; kappa needs the same items")
    if not a:
        raise ValueError("kappa needs at least one item labelled by both raters")
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    count_a, count_b = Counter(a), Counter(b)
    expected = sum(count_a[c] * count_b[c] for c in count_a) / (n * n)
    if expected >= 1.0:
        return math.nan
    return (observed - expected) / (1.0 - expected)


# ----- helpers --------------------------------------------------------------------------------------------------


def _combine(values: list[int], resolve: Resolve) -> int:
    if resolve == "max":
        return max(values)
    if resolve == "min":
        return min(values)
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]  # the lower median: an actual grade, the lower one of two
