"""Plain Python callables as stages.

    >>> from rag_eval.adapters import functions
    >>> def bm25_search(query, k):                      # -> [(doc_id, score), ...] best first, or doc ids, or Hits
    ...     return index.top(query, k)
    >>> first = functions.retriever(bm25_search, name="bm25")
    >>> def by_length(query, hits):                      # -> the hits reordered (Hits, doc ids or (doc_id, score))
    ...     return sorted(hits, key=lambda h: len(h.text))
    >>> pipe = rag_eval.stages.Pipeline(first, functions.reranker(by_length, name="shortest"), depth=50, budget=5)

A function may be sync or ``async def``. An async one gives the stage a native async path (``has_async``), which
``Pipeline.run(concurrency=N)`` drives on an event loop; a sync one runs on the runner's threads.

The fingerprint (the cache key) covers what decides the function's output, read when a run starts
(:mod:`rag_eval.stages._fingerprint`): its code object, its defaults and closure, every global it loads, followed
through the user's own modules (a helper edited in the same module changes the key; another stage's function in that
module does not), and for a bound method or a callable object the object itself; installed packages by name and
version; data by content (two indexes of the same size differ). An object that cannot be described exactly (a
model, a client, a C extension's index) makes the stage refuse to be cached, naming it: pass ``version="..."`` and
change it yourself when that object changes. With ``version=`` the fingerprint is the version alone, so editing the
code no longer invalidates the cache.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ..stages import Fingerprint, Hit, Reranker, Retriever
from ..stages._fingerprint import fingerprint
from ..stages.hits import as_hit
from ._common import map_back, qualified_name, returned_items, run_sync

__all__ = ["FunctionReranker", "FunctionRetriever", "reranker", "retriever"]


def retriever(fn: Callable[[str, int], Any], *, name: str, version: str | None = None) -> FunctionRetriever:
    """A first stage calling ``fn(query_text, k)``, which returns the ranking best first: ``(doc_id, score)``
    pairs, doc ids or :class:`~rag_eval.stages.Hit` records. ``k`` is the pipeline's depth; returning more is
    allowed (the runner keeps ``depth`` and records the rest as beyond the depth)."""
    return FunctionRetriever(fn, name=name, version=version)


def reranker(fn: Callable[[str, list[Hit]], Any], *, name: str, version: str | None = None) -> FunctionReranker:
    """A later stage calling ``fn(query_text, hits)``, which returns some of the given hits reordered, optionally
    rescored and cut: Hits, or doc ids, or ``(doc_id, score)`` pairs naming given hits. A doc id or pair keeps the
    given hit's text, tokens and metadata; a pair sets the new score; a bare doc id leaves the score empty (the
    score of an earlier stage would not describe this ranking)."""
    return FunctionReranker(fn, name=name, version=version)


class _FunctionStage:
    """What the two function stages share: the function, whether it is async, its fingerprint."""

    fn: Callable[..., Any]
    name: str
    version: str | None

    def _wrap(self, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise TypeError(f"stage {self.name!r}: expected a function, not {type(fn).__name__}")
        self.fn = fn
        self._is_async = _is_async(fn)

    def config(self) -> dict[str, Any]:
        return {}

    def code(self) -> Fingerprint:
        """The function's fingerprint, read now (a global rebound since the stage was made is seen)."""
        return fingerprint(self.fn, stage=self.name)

    @property
    def has_async(self) -> bool:
        return self._is_async

    def _call(self, *args: Any) -> Any:
        if self._is_async:
            return run_sync(lambda: self.fn(*args))
        return self.fn(*args)

    async def _acall(self, *args: Any) -> Any:
        if self._is_async:
            return await self.fn(*args)
        return await asyncio.to_thread(self.fn, *args)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, fn={getattr(self.fn, '__qualname__', self.fn)!r})"


class FunctionRetriever(_FunctionStage, Retriever):
    """A retriever made from a function ``fn(query_text, k)``; see :func:`retriever`."""

    def __init__(self, fn: Callable[[str, int], Any], *, name: str, version: str | None = None) -> None:
        Retriever.__init__(self, name, version=version)
        self._wrap(fn)

    def search(self, query: str, k: int) -> list[Hit]:
        return self._hits(self._call(query, k))

    async def asearch(self, query: str, k: int) -> list[Hit]:
        return self._hits(await self._acall(query, k))

    def _hits(self, returned: Any) -> list[Hit]:
        items = returned_items(self.name, returned, "the function")
        try:
            return [as_hit(item) for item in items]
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"stage {self.name!r}: {exc}") from None


class FunctionReranker(_FunctionStage, Reranker):
    """A reranker made from a function ``fn(query_text, hits)``; see :func:`reranker`. The function receives a
    new list each call (the hits themselves are immutable), so it may sort it in place."""

    def __init__(self, fn: Callable[[str, list[Hit]], Any], *, name: str, version: str | None = None) -> None:
        Reranker.__init__(self, name, version=version)
        self._wrap(fn)

    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        given = list(hits)
        return map_back(
            self.name,
            given,
            returned_items(self.name, self._call(query, list(given)), "the function"),
            what="the function",
        )

    async def arerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        given = list(hits)
        returned = await self._acall(query, list(given))
        return map_back(self.name, given, returned_items(self.name, returned, "the function"), what="the function")


def _is_async(fn: Any) -> bool:
    if inspect.iscoroutinefunction(fn):  # also sees through functools.partial and bound methods
        return True
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - the method itself, to ask whether it is async
    return not inspect.isfunction(fn) and inspect.iscoroutinefunction(call)


def source_fingerprint(fn: Callable[..., Any]) -> str:
    """The hash of what defines ``fn``'s behaviour (see the module's docstring); ``Uncacheable`` when some of it
    cannot be described exactly. Stable across processes."""
    return fingerprint(fn, stage=qualified_name(fn)).digest
