"""Running a pipeline: every query through every stage, in blocks, with concurrency, batches, a cache, retries and
per-query faults.

The rules (blocks, executors, faults, mended answers, the cache, who is at fault): ``docs/runner.md``, "The runner"."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..data.queryset import QuerySet
from ..errors import HarnessError, InputError
from . import hit_table as ht
from ._batch import Given, StageJob, _describe, compute_batch, entry_hash
from ._cache import NoCache, NoStore, StageCache, StageStore, as_cache
from ._executor import Executor, todo_table
from .budget import Budget
from .fingerprint import Uncacheable
from .fusion import Fusion
from .result import PipelineResult, PipelineSpec, StageOutput, StageSpec, announce
from .stage import Reranker, Retriever, Stage

MIN_BLOCK = 1000  # queries per block at least (a block's Hit objects are all that lives at once)
FULL_PASS_EVERY = 1000  # the garbage collector's third threshold during a run (see _few_full_collections)


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


def block_size(batch_size: int, concurrency: int) -> int:
    """Queries per block of the local runner: enough for four rounds of ``concurrency`` batches, at least 1,000."""
    return max(MIN_BLOCK, batch_size * concurrency * 4)


@dataclasses.dataclass
class _Step:
    """One stage of the run: what it is, where its output's key comes from, who reads its hits."""

    stage: Stage
    role: str  # "input", "first" or "reranker"
    key: str  # the fingerprint of its output: its own and everything upstream
    covers: str
    job: StageJob
    inputs: tuple[int, ...] = ()  # a fusion: the steps it fuses
    upstream: int | None = None  # a reranker: the step whose hits it is given
    read: bool = False  # a later step reads its hits

    @property
    def fuses(self) -> bool:
        return bool(self.inputs)


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
    batch_size: int = 1,
    executor: Executor | str | None = None,
) -> PipelineResult:
    """The run of :meth:`Pipeline.run <rag_eval.stages.Pipeline.run>`, which checked every setting (they are
    trusted here): only the queries are checked."""
    query_set = queries if isinstance(queries, QuerySet) else None  # kept on the result: evaluate weights by it
    queries = _checked_queries(queries)
    running = resolve_executor(executor)
    store = as_cache(cache)
    described = {stage.name: _described(stage, store) for stage in pipeline.stages}  # before anything runs
    spec = _spec(pipeline, described)
    job = StageJob(
        role="first",
        depth=pipeline.depth,
        corpus=pipeline.corpus,
        batch_size=batch_size,
        concurrency=concurrency,
        retries=retries,
        backoff=backoff,
        timeout=timeout,
        verify=-1 if verify is True else int(verify),
    )
    steps = _steps(pipeline, described, job)
    stores = [store.store(s.stage.name, s.key) if not s.fuses else NoStore() for s in steps]
    bars = [_progress_bar(s.stage.name, len(queries), progress) for s in steps]
    try:
        if running is None:
            with _few_full_collections():
                parts = _run_in_blocks(steps, stores, bars, queries, block_size(batch_size, concurrency))
        else:
            tables = _run_by_stage(steps, stores, bars, queries, running, cached=not isinstance(store, NoCache))
            parts = [[t] for t in tables]
            del tables
    except BaseException:
        _flush(stores, quietly=True)  # keep what finished; the error that stopped the run is the one raised
        raise
    else:
        _flush(stores)
    finally:
        for bar in bars:
            if bar is not None:
                bar.close()
    # the stores are let go before the outputs are made contiguous: they hold the rows they were given or read
    # (the block tables, the memory-mapped shards), which are then freed part by part as they are copied
    stores.clear()
    outputs = {}
    for s, stage_parts in zip(steps, parts, strict=True):
        table = ht.contiguous(stage_parts)
        outputs[s.stage.name] = StageOutput(s.stage.name, s.role, s.key, table=table, covers=s.covers)
    result = PipelineResult(spec, queries, outputs, query_set)
    announce(result.findings, stacklevel=3)  # once per run, one line per kind, at the caller of Pipeline.run
    return result


