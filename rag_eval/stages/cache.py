"""The on-disk cache of stage outputs: one append-only JSON-lines file per stage configuration.

A query's output is written as soon as it completes, in one ``write`` of one line, so a run killed at any point
(Ctrl-C, SIGKILL) keeps every query it finished; a line cut short by the kill (or any other damaged line) is
dropped, with a warning, when the file is next opened, and its query is recomputed. Entries are keyed by query id and a hash of the query text; the file by a fingerprint of the stage's
configuration and of everything upstream of it. JSON only, no pickle.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import warnings
from pathlib import Path
from typing import Any

from .._files import file_lock


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class StageCache:
    """A directory of stage outputs. ``Pipeline.run(cache=path)`` makes one; pass your own to share it."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def store(self, stage_name: str, key: str) -> StageStore:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stage_name)[:60]
        return StageStore(self.directory / f"{safe}-{key}.jsonl")

    def __repr__(self) -> str:
        return f"StageCache({str(self.directory)!r})"


class StageStore:
    """The outputs of one stage configuration, read once at start, appended to as queries complete.

    Several processes may run into the same store at once: each record is one ``O_APPEND`` write of one line,
    made under a shared lock on ``<file>.lock``; the rare repair of a damaged file (a line torn by a kill,
    garbage bytes) rewrites it under the exclusive lock, so no appender's line is lost.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._lock_path = path.with_name(path.name + ".lock")
        self.damaged = 0  # lines dropped when the file was opened (their queries are recomputed)
        if path.exists():
            self._load()

    def _load(self) -> None:
        records, damaged = _parse(self.path.read_bytes())
        if damaged:  # look again under the exclusive lock (a line may have been mid-write), then repair
            with file_lock(self._lock_path, exclusive=True):
                data = self.path.read_bytes()
                records, damaged = _parse(data)
                if damaged:
                    _rewrite(self.path, records)
        for record in records:
            self._entries[(record["query_id"], record["query_hash"])] = record
        self.damaged = damaged
        if damaged:
            warnings.warn(
                f"cache {self.path}: {damaged} damaged line(s) dropped (cut short by a kill, or not a record of "
                "this stage); their queries are recomputed", UserWarning, stacklevel=2,
            )

    def get(self, query_id: str, query_hash: str) -> dict[str, Any] | None:
        return self._entries.get((query_id, query_hash))

    def put(self, record: dict[str, Any]) -> None:
        # infinite scores are written as Infinity (read back by json); NaN never reaches here (Hit refuses it)
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode()
        with self._lock, file_lock(self._lock_path, exclusive=False):
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
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
        isinstance(record, dict) and isinstance(record.get("hits"), dict)
        and isinstance(record.get("query_id"), str) and isinstance(record.get("query_hash"), str)
    )


def _rewrite(path: Path, records: list[dict[str, Any]]) -> None:
    """Replace ``path`` by its good records, atomically (a temporary file renamed over it)."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as f:
        f.write(b"".join((json.dumps(r, ensure_ascii=False) + "\n").encode() for r in records))
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


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
