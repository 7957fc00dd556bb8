"""Plain Python callables as stages.

Sync, async and batch functions, fingerprints, per-query columns, doc ids and judges: ``docs/adapters.md``,
"Functions"."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..data.queryset import QuerySet
from ..errors import InputError
from ..stages import Fingerprint, Hit, Reranker, Retriever
from ..stages.fingerprint import fingerprint
from ..stages.generator import Generation, Generator
from ..stages.hits import as_hit
from ..stages.judges import DEFAULT_SCALE, BaseJudge, JudgeGrade, JudgeItem, check_scale
from ._common import map_back, qualified_name, returned_items, run_sync

__all__ = [
    "FunctionBatchReranker",
    "FunctionBatchRetriever",
    "FunctionGenerator",
    "FunctionJudge",
    "FunctionReranker",
    "FunctionRetriever",
    "generator",
    "judge",
    "reranker",
    "retriever",
]


def retriever(
    fn: Callable[..., Any],
    *,
    name: str,
    version: str | None = None,
    batch: bool = False,
    columns: Sequence[str] | None = None,
    queries: QuerySet | None = None,
) -> FunctionRetriever:
    """A first stage calling ``fn(query_text, k)``, which returns the ranking best first: ``(doc_id, score)``
    pairs, doc ids or :class:`~rag_eval.stages.Hit` records. ``k`` is the pipeline's depth; returning more is
    allowed (the runner keeps ``depth`` and records the rest as beyond the depth). A doc id may be a str, an int
    or a :class:`uuid.UUID` (read as the module's docstring says).

    ``batch=True``: ``fn(query_texts, k)`` takes a list of query texts and returns one such ranking per query, in
    their order (a :class:`FunctionBatchRetriever`).

    ``columns`` (with ``queries``, the :class:`~rag_eval.QuerySet` holding them): the query set's columns passed
    to the function as a third argument, ``fn(query_text, k, {column: value})`` (``batch=True``:
    ``fn(query_texts, k, [{column: value}, ...])``), for a per-query metadata filter (the module's docstring)."""
    per_query = _query_columns(name, columns, queries)
    if _batch_flag(name, batch):
        return FunctionBatchRetriever(fn, name=name, version=version, query_columns=per_query)
    return FunctionRetriever(fn, name=name, version=version, query_columns=per_query)


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


class QueryColumns:
    """The columns a retriever function is given per query: ``{query_text: {column: value}}`` read from a query
    set (see :func:`retriever`), and their digest for the fingerprint."""

    def __init__(self, stage_name: str, columns: tuple[str, ...], by_text: Mapping[str, Mapping[str, Any]]) -> None:
        self.stage_name, self.columns = stage_name, columns
        # plain dicts (a stage is pickled for Ray's workers; a mappingproxy cannot be), copied on the way out
        self.by_text: dict[str, dict[str, Any]] = {t: dict(v) for t, v in by_text.items()}
        described = json.dumps(sorted((t, sorted(v.items())) for t, v in by_text.items()), default=str)
        self.digest = hashlib.sha256(described.encode()).hexdigest()[:20]

    def of(self, text: str) -> dict[str, Any]:
        """The columns of the query whose text is ``text`` (a new dict: the function may change it)."""
        values = self.by_text.get(text)
        if values is None:
            raise LookupError(
                f"stage {self.stage_name!r}: the query {text[:60]!r} is not in the query set given with columns= "
                f"(its columns {list(self.columns)} are unknown)"
            )
        return dict(values)

    def config(self) -> dict[str, Any]:
        return {"columns": list(self.columns), "values": self.digest}


def _query_columns(name: str, columns: Sequence[str] | None, queries: QuerySet | None) -> QueryColumns | None:
    """The per-query columns of :func:`retriever`, checked: each query holds each column, and two queries with the
    same text hold the same values."""
    if columns is None and queries is None:
        return None
    if columns is None or queries is None:
        raise InputError(f"stage {name!r}: give columns= and queries= together (the columns, and the query set)")
    if isinstance(columns, str) or not all(isinstance(c, str) and c for c in columns) or not columns:
        raise InputError(f"stage {name!r}: columns must be a non-empty list of column names, not {columns!r}")
    if not isinstance(queries, QuerySet):
        raise InputError(
            f"stage {name!r}: queries= must be a rag_eval.QuerySet (its provenance holds each query's columns), "
            f"not {type(queries).__name__}"
        )
    wanted = tuple(columns)
    by_text: dict[str, dict[str, Any]] = {}
    owner: dict[str, str] = {}
    for qid, text in queries.items():
        held = queries.provenance[qid].columns
        missing = [c for c in wanted if c not in held]
        if missing:
            raise InputError(f"stage {name!r}: query {qid!r} has no column {missing[0]!r} (it has {sorted(held)})")
        values = {c: held[c] for c in wanted}
        if text in by_text and by_text[text] != values:
            raise InputError(
                f"stage {name!r}: queries {owner[text]!r} and {qid!r} have the same text but different columns "
                f"({by_text[text]} and {values}); a stage is given the text only, so it cannot tell them apart"
            )
        by_text.setdefault(text, values)
        owner.setdefault(text, qid)
    return QueryColumns(name, wanted, by_text)


class _CallsFunction:
    """Calling the user's function ``fn`` from sync and async code alike, whether it is a coroutine function or not
    (what the function stages and the function judge share)."""

    fn: Callable[..., Any]
    _is_async: bool

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


class _FunctionStage(_CallsFunction):
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

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, fn={getattr(self.fn, '__qualname__', self.fn)!r})"


class FunctionRetriever(_FunctionStage, Retriever):
    """A retriever made from a function ``fn(query_text, k)`` (``fn(query_text, k, values)`` with per-query
    columns); see :func:`retriever`."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str,
        version: str | None = None,
        query_columns: QueryColumns | None = None,
    ) -> None:
        Retriever.__init__(self, name, version=version)
        self._wrap(fn)
        self.query_columns = query_columns

    def config(self) -> dict[str, Any]:
        return {} if self.query_columns is None else {"query_columns": self.query_columns.config()}

    def search(self, query: str, k: int) -> list[Hit]:
        return self._hits(self._call(query, k, *self._values([query], one=True)))

    async def asearch(self, query: str, k: int) -> list[Hit]:
        return self._hits(await self._acall(query, k, *self._values([query], one=True)))

    def _values(self, queries: list[str], *, one: bool) -> tuple[Any, ...]:
        """The function's third argument, when it takes the queries' columns: one query's, or a list of them."""
        if self.query_columns is None:
            return ()
        values = [dict(self.query_columns.of(q)) for q in queries]
        return (values[0],) if one else (values,)

    def _hits(self, returned: Any) -> list[Hit]:
        items = returned_items(self.name, returned, "the function")
        try:
            return [as_hit(_store_id(item)) for item in items]
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"stage {self.name!r}: {exc}") from None


