"""Running a pipeline: stage by stage, every query, with concurrency, a cache, retries and per-query faults.

A fault in one query of one stage (an exception, a timeout, None or another bad return, ids that are not
strings, a reranker returning ids it was not given, ids outside the corpus) is recorded for that query with
its text, and the run goes on; the later stages skip that query. Answers that can be used once mended are kept
with an issue recorded for the query (``Outcome.issues``): a doc id returned twice (kept once, at its first
place), more hits than the depth (cut to the depth), and, with ``verify``, a different answer on a second call.
Every completed query is written to the cache at once, so an interrupted run loses nothing it finished.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import InputError
from .cache import StageCache, as_cache, text_hash
from .fusion import Fusion
from .hits import Hit, as_hit
from .result import Outcome, PipelineResult, StageOutput
from .stage import Retriever, Stage


class StageFault(Exception):
    """A stage's output for one query cannot be used (the message says why)."""


def run_pipeline(
    pipeline, queries: Mapping[str, str], *, cache: StageCache | str | None, concurrency: int, progress: bool | None,
    retries: int, backoff: float, timeout: float | None, verify: bool | int = False,
) -> PipelineResult:
    queries = _checked_queries(queries)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a positive int, not {concurrency!r}")
    if retries < 0 or backoff < 0 or (timeout is not None and timeout <= 0):
        raise ValueError("retries and backoff must be 0 or more, and timeout positive (or None)")
    if not isinstance(verify, (bool, int)) or verify < 0:
        raise ValueError(f"verify must be True, False or a number of queries, not {verify!r}")
    store = as_cache(cache)
    settings = _Settings(concurrency, progress, retries, backoff, timeout, -1 if verify is True else int(verify))
    depth, stages = pipeline.depth, {}
    first = pipeline.retriever

    def retrieve(stage: Retriever, role: str) -> StageOutput:
        key = _key(stage.fingerprint(), f"depth={depth}")
        out = StageOutput(stage.name, role, key)
        calls = {q: (queries[q], None) for q in queries}
        out.outcomes = _run_stage(
            stage, calls, store.store(stage.name, key), settings,
            call=lambda text, _: stage.search(text, depth),
            acall=(lambda text, _: stage.asearch(text, depth)) if stage.has_async else None,
            check=lambda hits, _: _first_stage_hits(hits, depth, pipeline.corpus),
        )
        return out

    if isinstance(first, Fusion):
        inputs = [retrieve(r, "input") for r in first.retrievers]
        stages.update({o.name: o for o in inputs})
        fused = StageOutput(first.name, "first", _key(first.fingerprint(), *(o.fingerprint for o in inputs)))
        for q in queries:
            failed = [o.name for o in inputs if o.outcomes[q].failed]
            if failed:
                fused.outcomes[q] = Outcome(None, f"input retriever(s) failed: {', '.join(failed)}")
                continue
            rankings = [o.outcomes[q].hits for o in inputs]
            start = time.perf_counter()
            hits = first.combine(rankings, depth)
            kept = {h.doc_id for h in hits}
            beyond = dict.fromkeys(
                d for o in inputs for d in (*(h.doc_id for h in o.outcomes[q].hits), *o.outcomes[q].beyond_depth)
                if d not in kept
            )
            fused.outcomes[q] = Outcome(tuple(hits), latency=time.perf_counter() - start, beyond_depth=tuple(beyond))
        stages[first.name] = previous = fused
    else:
        stages[first.name] = previous = retrieve(first, "first")

    for reranker in pipeline.rerankers:
        key = _key(reranker.fingerprint(), previous.fingerprint)
        out = StageOutput(reranker.name, "reranker", key)
        calls = {}
        for q, outcome in previous.outcomes.items():
            if outcome.failed:
                out.outcomes[q] = Outcome(None, f"not run: {previous.name} failed on this query")
            else:
                calls[q] = (queries[q], outcome.hits)
        out.outcomes.update(
            _run_stage(
                reranker, calls, store.store(reranker.name, key), settings,
                call=lambda text, hits, r=reranker: r.rerank(text, list(hits)),
                acall=(lambda text, hits, r=reranker: r.arerank(text, list(hits))) if reranker.has_async else None,
                check=_reranked_hits,
            )
        )
        out.outcomes = {q: out.outcomes[q] for q in queries}  # query order
        stages[reranker.name] = previous = out
    return PipelineResult(pipeline, queries, stages)


