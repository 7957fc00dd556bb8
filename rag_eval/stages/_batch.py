"""One stage over a batch of queries: every answer checked, every fault charged to its own query.

Every rule (faults, retries, timeouts, mended answers, batches, who is at fault): ``docs/runner.md``, "A batch:
answers checked, faults charged to their query"."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import struct
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from .. import _accel
from ..errors import HarnessError
from . import hit_table as ht
from ._cache import json_metadata
from .hits import Hit, as_hit
from .stage import Reranker, Retriever, Stage

if TYPE_CHECKING:
    from ._cache import NoStore, StageStore

__all__ = ["StageFault", "StageJob", "compute_batch", "entry_hash"]

Given = tuple[Hit, ...] | None  # the hits a reranker is given for a query (None: a first stage, given none)
# hits kept, doc ids past the depth, issues, and for a reranker that returned given Hit objects their places in
# what it was given (its table is then taken from the given hits' columns, not built again hit by hit)
Checked = tuple[tuple[Hit, ...], tuple[str, ...], list[str], list[int] | None]
Result = tuple[tuple[Hit, ...] | None, str | None, float, tuple[str, ...], tuple[str, ...]]  # hits, error, ...

_STOP = (KeyboardInterrupt, SystemExit, HarnessError)  # stop the run; every other exception is the query's fault
PUT_SECONDS = 1.0  # finished rows go to the store at least this often while a batch computes (a kill loses less)
_doc_id = itemgetter(0)
_metadata = itemgetter(4)


class StageFault(Exception):
    """A stage's output for one query cannot be used (the message says why)."""


@dataclasses.dataclass(frozen=True)
class StageJob:
    """What a stage needs of the run to compute its queries (picklable: a Ray worker gets one).

    ``role``: "first" or "input" (a first stage, or an input of a fusion: asked for ``depth`` hits) or "reranker";
    ``corpus``: the known doc ids a first stage's answers are checked against (None: not checked); ``batch_size``
    queries per call; ``concurrency`` calls at once; ``retries``, ``backoff`` and ``timeout`` per query (see the
    module's docstring); ``verify``: how many of the queries computed to ask a second time (the first ones; -1:
    every one; 0: none)."""

    role: str
    depth: int
    corpus: frozenset[str] | None = None
    batch_size: int = 1
    concurrency: int = 1
    retries: int = 0
    backoff: float = 0.5
    timeout: float | None = None
    verify: int = 0

    @property
    def reranks(self) -> bool:
        return self.role == "reranker"


# ----- the cache key of an entry -----------------------------------------------------------------------------


def entry_hash(texts: Sequence[str], hits: pa.Array | pa.ChunkedArray | None = None) -> list[str]:
    """The cache key of each query's entry besides its id: the hash of its text and, for a reranker, of the ids of
    the hits it is given (``hits``: a list-of-struct column of the previous stage's rows, one per text; a null row,
    a failed query, gets ""). The ids are hashed straight from the Arrow buffers (their lengths, then their bytes),
    never as Python strs, and unambiguously whatever they hold: sha256 of the text's length and bytes, the number of
    ids, their byte lengths and their bytes; a first stage's key is the sha256 of the text alone. In C where built
    (``_speedups.entry_keys``: one hash call per query), else in Python; the same keys."""
    speedups = _accel.speedups
    if hits is None:
        if speedups is not None:
            keys: list[str] = speedups.entry_keys(hashlib.sha256, list(texts), b"", None, b"", None)
            return keys
        return [hashlib.sha256(text.encode()).hexdigest()[:16] for text in texts]
    column = hits.combine_chunks() if isinstance(hits, pa.ChunkedArray) else hits
    if len(column) != len(texts):
        raise ValueError(f"entry_hash: {len(texts)} texts but {len(column)} rows of hits")
    if not len(column):
        return []
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    rows = column.offsets.to_numpy()
    ids = column.values.field("doc_id")  # every row's hits (of the whole array: offsets index into it)
    if ids.type != pa.large_string():
        ids = ids.cast(pa.large_string())
    buffers = ids.buffers()
    id_offsets = np.frombuffer(buffers[1], np.int64)[ids.offset : ids.offset + len(ids) + 1]
    data = memoryview(buffers[2]) if buffers[2] is not None else memoryview(b"")
    if speedups is not None:
        keys = speedups.entry_keys(
            hashlib.sha256,
            list(texts),
            np.ascontiguousarray(valid, np.uint8),
            np.ascontiguousarray(rows, np.int64),
            data,
            np.ascontiguousarray(id_offsets, np.int64),
        )
        return keys
    return _entry_keys(texts, valid.tolist(), rows.tolist(), id_offsets, data)


