"""Running a pipeline: stage by stage, every query, with concurrency, a cache, retries and per-query faults.

A fault in one query of one stage (an exception, a timeout, None or another bad return, ids that are not
strings, a reranker returning ids it was not given, ids outside the corpus) is recorded for that query with
its text, and the run goes on; the later stages skip that query. Answers that can be used once mended are kept
with an issue recorded for the query (``Outcome.issues``): a doc id returned twice (kept once, at its first
place), more hits than the depth (cut to the depth), and, with ``verify``, a different answer on a second call.
Every completed query is written to the cache at once, so an interrupted run loses nothing it finished.
When the run ends, a systematic problem is said once, one line per kind (:attr:`PipelineResult.findings`): a stage
that failed on more than half of its queries (with the count and the first error), a retriever that returned the same
number of hits below the depth on most queries (a cap of its own).

Who is at fault decides what happens. Anything a stage raises for a query (an ``Exception``, and also a
``BaseException`` of its own such as ``GeneratorExit`` or an ``asyncio.CancelledError`` it raises itself) is that
query's fault, recorded and retried. ``KeyboardInterrupt`` and ``SystemExit`` stop the run, keeping what is stored. A
failure of the harness itself (the cache cannot be written, a result cannot be stored) is a
:class:`~rag_eval.errors.HarnessError` that stops the run: it is never retried, recorded or scored as the stage's.
A timeout holds whatever the stage does: a sync stage's call runs on a thread the runner stops waiting for; an async
stage runs on the runner's worker threads, each with an event loop of its own, so one that blocks its loop (a
``time.sleep`` inside) holds only its own query, and a run takes about ``timeout x ceil(queries / concurrency)``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import os
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from ..errors import HarnessError, InputError
from ._cache import NoCache, NoStore, StageCache, StageStore, as_cache, json_metadata, text_hash
from ._fingerprint import Uncacheable
from .budget import Budget
from .fusion import Fusion
from .hits import Hit, as_hit
from .result import Outcome, PipelineResult, PipelineSpec, StageOutput, StageSpec, announce
from .stage import Reranker, Retriever, Stage

Given = tuple[Hit, ...] | None  # the hits a reranker is given for a query (None: a first stage, given none)
Call = Callable[[str, Given], Any]  # call(query text, given): what the stage returned
ACall = Callable[[str, Given], Awaitable[Any]]
Checked = tuple[list[Hit], tuple[str, ...], list[str]]  # hits kept, doc ids past the depth, issues
Check = Callable[[Any, Any], Checked]  # check(returned, given): usable hits, or a StageFault
Todo = tuple[str, str, Given, str, bool]  # query id, text, given, query hash, verify it
Finish = Callable[[str, str, Outcome], None]  # finish(query id, query hash, outcome)


class _Bar(Protocol):
    """What the runner uses of a progress bar (tqdm's)."""

    def update(self, n: float | None = 1) -> bool | None: ...

    def close(self) -> None: ...


class Plan(Protocol):
    """What the runner reads of a :class:`~rag_eval.stages.Pipeline` (named here by its shape, so that the runner
    does not import the pipeline that calls it)."""

    retriever: Retriever
    rerankers: tuple[Reranker, ...]
    depth: int
    budget: Budget
    corpus: frozenset[str] | None
    tokenizer: Callable[[str], int]

    @property
    def stages(self) -> list[Stage]: ...


class StageFault(Exception):
    """A stage's output for one query cannot be used (the message says why)."""


def run_pipeline(
    pipeline: Plan,
    queries: Mapping[str, str],
    *,
    cache: StageCache | str | os.PathLike[str] | None,
    concurrency: int,
    progress: bool | None,
    retries: int,
    backoff: float,
    timeout: float | None,
    verify: bool | int = False,
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
    described = {stage.name: _described(stage, store) for stage in pipeline.stages}  # before anything runs
    spec = _spec(pipeline, described)

    def output(stage: Stage, role: str, *upstream: str) -> StageOutput:
        digest, covers = described[stage.name]
        return StageOutput(stage.name, role, _key(digest, *upstream), covers=covers)

    def retrieve(stage: Retriever, role: str) -> StageOutput:
        out = output(stage, role, f"depth={depth}")
        key = out.fingerprint
        calls: dict[str, tuple[str, tuple[Hit, ...] | None]] = {q: (queries[q], None) for q in queries}
        out.outcomes = _run_stage(
            stage,
            calls,
            store.store(stage.name, key),
            settings,
            call=lambda text, _: stage.search(text, depth),
            acall=(lambda text, _: stage.asearch(text, depth)) if stage.has_async else None,
            check=lambda hits, _: _first_stage_hits(hits, depth, pipeline.corpus),
        )
        return out

    if isinstance(first, Fusion):
        inputs = [retrieve(r, "input") for r in first.retrievers]
        stages.update({o.name: o for o in inputs})
        fused = output(first, "first", *(o.fingerprint for o in inputs))
        for q in queries:
            failed = [o.name for o in inputs if o.outcomes[q].failed]
            if failed:
                fused.outcomes[q] = Outcome(None, f"input retriever(s) failed: {', '.join(failed)}", skipped=True)
                continue
            rankings = [o.outcomes[q].hits or () for o in inputs]
            start = time.perf_counter()
            try:
                hits = first.combine(rankings, depth)
            except InputError as exc:  # a NaN a score sum cannot order: this query's fault of the fusion
                fused.outcomes[q] = Outcome(None, _describe(exc), latency=time.perf_counter() - start)
                continue
            kept = {h.doc_id for h in hits}
            beyond = dict.fromkeys(
                d
                for o in inputs
                for d in (*(h.doc_id for h in o.outcomes[q].hits or ()), *o.outcomes[q].beyond_depth)
                if d not in kept
            )
            fused.outcomes[q] = Outcome(tuple(hits), latency=time.perf_counter() - start, beyond_depth=tuple(beyond))
        stages[first.name] = previous = fused
    else:
        stages[first.name] = previous = retrieve(first, "first")

    for reranker in pipeline.rerankers:
        out = output(reranker, "reranker", previous.fingerprint)
        key = out.fingerprint
        calls = {}
        for q, outcome in previous.outcomes.items():
            if outcome.failed:
                out.outcomes[q] = Outcome(None, f"not run: {previous.name} failed on this query", skipped=True)
            else:
                calls[q] = (queries[q], outcome.hits)
        out.outcomes.update(
            _run_stage(
                reranker,
                calls,
                store.store(reranker.name, key),
                settings,
                call=_rerank_call(reranker),
                acall=_rerank_acall(reranker) if reranker.has_async else None,
                check=_reranked_hits,
            )
        )
        out.outcomes = {q: out.outcomes[q] for q in queries}  # query order
        stages[reranker.name] = previous = out
    result = PipelineResult(spec, queries, stages)
    announce(result.findings, stacklevel=3)  # once per run, one line per kind, at the caller of Pipeline.run
    return result


def _rerank_call(reranker: Reranker) -> Call:
    """``call(text, given)`` for a reranker: it gets a list of its own (it must not change the input in place)."""

    def call(text: str, given: Given) -> Any:
        return reranker.rerank(text, list(given or ()))

    return call


def _rerank_acall(reranker: Reranker) -> ACall:
    async def acall(text: str, given: Given) -> Any:
        return await reranker.arerank(text, list(given or ()))

    return acall


def _spec(pipeline: Plan, described: Mapping[str, tuple[str, str]]) -> PipelineSpec:
    """The frozen description of ``pipeline`` a result keeps (its stages' models and indexes are not kept)."""
    first = pipeline.retriever
    inputs = {r.name for r in first.retrievers} if isinstance(first, Fusion) else set()

    def role(stage: Stage) -> str:
        return "input" if stage.name in inputs else "first" if stage is first else "reranker"

    return PipelineSpec(
        structure=repr(pipeline),
        depth=pipeline.depth,
        budget=pipeline.budget,
        stages=tuple(
            StageSpec(
                name=stage.name,
                role=role(stage),
                kind=stage.kind,
                cls=f"{type(stage).__module__}.{type(stage).__qualname__}",
                fingerprint=described[stage.name][0],
                covers=described[stage.name][1],
                version=stage.version,
            )
            for stage in pipeline.stages
        ),
        corpus_size=len(pipeline.corpus) if pipeline.corpus is not None else None,
        tokenizer=pipeline.tokenizer,
    )


class _Settings:
    def __init__(
        self,
        concurrency: int,
        progress: bool | None,
        retries: int,
        backoff: float,
        timeout: float | None,
        verify: int,
    ):
        self.concurrency, self.progress, self.retries, self.backoff, self.timeout = (
            concurrency,
            progress,
            retries,
            backoff,
            timeout,
        )
        self.verify = verify  # computed queries per stage called twice: -1 all, 0 none


def _described(stage: Stage, store: StageCache | NoCache) -> tuple[str, str]:
    """A stage's fingerprint and what it covers; a stage that cannot be described exactly runs uncached."""
    try:
        described = stage.described()
    except Uncacheable:
        if not isinstance(store, NoCache):
            raise
        return f"uncached:{stage.name}", "not cached (it cannot be described exactly; see version=)"
    return described.digest, described.covers


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
        issues.append(
            f"returned {len(repeated)} repeated doc id(s), kept once at the first place (e.g. {repeated[0]!r})"
        )
    return unique, issues


_STOP = (KeyboardInterrupt, SystemExit, HarnessError)  # stop the run; every other exception is the query's fault


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


def _second_answer(first: Sequence[Hit], get_again: Callable[[], Any], check: Check, given: Given) -> str | None:
    """The issue, if any, when a stage is asked the same query again (``verify``): a differing answer."""
    try:
        again = check(get_again(), given)[0]
    except _STOP:
        raise
    except BaseException as exc:  # noqa: BLE001 - reported as the query's issue
        return f"nondeterministic: a second call failed ({_describe(exc)})"
    a, b = [h.doc_id for h in first], [h.doc_id for h in again]
    if a == b:
        return None
    rank = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))) + 1
    return f"nondeterministic: a second call returned a different ranking (first difference at rank {rank})"