class _Settings:
    def __init__(
        self, concurrency: int, progress: bool | None, retries: int, backoff: float, timeout: float | None, verify: int,
    ):
        self.concurrency, self.progress, self.retries, self.backoff, self.timeout = (
            concurrency, progress, retries, backoff, timeout,
        )
        self.verify = verify  # computed queries per stage called twice: -1 all, 0 none


def _key(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:20]


def _checked_queries(queries: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(queries, Mapping):
        raise TypeError(f"queries must be a mapping {{query_id: text}}, not {type(queries).__name__}")
    out = {}
    for qid, text in queries.items():
        if not isinstance(qid, str):
            raise InputError(f"query id {qid!r} is a {type(qid).__name__}, not a str", source="queries")
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"query {qid!r}: the text must be a non-empty str, not {text!r}", source="queries")
        out[qid] = text
    if not out:
        raise ValueError("no queries to run")
    return out


def _as_hits(returned: Any) -> tuple[list[Hit], list[str]]:
    if returned is None:
        raise StageFault("returned None instead of a list of hits")
    if isinstance(returned, (str, bytes, Mapping)) or not isinstance(returned, Sequence):
        raise StageFault(f"returned a {type(returned).__name__}, not a list of hits")
    try:
        hits = [as_hit(item) for item in returned]
    except (TypeError, ValueError) as exc:
        raise StageFault(str(exc)) from None
    seen: set[str] = set()
    unique, repeated = [], []
    for hit in hits:  # a doc id returned twice counts once, at its first place
        if hit.doc_id not in seen:
            seen.add(hit.doc_id)
            unique.append(hit)
        else:
            repeated.append(hit.doc_id)
    issues = []
    if repeated:
        issues.append(f"returned {len(repeated)} repeated doc id(s), kept once at the first place (e.g. {repeated[0]!r})")
    return unique, issues


Checked = tuple[list[Hit], tuple[str, ...], list[str]]  # hits kept, doc ids past the depth, issues


def _first_stage_hits(returned: Any, depth: int, corpus: frozenset[str] | None) -> Checked:
    hits, issues = _as_hits(returned)
    if corpus is not None:
        unknown = [h.doc_id for h in hits if h.doc_id not in corpus]
        if unknown:
            raise StageFault(f"returned doc ids not in the corpus: {unknown[:5]}")
    if len(hits) > depth:
        issues.append(f"returned {len(hits)} hits for a depth of {depth}: cut to the depth")
    return hits[:depth], tuple(h.doc_id for h in hits[depth:]), issues


def _reranked_hits(returned: Any, given: Sequence[Hit]) -> Checked:
    hits, issues = _as_hits(returned)
    known = {h.doc_id for h in given}
    strangers = [h.doc_id for h in hits if h.doc_id not in known]
    if strangers:
        raise StageFault(f"returned doc ids it was not given: {strangers[:5]}")
    return hits, (), issues


def _second_answer(first: Sequence[Hit], get_again: Callable[[], Any], check: Callable, given) -> str | None:
    """The issue, if any, when a stage is asked the same query again (``verify``): a differing answer."""
    try:
        again = check(get_again(), given)[0]
    except Exception as exc:  # noqa: BLE001 - reported as the query's issue
        return f"nondeterministic: a second call failed ({_describe(exc)})"
    a, b = [h.doc_id for h in first], [h.doc_id for h in again]
    if a == b:
        return None
    rank = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b))) + 1
    return f"nondeterministic: a second call returned a different ranking (first difference at rank {rank})"


def _run_stage(
    stage: Stage, calls: dict[str, tuple[str, tuple[Hit, ...] | None]], store, settings: _Settings, *,
    call: Callable, acall: Callable | None, check: Callable,
) -> dict[str, Outcome]:
    """Every query of ``calls`` through one stage: from the cache where stored, else computed and stored."""
    outcomes: dict[str, Outcome] = {}
    todo: list[tuple[str, str, tuple[Hit, ...] | None, str, bool]] = []
    for q, (text, given) in calls.items():
        qhash = text_hash(text if given is None else text + "\x00" + "\x1f".join(h.doc_id for h in given))
        record = store.get(q, qhash)
        if record is not None:
            outcomes[q] = Outcome(
                Hit.from_columns(record["hits"]), latency=record.get("latency", 0.0), cached=True,
                beyond_depth=tuple(record.get("beyond_depth", ())), issues=tuple(record.get("issues", ())),
            )
        else:
            todo.append((q, text, given, qhash, settings.verify < 0 or len(todo) < settings.verify))
    bar = _progress_bar(stage.name, len(todo), settings.progress)

    def finish(q: str, qhash: str, result: Outcome) -> None:
        outcomes[q] = result
        if not result.failed:
            store.put({
                "query_id": q, "query_hash": qhash, "latency": result.latency,
                "hits": Hit.to_columns(result.hits), "beyond_depth": list(result.beyond_depth),
                **({"issues": list(result.issues)} if result.issues else {}),
            })
        if bar is not None:
            bar.update(1)

    try:
        if not todo:
            pass
        elif acall is not None and settings.concurrency > 1:
            _run_async(todo, acall, check, settings, finish)
        else:
            _run_threads(todo, call, check, settings, finish)
    finally:
        if bar is not None:
            bar.close()
    return {q: outcomes[q] for q in calls if q in outcomes}