def _entry_keys(
    texts: Sequence[str], valid: list[bool], rows: list[int], id_offsets: np.ndarray, data: memoryview
) -> list[str]:
    """:func:`entry_hash` of a reranker in Python (the twin of ``_speedups.entry_keys``)."""
    lengths = memoryview(np.diff(id_offsets).astype("<i8").tobytes())  # each id's length in bytes, 8 bytes each
    starts = id_offsets.tolist()
    pack = struct.Struct("<q").pack
    sha256 = hashlib.sha256
    out = []
    for i, text in enumerate(texts):
        if not valid[i]:
            out.append("")
            continue
        lo, hi = rows[i], rows[i + 1]
        encoded = text.encode()
        digest = sha256(b"rerank\x00")
        digest.update(pack(len(encoded)))
        digest.update(encoded)
        digest.update(pack(hi - lo))
        digest.update(lengths[8 * lo : 8 * hi])
        digest.update(data[starts[lo] : starts[hi]])
        out.append(digest.hexdigest()[:16])
    return out


# ----- checking one answer -----------------------------------------------------------------------------------


def _describe(exc: BaseException) -> str:
    if isinstance(exc, StageFault):
        return str(exc)
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError, concurrent.futures.TimeoutError)):
        return "timed out"
    if isinstance(exc, asyncio.CancelledError):
        return f"the stage raised CancelledError itself{f': {exc}' if str(exc) else ''}"
    return f"{type(exc).__name__}: {exc}"


def _as_hits(returned: Any) -> tuple[Sequence[Hit], list[str]]:
    """The returned items as Hits, each doc id once (at its first place), and the issue if one came twice. The
    common case (a list of Hit objects with distinct ids) is checked with a type set and an id set: no Python work
    per hit."""
    kind = type(returned)
    if kind is not list and kind is not tuple:
        if returned is None:
            raise StageFault("returned None instead of a list of hits")
        if isinstance(returned, (str, bytes, Mapping)) or not isinstance(returned, Sequence):
            raise StageFault(f"returned a {type(returned).__name__}, not a list of hits")
    if not returned:
        return (), []
    hits: Sequence[Hit]
    if set(map(type, returned)) == {Hit}:
        hits = returned
    else:
        try:
            hits = [as_hit(item) for item in returned]
        except (TypeError, ValueError) as exc:
            raise StageFault(str(exc)) from None
    ids = list(map(_doc_id, hits))
    if len(set(ids)) == len(ids):
        return hits, []
    seen: set[str] = set()
    unique, repeated = [], []
    for hit in hits:  # a doc id returned twice counts once, at its first place
        if hit.doc_id not in seen:
            seen.add(hit.doc_id)
            unique.append(hit)
        else:
            repeated.append(hit.doc_id)
    issue = f"returned {len(repeated)} repeated doc id(s), kept once at the first place (e.g. {repeated[0]!r})"
    return unique, [issue]


def _first_stage_hits(returned: Any, depth: int, corpus: frozenset[str] | None) -> Checked:
    hits, issues = _as_hits(returned)
    if corpus is not None and not corpus.issuperset(map(_doc_id, hits)):
        unknown = [h.doc_id for h in hits if h.doc_id not in corpus]
        raise StageFault(f"returned doc ids not in the corpus: {unknown[:5]}")
    if len(hits) > depth:
        issues.append(f"returned {len(hits)} hits for a depth of {depth}: cut to the depth")
        return tuple(hits[:depth]), tuple(h.doc_id for h in hits[depth:]), issues, None
    return tuple(hits), (), issues, None


