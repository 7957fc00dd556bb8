"""Durable file I/O: every write of rag_eval that must survive a crash or a full disk goes through here (below
every layer).

:func:`atomic_write` replaces a file whole, :func:`append` adds whole lines to a log, :func:`file_lock` locks between
processes, :func:`all_or_none` commits a set of files together: ``docs/bad-input/ground-truth.md``, "Durable files".
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from .errors import InputError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: appends stay whole lines, repairs are not locked
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "TEMPORARY_SUFFIX",
    "all_or_none",
    "append",
    "append_output",
    "atomic_write",
    "current",
    "file_lock",
    "move_aside",
    "output_error",
    "remove_temporaries",
    "target_of",
    "write_output",
]

TEMPORARY_SUFFIX = ".rag_eval.tmp"
# ours (.NAME.PID.THREAD.rag_eval.tmp), and the names earlier versions used (.NAME.PID.THREAD.tmp, NAME.PID.THREAD.tmp)
_TEMPORARY = re.compile(r"\.?(?P<name>.+)\.(?P<pid>\d+)\.\d+(?:\.rag_eval)?\.tmp")
_TAIL_CHUNK = 1 << 16


def target_of(path: str | os.PathLike[str]) -> Path:
    """The file a write of ``path`` lands in: symlinks resolved (a link is written through, never replaced)."""
    return Path(os.path.realpath(os.fspath(path)))


# ----- atomic replace ------------------------------------------------------------------------------------------


#: what :func:`atomic_write` writes: bytes, an iterable of chunks, or a function that writes to a binary file
Data = bytes | bytearray | memoryview | Iterable[bytes] | Callable[[BinaryIO], object]


def atomic_write(path: str | os.PathLike[str], data: Data) -> Path:
    """Replace the file at ``path`` by ``data`` (bytes; an iterable of chunks written in turn, so that a large file
    need not be held in memory; or a function given the open binary file to write to, e.g. ``frame.to_csv`` or
    ``fig.savefig``), all or nothing, durably; returns the file written (symlinks resolved). Raises the ``OSError``
    of the step that failed, after removing the temporary file."""
    target = target_of(path)
    temporary = _write_temporary(target, data)
    try:
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    fsync_directory(target.parent)
    return target


def _write_temporary(target: Path, data: Data) -> Path:
    """``data`` written whole to a temporary file beside ``target`` (with its permissions) and fsync'd; on any
    error the temporary is removed and the error raised."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}{TEMPORARY_SUFFIX}")
    try:
        mode = os.stat(target).st_mode & 0o7777  # keep the permissions of the file replaced
    except OSError:
        mode = None
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            if mode is not None and hasattr(os, "fchmod"):
                os.fchmod(fd, mode)
            if callable(data):
                with os.fdopen(os.dup(fd), "wb") as file:  # a buffered file: each write's length checked
                    data(file)
                expected = os.fstat(fd).st_size
            else:
                expected = 0
                for chunk in [data] if isinstance(data, (bytes, bytearray, memoryview)) else _batched(data):
                    _write_all(fd, chunk)
                    expected += len(chunk)
            size = os.fstat(fd).st_size
            if size != expected:
                raise OSError(errno.EIO, f"{size} bytes on disk after writing {expected}")
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError) and exc.filename in (None, os.fspath(temporary)):
            exc.filename = os.fspath(target)  # whose file it was (ENOSPC from a write names none)
        raise
    return temporary


_STAGED = threading.local()


