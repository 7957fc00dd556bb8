"""The on-disk cache of stage outputs: a directory of append-only Arrow IPC shards per stage configuration.

Layout, writing, reading, damaged shards, metadata and the cache's own failures: ``docs/runner.md``, "The cache"."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import errno
import hashlib
import json
import os
import re
import threading
import time
import uuid
import warnings
import zlib
from collections.abc import Iterator, Mapping, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from .._checks import check_int, check_path, check_seconds
from .._files import atomic_write, move_aside, remove_temporaries
from ..errors import DamagedShard, HarnessError, InputError, OldCacheKeys
from . import hit_table as ht
from .fingerprint import SCHEME

MARKER = "rag_eval-cache.json"
SHARD = re.compile(r"shard-(?P<time>\d{1,20})-(?P<pid>\d+)-(?P<uuid>[0-9a-f]{32})-(?P<crc>[0-9a-f]{8})\.arrow")
DAMAGED_SUFFIX = ".damaged"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class StageCache:
    """A directory of stage outputs. ``Pipeline.run(cache=path)`` makes one; pass your own to share it, or to
    choose how often shards are written (``shard_queries`` rows, or ``shard_seconds``: the most a kill loses)."""

    def __init__(
        self, directory: str | os.PathLike[str], *, shard_queries: int = 1000, shard_seconds: float = 10.0
    ) -> None:
        self.shard_queries = check_int(shard_queries, "shard_queries", high=None)
        self.shard_seconds = check_seconds(shard_seconds, "shard_seconds")
        self.directory = check_path(directory, "the cache directory")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise harness_error(self.directory, "cannot create the cache directory", exc) from None
        remove_temporaries(self.directory, every=True)  # left by a process killed while replacing a file
        self._check_scheme()

    def _check_scheme(self) -> None:
        marker = self.directory / MARKER
        try:
            scheme = json.loads(marker.read_bytes()).get("key_scheme")
        except (OSError, ValueError, AttributeError):
            scheme = None
        if scheme == SCHEME:
            return
        try:
            old = list(self.directory.glob("*.jsonl"))
        except OSError:
            old = []
        if old and (not isinstance(scheme, int) or scheme < SCHEME):
            warnings.warn(
                f"cache {self.directory}: its {len(old)} file(s) were written by an older rag_eval (JSON lines, under "
                "an older key scheme): they are not reused (nor migrated), every stage is computed again; delete "
                "them when convenient",
                OldCacheKeys,
                stacklevel=3,
            )
        with contextlib.suppress(OSError):  # said once: the directory now carries the current scheme (a read-only
            atomic_write(marker, json.dumps({"key_scheme": SCHEME}).encode() + b"\n")  # one cannot, and need not)

    def store(self, stage_name: str, key: str) -> StageStore:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stage_name)[:60]
        return StageStore(
            self.directory / f"{safe}-{key}",
            stage_name,
            shard_queries=self.shard_queries,
            shard_seconds=self.shard_seconds,
        )

    def __repr__(self) -> str:
        return f"StageCache({str(self.directory)!r})"


@dataclasses.dataclass(frozen=True)
class StoreSpec:
    """What opens a store (picklable: a Ray actor opens its own). ``directory`` None: a store that keeps nothing."""

    directory: str | None
    stage: str = ""
    shard_queries: int = 1000
    shard_seconds: float = 10.0

    def open(self) -> StageStore | NoStore:
        if self.directory is None:
            return NoStore()
        return StageStore(
            Path(self.directory), self.stage, shard_queries=self.shard_queries, shard_seconds=self.shard_seconds
        )


class StageStore:
    """The outputs of one stage configuration: its shards read (memory-mapped) and indexed when opened, new rows
    buffered and written as new shards (see the module's docstring). Thread-safe; several processes may write one
    store at once (each writes shards of its own)."""

    def __init__(
        self, directory: Path, stage: str = "", *, shard_queries: int = 1000, shard_seconds: float = 10.0
    ) -> None:
        self.directory = Path(directory)  # the bounds: checked by StageCache, which opens the stores
        self.stage = stage
        self.shard_queries = shard_queries
        self.shard_seconds = float(shard_seconds)
        self.damaged = 0  # shards found damaged when opened (warned, set aside; their queries are recomputed)
        self.shards = 0  # shards read when opened
        self._lock = threading.RLock()
        self._segments: list[pa.Table] = []  # shards read, then every chunk put (rows in a global numbering)
        self._starts: list[int] = [0]  # the global row where each segment starts (and the total, last)
        self._index: dict[tuple[str, str], int] = {}  # (query_hash, query_id) -> global row (the last written wins)
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._pending_since = 0.0
        self._read: set[str] = set()  # the shard files read (or set aside), by name
        self._writing: tuple[threading.Thread, list[BaseException]] | None = None  # the shard being written
        try:
            if self.directory.is_dir():
                self._load()
        except OSError as exc:
            raise harness_error(self.directory, "cannot read the cache directory", exc) from None

    # ----- reading ---------------------------------------------------------------------------------------------

    def refresh(self) -> int:
        """Read the shards other writers (processes, Ray workers) wrote since this store was opened; returns how
        many. (A pair they stored is then found; one stored both here and there: the one read last wins.)"""
        with self._lock:
            self._settle()  # (this store's own shards are indexed already)
            before = self.shards
            try:
                if self.directory.is_dir():
                    self._load(clean=False)
            except OSError as exc:
                raise harness_error(self.directory, "cannot read the cache directory", exc) from None
            return self.shards - before

    def _load(self, *, clean: bool = True) -> None:
        if clean:
            remove_temporaries(self.directory, every=True)  # of writers killed while writing a shard
        shards: list[tuple[int, str]] = []
        damaged: list[tuple[str, str]] = []
        for entry in os.scandir(self.directory):
            if not entry.name.startswith("shard-") or not entry.name.endswith(".arrow") or entry.name in self._read:
                continue
            self._read.add(entry.name)
            match = SHARD.fullmatch(entry.name)
            if match is None:
                damaged.append((entry.name, "a name that is not a shard's (it carries no checksum)"))
            else:
                shards.append((int(match["time"]), entry.name))
        for _, name in sorted(shards):  # oldest first: a pair written again later overrides it in the index
            table, why = self._read_shard(name)
            if table is None:
                damaged.append((name, why))
            elif table.num_rows:
                self._add_segment(table)
                self.shards += 1
        if damaged:
            self._set_aside(damaged)

    def _read_shard(self, name: str) -> tuple[pa.Table | None, str]:
        path = self.directory / name
        match = SHARD.fullmatch(name)
        assert match is not None
        try:
            with pa.memory_map(str(path)) as source:  # the table's buffers keep the mapping after close
                data = source.read_buffer()
        except FileNotFoundError:  # set aside by another process opening the store at the same time
            return None, "removed while being read"
        except OSError as exc:
            raise harness_error(path, "cannot read a cache shard", exc) from None
        except pa.ArrowException as exc:
            return None, f"unreadable ({exc})"
        if f"{zlib.crc32(data):08x}" != match["crc"]:
            return None, "its bytes do not match its checksum (cut short or overwritten)"
        try:
            table = ipc.open_file(data).read_all()
            table.validate(full=True)
        except (pa.ArrowException, OSError, ValueError) as exc:
            return None, f"Arrow cannot read it ({exc})"
        why = _damage(table)
        return (None, why) if why else (table, "")

    def _set_aside(self, damaged: list[tuple[str, str]]) -> None:
        self.damaged += len(damaged)
        kept = []
        for name, _ in damaged:
            try:
                move_aside(self.directory / name, self.directory / (name + DAMAGED_SUFFIX))
            except FileNotFoundError:
                pass  # set aside by another process meanwhile
            except OSError:
                kept.append(name)
        listed = "; ".join(f"{name}: {why}" for name, why in damaged[:5])
        more = f"; and {len(damaged) - 5} more" if len(damaged) > 5 else ""
        where = (
            f" (could not set {len(kept)} aside: they will be reported again)"
            if kept
            else f" (set aside as *{DAMAGED_SUFFIX})"
        )
        warnings.warn(
            f"cache {self.directory}: {len(damaged)} damaged shard(s) not read{where}; their queries are "
            f"recomputed: {listed}{more}",
            DamagedShard,
            stacklevel=3,
        )

    def _add_segment(self, table: pa.Table) -> None:
        start = self._starts[-1]
        keys = zip(table.column("query_hash").to_pylist(), table.column("query_id").to_pylist(), strict=True)
        self._index.update(zip(keys, range(start, start + table.num_rows), strict=True))
        self._segments.append(table)
        self._starts.append(start + table.num_rows)

    def lookup(self, query_ids: Sequence[str], query_hashes: Sequence[str]) -> pa.Table:
        """The stored rows of the ``(query_id, query_hash)`` pairs found, ``cached`` set, in the order asked (a
        pair not found has no row)."""
        if len(query_ids) != len(query_hashes):
            raise ValueError(f"lookup: {len(query_ids)} query ids but {len(query_hashes)} hashes")
        get = self._index.get
        with self._lock:  # the (hash, id) pairs made and looked up in C: no Python call per query
            wanted = np.fromiter(
                map(get, zip(query_hashes, query_ids, strict=True), repeat(-1)), np.int64, len(query_ids)
            )
            rows = wanted[wanted >= 0]
            if not rows.size:
                return ht.empty_table()
            starts = np.asarray(self._starts, np.int64)
            segment = np.searchsorted(starts, rows, side="right") - 1
            if (segment == segment[0]).all():
                local = rows - starts[segment[0]]
                table = self._segments[int(segment[0])]
                if local[-1] - local[0] == local.size - 1 and (np.diff(local) == 1).all():
                    part = table.slice(int(local[0]), local.size)  # asked in the order stored: no copy
                else:
                    part = table.take(pa.array(local))
            else:
                order = np.argsort(segment, kind="stable")
                parts = []
                for s in np.unique(segment):
                    parts.append(self._segments[int(s)].take(pa.array(rows[segment == s] - starts[s])))
                inverse = np.empty_like(order)
                inverse[order] = np.arange(order.size)
                part = ht.concat(parts).combine_chunks().take(pa.array(inverse))
        at = part.schema.get_field_index("cached")
        return part.set_column(at, part.schema.field(at), pa.array(np.ones(part.num_rows, bool)))

    def __len__(self) -> int:
        return len(self._index)

    # ----- writing ---------------------------------------------------------------------------------------------

    def put(self, chunk: pa.Table) -> None:
        """Keep the rows of ``chunk`` (:data:`~rag_eval.stages.hit_table.SCHEMA` rows of computed, non-failed
        queries): buffered, written as a new shard when enough are pending (the module's docstring); a failure to
        write is a HarnessError."""
        _check_put(chunk)
        if not chunk.num_rows:
            return
        with self._lock:
            self._add_segment(chunk)
            if not self._pending:
                self._pending_since = time.monotonic()
            self._pending.append(chunk)
            self._pending_rows += chunk.num_rows
            if self._pending_rows >= self.shard_queries or time.monotonic() - self._pending_since >= self.shard_seconds:
                self._flush()

    def flush(self) -> None:
        """Write what is pending now as one shard (a no-op when nothing is), and wait until every shard is on disk;
        raises the HarnessError of a write that failed since the last put or flush."""
        with self._lock:
            self._flush()
            self._settle()

    def _flush(self) -> None:
        """Hand what is pending to a writer thread (after the previous write is done: one at a time, so at most one
        shard is being written and fewer than ``shard_queries`` rows wait, whatever the stage computes meanwhile)."""
        if not self._pending:
            return
        pending, self._pending, self._pending_rows = self._pending, [], 0  # a failed write is not retried
        self._settle()
        table = ht.concat(pending)
        failure: list[BaseException] = []

        def write() -> None:
            try:
                self._write(table)
            except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread by _settle
                failure.append(exc)

        writer = threading.Thread(target=write, name=f"rag_eval cache {self.stage}", daemon=False)  # exit waits
        writer.start()
        self._writing = (writer, failure)

    def _settle(self) -> None:
        """Wait for the shard being written, if any; raise its failure."""
        if self._writing is None:
            return
        (writer, failure), self._writing = self._writing, None
        writer.join()
        if failure:
            raise failure[0]

    def _write(self, table: pa.Table) -> None:
        sink = pa.BufferOutputStream()
        with ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        data = sink.getvalue()
        name = f"shard-{time.time_ns():019d}-{os.getpid()}-{uuid.uuid4().hex}-{zlib.crc32(data):08x}.arrow"
        try:
            self.directory.mkdir(exist_ok=True)
            atomic_write(self.directory / name, memoryview(data))
            self._read.add(name)  # its rows are indexed already (put)
        except OSError as exc:
            if not self.directory.parent.is_dir():
                raise harness_error(
                    self.directory.parent,
                    "the cache directory was removed during the run (what was stored in it is gone)",
                    exc,
                ) from None
            raise harness_error(self.directory, "cannot store results", exc) from None

    def spec(self) -> StoreSpec:
        return StoreSpec(str(self.directory), self.stage, self.shard_queries, self.shard_seconds)

    def __repr__(self) -> str:
        return f"StageStore({str(self.directory)!r}, {len(self)} entries)"


def _schema_ok(table: pa.Table) -> bool:
    try:
        fields = ht.fields_of(table)
    except (KeyError, AttributeError, TypeError):
        return False
    return table.schema.remove_metadata().equals(ht.schema(fields))


def _check_put(table: pa.Table) -> None:
    if not isinstance(table, pa.Table) or not _schema_ok(table):
        raise HarnessError(f"StageStore.put takes a table of the stage output schema, not {table!r:.200}")
    if table.column("hits").null_count:
        raise HarnessError("StageStore.put takes the rows of computed queries only (a row with null hits: failed)")


def _damage(table: pa.Table) -> str:
    """Why a shard's table cannot be trusted, or "" (whole columns checked, never hit by hit)."""
    if not _schema_ok(table):
        return f"its columns are not a stage output's ({table.schema.to_string(show_schema_metadata=False)!r:.200})"
    for name in ("query_id", "query_hash", "hits", "latency", "cached", "skipped", "beyond_depth", "issues"):
        if table.column(name).null_count:
            return f"a null {name}"
    if table.column("error").null_count != table.num_rows:
        return "a failed row (one with an error)"
    latency = table.column("latency")
    if pc.any(pc.is_nan(latency)).as_py() or pc.any(pc.less(latency, pa.scalar(0.0))).as_py():
        return "a NaN or negative latency"
    if pc.any(table.column("skipped")).as_py():
        return "a skipped row"
    for name in ("beyond_depth", "issues"):
        if pc.list_flatten(table.column(name)).null_count:
            return f"a null in {name}"
    hits = pc.list_flatten(table.column("hits"))
    if hits.null_count:
        return "a null hit"
    doc_ids = pc.struct_field(hits, "doc_id")
    if doc_ids.null_count or (len(doc_ids) and pc.min(pc.binary_length(doc_ids)).as_py() == 0):
        return "a null or empty doc id"
    if pc.any(pc.is_nan(pc.struct_field(hits, "score"))).as_py():
        return "a NaN score"
    fields = ht.fields_of(table)
    if "tokens" in fields and (pc.min(pc.struct_field(hits, "tokens")).as_py() or 0) < 0:
        return "a negative token count"
    if "metadata" in fields:
        metadata = pc.utf8_trim_whitespace(pc.struct_field(hits, "metadata"))
        objects = pc.and_(pc.starts_with(metadata, "{"), pc.ends_with(metadata, "}"))
        if not pc.all(objects).as_py():
            return "hit metadata that is not a JSON object"
    return ""


def harness_error(path: Path, what: str, exc: OSError) -> HarnessError:
    """The cache's own failure, naming the path, the cause and what to do."""
    cause = exc.strerror or str(exc) or type(exc).__name__
    advice = {
        errno.ENOSPC: "free some space (or pass another cache=), then run again: stored results are reused",
        errno.EDQUOT: "free some space (or pass another cache=), then run again: stored results are reused",
        errno.EACCES: "make the directory writable, or pass another cache=",
        errno.EPERM: "make the directory writable, or pass another cache=",
        errno.EROFS: "the file system is read-only: pass another cache=",
        errno.ENOENT: "pass a cache directory that stays in place during the run, then run again",
    }.get(exc.errno or 0, "check the cache directory, then run again: stored results are reused")
    return HarnessError(
        f"cache {path}: {what}: {cause}; {advice} (this is not the stage's fault: nothing of the run was scored)"
    )


def json_metadata(metadata: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A hit's metadata in JSON types by the cache's rule (see the module's docstring), or an InputError naming
    ``where`` and the key."""
    return {k: _json_value(v, f"{where}, metadata key {k!r}") for k, v in _str_keys(metadata, where)}


def _str_keys(metadata: Mapping[str, Any], where: str) -> Iterator[tuple[str, Any]]:
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise InputError(
                f"metadata key {key!r} is a {type(key).__name__}, not a str (the cache stores JSON objects)",
                source=where,
            )
        yield key, value


def _json_value(value: Any, where: str) -> Any:
    if value is None or (isinstance(value, (str, bool, int)) and type(value) in (str, bool, int)):
        return value
    if type(value) is float:
        return value
    if isinstance(value, np.generic) and not isinstance(value, (np.void, np.object_)):
        item = value.item()
        if isinstance(item, (bool, int, float, str, bytes)) and not isinstance(item, bytes):
            return item
        return _json_value(item, where)
    if isinstance(value, np.ndarray) and not value.dtype.hasobject:
        return value.tolist()
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (bool, int, str)):  # a subclass (an IntEnum, a str enum): its plain value
        return (bool if isinstance(value, bool) else int if isinstance(value, int) else str)(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        return {k: _json_value(v, f"{where}[{k!r}]") for k, v in _str_keys(value, where)}
    if isinstance(value, (list, tuple)):
        return [_json_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise InputError(
        f"the value is a {type(value).__module__}.{type(value).__qualname__}, which the cache cannot store as JSON "
        "(it keeps str, numbers, bools, None, lists and str-keyed dicts; NumPy scalars become numbers, datetimes ISO "
        "strings): convert it in the stage",
        source=where,
    )


class NoCache:
    """Keeps nothing (``cache=None``)."""

    def store(self, stage_name: str, key: str) -> NoStore:
        return NoStore()


class NoStore:
    """A store that keeps nothing: the same calls as :class:`StageStore`."""

    damaged = 0

    def lookup(self, query_ids: Sequence[str], query_hashes: Sequence[str]) -> pa.Table:
        return ht.empty_table()

    def put(self, chunk: pa.Table) -> None:
        pass

    def flush(self) -> None:
        pass

    def refresh(self) -> int:
        return 0

    def spec(self) -> StoreSpec:
        return StoreSpec(None)

    def __len__(self) -> int:
        return 0


def as_cache(cache: StageCache | str | os.PathLike[str] | None) -> StageCache | NoCache:
    if cache is None:
        return NoCache()
    if isinstance(cache, StageCache):
        return cache
    if isinstance(cache, (str, os.PathLike)):
        return StageCache(cache)
    raise TypeError(f"cache must be a directory path or a StageCache, not {type(cache).__name__}")