def _progress_bar(name: str, total: int, progress: bool | None):
    if progress is False or total == 0:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=name, unit="query", disable=None if progress is None else not progress, leave=False)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, StageFault):
        return str(exc)
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError, concurrent.futures.TimeoutError)):
        return "timed out"
    return f"{type(exc).__name__}: {exc}"


def _run_threads(todo, call, check, settings: _Settings, finish) -> None:
    def ask(text: str, given):
        return call(text, given) if settings.timeout is None else _with_timeout(call, text, given, settings.timeout)

    def one(q: str, text: str, given, qhash: str, verify: bool) -> None:
        start = time.perf_counter()
        error = None
        for attempt in range(settings.retries + 1):
            try:
                hits, beyond, issues = check(ask(text, given), given)
                latency = time.perf_counter() - start
                if verify and (issue := _second_answer(hits, lambda: ask(text, given), check, given)):
                    issues.append(issue)
                finish(q, qhash, Outcome(tuple(hits), latency=latency, beyond_depth=beyond, issues=tuple(issues)))
                return
            except Exception as exc:  # a fault in one query is recorded, never raised
                error = _describe(exc)
                if attempt < settings.retries:
                    time.sleep(settings.backoff * 2**attempt)
        finish(q, qhash, Outcome(None, error, latency=time.perf_counter() - start))

    if settings.concurrency == 1:
        for item in todo:
            one(*item)
        return
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=settings.concurrency)
    try:
        for future in [pool.submit(one, *item) for item in todo]:
            future.result()
    except BaseException:  # Ctrl-C: stop at once; what completed is already in the cache
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def _with_timeout(call, text, given, timeout: float):
    result: list[Any] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            result.append(call(text, given))
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)

    worker = threading.Thread(target=target, daemon=True)  # an overrunning call is abandoned, not killed
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError
    if failure:
        raise failure[0]
    return result[0]


def _run_async(todo, acall, check, settings: _Settings, finish) -> None:
    async def main() -> None:
        gate = asyncio.Semaphore(settings.concurrency)

        async def ask(text: str, given):
            coroutine = acall(text, given)
            return await (asyncio.wait_for(coroutine, settings.timeout) if settings.timeout else coroutine)

        async def one(q: str, text: str, given, qhash: str, verify: bool) -> None:
            async with gate:
                start = time.perf_counter()
                error = None
                for attempt in range(settings.retries + 1):
                    try:
                        hits, beyond, issues = check(await ask(text, given), given)
                        latency = time.perf_counter() - start
                        if verify:
                            try:
                                again: Any = await ask(text, given)
                            except Exception as exc:  # noqa: BLE001 - reported by _second_answer
                                again = exc
                            issue = _second_answer(hits, lambda: _raise_or(again), check, given)
                            if issue:
                                issues.append(issue)
                        finish(q, qhash, Outcome(tuple(hits), latency=latency, beyond_depth=beyond, issues=tuple(issues)))
                        return
                    except Exception as exc:
                        error = _describe(exc)
                        if attempt < settings.retries:
                            await asyncio.sleep(settings.backoff * 2**attempt)
                finish(q, qhash, Outcome(None, error, latency=time.perf_counter() - start))

        await asyncio.gather(*(one(*item) for item in todo))

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(main())
        return
    # already inside an event loop (a notebook): run ours on a thread of its own
    done: list[BaseException] = []
    thread = threading.Thread(target=lambda: _capture(lambda: asyncio.run(main()), done))
    thread.start()
    thread.join()
    if done:
        raise done[0]


def _raise_or(value: Any) -> Any:
    if isinstance(value, BaseException):
        raise value
    return value


def _capture(fn, errors: list[BaseException]) -> None:
    try:
        fn()
    except BaseException as exc:
        errors.append(exc)
