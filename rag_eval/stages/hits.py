"""Hit: one result of a stage. A stage's ranking is the order of the hits it returns."""

from __future__ import annotations

import math
from functools import partial
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class _Fields(NamedTuple):
    doc_id: str
    score: float | None = None
    text: str | None = None
    tokens: int | None = None
    metadata: Mapping[str, Any] = _EMPTY


class Hit(_Fields):
    """A retrieved chunk: its id, and what a stage knows of it. Immutable.

    ``score`` is data, never used to re-sort; ``text`` (or a handle to it) and ``tokens`` feed token budgets;
    ``metadata`` is free (a source document id, character offsets: the ground-truth tools read them).
    (A named tuple underneath: a cached run rebuilds many thousands of hits, and tuples are cheap to make.)
    """

    __slots__ = ()

    def __new__(
        cls, doc_id: str, score: float | None = None, text: str | None = None, tokens: int | None = None,
        metadata: Mapping[str, Any] = _EMPTY,
    ) -> Hit:
        if not isinstance(doc_id, str):
            raise TypeError(f"a hit's doc_id must be a str, not {type(doc_id).__name__} ({doc_id!r})")
        if score is not None:
            score = float(score)
            if math.isnan(score):
                raise ValueError(f"hit {doc_id!r}: score is NaN")
        if not isinstance(metadata, MappingProxyType):
            metadata = MappingProxyType(dict(metadata)) if metadata else _EMPTY
        return super().__new__(cls, doc_id, score, text, tokens, metadata)

    def with_score(self, score: float | None) -> Hit:
        return Hit(self.doc_id, score, self.text, self.tokens, self.metadata)

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
        return cls(record["doc_id"], record.get("score"), record.get("text"), record.get("tokens"),
                   record.get("metadata") or _EMPTY)

    @staticmethod
    def to_columns(hits: Sequence[Hit]) -> dict[str, list[Any]]:
        """Hits as JSON-ready columns (what the cache stores): one list per field."""
        return {
            "doc_id": [h.doc_id for h in hits], "score": [h.score for h in hits], "text": [h.text for h in hits],
            "tokens": [h.tokens for h in hits], "metadata": [dict(h.metadata) if h.metadata else None for h in hits],
        }

    @classmethod
    def from_columns(cls, columns: Mapping[str, list[Any]]) -> tuple[Hit, ...]:
        """The hits :meth:`to_columns` wrote, rebuilt without the checks (they were checked before being written)."""
        metadata = [MappingProxyType(m) if m else _EMPTY for m in columns["metadata"]]
        fields = zip(columns["doc_id"], columns["score"], columns["text"], columns["tokens"], metadata)
        return tuple(map(partial(tuple.__new__, cls), fields))

    def __repr__(self) -> str:
        extra = "".join(f", {k}={getattr(self, k)!r}" for k in ("score", "text", "tokens") if getattr(self, k) is not None)
        return f"Hit({self.doc_id!r}{extra}{', metadata=...' if self.metadata else ''})"


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