def _reranked_hits(returned: Any, given: Given) -> Checked:
    kind = type(returned)
    if (kind is list or kind is tuple) and given:  # the common case: the given Hit objects, reordered or cut
        place = dict(zip(map(id, given), range(len(given)), strict=True))
        places = list(map(place.get, map(id, returned)))
        if None not in places and len(set(places)) == len(places):  # each a given object, once: nothing to check
            return tuple(returned), (), [], places  # type: ignore[return-value]
    hits, issues = _as_hits(returned)
    known = set(map(_doc_id, given or ()))
    if not known.issuperset(map(_doc_id, hits)):
        strangers = [h.doc_id for h in hits if h.doc_id not in known]
        raise StageFault(f"returned doc ids it was not given: {strangers[:5]}")
    return tuple(hits), (), issues, None


def _stored_types(stage: str, query: str, hits: tuple[Hit, ...]) -> tuple[Hit, ...]:
    """The hits with their metadata in JSON types (the cache's rule, applied with or without a cache, so that a
    rerun from the cache sees what the first run saw); anything else is an InputError naming the hit."""
    if not any(map(_metadata, hits)):  # no metadata (an empty mapping is falsy): nothing to convert
        return hits
    out = []
    for hit in hits:
        if hit.metadata:
            converted = json_metadata(hit.metadata, f"stage {stage!r}, query {query!r}, hit {hit.doc_id!r}")
            if converted != hit.metadata or any(type(v) is not type(converted[k]) for k, v in hit.metadata.items()):
                hit = Hit(hit.doc_id, hit.score, hit.text, hit.tokens, converted)
        out.append(hit)
    return tuple(out)


def _difference(first: Sequence[Hit], again: Sequence[Hit]) -> str | None:
    a, b = [h.doc_id for h in first], [h.doc_id for h in again]
    if a == b:
        return None
    rank = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))) + 1
    return f"nondeterministic: a second call returned a different ranking (first difference at rank {rank})"


def _failed_again(exc: BaseException) -> str:
    return f"nondeterministic: a second call failed ({_describe(exc)})"


# ----- calling the stage ---------------------------------------------------------------------------------------


def _overrides(stage: Stage, name: str, base: type) -> bool:
    return getattr(type(stage), name, None) is not getattr(base, name)


