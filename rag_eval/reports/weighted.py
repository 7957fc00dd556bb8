"""Traffic-weighted means: what users experience, estimated from a sampled :class:`~rag_eval.QuerySet`.

A report made with a QuerySet keeps each evaluated query's weight ``w_i = frequency_i / p_i`` (what
``QuerySet.weights("traffic")`` gives: the traffic the query stands for, divided by its inclusion probability,
``p_i = 1`` for a set that was not sampled) and its stratum. :meth:`Report.summary` then adds, beside the per-query
mean, the Hajek estimator ``sum(w_i * y_i) / sum(w_i)`` over the evaluated queries (NaN values left out) and its
stratified bootstrap interval: each resample draws, within every stratum, as many queries as the stratum has
(with replacement), from a generator seeded like the plain bootstrap, a few resamples at a time (about
:data:`~rag_eval.reports.summary.CHUNK` indices at once: O(n + resamples x metrics) memory).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..data.near_miss import near_miss_hint
from ..errors import InputError
from .summary import MIN_GEO_MEAN, chunk_rows

if TYPE_CHECKING:
    from ..data.queryset import QuerySet

TRAFFIC_COLUMNS = ["traffic_mean", "traffic_ci_low", "traffic_ci_high"]


@dataclass(frozen=True)
class QueryWeights:
    """Each query's traffic weight (``frequency / inclusion probability``) and stratum (None: not stratified)."""

    weights: Mapping[str, float]
    strata: Mapping[str, str | None]

    @classmethod
    def of(cls, query_set: QuerySet) -> QueryWeights:
        """The weights of a QuerySet; a sampled set (its card lists strata) whose query has no inclusion
        probability is an InputError naming the query."""
        if query_set.card.strata:
            for qid, p in query_set.provenance.items():
                if p.inclusion_probability is None:
                    raise InputError(
                        f"query {qid!r} of the sampled query set has no inclusion probability: its traffic weight "
                        "is unknown",
                        source="queries",
                    )
        return cls(query_set.weights("traffic"), query_set.strata)

    def check(self, query_ids: Sequence[str], who: str) -> None:
        """Every evaluated query has a weight: else an InputError naming the first that has none."""
        for qid in query_ids:
            if qid not in self.weights:
                raise InputError(
                    f"{who}: query {qid!r} was evaluated but is not in the query set, so it has no traffic weight"
                    + near_miss_hint([qid], set(self.weights) - set(query_ids), "the query set's"),
                    source="queries",
                )
            w = self.weights[qid]
            if not (isinstance(w, (int, float)) and math.isfinite(w) and w > 0):
                raise InputError(f"{who}: query {qid!r} has no usable traffic weight ({w!r})", source="queries")

    def to_json(self) -> bytes:
        return json.dumps({"weights": dict(self.weights), "strata": dict(self.strata)}).encode()

    @classmethod
    def from_json(cls, raw: bytes, where: str) -> QueryWeights:
        try:
            data: Any = json.loads(raw)
        except ValueError:
            data = None
        ok = (
            isinstance(data, dict)
            and set(data) == {"weights", "strata"}
            and isinstance(data["weights"], dict)
            and isinstance(data["strata"], dict)
            and all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in data["weights"].values())
            and all(s is None or isinstance(s, str) for s in data["strata"].values())
            and set(data["strata"]) == set(data["weights"])
        )
        if not ok:
            raise InputError("its query weights (metadata rag_eval.query_weights) are malformed", source=where)
        return cls({k: float(v) for k, v in data["weights"].items()}, dict(data["strata"]))


def hajek_bootstrap(
    values: np.ndarray,
    weights: np.ndarray,
    strata: Sequence[str | None],
    *,
    resamples: int,
    confidence: float,
    seed: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Hajek mean ``sum(w * y) / sum(w)`` of each column of ``values`` ``[queries, metrics]`` and its stratified
    bootstrap interval (percentile, at ``confidence``); NaN values are left out (each column then its own queries).
    Returns ``(mean, ci_low, ci_high)``, NaN for a column without a value."""
    m = values.shape[1]  # resamples and confidence: checked by Report.summarize
    finite = ~np.isnan(values)
    if finite.all():
        return _hajek(values, weights, list(strata), resamples, confidence, seed)
    out = np.full((3, m), np.nan)
    for j in range(m):
        keep = finite[:, j]
        column = _hajek(
            values[keep, j][:, None],
            weights[keep],
            [s for s, k in zip(strata, keep.tolist(), strict=True) if k],
            resamples,
            confidence,
            seed,
        )
        out[:, j] = [c[0] for c in column]
    return out[0], out[1], out[2]


def hajek_geometric(
    values: np.ndarray,
    weights: np.ndarray,
    strata: Sequence[str | None],
    *,
    resamples: int,
    confidence: float,
    seed: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`hajek_bootstrap` for the geometric families (gm_map, gm_bpref): the weighted mean of the logs of the
    values floored at 1e-5, and its interval, exponentiated."""
    logs = np.log(np.where(np.isnan(values), np.nan, np.maximum(values, MIN_GEO_MEAN)))
    mean, low, high = hajek_bootstrap(logs, weights, strata, resamples=resamples, confidence=confidence, seed=seed)
    return np.exp(mean), np.exp(low), np.exp(high)


def _hajek(
    values: np.ndarray, weights: np.ndarray, strata: list[str | None], resamples: int, confidence: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n, m = values.shape
    if n == 0:
        nan = np.full(m, np.nan)
        return nan, nan.copy(), nan.copy()
    weighted = values * weights[:, None]
    mean = weighted.sum(axis=0) / weights.sum()
    groups: dict[str | None, list[int]] = {}
    for i, s in enumerate(strata):
        groups.setdefault(s, []).append(i)
    order = sorted(groups, key=lambda s: (s is not None, s or ""))
    members = [np.array(groups[s], dtype=np.int64) for s in order]
    rng = np.random.default_rng(seed)
    means = np.empty((resamples, m))
    step = chunk_rows(n, resamples)
    for start in range(0, resamples, step):
        b = min(step, resamples - start)
        top = np.zeros((b, m))
        bottom = np.zeros(b)
        for rows in members:
            size = len(rows)
            picks = rng.integers(0, size, size=(b, size))
            picks += np.arange(b)[:, None] * size
            counts = np.bincount(picks.ravel(), minlength=b * size).reshape(b, size).astype(np.float64)
            top += counts @ weighted[rows]
            bottom += counts @ weights[rows]
        means[start : start + b] = top / bottom[:, None]
    alpha = 1 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2], axis=0)
    return mean, low, high
