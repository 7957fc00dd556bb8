"""Hit: one result of a stage. A stage's ranking is the order of the hits it returns.

Every field is checked when a Hit is made, so that no bad value travels to a metric or a token budget:
``doc_id`` a non-empty str; ``score`` None or a real number (an int, a float or a NumPy number: not a bool, a str or
NaN; +-inf is kept, as the run readers keep it); ``text`` None or a str; ``tokens`` None or an int >= 0 (not a bool,
a float, NaN or inf: a negative count would let a token budget deliver everything); ``metadata`` a mapping.
A bad field is an :class:`~rag_eval.errors.InputError` naming the hit and the field. The cache rebuilds the hits
it wrote through :meth:`Hit.from_columns`, which checks whole columns at once instead of each hit.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from functools import partial
from types import MappingProxyType
from typing import Any, NamedTuple

from ..errors import InputError

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class _Fields(NamedTuple):
    doc_id: str
    score: float | None = None
    text: str | None = None
    tokens: int | None = None
    metadata: Mapping[str, Any] = _EMPTY


_tuple_new = tuple.__new__


class Hit(_Fields):
    """A retrieved chunk: its id, and what a stage knows of it. Immutable; every field checked (module doc).

    ``score`` is data, never used to re-sort; ``text`` (or a handle to it) and ``tokens`` feed token budgets;
    ``metadata`` is free (a source document id, character offsets: the ground-truth tools read them).
    (A named tuple underneath: a cached run rebuilds many thousands of hits, and tuples are cheap to make.)
    """

    __slots__ = ()

    def __new__(
        cls,
        doc_id: str,
        score: float | None = None,
        text: str | None = None,
        tokens: int | None = None,
        metadata: Mapping[str, Any] = _EMPTY,
    ) -> Hit:
        if type(doc_id) is not str or not doc_id:
            _bad_doc_id(doc_id)
        if score is not None:
            if type(score) is not float:
                score = _real(score, doc_id)
            if score != score:
                raise InputError(f"hit {doc_id!r}: score is NaN")
        if text is not None and type(text) is not str:
            raise InputError(f"hit {doc_id!r}: text must be a str or None, not {type(text).__name__}")
        if tokens is not None and (type(tokens) is not int or tokens < 0):
            tokens = _token_count(tokens, doc_id)
        if metadata is not _EMPTY:
            kind = type(metadata)
            if kind is dict:  # the common case, without the ABC check of isinstance(.., Mapping)
                metadata = MappingProxyType(dict(metadata)) if metadata else _EMPTY
            elif kind is not MappingProxyType:
                if not isinstance(metadata, Mapping):
                    raise InputError(f"hit {doc_id!r}: metadata must be a mapping, not {kind.__name__}")
                metadata = MappingProxyType(dict(metadata)) if metadata else _EMPTY
        return _tuple_new(cls, (doc_id, score, text, tokens, metadata))  # not the named tuple's own __new__

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
        return cls(
            record["doc_id"],
            record.get("score"),
            record.get("text"),
            record.get("tokens"),
            record.get("metadata") or _EMPTY,
        )

    @staticmethod
    def to_columns(hits: Sequence[Hit]) -> dict[str, list[Any]]:
        """Hits as JSON-ready columns (what the cache stores): one list per field."""
        return {
            "doc_id": [h.doc_id for h in hits],
            "score": [h.score for h in hits],
            "text": [h.text for h in hits],
            "tokens": [h.tokens for h in hits],
            "metadata": [dict(h.metadata) if h.metadata else None for h in hits],
        }

    @classmethod
    def from_columns(cls, columns: Mapping[str, list[Any]]) -> tuple[Hit, ...]:
        """The hits :meth:`to_columns` wrote, rebuilt fast: each column is checked whole (a cache file edited or
        damaged by hand gives an InputError, never a hit with a negative token count), then the tuples are made
        without the per-hit checks."""
        doc_ids, scores, texts, tokens = columns["doc_id"], columns["score"], columns["text"], columns["tokens"]
        metadata = columns["metadata"]
        if not _columns_ok(doc_ids, scores, texts, tokens, metadata):
            _first_bad(doc_ids, scores, texts, tokens, metadata)
        frozen = [MappingProxyType(m) if m else _EMPTY for m in metadata]
        return tuple(map(partial(tuple.__new__, cls), zip(doc_ids, scores, texts, tokens, frozen, strict=True)))

    def __repr__(self) -> str:
        extra = "".join(
            f", {k}={getattr(self, k)!r}" for k in ("score", "text", "tokens") if getattr(self, k) is not None
        )
        return f"Hit({self.doc_id!r}{extra}{', metadata=...' if self.metadata else ''})"


def _bad_doc_id(doc_id: Any) -> None:
    if not isinstance(doc_id, str):
        raise InputError(f"a hit's doc_id must be a str, not {type(doc_id).__name__} ({doc_id!r})")
    raise InputError("a hit's doc_id must be a non-empty str, not ''")


def _real(score: Any, doc_id: str) -> float:
    if isinstance(score, bool) or not isinstance(score, numbers.Real):
        raise InputError(f"hit {doc_id!r}: score must be a real number or None, not {type(score).__name__} {score!r}")
    return float(score)


def _token_count(tokens: Any, doc_id: str) -> int:
    if isinstance(tokens, bool) or not isinstance(tokens, numbers.Integral):
        if isinstance(tokens, float) and not math.isfinite(tokens):
            raise InputError(f"hit {doc_id!r}: tokens is {tokens!r}: a token count is an int >= 0 or None")
        raise InputError(f"hit {doc_id!r}: tokens must be an int >= 0 or None, not {type(tokens).__name__} {tokens!r}")
    if tokens < 0:
        raise InputError(
            f"hit {doc_id!r}: tokens must be 0 or more, not {int(tokens)} (a negative count would let "
            "a token budget deliver everything)"
        )
    return int(tokens)


_NONE = type(None)


def _columns_ok(
    doc_ids: list[Any], scores: list[Any], texts: list[Any], tokens: list[Any], metadata: list[Any]
) -> bool:
    """Whether cached columns hold only what Hit's checks allow (scores as floats), a column at a time: a type
    set per column, a sum of the scores (NaN shows) and a min of the token counts."""
    n = len(doc_ids)
    if not len(scores) == len(texts) == len(tokens) == len(metadata) == n:
        return False
    if not set(map(type, doc_ids)) <= {str} or not all(doc_ids):
        return False
    kinds = set(map(type, scores))
    if kinds == {float}:
        total = sum(scores)
        if total != total and any(v != v for v in scores):  # NaN (or inf - inf: look closer)
            return False
    elif kinds - {_NONE} and (not kinds <= {float, _NONE} or any(v != v for v in scores if v is not None)):
        return False
    if not set(map(type, texts)) <= {str, _NONE}:
        return False
    kinds = set(map(type, tokens))
    if kinds == {int}:
        if min(tokens) < 0:
            return False
    elif kinds - {_NONE} and (not kinds <= {int, _NONE} or min(t for t in tokens if t is not None) < 0):
        return False
    return set(map(type, metadata)) <= {dict, _NONE}


def _first_bad(doc_ids: list[Any], scores: list[Any], texts: list[Any], tokens: list[Any], metadata: list[Any]) -> None:
    """Raise the per-hit check's error for the first cached hit that fails it (a column check found one)."""
    for i, fields in enumerate(zip(doc_ids, scores, texts, tokens, metadata, strict=False)):
        doc, score, text, count, meta = fields
        try:
            Hit(doc, score, text, count, meta or _EMPTY)
            if score is not None and type(score) is not float:
                raise InputError(f"hit {doc!r}: score must be a float or null, not {type(score).__name__}")
        except InputError as exc:
            raise InputError(f"cached hit {i + 1}: {exc}") from None
    if not len(scores) == len(texts) == len(tokens) == len(metadata) == len(doc_ids):
        raise InputError("cached hits: the columns differ in length")
    raise InputError("cached hits: a column holds a value of the wrong type")  # pragma: no cover


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
