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

A model answers a batch of queries faster than one query at a time: with ``batch=True`` the function takes the
batch (``fn(query_texts, k)``, ``fn(query_texts, hit_lists)``) and returns one answer per query, in order;
``Pipeline.run(..., batch_size=N)`` hands it up to N queries a call, and a single query is a batch of one.

    >>> def encode_and_search(queries, k):               # one model call for the whole batch
    ...     vectors = model.encode(queries, batch_size=len(queries))
    ...     return [index.top(v, k) for v in vectors]
    >>> first = functions.retriever(encode_and_search, name="dense", batch=True)

A batch call that raises, or returns another number of answers than it was given queries, is asked again query by
query (a batch of one each), so that a fault is charged to its own query.

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

from ..errors import InputError
from ..stages import Fingerprint, Hit, Reranker, Retriever
from ..stages._fingerprint import fingerprint
from ..stages.hits import as_hit
from ._common import map_back, qualified_name, returned_items, run_sync

__all__ = [
    "FunctionBatchReranker",
    "FunctionBatchRetriever",
    "FunctionReranker",
    "FunctionRetriever",
    "reranker",
    "retriever",
]


def retriever(
    fn: Callable[..., Any], *, name: str, version: str | None = None, batch: bool = False
) -> FunctionRetriever:
    """A first stage calling ``fn(query_text, k)``, which returns the ranking best first: ``(doc_id, score)``
    pairs, doc ids or :class:`~rag_eval.stages.Hit` records. ``k`` is the pipeline's depth; returning more is
    allowed (the runner keeps ``depth`` and records the rest as beyond the depth).

    ``batch=True``: ``fn(query_texts, k)`` takes a list of query texts and returns one such ranking per query, in
    their order (a :class:`FunctionBatchRetriever`)."""
    if _batch_flag(name, batch):
        return FunctionBatchRetriever(fn, name=name, version=version)
    return FunctionRetriever(fn, name=name, version=version)


def reranker(fn: Callable[..., Any], *, name: str, version: str | None = None, batch: bool = False) -> FunctionReranker:
    """A later stage calling ``fn(query_text, hits)``, which returns some of the given hits reordered, optionally
    rescored and cut: Hits, or doc ids, or ``(doc_id, score)`` pairs naming given hits. A doc id or pair keeps the
    given hit's text, tokens and metadata; a pair sets the new score; a bare doc id leaves the score empty (the
    score of an earlier stage would not describe this ranking).

    ``batch=True``: ``fn(query_texts, hit_lists)`` takes a list of query texts and a list of hit lists (a new
    list for each query) and returns one such answer per query, in their order (a :class:`FunctionBatchReranker`)."""
    if _batch_flag(name, batch):
        return FunctionBatchReranker(fn, name=name, version=version)
    return FunctionReranker(fn, name=name, version=version)


def _batch_flag(name: str, batch: object) -> bool:
    if not isinstance(batch, bool):  # batch="no" would be true: refuse anything but a bool
        raise InputError(f"stage {name!r}: batch must be True or False, not {batch!r}")
    return batch


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


class FunctionBatchRetriever(FunctionRetriever):
    """A retriever made from a batch function ``fn(query_texts, k)`` returning one ranking per query; see
    :func:`retriever` (``batch=True``). :meth:`search` is a batch of one."""

    def config(self) -> dict[str, Any]:
        return {"batch": True}  # the same function read one query at a time would mean something else

    def search(self, query: str, k: int) -> list[Hit]:
        return self._one(self._call([query], k))

    async def asearch(self, query: str, k: int) -> list[Hit]:
        return self._one(await self._acall([query], k))

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        queries = list(queries)
        return self._all(self._call(queries, k), len(queries))

    async def asearch_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        queries = list(queries)
        return self._all(await self._acall(queries, k), len(queries))

    def _one(self, returned: Any) -> list[Hit]:
        return self._all(returned, 1)[0]

    def _all(self, returned: Any, expected: int) -> list[list[Hit]]:
        return [self._hits(answer) for answer in _answers(self.name, returned, expected, "rankings")]


class FunctionBatchReranker(FunctionReranker):
    """A reranker made from a batch function ``fn(query_texts, hit_lists)`` returning one answer per query; see
    :func:`reranker` (``batch=True``). :meth:`rerank` is a batch of one. Each query's hits reach the function as a
    new list, so it may sort them in place."""

    def config(self) -> dict[str, Any]:
        return {"batch": True}

    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        return self.rerank_batch([query], [hits])[0]

    async def arerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        return (await self.arerank_batch([query], [hits]))[0]

    def rerank_batch(self, queries: Sequence[str], hit_lists: Sequence[Sequence[Hit]]) -> list[list[Hit]]:
        queries, given = list(queries), [list(hits) for hits in hit_lists]
        return self._map_all(given, self._call(queries, [list(hits) for hits in given]))

    async def arerank_batch(self, queries: Sequence[str], hit_lists: Sequence[Sequence[Hit]]) -> list[list[Hit]]:
        queries, given = list(queries), [list(hits) for hits in hit_lists]
        return self._map_all(given, await self._acall(queries, [list(hits) for hits in given]))

    def _map_all(self, given: list[list[Hit]], returned: Any) -> list[list[Hit]]:
        answers = _answers(self.name, returned, len(given), "answers")
        return [
            map_back(self.name, hits, returned_items(self.name, answer, "the function"), what="the function")
            for hits, answer in zip(given, answers, strict=True)
        ]


def _answers(stage_name: str, returned: Any, expected: int, what: str) -> list[Any]:
    """A batch function's answers, one per query asked: another number is an error (the runner then asks the
    queries one by one, so a wrong count in a batch is charged to no query that did not cause it)."""
    answers = returned_items(stage_name, returned, "the batch function")
    if len(answers) != expected:
        raise ValueError(
            f"stage {stage_name!r}: the batch function returned {len(answers)} {what} for {expected} "
            f"quer{'y' if expected == 1 else 'ies'} (one per query, in their order)"
        )
    return answers


def _is_async(fn: Any) -> bool:
    if inspect.iscoroutinefunction(fn):  # also sees through functools.partial and bound methods
        return True
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - the method itself, to ask whether it is async
    return not inspect.isfunction(fn) and inspect.iscoroutinefunction(call)


def source_fingerprint(fn: Callable[..., Any]) -> str:
    """The hash of what defines ``fn``'s behaviour (see the module's docstring); ``Uncacheable`` when some of it
    cannot be described exactly. Stable across processes."""
    return fingerprint(fn, stage=qualified_name(fn)).digest