@contextmanager
def all_or_none(folder: str | os.PathLike[str] | None = None) -> Iterator[None]:
    """A set of files written together (a result folder, tune's grid, result and plot): every
    :func:`write_output` of this thread inside the block is written whole to its temporary file and fsync'd, and
    only when the block ends without an error are they all renamed over their targets (then their folders
    fsync'd); on an error every temporary is removed and no target has changed. Until the block ends a file
    written is read back at :func:`current`. ``folder``: the folder they go in, made if missing (with its
    parents) and then removed again, with the subfolders made in it, if the block fails and leaves them empty.
    Blocks nest: the outermost one commits."""
    made: list[Path] = []
    if folder is not None:
        for parent in [Path(folder), *Path(folder).parents]:
            if parent.exists():
                break
            made.append(parent)
        Path(folder).mkdir(parents=True, exist_ok=True)
    if getattr(_STAGED, "files", None) is not None:
        yield
        return
    files: dict[Path, Path] = {}
    _STAGED.files = files
    try:
        yield
    except BaseException:
        _STAGED.files = None
        for temporary in files.values():
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        if made:  # the folders made for the set (and any made inside them), bottom up, if empty
            inside = sorted((p for p in made[0].rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
            for empty in [*inside, *made]:
                with contextlib.suppress(OSError):
                    empty.rmdir()
        raise
    _STAGED.files = None
    pending = list(files.items())
    try:
        while pending:
            target, temporary = pending[0]
            os.replace(temporary, target)  # a rename takes no space: only a failing disk stops it half-way
            pending.pop(0)
    except BaseException:
        for _, temporary in pending:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise
    for folder in dict.fromkeys(target.parent for target in files):
        fsync_directory(folder)


def current(path: str | os.PathLike[str]) -> Path:
    """Where the content written to ``path`` is now: its temporary file while an :func:`all_or_none` block has
    not ended, else the file itself."""
    target = target_of(path)
    staged = getattr(_STAGED, "files", None) or {}
    return staged.get(target, target)


def _batched(chunks: Iterable[bytes], size: int = 1 << 20) -> Iterator[bytes]:
    """Small chunks joined into writes of about ``size`` bytes (one system call per line would be slow)."""
    pending: list[bytes] = []
    held = 0
    for chunk in chunks:
        pending.append(chunk)
        held += len(chunk)
        if held >= size:
            yield b"".join(pending)
            pending, held = [], 0
    if pending:
        yield b"".join(pending)


def fsync_directory(directory: Path) -> None:
    """Make a rename or a new file in ``directory`` durable (a no-op where directories cannot be opened)."""
    if not hasattr(os, "O_DIRECTORY"):  # pragma: no cover - Windows
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):  # file systems that cannot sync a directory
            raise
    finally:
        os.close(fd)


def move_aside(path: str | os.PathLike[str], to: str | os.PathLike[str]) -> None:
    """Rename ``path`` to ``to`` in the same folder (a damaged file set aside), durably."""
    os.replace(path, to)
    fsync_directory(Path(to).parent)


def write_output(path: str | os.PathLike[str], data: Data) -> Path:
    """:func:`atomic_write` for a file the user asked for (a qrels, run or pool file): a failure is an
    InputError naming the file, the cause, and that the file keeps its old content. A target that is no regular
    file (``/dev/stdout``, a FIFO) is written straight to: it cannot be replaced."""
    try:
        if _is_stream(path):
            return _write_stream(path, data, append=False)
        staged = getattr(_STAGED, "files", None)
        if staged is None:
            return atomic_write(path, data)
        target = target_of(path)  # inside all_or_none: renamed when the block ends
        staged[target] = _write_temporary(target, data)
        return target
    except OSError as exc:
        raise output_error(path, exc) from None


def append_output(path: str | os.PathLike[str], data: bytes) -> Path:
    """Add ``data`` (whole lines) to the end of a file the user asked for (e.g. ``$GITHUB_STEP_SUMMARY``): a
    missing file is created whole or not at all (:func:`atomic_write`), an existing one is appended to under its
    lock and cut back to its old end if the append fails (:func:`append`; a last line of its own without a newline
    gets one, never cut). A failure is an InputError naming the file, as for :func:`write_output`."""
    try:
        if _is_stream(path):
            return _write_stream(path, data, append=True)
        target = target_of(path)
        if not target.exists():
            return atomic_write(target, data)
        with file_lock(target, exclusive=True):
            append(target, data, whole=lambda tail: True)
        return target
    except OSError as exc:
        raise output_error(path, exc) from None


def _is_stream(path: str | os.PathLike[str]) -> bool:
    try:
        return not stat.S_ISREG(os.stat(path).st_mode) and not stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def _write_stream(path: str | os.PathLike[str], data: Data, *, append: bool) -> Path:
    """Write to a character device or a FIFO (nothing to replace, nothing to sync)."""
    fd = os.open(path, os.O_WRONLY | (os.O_APPEND if append else 0))
    try:
        if callable(data):
            with os.fdopen(os.dup(fd), "wb") as file:
                data(file)
        else:
            for chunk in [data] if isinstance(data, (bytes, bytearray, memoryview)) else _batched(data):
                _write_all(fd, chunk)
    finally:
        os.close(fd)
    return Path(path)


def output_error(path: str | os.PathLike[str], exc: OSError) -> InputError:
    """The InputError of an output file that could not be written: its name, the cause, what happened to it."""
    cause = exc.strerror or str(exc) or type(exc).__name__
    error = InputError(
        f"cannot write the file: {cause} (nothing was changed: the file keeps its old content, if it had one)",
        source=os.fspath(path),
    )
    error.errno = exc.errno  # the cause, for whoever picks a status from it
    return error


def remove_temporaries(path: str | os.PathLike[str], *, every: bool = False) -> list[Path]:
    """Remove the temporary files of :func:`atomic_write` (and of earlier versions) left behind by processes that
    are gone: those of the file ``path`` or, with ``every``, every one in the directory ``path``. Returns them."""
    target = target_of(path)
    directory, name = (target, None) if every else (target.parent, target.name)
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        match = _TEMPORARY.fullmatch(entry.name)
        if match is not None:
            stale = (name is None or match["name"] == name) and not _alive(int(match["pid"]))
        else:  # the pool writer's temporary before this module, which named no process
            stale = name is not None and entry.name == f"{name}.partial"
        if stale and entry.is_file(follow_symlinks=False):
            try:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
            except OSError:
                pass
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True  # another thread of this process may be writing it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True


# ----- append log ----------------------------------------------------------------------------------------------


def append(path: str | os.PathLike[str], data: bytes, *, whole: Callable[[bytes], bool] | None = None) -> int:
    """Append ``data`` (whole lines, ending in a newline) to the log at ``path``, created if missing, and fsync it;
    returns the offset it starts at. The caller holds the log's exclusive :func:`file_lock`.

    Bytes after the file's last newline are a tail: one ``whole(tail)`` accepts (a record written without its
    newline) gets a newline first; any other (cut short by a kill or a full disk) is truncated away. Every write's
    length is checked; on any error the file is truncated back to where this append started (removed, if this
    append created it) and the error raised.
    """
    try:
        fd, created = os.open(path, os.O_RDWR | os.O_APPEND), False
    except FileNotFoundError:
        fd, created = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644), True
    try:
        start = os.fstat(fd).st_size
        payload = data
        if start:
            cut, tail = _tail(fd, start)
            if tail and whole is not None and tail.strip() and whole(tail):
                payload = b"\n" + data
            elif tail:
                os.ftruncate(fd, cut)
                start = cut
        try:
            _write_all(fd, payload)
            os.fsync(fd)
        except BaseException:
            try:
                if created:  # a log this append made: removed again, not left empty
                    os.unlink(path)
                else:
                    os.ftruncate(fd, start)
                    os.fsync(fd)
            except OSError:
                pass
            raise
        return start
    finally:
        os.close(fd)


