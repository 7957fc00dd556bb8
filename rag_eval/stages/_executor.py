"""Executors: what runs a stage's queries somewhere else than in the runner's own loop (Ray's workers, say).

``Pipeline.run(queries, executor=...)`` runs the pipeline stage by stage over an :class:`Executor`: for each stage,
the runner looks every query up in the cache, and hands the rest to :meth:`Executor.run_stage` as one table
(``todo``: ``query_id``, ``text``, ``query_hash`` and, for a reranker, ``hits``: the hits each query is given, a
column of the previous stage's table). The executor computes them with
:func:`rag_eval.stages._batch.compute_batch` (so every fault rule of a local run holds), puts the new rows into the
store that ``store`` opens (``StoreSpec.open()``; None: no cache) and flushes it, and returns the rows of
:data:`~rag_eval.stages.hit_table.SCHEMA` in the order of ``todo``. The result is the same as a local run's
(latency aside).

:class:`LocalExecutor` does that in the runner's own process: the reference an executor is tested against.
``executor="ray"`` is ``rag_eval.stages._ray.RayExecutor()`` (imported when asked for: Ray is an optional extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import pyarrow as pa

from . import hit_table as ht
from ._batch import Given, StageJob, compute_batch

if TYPE_CHECKING:
    from ._cache import StoreSpec
    from .stage import Stage

__all__ = ["Executor", "LocalExecutor", "todo_table"]

TODO_FIELDS = ("query_id", "text", "query_hash")


@runtime_checkable
class Executor(Protocol):
    """Runs one stage over a table of queries (see the module's docstring)."""

    def run_stage(self, stage: Stage, job: StageJob, todo: pa.Table, store: StoreSpec | None) -> pa.Table:
        """The rows of ``todo`` computed through ``stage`` (SCHEMA rows, in ``todo``'s order); new rows put into
        ``store.open()`` and flushed before returning."""
        ...


def todo_table(
    query_ids: list[str], texts: list[str], query_hashes: list[str], hits: pa.Array | pa.ChunkedArray | None = None
) -> pa.Table:
    """The ``todo`` table of :meth:`Executor.run_stage` (``hits``: the given hits of a reranker's queries)."""
    columns = {
        "query_id": pa.array(query_ids, pa.large_string()),
        "text": pa.array(texts, pa.large_string()),
        "query_hash": pa.array(query_hashes, pa.string()),
    }
    if hits is not None:
        columns["hits"] = hits
    return pa.table(columns)


def given_of(todo: pa.Table) -> list[Given] | None:
    """The hits each query of ``todo`` is given, as Hit tuples (None: a first stage's todo, given none)."""
    if "hits" not in todo.schema.names:
        return None
    rows = pa.table({"hits": todo.column("hits")})
    return ht.hit_lists(rows)


class LocalExecutor:
    """Runs each stage in this process, with :func:`compute_batch` over the whole ``todo`` (what the runner does
    block by block without an executor): the reference for other executors, and a way to run stage by stage."""

    def run_stage(self, stage: Stage, job: StageJob, todo: pa.Table, store: StoreSpec | None) -> pa.Table:
        opened = store.open() if store is not None else None
        try:
            table, _ = compute_batch(
                stage,
                job,
                todo.column("query_id").to_pylist(),
                todo.column("text").to_pylist(),
                todo.column("query_hash").to_pylist(),
                given_of(todo),
                given_column=todo.column("hits") if "hits" in todo.schema.names else None,
                store=opened,
            )
        finally:
            if opened is not None:
                opened.flush()
        return table

    def __repr__(self) -> str:
        return "LocalExecutor()"
