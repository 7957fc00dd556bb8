"""Hit: one result of a stage. A stage's ranking is the order of the hits it returns."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Hit:
    """A retrieved chunk: its id, and what a stage knows of it.

    ``score`` is data, never used to re-sort; ``text`` (or a handle to it) and ``tokens`` feed token budgets;
    ``metadata`` is free (a source document id, character offsets: the ground-truth tools read them).
    """

    doc_id: str
    score: float | None = None
    text: str | None = None
    tokens: int | None = None
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if not isinstance(self.doc_id, str):
            raise TypeError(f"a hit's doc_id must be a str, not {type(self.doc_id).__name__} ({self.doc_id!r})")
        if self.score is not None:
            score = float(self.score)
            if math.isnan(score):
                raise ValueError(f"hit {self.doc_id!r}: score is NaN")
            object.__setattr__(self, "score", score)

    def with_score(self, score: float | None) -> Hit:
        return replace(self, score=score)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (what the cache stores); metadata must be JSON-serialisable."""
        out: dict[str, Any] = {"doc_id": self.doc_id}
        if self.score is not None:
            out["score"] = self.score
        if self.text is not None:
            out["text"] = self.text
        if self.tokens is not None:
            out["tokens"] = self.tokens
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        return out

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> Hit:
        return cls(
            record["doc_id"], record.get("score"), record.get("text"), record.get("tokens"),
            MappingProxyType(dict(record.get("metadata", {}))),
        )


def as_hit(item: Any) -> Hit:
    """A stage's returned item as a Hit: a Hit, a ``(doc_id, score)`` pair, or a bare doc id."""
    if isinstance(item, Hit):
        return item
    if isinstance(item, str):
        return Hit(item)
    if isinstance(item, (tuple, list)) and len(item) == 2:
        return Hit(item[0], item[1])
    if isinstance(item, Mapping) and "doc_id" in item:
        return Hit.from_json(item)
    raise TypeError(f"cannot read {item!r} as a hit: return Hit objects, (doc_id, score) pairs or doc ids")
