"""Stages: a retriever turns a query into ranked hits; a reranker reorders (and may rescore or cut) the hits it is
given. Adapters (``rag_eval.adapters``) wrap LangChain, LlamaIndex and plain functions as these."""

from __future__ import annotations

import asyncio
import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from .fingerprint import Fingerprint, fingerprint, is_users_class
from .hits import Hit


class Stage(ABC):
    """One step of a pipeline, with a name and a fingerprint of its configuration (the cache key)."""

    kind: ClassVar[str]

    def __init__(self, name: str, *, version: str | None = None) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a stage needs a non-empty name, not {name!r}")
        self.name = name
        self.version = version

    def config(self) -> dict[str, Any]:
        """What identifies this stage's behaviour besides its class and name (JSON-serialisable)."""
        return {}

    def code(self) -> Fingerprint | None:
        """What decides this stage's outputs besides :meth:`config` (see :mod:`rag_eval.stages.fingerprint`): for a
        stage class of the user's own, its code, and, when it does not define :meth:`config`, its whole state; None
        for rag_eval's own classes (their config says it all). Raises ``Uncacheable`` when that cannot be described
        exactly."""
        if not is_users_class(type(self)):
            return None
        if type(self).config is Stage.config:
            return fingerprint(self, stage=self.name)
        return fingerprint(type(self), stage=self.name)

    def described(self) -> Fingerprint:
        """The fingerprint (a stable hash of the class, name, version, :meth:`config` and, without a version,
        :meth:`code`: equal fingerprints, equal outputs) and what it covers, in words."""
        code = None if self.version is not None else self.code()
        identity = {
            "class": f"{type(self).__module__}.{type(self).__qualname__}",
            "name": self.name,
            "version": self.version,
            "config": self.config(),
            "code": code.digest if code is not None else None,
        }
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:20]
        if self.version is not None:
            covers = f"version {self.version!r} (given: the code is not looked at)"
        elif code is not None:
            covers = code.covers
        else:
            covers = "its class and its settings (config())"
        return Fingerprint(digest, covers)

    def fingerprint(self) -> str:
        """The stage's cache key: see :meth:`described`."""
        return self.described().digest

    @property
    def has_async(self) -> bool:
        """Whether the stage has a native async path (else concurrency uses threads)."""
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Retriever(Stage):
    """A first stage: ``search(query_text, k)`` returns at most k hits, best first.

    ``search_batch(queries, k)`` answers several queries in one call (one list of hits per query, in order); the
    runner calls it with ``Pipeline.run(..., batch_size=N)``. By default it calls :meth:`search` per query (and
    the runner then calls :meth:`search` itself, so that a fault stays its query's); a stage whose model or
    service answers a batch faster (one encoder call, one request) overrides it, and ``asearch_batch`` for the
    async path.
    """

    kind = "retriever"

    @abstractmethod
    def search(self, query: str, k: int) -> Sequence[Hit]: ...

    async def asearch(self, query: str, k: int) -> Sequence[Hit]:
        raise NotImplementedError

    def search_batch(self, queries: Sequence[str], k: int) -> Sequence[Sequence[Hit]]:
        """One ranking of at most ``k`` hits per query of ``queries``, in their order (by default, :meth:`search`
        for each). If it raises, or returns another number of rankings, the runner asks :meth:`search` query by
        query instead, so that the fault is charged to its own query."""
        return [self.search(query, k) for query in queries]

    async def asearch_batch(self, queries: Sequence[str], k: int) -> Sequence[Sequence[Hit]]:
        """The async twin of :meth:`search_batch` (by default, :meth:`asearch` for each query, gathered)."""
        return await asyncio.gather(*(self.asearch(query, k) for query in queries))


class Reranker(Stage):
    """A later stage: ``rerank(query_text, hits)`` returns the hits reordered, optionally rescored and cut.

    It may return only hits it was given (by doc id); the input list must not be changed in place.

    ``rerank_batch(queries, hit_lists)`` reranks several queries in one call (one list per query, in order);
    the runner calls it with ``Pipeline.run(..., batch_size=N)``. By default it calls :meth:`rerank` per query
    (and the runner then calls :meth:`rerank` itself, so that a fault stays its query's); a model that scores a
    batch faster overrides it, and ``arerank_batch`` for the async path.
    """

    kind = "reranker"

    @abstractmethod
    def rerank(self, query: str, hits: Sequence[Hit]) -> Sequence[Hit]: ...

    async def arerank(self, query: str, hits: Sequence[Hit]) -> Sequence[Hit]:
        raise NotImplementedError

    def rerank_batch(self, queries: Sequence[str], hit_lists: Sequence[Sequence[Hit]]) -> Sequence[Sequence[Hit]]:
        """The hits of each query reranked, in the order of ``queries`` (by default, :meth:`rerank` for each).
        Each list is the stage's own (it must not be changed in place). If it raises, or returns another number
        of lists, the runner asks :meth:`rerank` query by query instead, so that the fault is charged to its own
        query."""
        return [self.rerank(query, hits) for query, hits in zip(queries, hit_lists, strict=True)]

    async def arerank_batch(
        self, queries: Sequence[str], hit_lists: Sequence[Sequence[Hit]]
    ) -> Sequence[Sequence[Hit]]:
        """The async twin of :meth:`rerank_batch` (by default, :meth:`arerank` for each query, gathered)."""
        return await asyncio.gather(*(self.arerank(q, hits) for q, hits in zip(queries, hit_lists, strict=True)))
