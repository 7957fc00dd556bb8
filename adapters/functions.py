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

The fingerprint (the cache key) is a hash of the function's source code (``inspect.getsource``; where there is
no source, of its code object), plus its default arguments, the plain values its closure holds and, for a bound
method or a callable object, the object's plain settings: the same function gives the same fingerprint in every
process, and editing it invalidates the cache. What the source reads from elsewhere (a global index, a file) is
not covered: pass ``version="..."`` and change it yourself when that changes. With ``version=`` the fingerprint
is the version alone, so editing the source (a comment, a refactor) no longer invalidates the cache.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import textwrap
import types
from collections.abc import Callable, Sequence
from typing import Any

from ..stages.hits import Hit, as_hit
from ..stages.stage import Reranker, Retriever
from ._common import describe, map_back, qualified_name, returned_items, run_sync

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
        # computed now: the function as wrapped, even if its file is edited while the process runs
        self._source = None if self.version is not None else source_fingerprint(fn)

    def config(self) -> dict[str, Any]:
        if self.version is not None:
            return {"version": self.version}
        return {"source": self._source}

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
        return map_back(self.name, given, returned_items(self.name, self._call(query, list(given)), "the function"),
                        what="the function")

    async def arerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        given = list(hits)
        returned = await self._acall(query, list(given))
        return map_back(self.name, given, returned_items(self.name, returned, "the function"), what="the function")


def _is_async(fn: Any) -> bool:
    if inspect.iscoroutinefunction(fn):  # also sees through functools.partial and bound methods
        return True
    call = getattr(type(fn), "__call__", None)
    return not inspect.isfunction(fn) and inspect.iscoroutinefunction(call)


def source_fingerprint(fn: Callable[..., Any]) -> str:
    """A hash of what defines ``fn``'s behaviour as far as can be read from it: its source (or code object), its
    defaults, the plain values of its closure, and what a partial or bound method adds. Stable across processes."""
    digest = hashlib.sha256()
    for part in _identity(fn, 0):
        digest.update(json.dumps(part, sort_keys=True, default=str).encode())
        digest.update(b"\x1f")
    return digest.hexdigest()[:20]


def _identity(fn: Any, depth: int) -> list[Any]:
    if depth > 5:
        return [{"callable": qualified_name(fn)}]
    if isinstance(fn, functools.partial):
        return [
            *_identity(fn.func, depth + 1),
            {"partial_args": [describe(a) for a in fn.args],
             "partial_keywords": {k: describe(v) for k, v in sorted(fn.keywords.items())}},
        ]
    if inspect.ismethod(fn):
        return [*_identity(fn.__func__, depth + 1), {"bound_to": describe(fn.__self__)}]
    if inspect.isfunction(fn):
        closure = []
        for cell in fn.__closure__ or ():
            try:
                closure.append(describe(cell.cell_contents))
            except ValueError:  # an empty cell
                closure.append(None)
        return [
            _source(fn),
            {"defaults": [describe(d) for d in fn.__defaults__ or ()],
             "kwdefaults": {k: describe(v) for k, v in sorted((fn.__kwdefaults__ or {}).items())},
             "closure": closure},
        ]
    if inspect.isbuiltin(fn):
        return [{"callable": f"{getattr(fn, '__module__', None)}.{getattr(fn, '__qualname__', repr(fn))}"}]
    # a callable object: its class's source, and its plain settings
    return [_source(type(fn)), {"instance": describe(fn)}]


def _source(obj: Any) -> dict[str, Any]:
    try:
        return {"source": textwrap.dedent(inspect.getsource(obj))}
    except (OSError, TypeError):  # defined in a string (exec, python -c) or a C extension
        code = getattr(obj, "__code__", None)
        if isinstance(code, types.CodeType):
            return {"code": _code(code)}
        return {"class": qualified_name(obj)}


def _code(code: types.CodeType) -> dict[str, Any]:
    """A code object's bytecode, names and constants; nested code objects (lambdas, inner functions) recursed
    into, since their repr holds a memory address."""
    return {"bytecode": code.co_code.hex(), "names": list(code.co_names), "consts": [_const(c) for c in code.co_consts]}


def _const(value: Any) -> Any:
    if isinstance(value, types.CodeType):
        return _code(value)
    if isinstance(value, frozenset):  # `x in {"a", "b"}` compiles to one; its order follows the hash seed
        return sorted((_const(v) for v in value), key=repr)
    if isinstance(value, tuple):
        return [_const(v) for v in value]
    return repr(value)