def _run_stage(
    stage: Stage,
    calls: dict[str, tuple[str, Given]],
    store: StageStore | NoStore,
    settings: _Settings,
    *,
    call: Call,
    acall: ACall | None,
    check: Check,
) -> dict[str, Outcome]:
    """Every query of ``calls`` through one stage: from the cache where stored, else computed and stored."""
    outcomes: dict[str, Outcome] = {}
    todo: list[Todo] = []
    for q, (text, given) in calls.items():
        qhash = text_hash(text if given is None else text + "\x00" + "\x1f".join(h.doc_id for h in given))
        record = store.get(q, qhash)
        if record is not None:
            outcomes[q] = Outcome(
                Hit.from_columns(record["hits"]),
                latency=record.get("latency", 0.0),
                cached=True,
                beyond_depth=tuple(record.get("beyond_depth", ())),
                issues=tuple(record.get("issues", ())),
            )
        else:
            todo.append((q, text, given, qhash, settings.verify < 0 or len(todo) < settings.verify))
    bar = _progress_bar(stage.name, len(todo), settings.progress)
    finishing = threading.Lock()
    stopped = threading.Event()  # the run stopped (a harness error, Ctrl-C): calls still in flight store nothing

    def finish(q: str, qhash: str, result: Outcome) -> None:
        """Keep one query's outcome: a harness failure here (the cache) is raised, never the stage's fault."""
        if not result.failed:
            result = _stored_types(stage.name, q, result)
        with finishing:  # one store at a time, so that none follows a failed one (the run stops there)
            if stopped.is_set():
                return
            if not result.failed:
                try:
                    store.put(
                        {
                            "query_id": q,
                            "query_hash": qhash,
                            "latency": result.latency,
                            "hits": Hit.to_columns(result.hits or ()),
                            "beyond_depth": list(result.beyond_depth),
                            **({"issues": list(result.issues)} if result.issues else {}),
                        }
                    )
                except BaseException:
                    stopped.set()
                    raise
            outcomes[q] = result
            if bar is not None:
                bar.update(1)

    try:
        if todo:
            _run_threads(todo, call, acall, check, settings, finish)
    except BaseException:
        stopped.set()
        raise
    finally:
        if bar is not None:
            bar.close()
    return {q: outcomes[q] for q in calls if q in outcomes}


