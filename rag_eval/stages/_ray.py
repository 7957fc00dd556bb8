"""Running a stage over Ray: one machine's cores, or a cluster's machines and GPUs.

How a stage runs there (actors and tasks, the cache on a cluster, what a dead worker costs, versions):
``docs/clusters.md``, "On Ray"."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from .._checks import check_int, check_number, check_seconds
from .._optional import install_hint, require
from ..errors import HarnessError, InputError
from .hit_table import concat, empty_table, hit_lists

#: rows of a Ray batch when neither the executor nor the stage says otherwise
DEFAULT_BATCH_ROWS = 256
#: Ray Data's own dependencies whose installed versions are checked against ray's requirements (its ``data`` extra)
CHECKED = ("numpy", "pandas", "pyarrow")
ROW = "_rag_eval_row"  # the position of a query in the runner's todo table, carried through Ray and dropped after
VERIFY = "_rag_eval_verify"  # whether a query is one of the first ``job.verify`` (asked twice), set by the driver


class _Spec(Protocol):
    """What the executor uses of a cache store's picklable description (``StageStore.spec()``)."""

    def open(self) -> Any: ...


def check_ray_data() -> dict[str, str]:
    """The installed versions of :data:`CHECKED`; an ImportError when one of them is missing or outside the range
    the installed ray's Ray Data declares (its ``data`` extra), or when ray itself is missing."""
    from importlib import metadata

    from packaging.requirements import Requirement

    require("ray", extra="ray", feature="RayExecutor")
    try:
        ray_version = metadata.version("ray")
        declared = metadata.requires("ray") or []
    except metadata.PackageNotFoundError:  # importable but not installed as a distribution (a source checkout)
        return {}
    found: dict[str, str] = {}
    for line in declared:
        requirement = Requirement(line)
        name = requirement.name.lower()
        if name not in CHECKED or requirement.marker is None or not requirement.marker.evaluate({"extra": "data"}):
            continue
        if not requirement.marker.evaluate({"extra": ""}):  # a requirement of the data extra (not of the core)
            try:
                installed = metadata.version(name)
            except metadata.PackageNotFoundError:
                raise ImportError(
                    f"Ray Data (ray {ray_version}) needs {requirement.name}{requirement.specifier}, which is not "
                    f"installed: {install_hint('ray')}"
                ) from None
            if not requirement.specifier.contains(installed, prereleases=True):
                raise ImportError(
                    f"Ray Data (ray {ray_version}) supports {requirement.name}{requirement.specifier}, but "
                    f"{requirement.name} {installed} is installed: install a supported version ({install_hint('ray')} "
                    "brings one) or a ray release that supports it"
                )
            found[name] = installed
    return found


