"""Advisory file locks between processes, shared by the stage cache and the judgement log (below every layer)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: appends stay whole lines, repairs are not locked
    fcntl = None  # type: ignore[assignment]


@contextmanager
def file_lock(path: Path, *, exclusive: bool) -> Iterator[None]:
    """Hold ``flock`` on ``path`` (created if missing): shared or exclusive; a no-op where the platform has none."""
    if fcntl is None:
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