def _flush(stores: list[StageStore | NoStore], *, quietly: bool = False) -> None:
    """Every store's pending rows written (``quietly``: a store failing now does not hide the error that stopped
    the run). A function of its own, so that no loop variable of the run keeps a store (and its rows) alive."""
    for opened in stores:
        if quietly:
            with contextlib.suppress(HarnessError, OSError):
                opened.flush()
        else:
            opened.flush()


@contextlib.contextmanager
def _few_full_collections() -> Iterator[None]:
    """The garbage collector's full passes made rare while the blocks run (every :data:`FULL_PASS_EVERY` young
    passes, not every 10): a block's Hit objects are young and many, and a full pass walks every object of the
    process, which took 20-30% of a run with instant stages. Young passes go on as usual, so the cycles a stage
    makes are still collected; the thresholds are restored when the run ends."""
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], max(thresholds[2], FULL_PASS_EVERY))
    try:
        yield
    finally:
        if gc.get_threshold()[2] == max(thresholds[2], FULL_PASS_EVERY):  # unless someone else changed them
            gc.set_threshold(*thresholds)


def resolve_executor(executor: Executor | str | None) -> Executor | None:
    """None (the local runner), ``"ray"`` (a default :class:`~rag_eval.stages._ray.RayExecutor`, imported only
    now: Ray is an optional extra) or an object with ``run_stage`` (checked by ``Pipeline.run``)."""
    if executor is None:
        return None
    if isinstance(executor, str):
        from ._ray import RayExecutor

        made: Executor = RayExecutor()
        return made
    return executor


def _steps(pipeline: Plan, described: Mapping[str, tuple[str, str]], job: StageJob) -> list[_Step]:
    """The stages in the order they run, each with its output's key (its fingerprint and everything upstream)."""
    depth = pipeline.depth
    first = pipeline.retriever
    steps: list[_Step] = []

    def add(stage: Stage, role: str, *upstream: str, **more: Any) -> _Step:
        digest, covers = described[stage.name]
        step = _Step(stage, role, _key(digest, *upstream), covers, dataclasses.replace(job, role=role), **more)
        steps.append(step)
        return step

    if isinstance(first, Fusion):
        inputs = [add(r, "input", f"depth={depth}") for r in first.retrievers]
        for step in inputs:
            step.read = True
        add(first, "first", *(s.key for s in inputs), inputs=tuple(range(len(inputs))))
    else:
        add(first, "first", f"depth={depth}")
    for reranker in pipeline.rerankers:
        previous = len(steps) - 1
        steps[previous].read = True
        add(reranker, "reranker", steps[previous].key, upstream=previous)
    return steps


# ----- the local runner: blocks of queries through every stage -----------------------------------------------


def _run_in_blocks(
    steps: list[_Step],
    stores: list[StageStore | NoStore],
    bars: list[_Bar | None],
    queries: dict[str, str],
    block: int,
) -> list[list[pa.Table]]:
    """Every block through every stage: per stage, its block tables in query order."""
    ids, texts = list(queries), list(queries.values())
    hashes = entry_hash(texts)
    parts: list[list[pa.Table]] = [[] for _ in steps]
    verify = [s.job.verify for s in steps]  # how many computed queries are still to be asked twice, per stage
    for lo in range(0, len(ids), block):
        hi = min(lo + block, len(ids))
        block_ids, block_texts, block_hashes = ids[lo:hi], texts[lo:hi], hashes[lo:hi]
        done: list[tuple[pa.Table, list[Any] | None]] = []
        for n, step in enumerate(steps):
            bar = bars[n]
            hits: list[Any] | None
            if step.fuses:
                table, hits = _fused(step, [done[i] for i in step.inputs], block_ids, block_hashes)
                if bar is not None:
                    bar.update(len(block_ids))
            else:
                previous = done[step.upstream] if step.upstream is not None else None
                job = dataclasses.replace(step.job, verify=verify[n]) if verify[n] != step.job.verify else step.job
                table, hits, computed = _block(
                    step, job, stores[n], bar, block_ids, block_texts, block_hashes, previous, steps
                )
                if verify[n] > 0:
                    verify[n] = max(0, verify[n] - computed)
            parts[n].append(table)
            done.append((table, hits if step.read else None))
    return parts