class RayExecutor:
    """Run each stage of a pipeline over Ray (``Pipeline.run(queries, executor=RayExecutor(...))``).

    ``address``: the cluster to connect to (``"ray://head:10001"``, ``"head:6379"`` or ``"auto"``) when Ray is not
    initialised yet; None starts a local Ray (or joins the one ``RAY_ADDRESS`` names). An executor never
    re-initialises a Ray the user started: it attaches to it, and ``address``, ``runtime_env`` and ``init`` are then
    refused (they would be silently ignored). ``runtime_env``: Ray's runtime environment for the workers (``pip``,
    ``working_dir``, ``env_vars``: what a cluster's machines need to import the stages). ``init``: more keyword
    arguments for ``ray.init`` (``num_cpus`` of a local Ray, for instance; the workers' output is not echoed on the
    driver unless ``init={"log_to_driver": True}``: a stage's faults are recorded per query all the same).

    ``num_cpus`` and ``num_gpus``: what each worker (actor or task) asks of Ray (default 1 CPU, no GPU).
    ``batch_size``: the rows of a Ray batch (default: 16 x the stage's own batch size x its concurrency, at least
    256), the unit Ray schedules and retries. ``actors``: the size of a stateful stage's actor pool (default: the
    cluster's CPUs over ``num_cpus``, or its GPUs over ``num_gpus`` when GPUs are asked for). ``factory``: ``{stage
    name: a callable with no argument that builds the stage}``, called once in each actor (the model loads there,
    not on the driver and not per batch). ``stateful``: names of further stages to run on actors, pickled (those
    with a factory always are). ``flush_seconds``: how long a worker keeps finished queries before it writes
    them as a shard (the work a killed worker can lose; the module's text).
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        num_cpus: float | None = None,
        num_gpus: float | None = None,
        batch_size: int | None = None,
        actors: int | None = None,
        factory: Mapping[str, Callable[[], Any]] | None = None,
        stateful: Collection[str] = (),
        runtime_env: Mapping[str, Any] | None = None,
        init: Mapping[str, Any] | None = None,
        flush_seconds: float = 1.0,
    ) -> None:
        if address is not None and (not isinstance(address, str) or not address.strip()):
            raise InputError(f"RayExecutor: address must be a non-empty str (or None), not {address!r}")
        self.address = address
        self.num_cpus = _resource(num_cpus, "num_cpus")
        self.num_gpus = _resource(num_gpus, "num_gpus")
        self.batch_size = _count(batch_size, "batch_size")
        self.actors = _count(actors, "actors")
        self.flush_seconds = (
            1.0 if flush_seconds is None else check_seconds(flush_seconds, "RayExecutor: flush_seconds", zero=True)
        )
        if factory is not None and not isinstance(factory, Mapping):
            raise InputError(
                "RayExecutor: factory must be a mapping {stage name: a callable that builds the stage}, not "
                f"{type(factory).__name__}"
            )
        self.factory = dict(factory or {})
        for name, build in self.factory.items():
            if not isinstance(name, str) or not callable(build):
                raise InputError(f"RayExecutor: factory[{name!r}] must be a callable under a stage's name (a str)")
        if isinstance(stateful, str) or not isinstance(stateful, Collection):
            raise InputError(f"RayExecutor: stateful must be a collection of stage names, not {stateful!r}")
        self.stateful = frozenset(stateful)
        for name, value in (("runtime_env", runtime_env), ("init", init)):
            if value is not None and not isinstance(value, Mapping):
                raise InputError(f"RayExecutor: {name} must be a mapping, not {type(value).__name__}")
        self.runtime_env = dict(runtime_env) if runtime_env is not None else None
        self.init = dict(init or {})
        for reserved in ("address", "runtime_env"):
            if reserved in self.init:
                raise InputError(f"RayExecutor: give {reserved} as its own argument, not inside init")
        self._started = False  # whether this executor started the Ray it uses (so shutdown stops it)

    def __repr__(self) -> str:
        return f"RayExecutor(address={self.address!r}, actors={self.actors}, batch_size={self.batch_size})"

    # -- Ray itself ---------------------------------------------------------------------------------------------

    def connect(self) -> Any:
        """The ``ray`` module, attached to the Ray already initialised or initialised here (see the class)."""
        ray = require("ray", extra="ray", feature="RayExecutor")
        check_ray_data()
        if ray.is_initialized():
            if self._started:  # by this executor, for an earlier stage
                return ray
            if self.address is not None or self.runtime_env is not None or self.init:
                raise InputError(
                    "RayExecutor: Ray is already initialised in this process, so address, runtime_env and init "
                    "cannot apply (give them to your own ray.init, or leave them out to attach)"
                )
            return ray
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # never send Ray's usage statistics
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, **self.init}
        if self.runtime_env is not None:
            options["runtime_env"] = self.runtime_env
        ray.init(self.address, **options)
        self._started = True
        return ray

    def shutdown(self) -> None:
        """Stop the Ray this executor started (a Ray the user started is left running)."""
        if self._started:
            import ray

            ray.shutdown()
            self._started = False

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- the executor protocol ----------------------------------------------------------------------------------

    def run_stage(self, stage: Any, job: Any, todo: pa.Table, store: _Spec | None) -> pa.Table:
        """``todo`` through ``stage`` on Ray: SCHEMA rows, one per row of ``todo``, in its order."""
        if todo.num_rows == 0:
            return empty_table()
        with warnings.catch_warnings():
            # Ray's own warnings (its deprecations, its advice on tuning a pool larger than its inputs) are not the
            # user's concern; a warning of the user's stage in a worker is the worker's
            warnings.filterwarnings("ignore", module=r"ray(\.|$)")
            ray = self.connect()
            return self._run(ray, stage, job, todo, store)

    def _run(self, ray: Any, stage: Any, job: Any, todo: pa.Table, store: _Spec | None) -> pa.Table:
        n = todo.num_rows
        data = require("ray.data", extra="ray", feature="RayExecutor")
        context = data.DataContext.get_current()
        context.enable_progress_bars = False
        rows = self._batch_rows(job)
        todo = todo.append_column(ROW, pa.array(np.arange(n, dtype=np.int64)))
        if 0 < job.verify < n:  # the first `verify` queries of the stage are asked twice, wherever they run
            todo = todo.append_column(VERIFY, pa.array(np.arange(n) < job.verify))
        blocks = [todo.slice(start, rows) for start in range(0, n, rows)]
        dataset = data.from_arrow(blocks)
        build = self.factory.get(stage.name)
        expected = _digest(stage)
        common: dict[str, Any] = {"batch_size": rows, "batch_format": "pyarrow", "zero_copy_batch": True}
        if self.num_cpus is not None:
            common["num_cpus"] = self.num_cpus
        if self.num_gpus is not None:
            common["num_gpus"] = self.num_gpus
        if build is not None or stage.name in self.stateful:
            pool = min(self.actors or _pool_size(ray, self.num_cpus, self.num_gpus), len(blocks))
            mapped = dataset.map_batches(
                _StageWorker,
                compute=data.ActorPoolStrategy(size=pool),
                fn_constructor_kwargs={
                    "stage": None if build is not None else stage,
                    "build": build,
                    "name": stage.name,
                    "digest": expected,
                    "job": job,
                    "store": store,
                    "flush_seconds": self.flush_seconds,
                },
                **common,
            )
        else:
            mapped = dataset.map_batches(
                _task_batch,
                fn_kwargs={"stage": stage, "job": job, "store": store, "flush_seconds": self.flush_seconds},
                **common,
            )
        try:
            parts = [ray.get(ref) for ref in mapped.to_arrow_refs()]
        except Exception as exc:
            raise _ours(exc) from exc
        return _in_order(parts, n, stage.name)

    def _batch_rows(self, job: Any) -> int:
        if self.batch_size is not None:
            return self.batch_size
        per_call = max(1, int(job.batch_size)) * max(1, int(job.concurrency))
        return max(DEFAULT_BATCH_ROWS, 16 * per_call)


# -- inside the workers ---------------------------------------------------------------------------------------------


class _StageWorker:
    """A Ray Data actor: the stage built (or unpickled) once, the cache store opened once, then batch after batch."""

    def __init__(
        self,
        *,
        stage: Any,
        build: Callable[[], Any] | None,
        name: str,
        digest: str | None,
        job: Any,
        store: Any,
        flush_seconds: float,
    ) -> None:
        _check_once()  # this worker's own versions (a cluster's machines may differ from the driver's)
        if build is not None:
            stage = build()
            _check_built(stage, name, digest)
        self.stage, self.job = stage, job
        self.store = _open(store, flush_seconds)

    def __call__(self, batch: pa.Table) -> pa.Table:
        return compute_rows(self.stage, self.job, batch, self.store)


def _task_batch(batch: pa.Table, *, stage: Any, job: Any, store: Any, flush_seconds: float) -> pa.Table:
    """One batch as a Ray task (a stage with no state worth keeping between batches; the store is opened per task)."""
    _check_once()
    return compute_rows(stage, job, batch, _open(store, flush_seconds))


_CHECKED_HERE: list[bool] = []  # whether this worker process has checked its versions


def _check_once() -> None:
    if not _CHECKED_HERE:
        check_ray_data()
        _CHECKED_HERE.append(True)


def compute_rows(stage: Any, job: Any, batch: pa.Table, store: Any) -> pa.Table:
    """SCHEMA rows (and the row position column) for the queries of one Ray batch: read from ``store`` where it has
    them (finished by an earlier attempt at this batch, whose worker died), computed by
    :func:`~rag_eval.stages._batch.compute_batch` otherwise, which puts what it finishes in the store as it goes (at
    least every ``PUT_SECONDS``); the store is flushed when the batch is done."""
    import dataclasses

    from ._batch import compute_batch

    ids = batch.column("query_id").to_pylist()
    hashes = batch.column("query_hash").to_pylist()
    texts = batch.column("text").to_pylist()
    missing = list(range(len(ids)))
    parts: list[pa.Table] = []
    if store is not None:
        found = store.lookup(ids, hashes)
        if found.num_rows:
            parts.append(found)
            have = set(found.column("query_id").to_pylist())
            missing = [i for i in missing if ids[i] not in have]
    if missing:
        if VERIFY in batch.column_names:  # the run's first `verify` queries, flagged by the driver
            flags = batch.column(VERIFY).to_pylist()
            missing.sort(key=lambda i: not flags[i])  # compute_batch asks the first job.verify of them twice
            job = dataclasses.replace(job, verify=sum(1 for i in missing if flags[i]))
        table, _ = compute_batch(
            stage,
            job,
            [ids[i] for i in missing],
            [texts[i] for i in missing],
            [hashes[i] for i in missing],
            hit_lists(batch, missing) if "hits" in batch.column_names else None,
            store=store,
        )
        parts.append(table)
        if store is not None:
            store.flush()  # a shard of this worker's own
    out = concat(parts)
    if out.num_rows != len(ids):
        raise HarnessError(f"stage {stage.name!r} on Ray: a batch of {len(ids)} queries gave {out.num_rows} rows")
    position = {q: i for i, q in enumerate(ids)}
    order = np.argsort(np.fromiter((position[q] for q in out.column("query_id").to_pylist()), np.int64, len(ids)))
    return out.take(pa.array(order)).append_column(ROW, batch.column(ROW))


def _open(spec: Any, flush_seconds: float) -> Any:
    """A worker's own store: writing a shard at every put of compute_batch once ``flush_seconds`` have passed."""
    import dataclasses

    from ._cache import StoreSpec

    if spec is None:
        return None
    if isinstance(spec, StoreSpec):
        spec = dataclasses.replace(spec, shard_seconds=max(min(spec.shard_seconds, flush_seconds), 1e-6))
    return spec.open()