class _Caller:
    """How to ask one stage for one query or a batch, on this run's settings (timeouts, event loops)."""

    def __init__(self, stage: Stage, job: StageJob) -> None:
        self.stage, self.job = stage, job
        self.reranks = isinstance(stage, Reranker)
        self.is_async = stage.has_async
        base = Reranker if self.reranks else Retriever
        batch = "rerank_batch" if self.reranks else "search_batch"
        # a stage's own batch method is used (its async one first); the defaults only loop over the single one
        self.batch_async = job.batch_size > 1 and self.is_async and _overrides(stage, "a" + batch, base)
        self.batched = self.batch_async or (job.batch_size > 1 and _overrides(stage, batch, base))
        self.local = threading.local()
        self.loops: list[asyncio.AbstractEventLoop] = []  # every event loop made for this batch, closed at the end

    # the stage's methods, as calls of (texts, given lists)
    def _sync_one(self, text: str, given: Given) -> Any:
        if isinstance(self.stage, Reranker):
            return self.stage.rerank(text, list(given or ()))
        assert isinstance(self.stage, Retriever)
        return self.stage.search(text, self.job.depth)

    def _async_one(self, text: str, given: Given) -> Awaitable[Any]:
        if isinstance(self.stage, Reranker):
            return self.stage.arerank(text, list(given or ()))
        assert isinstance(self.stage, Retriever)
        return self.stage.asearch(text, self.job.depth)

    def _sync_batch(self, texts: list[str], given: list[Given]) -> Any:
        if isinstance(self.stage, Reranker):
            return self.stage.rerank_batch(texts, [list(g or ()) for g in given])
        assert isinstance(self.stage, Retriever)
        return self.stage.search_batch(texts, self.job.depth)

    def _async_batch(self, texts: list[str], given: list[Given]) -> Awaitable[Any]:
        if isinstance(self.stage, Reranker):
            return self.stage.arerank_batch(texts, [list(g or ()) for g in given])
        assert isinstance(self.stage, Retriever)
        return self.stage.asearch_batch(texts, self.job.depth)

    def one(self, text: str, given: Given) -> Any:
        """The stage's answer for one query (the single-query method), within the timeout."""
        timeout = self.job.timeout
        if self.is_async:
            return self._on_own_loop(lambda: self._async_one(text, given), timeout)
        if timeout is None:
            return self._sync_one(text, given)
        return _with_timeout(lambda: self._sync_one(text, given), timeout)

    def batch(self, texts: list[str], given: list[Given]) -> Any:
        """The stage's answers for a batch (the batch method), within ``timeout x len(texts)``."""
        timeout = None if self.job.timeout is None else self.job.timeout * len(texts)
        if self.batch_async:
            return self._on_own_loop(lambda: self._async_batch(texts, given), timeout)
        if timeout is None:
            return self._sync_batch(texts, given)
        return _with_timeout(lambda: self._sync_batch(texts, given), timeout)

    def _on_own_loop(self, make: Callable[[], Awaitable[Any]], timeout: float | None) -> Any:
        """Await ``make()`` on this worker thread's event loop (made on first use, kept from call to call). With a
        timeout the loop is driven by a helper thread the worker stops waiting for, so a stage that blocks its loop
        cannot hold the timeout; that loop is then abandoned (its task asked to cancel) and the next call gets a new
        one."""
        local = self.local
        loop = getattr(local, "loop", None)
        if loop is None or loop.is_closed():
            loop = local.loop = asyncio.new_event_loop()
            self.loops.append(loop)

        async def awaited() -> Any:
            return await make()

        if timeout is None:
            return loop.run_until_complete(awaited())
        result: list[Any] = []
        failure: list[BaseException] = []
        task_box: list[asyncio.Task[Any]] = []
        abandoned = threading.Event()
        done = threading.Lock()

        def target() -> None:
            try:
                task = loop.create_task(awaited())
                task_box.append(task)
                result.append(loop.run_until_complete(task))
            except BaseException as exc:  # noqa: BLE001 - handed to the worker, which re-raises it
                failure.append(exc)
            finally:
                with done:
                    if abandoned.is_set():  # nobody waits for this loop any more: close it here
                        loop.close()

        driver = threading.Thread(target=target, daemon=True)
        driver.start()
        driver.join(timeout)
        with done:
            late = driver.is_alive()
            if late:
                abandoned.set()
        if late:
            local.loop = None  # abandoned: still busy with the overrunning call; the next call gets a new loop
            self.loops.remove(loop)  # its driver closes it when the call ends; close() must not race it for that
            try:
                if task_box:
                    loop.call_soon_threadsafe(task_box[0].cancel)
            except RuntimeError:  # it finished (and was closed) meanwhile
                pass
            raise TimeoutError
        if failure:
            raise failure[0]
        return result[0]

    def close(self) -> None:
        for loop in self.loops:
            if not loop.is_running() and not loop.is_closed():
                loop.close()


