"""The on-disk cache of stage outputs: one append-only JSON-lines file per stage configuration.

A query's output is written as soon as it completes, in one ``write`` of one line, so a run killed at any point
(Ctrl-C, SIGKILL) keeps every query it finished; a line cut short by the kill (or any other damaged line) is
dropped, with a warning, when the file is next opened, and its query is recomputed. Entries are keyed by query id
and a hash of the query text; the file by a fingerprint of the stage's configuration and of everything upstream
of it (:mod:`rag_eval.stages._fingerprint`). JSON only, no pickle.

Hits' metadata is stored in JSON types by one rule, applied when the hit reaches the runner (with or without a
cache, so that a rerun from the cache sees what the first run saw): str, int, float, bool and None as they are;
NumPy scalars as Python numbers (and arrays as lists); datetimes, dates and times as ISO 8601 strings; tuples as
lists; mappings with str keys as objects. Anything else is an InputError naming the stage, query, hit and key.

The cache's own failures are not the stage's: a directory that cannot be created, read or written (read-only, full,
removed during the run), a short write, a failing fsync are a :class:`~rag_eval.errors.HarnessError` naming the
cache and what to do. It stops the run (what was stored before stays stored); a record cut short by it is
truncated away at once (under the file's exclusive lock) and no temporary file is left.

A directory written by an older key scheme (before :data:`~rag_eval.stages._fingerprint.SCHEME`) holds files that
are never found again: this is said once, with an :class:`~rag_eval.errors.OldCacheKeys` warning, and the directory
is marked with the current scheme (``rag_eval-cache.json``).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import json
import os
import threading
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .._files import append, atomic_write, file_lock, remove_temporaries
from ..errors import HarnessError, InputError, OldCacheKeys, TornLine
from ._fingerprint import SCHEME

MARKER = "rag_eval-cache.json"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class StageCache:
    """A directory of stage outputs. ``Pipeline.run(cache=path)`` makes one; pass your own to share it."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
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
        if old and (scheme is None or scheme < SCHEME):
            warnings.warn(
                f"cache {self.directory}: its {len(old)} file(s) were written under an older key scheme (one that "
                "did not cover the code a stage calls): they are not reused, every stage is computed again; delete "
                "them when convenient",
                OldCacheKeys,
                stacklevel=3,
            )
        with contextlib.suppress(OSError):  # said once: the directory now carries the current scheme (a read-only
            atomic_write(marker, json.dumps({"key_scheme": SCHEME}).encode() + b"\n")  # one cannot, and need not)

    def store(self, stage_name: str, key: str) -> StageStore:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stage_name)[:60]
        return StageStore(self.directory / f"{safe}-{key}.jsonl", stage_name)

    def __repr__(self) -> str:
        return f"StageCache({str(self.directory)!r})"


class StageStore:
    """The outputs of one stage configuration, read once at start, appended to as queries complete.

    Several processes may run into the same store at once: each record is appended whole
    (:func:`rag_eval._files.append`) under the exclusive lock on ``<file>.lock``; the rare repair of a damaged file
    (a line torn by a kill, garbage bytes) rewrites it under the exclusive lock, so no appender's line is lost.
    """

    def __init__(self, path: Path, stage: str = "") -> None:
        self.path = path
        self.stage = stage
        self._entries: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._lock_path = path.with_name(path.name + ".lock")
        self.damaged = 0  # lines dropped when the file was opened (their queries are recomputed)
        try:
            if path.exists():
                self._load()
        except OSError as exc:
            raise harness_error(path, "cannot read the cache file", exc) from None

    def _load(self) -> None:
        records, damaged = _parse(self.path.read_bytes())
        if damaged:  # look again under the exclusive lock (a line may have been mid-write), then repair
            with file_lock(self._lock_path, exclusive=True):
                data = self.path.read_bytes()
                records, damaged = _parse(data)
                if damaged:
                    try:
                        _rewrite(self.path, records)
                    except OSError as exc:
                        raise harness_error(self.path, "cannot repair the damaged cache file", exc) from None
        for record in records:
            self._entries[(record["query_id"], record["query_hash"])] = record
        self.damaged = damaged
        if damaged:
            warnings.warn(
                f"cache {self.path}: {damaged} damaged line(s) dropped (cut short by a kill, or not a record of "
                "this stage); their queries are recomputed",
                TornLine,
                stacklevel=2,
            )

    def get(self, query_id: str, query_hash: str) -> dict[str, Any] | None:
        return self._entries.get((query_id, query_hash))

    def put(self, record: dict[str, Any]) -> None:
        """Append one record, or raise a HarnessError (after truncating away any part of it that was written)."""
        # infinite scores are written as Infinity (read back by json); NaN never reaches here (Hit refuses it)
        try:
            line = (json.dumps(record, ensure_ascii=False) + "\n").encode()
        except (TypeError, ValueError) as exc:  # the runner converts metadata first: this is rag_eval's own bug
            raise HarnessError(
                f"cache {self.path}: cannot encode the record of query {record.get('query_id')!r} as JSON ({exc})"
            ) from None
        with self._lock:
            try:
                with file_lock(self._lock_path, exclusive=True):
                    append(self.path, line)  # whole, fsync'd; a torn tail cut first, a failed append cut back
            except OSError as exc:
                if not self.path.parent.is_dir():
                    raise harness_error(
                        self.path.parent,
                        "the cache directory was removed during the run (what was stored in it is gone)",
                        exc,
                    ) from None
                raise harness_error(self.path, "cannot store a result", exc) from None
            self._entries[(record["query_id"], record["query_hash"])] = record

    def __len__(self) -> int:
        return len(self._entries)


def _parse(data: bytes) -> tuple[list[dict[str, Any]], int]:
    """The records of a cache file, and how many non-blank lines are not records (torn, garbage, foreign)."""
    complete = data.rfind(b"\n") + 1
    lines = [line for line in data[:complete].split(b"\n") if line.strip()]
    torn = 1 if data[complete:].strip() else 0  # a last line without its newline: cut short
    try:  # one parse for the whole file; line by line only when some line is damaged
        parsed = json.loads(b"[" + b",".join(lines) + b"]")
    except ValueError:
        parsed = []
        for line in lines:
            try:
                parsed.append(json.loads(line))
            except ValueError:
                parsed.append(None)
    records = [r for r in parsed if _is_record(r)]
    return records, torn + len(parsed) - len(records)


def _is_record(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("hits"), dict)
        and isinstance(record.get("query_id"), str)
        and isinstance(record.get("query_hash"), str)
    )


def _rewrite(path: Path, records: list[dict[str, Any]]) -> None:
    """Replace ``path`` by its good records, atomically (:func:`rag_eval._files.atomic_write`)."""
    atomic_write(path, b"".join((json.dumps(r, ensure_ascii=False) + "\n").encode() for r in records))


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
    def get(self, query_id: str, query_hash: str) -> None:
        return None

    def put(self, record: dict[str, Any]) -> None:
        pass


def as_cache(cache: StageCache | str | os.PathLike[str] | None) -> StageCache | NoCache:
    if cache is None:
        return NoCache()
    if isinstance(cache, StageCache):
        return cache
    if isinstance(cache, (str, os.PathLike)):
        return StageCache(cache)
    raise TypeError(f"cache must be a directory path or a StageCache, not {type(cache).__name__}")
