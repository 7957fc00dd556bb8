"""Judged share: how much of what a system put in its top k the qrels judge.

A metric counts an unjudged item as non-relevant, so a system whose top k is largely unjudged (a new system, or one
the pool never saw) scores a lower bound. Every report carries the judged share of each system (and stage) at the
cutoffs it measures, ``Report.judged``, lists it on the metric card, and warns when a share falls below a
threshold (0.9 by default): pool that system's results (:func:`rag_eval.pool`), label them, and evaluate again;
or evaluate with condensed lists (``Conventions(unjudged="remove")``), which drop unjudged items first.

The share is the mean of judged@k (the judged share of the top min(k, returned)) over the counted queries, with
its ``n``: the very number the report's summary shows for judged@k, over the same base. judged@k of an empty top k
(an empty ranking, a failed query scored as one, a token budget that delivers nothing) is 0/0, so NaN: it is left
out of the mean and counted in the summary's ``n_nan`` (nothing there is unjudged, so its scores are exact). It is
measured on the ranking as given, not condensed even when the report's conventions are; so is judged@k in the
report's tables.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..data.qrels import Qrels
from ..data.run import Run
from ..errors import RagEvalWarning
from ..metrics.conventions import Conventions
from ..metrics.engine import evaluate_run
from ..metrics.grammar import Metric

JUDGED_THRESHOLD = 0.9


class LowJudgedShare(RagEvalWarning):
    """A system's judged share is below the threshold: its scores are lower bounds."""


@dataclass(frozen=True)
class JudgedShare:
    """The mean judged@k of one system (and stage) over ``n`` counted queries."""

    run: str
    stage: str | None
    cutoff: str  # "10", "budget" or "depth"
    share: float  # NaN when no counted query put anything in its top k
    n: int  # the queries the share is the mean over (judged@k defined: something in the top k)

    @property
    def metric(self) -> str:
        return f"judged@{self.cutoff}"

    def record(self) -> dict[str, object]:
        """What the metric card keeps."""
        return {"run": self.run, "stage": self.stage, "metric": self.metric, "share": self.share, "n": self.n}


def cutoffs_of(metrics: Sequence[Metric]) -> list[int]:
    """The cutoffs a report measures at (10 when no metric has one)."""
    found = sorted({m.k for m in metrics if m.k is not None})
    return found or [10]


def judged_metrics(cutoffs: Sequence[int]) -> list[Metric]:
    """What a share is computed from: judged@k per cutoff. Appended to a report's own metrics, they cost no second
    pass over the run."""
    return [Metric("judged", k) for k in cutoffs]


def mean_share(judged: np.ndarray) -> tuple[float, int]:
    """Mean judged@k over the queries where it is defined (NaN, 0/0, where the top k is empty), and how many those
    are: the summary's ``mean`` and ``n`` of the same values."""
    judged = np.asarray(judged, dtype=float)
    shares = judged[~np.isnan(judged)]
    return (float(shares.mean()) if len(shares) else float("nan")), int(len(shares))


def judged_share(
    qrels: Qrels, run: Run, cutoff: int | Mapping[str, int], conventions: Conventions, *, exclude=()
) -> tuple[float, int]:
    """:func:`mean_share` at one cutoff (or a per-query cutoff mapping) in a pass of its own, on the ranking as
    given (``unjudged="keep"``), for where the report's own pass cannot carry it."""
    plain = conventions.replace(unjudged="keep")
    if isinstance(cutoff, int):
        result = evaluate_run(qrels, run, [Metric("judged", cutoff)], plain, exclude=exclude, warn_ids=False)
    else:
        result = evaluate_run(qrels, run, [Metric("judged", None)], plain, cutoffs=[dict(cutoff)], exclude=exclude,
                              warn_ids=False)
    return mean_share(result.values[0])


def warn_low(shares: Sequence[JudgedShare], threshold: float) -> list[str]:
    """One warning per system (and stage) whose lowest judged share is below ``threshold``; returns the notes."""
    notes = []
    worst: dict[tuple[str, str | None], JudgedShare] = {}
    for s in shares:
        key = (s.run, s.stage)
        if s.share == s.share and (key not in worst or s.share < worst[key].share):
            worst[key] = s
    for (run, stage), s in worst.items():
        if s.share < threshold:
            who = f"run {run!r}" + (f", stage {stage!r}" if stage else "")
            note = (f"{who}: {s.metric} is {s.share:.3f}, below {threshold:g}: its scores are lower bounds "
                    "(pool its results with rag_eval.pool, label them, and evaluate again)")
            warnings.warn(note, LowJudgedShare, stacklevel=4)
            notes.append(note)
    return notes


def shares_frame(shares: Sequence[JudgedShare]):
    import pandas as pd

    return pd.DataFrame([s.record() for s in shares], columns=["run", "stage", "metric", "share", "n"])