def _store_id(item: Any) -> Any:
    """A returned item with its doc id as a str, where a store gave an int or a UUID (the module's docstring)."""
    if isinstance(item, Hit):
        return item
    if isinstance(item, (tuple, list)) and len(item) == 2:
        doc_id = _id_text(item[0])
        return item if doc_id is item[0] else (doc_id, item[1])
    return _id_text(item)


def _id_text(value: Any) -> Any:
    if isinstance(value, (bool, np.bool_)):
        return value  # refused by as_hit, with its message
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


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
        return {"batch": True, **super().config()}  # the same function read a query at a time would differ

    def search(self, query: str, k: int) -> list[Hit]:
        return self._one(self._call([query], k, *self._values([query], one=False)))

    async def asearch(self, query: str, k: int) -> list[Hit]:
        return self._one(await self._acall([query], k, *self._values([query], one=False)))

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        queries = list(queries)
        return self._all(self._call(queries, k, *self._values(queries, one=False)), len(queries))

    async def asearch_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        queries = list(queries)
        return self._all(await self._acall(queries, k, *self._values(queries, one=False)), len(queries))

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


# ----- judges -------------------------------------------------------------------------------------------------


def judge(fn: Callable[..., Any], *, name: str, batch: bool = False, version: str | None = None) -> FunctionJudge:
    """A judge calling ``fn(query_text, chunk_text)``, which returns the grade on the scale asked (an int), a
    ``(grade, confidence)`` pair (confidence in [0, 1]) or a :class:`~rag_eval.stages.judges.JudgeGrade`. What it
    raises, or a grade off the scale, is that item's failure.

    ``batch=True``: ``fn(query_texts, chunk_texts)`` takes two lists and returns one answer per pair, in order; a
    batch that raises, or returns another number of answers, is asked again pair by pair (a batch of one each), so
    that a fault is charged to its own item. ``version``: the fingerprint is then the version, not the code (needed
    for a function holding what cannot be described exactly: a model, a client)."""
    return FunctionJudge(fn, name=name, batch=_batch_flag(name, batch), version=version)