def _stored_types(stage: str, query: str, result: Outcome) -> Outcome:
    """The outcome with every hit's metadata in JSON types (the cache's rule, applied with or without a cache, so
    that a rerun from the cache sees what the first run saw); anything else is an InputError naming the hit."""
    if not any(h.metadata for h in result.hits or ()):
        return result
    hits = []
    for hit in result.hits or ():
        if hit.metadata:
            converted = json_metadata(hit.metadata, f"stage {stage!r}, query {query!r}, hit {hit.doc_id!r}")
            if converted != hit.metadata or any(type(v) is not type(converted[k]) for k, v in hit.metadata.items()):
                hit = Hit(hit.doc_id, hit.score, hit.text, hit.tokens, converted)
        hits.append(hit)
    return Outcome(tuple(hits), result.error, result.latency, result.cached, result.beyond_depth, result.issues)


def _progress_bar(name: str, total: int, progress: bool | None) -> _Bar | None:
    if progress is False or total == 0:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=name, unit="query", disable=None if progress is None else not progress, leave=False)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, StageFault):
        return str(exc)
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError, concurrent.futures.TimeoutError)):
        return "timed out"
    if isinstance(exc, asyncio.CancelledError):
        return f"the stage raised CancelledError itself{f': {exc}' if str(exc) else ''}"
    return f"{type(exc).__name__}: {exc}"


