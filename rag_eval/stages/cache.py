"""The on-disk cache of stage outputs: one append-only JSON-lines file per stage configuration.

A query's output is written as soon as it completes, in one ``write`` of one line, so a run killed at any point
(Ctrl-C, SIGKILL) keeps every query it finished; a line cut short by the kill is dropped when the file is next
opened. Entries are keyed by query id and a hash of the query text; the file by a fingerprint of the stage's
configuration and of everything upstream of it. JSON only, no pickle.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any


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
    """The outputs of one stage configuration, read once at start, appended to as queries complete."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        if path.exists():
            self._load()

    def _load(self) -> None:
        data = self.path.read_bytes()
        complete = data.rfind(b"\n") + 1
        if complete < len(data):  # a line cut short by a kill: drop it, so the next append starts clean
            with open(self.path, "r+b") as f:
                f.truncate(complete)
        lines = data[:complete].splitlines()
        try:  # one parse for the whole file; line by line only when some line is damaged
            records = json.loads(b"[" + b",".join(line for line in lines if line.strip()) + b"]")
        except ValueError:
            records = []
            for line in lines:
                try:
                    records.append(json.loads(line))
                except ValueError:
                    continue  # damaged: recompute that query
        for record in records:
            try:
                if isinstance(record.get("hits"), dict):  # else another layout (an older rag_eval): recompute
                    self._entries[(record["query_id"], record["query_hash"])] = record
            except (AttributeError, KeyError, TypeError):
                continue  # not ours: recompute that query

    def get(self, query_id: str, query_hash: str) -> dict[str, Any] | None:
        return self._entries.get((query_id, query_hash))

    def put(self, record: dict[str, Any]) -> None:
        # infinite scores are written as Infinity (read back by json); NaN never reaches here (Hit refuses it)
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode()
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
            self._entries[(record["query_id"], record["query_hash"])] = record

    def __len__(self) -> int:
        return len(self._entries)


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