def _block(
    step: _Step,
    job: StageJob,
    store: StageStore | NoStore,
    bar: _Bar | None,
    ids: list[str],
    texts: list[str],
    hashes: list[str],
    previous: tuple[pa.Table, list[Any] | None] | None,
    steps: list[_Step],
) -> tuple[pa.Table, list[Any] | None, int]:
    """One block through one retriever or reranker: the rows (in block order); when a later stage reads them, the
    Hit tuples (None where failed, :data:`_LATER` for a row read from the cache: rebuilt from its columns only if a
    later stage computes that query, see :func:`_hits_of`); and how many queries were computed."""
    pieces: list[tuple[pa.Table, list[int]]] = []  # tables of rows, each with the block positions of its rows
    rows = list(range(len(ids)))  # the block positions of the queries this stage runs
    if previous is not None:
        hashes = entry_hash(texts, previous[0].column("hits"))
        failed = _failed_rows(previous[0])
        if failed.any():
            pieces.append(_skipped(step, steps, ids, failed))
            rows = np.flatnonzero(~failed).tolist()
    run_ids, run_hashes = [ids[i] for i in rows], [hashes[i] for i in rows]
    keeps = not isinstance(store, NoStore)
    found = _usable(store.lookup(run_ids, run_hashes), job.corpus) if run_ids and keeps else None
    misses = list(range(len(rows)))  # positions in `rows` of the queries to compute
    found_rows: list[int] = []
    if found is not None and found.num_rows:
        found_at = set(found.column("query_id").to_pylist())
        found_rows = [i for i in rows if ids[i] in found_at]
        pieces.append((found, found_rows))
        misses = [k for k, q in enumerate(run_ids) if q not in found_at]
    if bar is not None and len(ids) > len(misses):
        bar.update(len(ids) - len(misses))
    computed_hits: list[Given] = []
    if misses:
        given, given_column = None, None
        if previous is not None:  # the previous stage's hits of the queries computed, row for row
            wanted = [rows[k] for k in misses]
            given = _hits_of(previous, wanted)
            given_column = previous[0].column("hits")
            if len(wanted) < len(ids):
                given_column = given_column.take(pa.array(wanted, pa.int64()))
        computed, computed_hits = compute_batch(
            step.stage,
            job,
            [run_ids[k] for k in misses],
            [texts[rows[k]] for k in misses],
            [run_hashes[k] for k in misses],
            given,
            given_column=given_column,
            store=store if keeps else None,
            progress=bar.update if bar is not None else None,
        )
        pieces.append((computed, [rows[k] for k in misses]))
    hits: list[Any] | None = None
    if step.read:  # the Hit tuples in block order: the computed ones as they are, the cached ones later
        hits = [None] * len(ids)
        for k, h in zip(misses, computed_hits, strict=True):
            hits[rows[k]] = h
        for at in found_rows:
            hits[at] = _LATER
    return _in_order(pieces, len(ids)), hits, len(misses)


_LATER = object()  # a block's row read from the cache: its Hit tuple is made only if a later stage needs it


def _hits_of(done: tuple[pa.Table, list[Any] | None], rows: list[int]) -> list[Given]:
    """The Hit tuples of a block's ``rows`` of one stage: those computed as they are, those read from the cache
    rebuilt from the table's columns (and kept, for another reader)."""
    table, hits = done
    if hits is None:
        return ht.hit_lists(table, rows)
    later = [i for i in rows if hits[i] is _LATER]
    if later:
        for i, h in zip(later, ht.hit_lists(table, later), strict=True):
            hits[i] = h
    return [hits[i] for i in rows]


def _skipped(step: _Step, steps: list[_Step], ids: list[str], failed: np.ndarray) -> tuple[pa.Table, list[int]]:
    """The rows of the queries a reranker does not run (its previous stage failed on them), and their positions."""
    upstream = steps[step.upstream].stage.name if step.upstream is not None else "the previous stage"
    at = np.flatnonzero(failed).tolist()
    builder = ht.TableBuilder()
    for i in at:
        builder.add(ids[i], "", None, error=f"not run: {upstream} failed on this query", skipped=True)
    return builder.table(), at