# -- helpers --------------------------------------------------------------------------------------------------------


def _in_order(parts: Sequence[pa.Table], n: int, name: str) -> pa.Table:
    """The workers' tables as one, in the runner's todo order; a lost or repeated row is a harness error."""
    out = concat([p.drop_columns([ROW]) for p in parts]) if parts else empty_table()
    rows = np.concatenate([p.column(ROW).to_numpy() for p in parts]) if parts else np.empty(0, np.int64)
    if len(rows) != n or not np.array_equal(np.sort(rows), np.arange(n)):
        raise HarnessError(
            f"stage {name!r} on Ray: {len(rows)} rows came back for {n} queries ({len(set(rows.tolist()))} distinct)"
        )
    return out.take(pa.array(np.argsort(rows, kind="stable")))


def _digest(stage: Any) -> str | None:
    from .fingerprint import Uncacheable

    try:
        return str(stage.described().digest)
    except Uncacheable:
        return None


def _check_built(stage: Any, name: str, digest: str | None) -> None:
    """A factory's stage must be the one the runner fingerprinted (else its outputs carry another's identity)."""
    built = getattr(stage, "name", None)
    if built != name:
        raise InputError(f"RayExecutor: factory[{name!r}] built a stage named {built!r}, not {name!r}")
    if digest is not None and _digest(stage) != digest:
        raise InputError(
            f"RayExecutor: factory[{name!r}] built a stage whose fingerprint differs from the pipeline's stage "
            f"{name!r} (another configuration or code): its outputs would be cached and reported as that stage's"
        )


def _ours(exc: BaseException) -> BaseException:
    """The rag_eval error (InputError, HarnessError) behind a Ray failure, if one is; else the failure itself."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (InputError, HarnessError, ImportError)):
            return current
        current = current.__cause__ or current.__context__
    return exc


def _pool_size(ray: Any, num_cpus: float | None, num_gpus: float | None) -> int:
    resources = ray.cluster_resources()
    if num_gpus:
        return max(1, int(resources.get("GPU", 0) // num_gpus))
    return max(1, int(resources.get("CPU", 1) // (num_cpus or 1)))


def _resource(value: object, what: str) -> float | None:
    return None if value is None else check_number(value, f"RayExecutor: {what}", low=0)


def _count(value: object, what: str) -> int | None:
    return None if value is None else check_int(value, f"RayExecutor: {what}", high=None)