def _run_threads(
    todo: list[Todo], call: Call, acall: ACall | None, check: Check, settings: _Settings, finish: Finish
) -> None:
    """Every query of ``todo`` on ``concurrency`` threads (the caller's own when 1). An async stage runs on an
    event loop of the worker thread's own, kept from call to call; one abandoned by a timeout is replaced."""
    local = threading.local()
    loops: list[asyncio.AbstractEventLoop] = []  # every event loop made for this stage, closed at the end

    def ask(text: str, given: Given) -> Any:
        if acall is not None:
            return _on_own_loop(local, loops, acall, text, given, settings.timeout)
        return call(text, given) if settings.timeout is None else _with_timeout(call, text, given, settings.timeout)

    def one(q: str, text: str, given: Given, qhash: str, verify: bool) -> None:
        start = time.perf_counter()
        error = None
        for attempt in range(settings.retries + 1):
            try:
                hits, beyond, issues = check(ask(text, given), given)
                latency = time.perf_counter() - start
                if verify and (issue := _second_answer(hits, lambda: ask(text, given), check, given)):
                    issues.append(issue)
            except _STOP:
                raise
            except BaseException as exc:  # noqa: BLE001 - a fault in one query is recorded, never raised
                error = _describe(exc)
                if attempt < settings.retries:
                    time.sleep(settings.backoff * 2**attempt)
                continue
            finish(q, qhash, Outcome(tuple(hits), latency=latency, beyond_depth=beyond, issues=tuple(issues)))
            return
        finish(q, qhash, Outcome(None, error, latency=time.perf_counter() - start))

    try:
        if settings.concurrency == 1:
            for item in todo:
                one(*item)
            return
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=settings.concurrency, thread_name_prefix="rag_eval")
        try:
            futures = [pool.submit(one, *item) for item in todo]
            for future in concurrent.futures.as_completed(futures):
                future.result()  # the first harness error, Ctrl-C or SystemExit stops the run
        except BaseException:  # stop at once: what completed is already in the cache
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
    finally:
        for loop in loops:
            if not loop.is_running() and not loop.is_closed():
                loop.close()


def _with_timeout(call: Call, text: str, given: Given, timeout: float) -> Any:
    result: list[Any] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            result.append(call(text, given))
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


def _on_own_loop(
    local: threading.local,
    loops: list[asyncio.AbstractEventLoop],
    acall: ACall,
    text: str,
    given: Given,
    timeout: float | None,
) -> Any:
    """Await ``acall(text, given)`` on this worker's event loop (made on first use). With a timeout the loop is
    driven by a helper thread the worker stops waiting for, so a stage that blocks its loop cannot hold the
    timeout; that loop is then abandoned (its task asked to cancel) and the next call gets a new one."""
    loop = getattr(local, "loop", None)
    if loop is None or loop.is_closed():
        loop = local.loop = asyncio.new_event_loop()
        loops.append(loop)

    async def awaited() -> Any:
        return await acall(text, given)

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
        try:
            if task_box:
                loop.call_soon_threadsafe(task_box[0].cancel)
        except RuntimeError:  # it finished (and was closed) meanwhile
            pass
        raise TimeoutError
    if failure:
        raise failure[0]
    return result[0]