def _failed_rows(table: pa.Table) -> np.ndarray:
    column = table.column("hits")
    if not column.null_count:
        return np.zeros(table.num_rows, bool)
    return np.asarray(pc.is_null(column).to_numpy(zero_copy_only=False), bool)


def _usable(found: pa.Table, corpus: frozenset[str] | None) -> pa.Table:
    """The cached rows whose doc ids are all in the corpus (a row that is not was stored under another corpus: the
    query is computed again, and its answer checked)."""
    if corpus is None or not found.num_rows:
        return found
    column = found.column("hits").combine_chunks()
    doc_ids = pc.struct_field(pc.list_flatten(column), "doc_id")
    outside = pc.invert(pc.is_in(doc_ids, value_set=_corpus_array(corpus)))
    if not pc.any(outside).as_py():
        return found
    parents = pc.list_parent_indices(column).to_numpy()
    bad = np.zeros(found.num_rows, bool)
    bad[parents[outside.to_numpy(zero_copy_only=False)]] = True
    return found.filter(pa.array(~bad))


_CORPUS: dict[int, tuple[frozenset[str], pa.Array]] = {}


def _corpus_array(corpus: frozenset[str]) -> pa.Array:
    """The corpus as an Arrow array (made once per corpus object)."""
    kept = _CORPUS.get(id(corpus))
    if kept is None or kept[0] is not corpus:
        _CORPUS.clear()
        kept = _CORPUS[id(corpus)] = (corpus, pa.array(sorted(corpus), pa.large_string()))
    return kept[1]


def _in_order(pieces: list[tuple[pa.Table, list[int]]], n: int) -> pa.Table:
    """The rows of ``pieces`` (each a table and the block positions of its rows) as one table in block order."""
    if len(pieces) == 1:
        return pieces[0][0]
    if not pieces:
        return ht.empty_table()
    positions = np.concatenate([np.asarray(at, np.int64) for _, at in pieces])
    order = np.empty(n, np.int64)
    order[positions] = np.arange(n)
    return ht.concat([t for t, _ in pieces]).combine_chunks().take(pa.array(order))


def _fused(
    step: _Step, inputs: list[tuple[pa.Table, list[Any] | None]], ids: list[str], hashes: list[str]
) -> tuple[pa.Table, list[Given]]:
    """A block of queries through a fusion of its inputs (computed, never cached: it is cheap)."""
    fusion = step.stage
    assert isinstance(fusion, Fusion)
    names = [r.name for r in fusion.retrievers]
    beyond = [t.column("beyond_depth").to_pylist() for t, _ in inputs]
    every = list(range(len(ids)))
    hit_lists = [_hits_of(done, every) for done in inputs]
    builder = ht.TableBuilder()
    out: list[Given] = []
    for i, q in enumerate(ids):
        rankings = [h[i] for h in hit_lists]
        failed = [name for name, r in zip(names, rankings, strict=True) if r is None]
        if failed:
            builder.add(q, hashes[i], None, error=f"input retriever(s) failed: {', '.join(failed)}", skipped=True)
            out.append(None)
            continue
        start = time.perf_counter()
        try:
            hits = tuple(fusion.combine([r or () for r in rankings], step.job.depth))
        except InputError as exc:  # a NaN a score sum cannot order: this query's fault of the fusion
            builder.add(q, hashes[i], None, error=_describe(exc), latency=time.perf_counter() - start)
            out.append(None)
            continue
        kept = {h.doc_id for h in hits}
        past = dict.fromkeys(
            d
            for r, b in zip(rankings, beyond, strict=True)
            for d in (*(h.doc_id for h in r or ()), *(b[i] or ()))
            if d not in kept
        )
        builder.add(q, hashes[i], hits, latency=time.perf_counter() - start, beyond_depth=tuple(past))
        out.append(hits)
    return builder.table(), out


# ----- with an executor: stage by stage ---------------------------------------------------------------------


