"""Judged share: how much of what a system put in its top k the qrels judge.

A metric counts an unjudged item as non-relevant, so a system whose top k is largely unjudged (a new system, or one
the pool never saw) scores a lower bound. Every report carries the judged share of each system (and stage) at the
cutoffs it measures, ``Report.judged``, lists it on the metric card, and warns when a share falls below a
threshold (0.9 by default), in one line per report that also says when the qrels judge so few documents per
query that no system can reach the threshold (:func:`ceiling`): pool that system's results (:func:`rag_eval.pool`),
label them, and evaluate again; or evaluate with condensed lists (``Conventions(unjudged="remove")``), which drop
unjudged items first.

The share is the mean of judged@k (the judged share of the top min(k, returned)) over the counted queries, with
its ``n``: the very number the report's summary shows for judged@k, over the same base. judged@k of an empty top k
(an empty ranking, a failed query scored as one, a token budget that delivers nothing) is 0/0, so NaN: it is left
out of the mean and counted in the summary's ``n_nan`` (nothing there is unjudged, so its scores are exact). It is
measured on the ranking as given, not condensed even when the report's conventions are; so is judged@k in the
report's tables.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..data.qrels import Qrels
from ..data.run import Run
from ..errors import LowJudgedShare
from ..metrics.conventions import Conventions
from ..metrics.engine import evaluate_run
from ..metrics.grammar import Metric

if TYPE_CHECKING:
    import pandas as pd

JUDGED_THRESHOLD = 0.9


@dataclass(frozen=True)
class JudgedShare:
    """The mean judged@k of one system (and stage) over ``n`` counted queries."""

    run: str
    stage: str | None
    cutoff: str  # "10", "budget" or "depth"
    share: float  # NaN when no counted query put anything in its top k
    n: int  # the queries the share is the mean over (judged@k defined: something in the top k)
    ceiling: float = float("nan")  # the highest share any system can reach with these qrels (see ceiling())

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
    return (float(shares.mean()) if len(shares) else float("nan")), len(shares)


def judged_share(
    qrels: Qrels,
    run: Run,
    cutoff: int | Mapping[str, int],
    conventions: Conventions,
    *,
    exclude: Collection[str] = (),
) -> tuple[float, int, float]:
    """:func:`mean_share` at one cutoff (or a per-query cutoff mapping) in a pass of its own, on the ranking as
    given (``unjudged="keep"``), for where the report's own pass cannot carry it; with its :func:`ceiling` over the
    same queries: ``(share, n, ceiling)``."""
    plain = conventions.replace(unjudged="keep")
    metrics = [Metric("judged", cutoff if isinstance(cutoff, int) else None), Metric("num_ret")]
    cutoffs = None if isinstance(cutoff, int) else [dict(cutoff), None]
    result = evaluate_run(qrels, run, metrics, plain, cutoffs=cutoffs, exclude=exclude, warn_ids=False)
    share, n = mean_share(result.values[0])
    account = result.account
    return share, n, ceiling(qrels, account.counted, cutoff, returned=result.values[1], rows=account.qrels_rows)


def ceiling(
    qrels: Qrels,
    query_ids: Iterable[str],
    cutoff: int | Mapping[str, int],
    *,
    returned: npt.ArrayLike | None = None,
    rows: np.ndarray | None = None,
) -> float:
    """The highest judged share at ``cutoff`` a system can reach on these queries returning as many results as
    this one did (``returned``, per query; k where not given): the mean of min(judged, t) / t over the queries
    with t = min(k, returned) > 0 (the qrels judge ``judged`` documents of the query), the very queries and
    denominators judged@k is the mean over, so that no measured share is above it. Below the threshold, no
    system can reach it (sparse qrels, such as BEIR's one or two judgements per query). NaN without a query."""
    query_ids = list(query_ids)
    # ``rows``: each query's row in the qrels' columns, where the caller has them (the engine's account)
    judged = qrels.num_judged(query_ids) if rows is None else np.diff(qrels.columns[1])[rows]
    if isinstance(cutoff, int):
        k = np.full(len(judged), cutoff, np.int64)
    else:
        k = np.fromiter(map(cutoff.get, query_ids, repeat(0)), np.int64, len(judged))
    if returned is not None:
        k = np.minimum(k, np.asarray(returned, dtype=np.float64).astype(np.int64))
    some = k > 0
    if not some.any():
        return float("nan")
    return float(np.mean(np.minimum(judged[some], k[some]) / k[some]))


def warn_low(shares: Sequence[JudgedShare], threshold: float, *, stacklevel: int = 4) -> list[str]:
    """One warning per report for every system (and stage) whose lowest judged share is below ``threshold``,
    with the count and the lowest; it says when the qrels judge too few documents per query for any system to
    reach the threshold. Returns the line (none when every share is at or above it)."""
    worst: dict[tuple[str, str | None], JudgedShare] = {}
    for s in shares:
        key = (s.run, s.stage)
        if s.share == s.share and (key not in worst or s.share < worst[key].share):
            worst[key] = s
    low = sorted((s for s in worst.values() if s.share < threshold), key=lambda s: s.share)
    if not low:
        return []

    def who(s: JudgedShare) -> str:
        return f"run {s.run!r}" + (f", stage {s.stage!r}" if s.stage else "")

    if len(low) == 1:
        s = low[0]
        line = (
            f"{who(s)}: {s.metric} is {s.share:.3f}, below {threshold:g}: its scores are lower bounds (pool its "
            "results with rag_eval.pool, label them, and evaluate again)"
        )
    else:
        shown = "; ".join(f"{who(s)}: {s.metric} {s.share:.3f}" for s in low[:3])
        more = f"; ... ({len(low) - 3} more)" if len(low) > 3 else ""
        line = (
            f"judged share below {threshold:g} for {len(low)} of {len(worst)} systems (stages), the lowest first: "
            f"{shown}{more}: their scores are lower bounds (pool their results with rag_eval.pool, label them, "
            "and evaluate again)"
        )
    capped = [s for s in low if s.ceiling == s.ceiling and s.ceiling < threshold]
    if capped:
        s = capped[0]
        which = "" if len(low) == 1 else f" for {len(capped)} of them"
        line += (
            f"; the qrels judge too few documents per query to reach it{which}: even a perfect system's "
            f"{s.metric} is at most {s.ceiling:.3f}"
            + (f" ({who(s)})" if len(low) > 1 else "")
            + ", as with sparse qrels such as BEIR's; condensed lists (Conventions(unjudged='remove')) measure "
            "judged documents only"
        )
    warnings.warn(line, LowJudgedShare, stacklevel=stacklevel)
    return [line]


def shares_frame(shares: Sequence[JudgedShare]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame([s.record() for s in shares], columns=["run", "stage", "metric", "share", "n"])
