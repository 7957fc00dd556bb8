"""Fusing several first-stage retrievers into one ranking: reciprocal rank fusion, a weighted score sum, or a convex
combination of min-max normalised scores."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Never

from .._checks import check_choice, check_int, check_number
from ..errors import InputError
from .hits import Hit
from .stage import Retriever

METHODS = ("rrf", "combsum", "wsum")
NORMS = ("min-max",)  # how ``wsum`` normalises each input's scores, per query, before weighting them
RRF_K = 60  # the reciprocal rank fusion constant of Cormack et al. (2009)


def _no_other_keywords(where: str, unexpected: Mapping[str, object]) -> None:
    """``k=`` was the RRF constant before 0.2: it is ``rrf_k=`` now (``k`` is a cutoff everywhere in rag_eval)."""
    if "k" in unexpected:
        raise TypeError(
            f"{where} takes the RRF constant as rrf_k= (k is a cutoff everywhere in rag_eval): "
            f"write {where}(..., rrf_k={unexpected['k']!r})"
        )
    if unexpected:
        raise TypeError(f"{where} got an unexpected keyword argument {next(iter(unexpected))!r}")


class Fusion(Retriever):
    """A first stage made of several retrievers. The harness runs (and caches, and reports) each input retriever as a
    stage of its own, then :meth:`combine` merges their rankings; ``search`` does both for direct use.

    ``rrf``: score = sum over inputs of weight / (rrf_k + rank) (Cormack et al. 2009; rrf_k = 60 by default).
    ``combsum``: score = sum of weight x score (inputs without scores count 0).
    ``wsum``: a convex combination of normalised scores (``norm="min-max"``, the only one): per query and per input,
    each returned hit's score becomes (score - min) / (max - min) over the hits that input returned for that query
    (all 0 when max = min: one hit, or equal scores), then score = sum of weight x normalised score, a doc an input
    did not return counting 0 from it. With two inputs and ``weights=(alpha, 1 - alpha)`` this is
    ``alpha x a + (1 - alpha) x b``. This is ranx's ``fuse(runs, norm="min-max", method="wsum")`` on the same
    rankings (ranx floors max - min at 1e-9 instead: it differs only when 0 < max - min < 1e-9). Every hit of a
    ``wsum`` input needs a finite score: a hit without one, or with an infinite one, is an InputError for that query.

    Ties (equal fused scores) keep first appearance: the first input's ranking first, in its order, then the docs
    only later inputs returned, in theirs.
    """

    def __init__(
        self,
        *retrievers: Retriever,
        method: str = "rrf",
        rrf_k: int = RRF_K,
        weights: Sequence[float] | None = None,
        name: str | None = None,
        norm: str | None = None,
        **unexpected: Never,
    ) -> None:
        _no_other_keywords("Fusion", unexpected)
        if len(retrievers) < 2 or not all(isinstance(r, Retriever) for r in retrievers):
            raise TypeError("fuse() needs two or more retrievers")
        check_choice(method, "fusion method", METHODS)
        if norm is not None and method != "wsum":
            raise InputError(f"norm={norm!r}: only the wsum fusion normalises scores (method={method!r})")
        if method == "wsum":
            check_choice(norm or "min-max", "score normalisation", NORMS)
        rrf_k = check_int(rrf_k, "the RRF constant rrf_k", low=0, high=None)
        if weights is not None and len(weights) != len(retrievers):
            raise ValueError("give one weight per retriever")
        for i, w in enumerate(weights or ()):  # a NaN weight would make every fused score NaN, in no order
            check_number(w, f"fusion weight {i + 1} (of retriever {retrievers[i].name!r})")
        names = [r.name for r in retrievers]
        if len(set(names)) != len(names):
            raise ValueError(f"the fused retrievers need distinct names, not {names}")
        super().__init__(name or f"{method}({','.join(names)})")
        self.retrievers: tuple[Retriever, ...] = tuple(retrievers)
        self.method: str = method
        self.rrf_k: int = int(rrf_k)
        self.weights: tuple[float, ...] = tuple(weights) if weights is not None else (1.0,) * len(retrievers)
        self.norm: str | None = (norm or "min-max") if method == "wsum" else None

    def config(self) -> dict[str, Any]:
        config = {
            "method": self.method,
            "k": self.rrf_k,  # named "k" in the key since 0.1: renaming it would invalidate every cache
            "weights": self.weights,
            "inputs": [r.fingerprint() for r in self.retrievers],
        }
        if self.norm is not None:  # only wsum's: the keys of rrf and combsum stay what they were
            config["norm"] = self.norm
        return config

    def combine(self, rankings: Sequence[Sequence[Hit]], depth: int) -> list[Hit]:
        """The fused ranking of the inputs' rankings, at most ``depth`` hits; a hit keeps the fields of its first
        appearance, with the fused score. Under ``combsum`` a fused score that is NaN (one input's +inf against
        another's -inf, or an infinite score times a weight of 0) is an InputError naming the doc: a NaN has no place
        in the order."""
        if self.method == "wsum":
            rankings = [self._normalised(i, ranking) for i, ranking in enumerate(rankings)]
        scores: dict[str, float] = {}
        first: dict[str, Hit] = {}
        for weight, ranking in zip(self.weights, rankings, strict=True):
            for rank, hit in enumerate(ranking, start=1):
                # combsum: a hit's score is never NaN (Hit refuses it), but +inf and -inf are scores
                # wsum: the scores are the normalised ones (_normalised), never None
                gain = weight / (self.rrf_k + rank) if self.method == "rrf" else weight * (hit.score or 0.0)
                scores[hit.doc_id] = scores.get(hit.doc_id, 0.0) + gain
                first.setdefault(hit.doc_id, hit)
        nan = next((d for d, score in scores.items() if math.isnan(score)), None)
        if nan is not None:
            raise InputError(
                f"combsum: doc {nan!r}'s fused score is NaN (an infinite score of one input against the opposite "
                "infinity of another, or an infinite score times a weight of 0), which has no place in the order"
            )
        order = sorted(first, key=lambda d: -scores[d])  # stable: ties keep first appearance
        return [first[d].with_score(scores[d]) for d in order[:depth]]

    def _normalised(self, i: int, ranking: Sequence[Hit]) -> list[Hit]:
        """Input ``i``'s hits with their min-max normalised scores (see the class): each must have a finite score."""
        scores = []
        for hit in ranking:
            if hit.score is None or not math.isfinite(hit.score):
                raise InputError(
                    f"wsum fuses scores: input retriever {self.retrievers[i].name!r} gave doc {hit.doc_id!r} "
                    f"{'no score' if hit.score is None else f'the score {hit.score!r}'}, which min-max cannot scale"
                )
            scores.append(hit.score)
        if not scores:
            return []
        low, high = min(scores), max(scores)
        span = high - low
        return [hit.with_score((s - low) / span if span > 0 else 0.0) for hit, s in zip(ranking, scores, strict=True)]

    def search(self, query: str, k: int) -> list[Hit]:
        return self.combine([r.search(query, k) for r in self.retrievers], k)


def fuse(
    *retrievers: Retriever,
    method: str = "rrf",
    rrf_k: int = RRF_K,
    weights: Sequence[float] | None = None,
    name: str | None = None,
    norm: str | None = None,
    **unexpected: Never,
) -> Fusion:
    """A first stage fusing ``retrievers``; each is kept and reported as a stage of its own. ``method``: ``"rrf"``
    (the default), ``"combsum"`` or ``"wsum"`` (see :class:`Fusion`). ``rrf_k``: the RRF constant (score = sum of
    weight / (rrf_k + rank)); ``k=``, its name before 0.2, is a TypeError saying so. ``norm``: wsum's score
    normalisation (``"min-max"``, its default and only one): ``fuse(a, b, method="wsum", weights=(alpha, 1 - alpha))``
    is the convex combination ``alpha x a + (1 - alpha) x b`` of their min-max normalised scores."""
    _no_other_keywords("fuse", unexpected)
    return Fusion(*retrievers, method=method, rrf_k=rrf_k, weights=weights, name=name, norm=norm)