def _run_by_stage(
    steps: list[_Step],
    stores: list[StageStore | NoStore],
    bars: list[_Bar | None],
    queries: dict[str, str],
    executor: Executor,
    *,
    cached: bool,
) -> list[pa.Table]:
    ids, texts = list(queries), list(queries.values())
    first_hashes = entry_hash(texts)
    tables: list[pa.Table] = []
    for n, step in enumerate(steps):
        if step.fuses:
            table, _ = _fused(step, [(tables[i], None) for i in step.inputs], ids, first_hashes)
        else:
            table = _executed(step, n, stores[n], executor, ids, texts, first_hashes, tables, steps, cached)
        if bars[n] is not None:
            bars[n].update(len(ids))  # type: ignore[union-attr]
        tables.append(table)
    return tables


def _executed(
    step: _Step,
    n: int,
    store: StageStore | NoStore,
    executor: Executor,
    ids: list[str],
    texts: list[str],
    hashes: list[str],
    tables: list[pa.Table],
    steps: list[_Step],
    cached: bool,
) -> pa.Table:
    """One stage over every query through ``executor``: the cached rows looked up here, the rest handed over."""
    rows = list(range(len(ids)))
    pieces: list[tuple[pa.Table, list[int]]] = []
    given_column = None
    if step.upstream is not None:
        previous = tables[step.upstream]
        failed = _failed_rows(previous)
        hashes = entry_hash(texts, previous.column("hits"))
        if failed.any():
            pieces.append(_skipped(step, steps, ids, failed))
            rows = np.flatnonzero(~failed).tolist()
        given_column = previous.column("hits")
    run_ids, run_hashes = [ids[i] for i in rows], [hashes[i] for i in rows]
    found = _usable(store.lookup(run_ids, run_hashes), step.job.corpus) if run_ids else ht.empty_table()
    found_at = set(found.column("query_id").to_pylist())
    if found.num_rows:
        pieces.append((found, [i for i in rows if ids[i] in found_at]))
    todo_rows = [i for i in rows if ids[i] not in found_at]
    if todo_rows:
        given = given_column.take(pa.array(todo_rows, pa.int64())) if given_column is not None else None
        todo = todo_table(
            [ids[i] for i in todo_rows], [texts[i] for i in todo_rows], [hashes[i] for i in todo_rows], given
        )
        spec = store.spec() if cached else None
        done = executor.run_stage(step.stage, step.job, todo, spec)
        pieces.append((_checked_rows(executor, step.stage.name, todo, done), todo_rows))
    return _in_order(pieces, len(ids))


def _checked_rows(executor: Executor, stage: str, todo: pa.Table, done: Any) -> pa.Table:
    """An executor's answer, if it is the rows of ``todo`` in order (else a HarnessError: not the stage's fault)."""
    if not isinstance(done, pa.Table) or "hits" not in done.schema.names:
        raise HarnessError(f"executor {executor!r}, stage {stage!r}: returned a {type(done).__name__}, not a table")
    try:
        conformed = ht.conform(done, ht.fields_of(done))
        ok = conformed.schema.equals(ht.schema(ht.fields_of(done)))
    except (pa.ArrowException, KeyError, TypeError, ValueError):
        ok = False
    if not ok:
        raise HarnessError(f"executor {executor!r}, stage {stage!r}: returned a table of another schema")
    if done.num_rows != todo.num_rows or not done.column("query_id").equals(todo.column("query_id")):
        raise HarnessError(
            f"executor {executor!r}, stage {stage!r}: returned {done.num_rows} rows for {todo.num_rows} queries, "
            "or in another order"
        )
    return conformed


# ----- the rest ---------------------------------------------------------------------------------------------


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
    out = dict(queries)
    ids, texts = out.keys(), out.values()
    # whole-column checks (builtins mapped in C, no Python call per query); the loop below only names the culprit
    if not (set(map(type, ids)) <= {str} and set(map(type, texts)) <= {str} and all(map(str.strip, texts))):
        for qid, text in out.items():
            if not isinstance(qid, str):
                raise InputError(f"query id {qid!r} is a {type(qid).__name__}, not a str", source="queries")
            if not isinstance(text, str) or not text.strip():
                raise InputError(f"query {qid!r}: the text must be a non-empty str, not {text!r}", source="queries")
    if not out:
        raise ValueError("no queries to run")
    return out


def _progress_bar(name: str, total: int, progress: bool | None) -> _Bar | None:
    if progress is False or total == 0:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=name, unit="query", disable=None if progress is None else not progress, leave=False)