def _tail(fd: int, size: int) -> tuple[int, bytes]:
    """Where the bytes after the last newline of the file start, and those bytes."""
    if os.pread(fd, 1, size - 1) == b"\n":  # the common case: one byte read
        return size, b""
    end = size
    pieces: list[bytes] = []
    while end > 0:
        begin = max(0, end - _TAIL_CHUNK)
        chunk = os.pread(fd, end - begin, begin)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            pieces.append(chunk[newline + 1 :])
            return begin + newline + 1, b"".join(reversed(pieces))
        pieces.append(chunk)
        end = begin
    return 0, b"".join(reversed(pieces))


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write every byte of ``data`` (``os.write`` may take only part of it); no progress is ENOSPC."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if not isinstance(n, int) or n <= 0:
            raise OSError(errno.ENOSPC, "no byte written (is the disk full?)")
        view = view[n:]


# ----- locks ---------------------------------------------------------------------------------------------------


@contextmanager
def file_lock(path: str | os.PathLike[str], *, exclusive: bool, blocking: bool = True) -> Iterator[None]:
    """Hold ``flock`` on ``path`` (created if missing): shared or exclusive; without ``blocking``, raise
    ``BlockingIOError`` at once when another process holds it. A no-op where the platform has no flock."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        flags = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        try:
            fcntl.flock(fd, flags if blocking else flags | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES) and not blocking:
                raise BlockingIOError(exc.errno, "held by another process", os.fspath(path)) from None
            raise
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