class FunctionJudge(_CallsFunction, BaseJudge):
    """A judge made from a function; see :func:`judge`."""

    description = "a function of the user's"

    def __init__(self, fn: Callable[..., Any], *, name: str, batch: bool = False, version: str | None = None) -> None:
        super().__init__(name, version=version)
        if not callable(fn):
            raise TypeError(f"judge {name!r}: expected a function, not {type(fn).__name__}")
        self.fn = fn
        self.batch = batch
        self._is_async = _is_async(fn)
        _ = self.fingerprint  # read now: Uncacheable (asking for version=) at once, not midway through a run

    @property
    def fingerprint(self) -> str:
        """Read at every use, as a stage's key is: what the function closes over or loads may change after the
        judge was made, and a judging run then meets another judge (issue 27, class 9)."""
        self._fingerprint = None
        return super().fingerprint

    def config(self) -> dict[str, Any]:
        code = None if self.version is not None else fingerprint(self.fn, stage=self.name).digest
        return {"code": code, "batch": self.batch}

    def grade(self, items: Sequence[JudgeItem], *, scale: tuple[int, int] = DEFAULT_SCALE) -> list[JudgeGrade]:
        scale, items = check_scale(scale), list(items)
        if not self.batch:
            return [self._one(item, scale) for item in items]
        try:
            answers = _answers(
                self.name, self._call([i.query for i in items], [i.text for i in items]), len(items), "grades"
            )
        except Exception:  # noqa: BLE001 - asked again item by item, so that the fault is charged to its own item
            return [self._one(item, scale) for item in items]
        return [_as_grade(answer, scale) for answer in answers]

    async def agrade(self, items: Sequence[JudgeItem], *, scale: tuple[int, int] = DEFAULT_SCALE) -> list[JudgeGrade]:
        scale, items = check_scale(scale), list(items)
        if self.batch:
            try:
                returned = await self._acall([i.query for i in items], [i.text for i in items])
                return [_as_grade(a, scale) for a in _answers(self.name, returned, len(items), "grades")]
            except Exception:  # noqa: BLE001 - item by item, as in grade
                pass

        async def one(item: JudgeItem) -> JudgeGrade:
            try:
                if self.batch:
                    return _as_grade(_single(self.name, await self._acall([item.query], [item.text])), scale)
                return _as_grade(await self._acall(item.query, item.text), scale)
            except Exception as exc:  # noqa: BLE001 - the item's fault
                return JudgeGrade.failed(exc)

        return list(await asyncio.gather(*(one(item) for item in items)))

    def _one(self, item: JudgeItem, scale: tuple[int, int]) -> JudgeGrade:
        """One item's grade (a batch function asked a batch of one), or its failure."""
        try:
            if self.batch:
                return _as_grade(_single(self.name, self._call([item.query], [item.text])), scale)
            return _as_grade(self._call(item.query, item.text), scale)
        except Exception as exc:  # noqa: BLE001 - the item's fault
            return JudgeGrade.failed(exc)

    def __repr__(self) -> str:
        return f"FunctionJudge({self.name!r}, fn={getattr(self.fn, '__qualname__', self.fn)!r})"


