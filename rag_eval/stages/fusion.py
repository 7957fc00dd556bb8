"""Fusing several first-stage retrievers into one ranking (reciprocal rank fusion, or a weighted score sum)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .hits import Hit
from .stage import Retriever

METHODS = ("rrf", "combsum")


class Fusion(Retriever):
    """A first stage made of several retrievers. The harness runs (and caches, and reports) each input retriever as a
    stage of its own, then :meth:`combine` merges their rankings; ``search`` does both for direct use.

    ``rrf``: score = sum over inputs of weight / (k + rank) (Cormack et al. 2009; k = 60 by default).
    ``combsum``: score = sum of weight x score (inputs without scores count 0). Ties keep first appearance.
    """

    def __init__(
        self,
        *retrievers: Retriever,
        method: str = "rrf",
        k: int = 60,
        weights: Sequence[float] | None = None,
        name: str | None = None,
    ) -> None:
        if len(retrievers) < 2 or not all(isinstance(r, Retriever) for r in retrievers):
            raise TypeError("fuse() needs two or more retrievers")
        if method not in METHODS:
            raise ValueError(f"unknown fusion method {method!r}; choose one of {METHODS}")
        if k < 0:
            raise ValueError(f"the rrf constant k must be 0 or more, not {k}")
        if weights is not None and len(weights) != len(retrievers):
            raise ValueError("give one weight per retriever")
        names = [r.name for r in retrievers]
        if len(set(names)) != len(names):
            raise ValueError(f"the fused retrievers need distinct names, not {names}")
        super().__init__(name or f"{method}({','.join(names)})")
        self.retrievers = tuple(retrievers)
        self.method = method
        self.k = k
        self.weights = tuple(weights) if weights is not None else (1.0,) * len(retrievers)

    def config(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "k": self.k,
            "weights": self.weights,
            "inputs": [r.fingerprint() for r in self.retrievers],
        }

    def combine(self, rankings: Sequence[Sequence[Hit]], depth: int) -> list[Hit]:
        """The fused ranking of the inputs' rankings, at most ``depth`` hits; a hit keeps the fields of its first
        appearance, with the fused score."""
        scores: dict[str, float] = {}
        first: dict[str, Hit] = {}
        for weight, ranking in zip(self.weights, rankings):
            for rank, hit in enumerate(ranking, start=1):
                if self.method == "rrf":
                    gain = weight / (self.k + rank)
                else:
                    gain = weight * (hit.score or 0.0)
                scores[hit.doc_id] = scores.get(hit.doc_id, 0.0) + gain
                first.setdefault(hit.doc_id, hit)
        order = sorted(first, key=lambda d: -scores[d])  # stable: ties keep first appearance
        return [first[d].with_score(scores[d]) for d in order[:depth]]

    def search(self, query: str, k: int) -> list[Hit]:
        return self.combine([r.search(query, k) for r in self.retrievers], k)


def fuse(
    *retrievers: Retriever,
    method: str = "rrf",
    k: int = 60,
    weights: Sequence[float] | None = None,
    name: str | None = None,
) -> Fusion:
    """A first stage fusing ``retrievers``; each is kept and reported as a stage of its own."""
    return Fusion(*retrievers, method=method, k=k, weights=weights, name=name)