def _with_timeout(call: Callable[[], Any], timeout: float) -> Any:
    result: list[Any] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            result.append(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, which re-raises it
            failure.append(exc)

    worker = threading.Thread(target=target, daemon=True)  # an overrunning call is abandoned, not killed
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError
    if failure:
        raise failure[0]
    return result[0]


def _answers(returned: Any, n: int) -> list[Any]:
    """A batch call's answers, one per query, or a StageFault when they cannot be matched to the queries."""
    if returned is None or isinstance(returned, (str, bytes, Mapping)) or not isinstance(returned, Sequence):
        raise StageFault(f"the batch call returned a {type(returned).__name__}, not one list of hits per query")
    answers = list(returned)
    if len(answers) != n:
        raise StageFault(f"the batch call returned {len(answers)} lists for {n} queries")
    return answers


# ----- a batch of queries ----------------------------------------------------------------------------------------


def compute_batch(
    stage: Stage,
    job: StageJob,
    query_ids: Sequence[str],
    texts: Sequence[str],
    query_hashes: Sequence[str],
    given: Sequence[Given] | None = None,
    *,
    given_column: pa.Array | pa.ChunkedArray | None = None,
    store: StageStore | NoStore | None = None,
    progress: Callable[[int], object] | None = None,
) -> tuple[pa.Table, list[Given]]:
    """Compute ``query_ids`` (with their ``texts``, entry hashes and, for a reranker, the hits each is ``given``)
    through ``stage``: their rows of :data:`~rag_eval.stages.hit_table.SCHEMA`, in the order given, and their
    checked hits (None where the stage failed). Faults are recorded per query (the module's docstring).

    ``store``: where finished, non-failed rows are put (at least every :data:`PUT_SECONDS` while the batch computes,
    the rest at the end, and what is finished when the run stops); the caller flushes it. ``progress(n)`` is called
    in the caller's thread as queries finish. ``given_column`` (optional, a reranker's): the hits column of the
    previous stage's rows of these queries (row ``k`` holds ``given[k]``), from which the rows of a reranker that
    returns the given Hit objects are taken instead of being built again hit by hit."""
    n = len(query_ids)
    if not len(texts) == len(query_hashes) == n or (given is not None and len(given) != n):
        raise ValueError("compute_batch: query_ids, texts, query_hashes (and given) differ in length")
    if job.reranks and given is None:
        raise ValueError("compute_batch: a reranker needs the hits each query is given")
    givens: Sequence[Given] = given if given is not None else [None] * n
    caller = _Caller(stage, job)
    depth, corpus, retries, backoff = job.depth, job.corpus, job.retries, job.backoff
    reranks = job.reranks

    def check(returned: Any, given: Given) -> Checked:
        return _reranked_hits(returned, given) if reranks else _first_stage_hits(returned, depth, corpus)

    results: list[Result | None] = [None] * n
    places: list[list[int] | None] = [None] * n  # a reranker's answer as places in what it was given
    verify = n if job.verify < 0 else min(job.verify, n)  # the first `verify` queries are asked twice

    def keep(
        i: int, hits: tuple[Hit, ...], latency: float, beyond: tuple[str, ...], issues: list[str], at: list[int] | None
    ) -> None:
        if at is None:
            hits = _stored_types(stage.name, query_ids[i], hits)
        else:  # the given Hit objects themselves: their metadata already in JSON types
            places[i] = at
        results[i] = (hits, None, latency, beyond, tuple(issues))

    def one(i: int, first: int = 0, error: str | None = None, start: float | None = None) -> None:
        """Query ``i`` by the single-query method, attempts ``first`` to ``retries``."""
        start = time.perf_counter() if start is None else start
        text, given = texts[i], givens[i]
        for attempt in range(first, retries + 1):
            if attempt:
                time.sleep(backoff * 2 ** (attempt - 1))
            try:
                hits, beyond, issues, at = check(caller.one(text, given), given)
                latency = time.perf_counter() - start
                if i < verify:
                    try:
                        issue = _difference(hits, check(caller.one(text, given), given)[0])
                    except _STOP:
                        raise
                    except BaseException as exc:  # noqa: BLE001 - reported as the query's issue
                        issue = _failed_again(exc)
                    if issue:
                        issues.append(issue)
            except _STOP:
                raise
            except BaseException as exc:  # noqa: BLE001 - a fault in one query is recorded, never raised
                error = _describe(exc)
                continue
            keep(i, hits, latency, beyond, issues, at)
            return
        results[i] = (None, error, time.perf_counter() - start, (), ())

    def batch(rows: range) -> None:
        """Queries ``rows`` in one batch call (query by query if that call cannot be used)."""
        start = time.perf_counter()
        part_texts, part_given = [texts[i] for i in rows], [givens[i] for i in rows]
        try:
            answers = _answers(caller.batch(part_texts, part_given), len(rows))
        except _STOP:
            raise
        except BaseException:  # noqa: BLE001 - nobody's fault in particular: each query asked on its own
            for i in rows:
                one(i)
            return
        latency = (time.perf_counter() - start) / len(rows)
        checked: dict[int, Checked] = {}
        for i, answer in zip(rows, answers, strict=True):
            try:
                checked[i] = check(answer, givens[i])
            except _STOP:
                raise
            except BaseException as exc:  # noqa: BLE001 - this query's first attempt failed
                if retries:
                    one(i, first=1, error=_describe(exc), start=start)
                else:
                    results[i] = (None, _describe(exc), latency, (), ())
        again = [i for i in checked if i < verify]
        if again:
            second: dict[int, str | None] = {}
            try:
                more = _answers(caller.batch([texts[i] for i in again], [givens[i] for i in again]), len(again))
            except _STOP:
                raise
            except BaseException:  # noqa: BLE001 - asked again one by one
                more = None
            for pos, i in enumerate(again):
                try:
                    answer = more[pos] if more is not None else caller.one(texts[i], givens[i])
                    second[i] = _difference(checked[i][0], check(answer, givens[i])[0])
                except _STOP:
                    raise
                except BaseException as exc:  # noqa: BLE001 - reported as the query's issue
                    second[i] = _failed_again(exc)
            for i, issue in second.items():
                if issue:
                    checked[i][2].append(issue)
        for i, (hits, beyond, issues, at) in checked.items():
            keep(i, hits, latency, beyond, issues, at)

    size = job.batch_size if caller.batched else 1
    units = [range(lo, min(lo + size, n)) for lo in range(0, n, size)]
    work: Callable[[range], None] = batch if caller.batched else (lambda rows: one(rows.start))
    if given_column is not None:
        given_column = given_column.combine_chunks() if isinstance(given_column, pa.ChunkedArray) else given_column
        if len(given_column) != n:
            raise ValueError("compute_batch: given_column has another number of rows than query_ids")
    saver = _Saver(store, results, query_ids, query_hashes, places if given_column is not None else None, given_column)
    try:
        if job.concurrency == 1 or len(units) == 1:
            for rows in units:
                work(rows)
                saver.finished(rows)
                if progress is not None:
                    progress(len(rows))
        else:
            _on_threads(units, work, job.concurrency, saver, progress)
    except BaseException:
        with contextlib.suppress(HarnessError):  # the error that stopped the run is the one raised
            saver.stop()  # what finished before the stop is kept (unless the store itself failed)
        raise
    finally:
        caller.close()
    return saver.table(), [r[0] if r is not None else None for r in results]


def _on_threads(
    units: list[range],
    work: Callable[[range], None],
    concurrency: int,
    saver: _Saver,
    progress: Callable[[int], object] | None,
) -> None:
    """Every unit on ``concurrency`` threads; the caller's thread stores finished rows and reports progress."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="rag_eval")
    try:
        futures = {pool.submit(work, rows): rows for rows in units}
        pending = set(futures)
        while pending:
            done, pending = concurrent.futures.wait(
                pending, timeout=PUT_SECONDS, return_when=concurrent.futures.FIRST_COMPLETED
            )
            for future in done:
                future.result()  # the first harness error, Ctrl-C or SystemExit stops the run
                saver.finished(futures[future])
                if progress is not None:
                    progress(len(futures[future]))
            saver.maybe_put()
    except BaseException:  # stop at once: calls still in flight store nothing
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


class _Saver:
    """The rows of a batch: finished ones put into the store as they accumulate (every PUT_SECONDS), then the
    table of all of them."""

    def __init__(
        self,
        store: StageStore | NoStore | None,
        results: list[Result | None],
        query_ids: Sequence[str],
        query_hashes: Sequence[str],
        places: list[list[int] | None] | None = None,
        given_column: pa.Array | None = None,
    ) -> None:
        self.store, self.results, self.query_ids, self.query_hashes = store, results, query_ids, query_hashes
        self.places, self.given_column = places, given_column
        self.done: list[int] = []  # rows finished, not yet put
        self.put_any = False
        self.broken = False  # the store failed: nothing more is put
        self.last = time.monotonic()

    def finished(self, rows: range) -> None:
        if self.store is not None:
            self.done.extend(rows)
            if time.monotonic() - self.last >= PUT_SECONDS:
                self._put(self.done)

    def maybe_put(self) -> None:
        if self.store is not None and self.done and time.monotonic() - self.last >= PUT_SECONDS:
            self._put(self.done)

    def _put(self, rows: list[int]) -> None:
        self.done = []
        self.last = time.monotonic()
        ok = [i for i in rows if (r := self.results[i]) is not None and r[0] is not None]
        if not ok or self.store is None:
            return
        self.put_any = True
        self._send(self._build(ok))

    def _send(self, table: pa.Table) -> None:
        assert self.store is not None
        try:
            self.store.put(table)
        except BaseException:
            self.broken = True
            raise

    def stop(self) -> None:
        """The run stops: put what finished (unless the store itself is what failed)."""
        if self.store is not None and not self.broken and self.done:
            self._put(self.done)

    def _build(self, rows: Sequence[int]) -> pa.Table:
        results, places = self.results, self.places
        taken = places is not None and all(
            places[i] is not None for i in rows if (r := results[i]) is not None and r[0] is not None
        )
        builder = ht.TableBuilder()
        add, ids, hashes = builder.add, self.query_ids, self.query_hashes
        for i in rows:
            result = results[i]
            assert result is not None
            hits, error, latency, beyond, issues = result
            if taken and hits is not None:
                hits = ()
            add(ids[i], hashes[i], hits, error=error, latency=latency, beyond_depth=beyond, issues=issues)
        table = builder.table()
        if taken:
            table = table.set_column(table.schema.get_field_index("hits"), "hits", self._taken(rows))
        return table

    def _taken(self, rows: Sequence[int]) -> pa.Array:
        """The hits of ``rows`` (each a reranker's answer of given Hit objects) taken from the given hits' columns:
        no Python work per hit but one int each."""
        assert self.given_column is not None and self.places is not None
        column = self.given_column
        starts = column.offsets.to_numpy()
        flat: list[int] = []
        lengths = np.zeros(len(rows), np.int64)
        bases = np.zeros(len(rows), np.int64)
        failed = np.zeros(len(rows), bool)
        for k, i in enumerate(rows):
            at = self.places[i]
            if at is None:
                failed[k] = True
                continue
            flat.extend(at)
            lengths[k] = len(at)
            bases[k] = starts[i]
        index = np.asarray(flat, np.int64) + np.repeat(bases, lengths)
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = column.values.take(pa.array(index))
        mask = pa.array(failed) if failed.any() else None
        return pa.LargeListArray.from_arrays(pa.array(offsets), values, mask=mask)

    def table(self) -> pa.Table:
        """Every row, in the order given; the rows not yet put go to the store."""
        table = self._build(range(len(self.results)))
        if self.store is not None:
            waiting = self.done if self.put_any else None  # None: nothing was put yet, every row waits
            failed = np.fromiter((r is None or r[0] is None for r in self.results), bool, len(self.results))
            if waiting is None:
                chunk = table if not failed.any() else table.filter(pa.array(~failed))
            else:
                keep = np.array([i for i in waiting if not failed[i]], np.int64)
                chunk = table.take(pa.array(keep)) if keep.size else None
            self.done = []
            if chunk is not None and chunk.num_rows:
                self._send(chunk)
        return table