def _single(name: str, returned: Any) -> Any:
    return _answers(name, returned, 1, "grades")[0]


def _as_grade(value: Any, scale: tuple[int, int]) -> JudgeGrade:
    """A function judge's answer for one item as a JudgeGrade (checked against the scale), or its failure."""
    confidence = None
    if isinstance(value, JudgeGrade):
        grade: Any = value.grade
        if grade is None:
            return value
        confidence = value.confidence
    elif isinstance(value, tuple) and len(value) == 2:
        grade, confidence = value
    else:
        grade = value
    if isinstance(grade, bool) or not isinstance(grade, (int, np.integer)):
        return JudgeGrade.failed(
            f"the function returned {value!r:.200}, not an int grade (or a (grade, confidence) pair)"
        )
    grade = int(grade)
    low, high = scale
    if not low <= grade <= high:
        return JudgeGrade.failed(f"the function returned grade {grade}, off the scale {low}..{high}")
    try:
        return JudgeGrade(grade=grade, confidence=None if confidence is None else float(confidence))
    except (InputError, TypeError, ValueError) as exc:
        return JudgeGrade.failed(f"the function returned {value!r:.200}: {exc}")


# ----- generators ------------------------------------------------------------------------------------------------


def generator(
    fn: Callable[..., Any], *, name: str, batch: bool = False, version: str | None = None
) -> FunctionGenerator:
    """A generator calling ``fn(prompt)``, which returns the answer: a str, or a
    :class:`~rag_eval.stages.generator.Generation` (with token counts). What it raises is that query's failure.
    ``batch=True``: ``fn(prompts)`` returns one answer per prompt, in order (a batch that raises or miscounts is asked
    again prompt by prompt). ``version``: the fingerprint is then the version, not the code (needed for a function
    holding what cannot be described exactly: a model, a client). Async functions are run to completion."""
    return FunctionGenerator(fn, name=name, batch=_batch_flag(name, batch), version=version)


class FunctionGenerator(_CallsFunction, Generator):
    """A generator made from a function; see :func:`generator`."""

    description = "a function of the user's"

    def __init__(self, fn: Callable[..., Any], *, name: str, batch: bool = False, version: str | None = None) -> None:
        super().__init__(name, version=version)
        if not callable(fn):
            raise TypeError(f"generator {name!r}: expected a function, not {type(fn).__name__}")
        self.fn = fn
        self.batch = batch
        self._is_async = _is_async(fn)
        _ = self.fingerprint  # Uncacheable (asking for version=) at once, not midway through a run

    def config(self) -> dict[str, Any]:
        code = None if self.version is not None else fingerprint(self.fn, stage=self.name).digest
        return {"code": code, "batch": self.batch}

    def generate(self, prompt: str) -> str | Generation:
        if self.batch:
            return _as_generation(_answers(self.name, self._call([prompt]), 1, "answers")[0])
        return _as_generation(self._call(prompt))

    def generate_batch(self, prompts: Sequence[str]) -> Sequence[str | Generation | BaseException]:
        if not self.batch:
            return super().generate_batch(prompts)
        returned = _answers(self.name, self._call(list(prompts)), len(prompts), "answers")
        out: list[str | Generation | BaseException] = []
        for value in returned:
            try:
                out.append(_as_generation(value))
            except TypeError as exc:
                out.append(exc)
        return out

    def __repr__(self) -> str:
        return f"FunctionGenerator({self.name!r}, fn={getattr(self.fn, '__qualname__', self.fn)!r})"


def _as_generation(value: Any) -> str | Generation:
    if isinstance(value, (str, Generation)):
        return value
    raise TypeError(f"the function returned a {type(value).__name__}, not a str or a Generation: {value!r:.200}")
