"""Reading input files: gzip, SHA-256, UTF-8 checks and line numbers, shared by every loader (docs/bad-input.md).

Every input is read exactly once, as a stream (:func:`read_raw`), so that pipes, FIFOs, ``/dev/stdin`` and
``<(cmd)`` work: a loader that must tell formats apart sniffs the bytes already read and parses that same
:class:`InputFile`. (A FIFO with no writer blocks, as it does for any Unix tool.) Lines end at LF, CRLF or a lone
CR, in every reader, and line numbers count lines by any of these endings.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError, RagEvalWarning

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class InputFile:
    """The decoded content of one input file, with what the metric card records about it."""

    path: str
    data: bytes  # decompressed bytes, checked to be UTF-8
    ascii: bool  # whether every byte is ASCII (the common case, and a faster one to read)
    _digest: Future[str] = field(repr=False, compare=False)

    @property
    def sha256(self) -> str:
        """SHA-256 of the file as stored (the compressed bytes of a .gz file)."""
        return self._digest.result()

    @property
    def name(self) -> str:
        """The file name without directories and without a ``.gz`` suffix."""
        name = Path(self.path).name
        return name[:-3] if name.endswith(".gz") else name

    def text(self) -> str:
        return self.data.decode("utf-8")

    def lines(self) -> Iterator[tuple[int, str]]:
        """Yield ``(line_number, line)`` for every line that holds more than whitespace and is not a comment
        (a line whose first non-blank character is ``#``). Lines end at LF, CRLF or a lone CR."""
        for number, line in enumerate(split_lines(self.text()), start=1):
            content = line.strip(" \t\x0b\x0c")
            if content and not content.startswith("#"):
                yield number, line

    def first_line(self) -> str:
        """The first line :meth:`lines` yields (to tell formats apart), without splitting the whole file."""
        found = _CONTENT_LINE.search(self.data)
        if found is None:
            raise self.error("empty file (only comments and blank lines)")
        start = found.end() - 1
        end = _LINE_END.search(self.data, start)
        return self.data[start : end.start() if end else len(self.data)].decode("utf-8")

    def json_objects(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """Yield ``(line_number, object)`` for every JSON line (as :meth:`lines` skips blanks and comments); a
        line that is not valid JSON, or not an object, or an object with a key twice (which ``json`` would
        silently resolve to the last value), is an InputError naming the file and line."""
        for number, line in self.lines():
            try:
                record = json.loads(line, object_pairs_hook=_unique_keys)
            except json.JSONDecodeError as exc:
                raise self.error(f"not valid JSON ({exc.msg})", number) from None
            except _DuplicateKey as exc:
                raise self.error(f"key {exc.args[0]!r} appears twice in one object", number) from None
            except ValueError:  # an integer of over 4300 digits (Python's limit on int from text)
                raise self.error("a number of more than 4300 digits (out of range for every field)", number) from None
            if not isinstance(record, dict):
                raise self.error("expected a JSON object", number)
            yield number, record

    def error(self, problem: str, line: int | None = None) -> InputError:
        return InputError(problem, source=self.path, line=line)


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    record = dict(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return record


def split_lines(text: str) -> list[str]:
    """``text`` split at LF, CRLF and lone CR (not at the other characters ``str.splitlines`` breaks at)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.split("\n")


def line_of_offset(data: bytes, offset: int) -> int:
    """The number of the line that holds byte ``offset`` of ``data``, counting LF, CRLF and CR endings."""
    return data.count(b"\n", 0, offset) + data.count(b"\r", 0, offset) - data.count(b"\r\n", 0, offset) + 1


def read_raw(path: PathLike) -> tuple[str, bytes]:
    """``(path as str, every byte of the file)``, read once from the start to the end: a regular file, a pipe, a
    FIFO or ``/dev/stdin`` alike."""
    spath = os.fspath(path)
    try:
        with open(spath, "rb") as stream:
            raw = stream.read()
    except FileNotFoundError:
        raise InputError("no such file", source=spath) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", source=spath) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=spath) from None
    return spath, raw


def read_input(path: PathLike) -> InputFile:
    """Read a whole input file once (``.gz`` transparently) and check that it is non-empty UTF-8."""
    return decode_input(*read_raw(path))


def decode_input(spath: str, raw: bytes) -> InputFile:
    """The :class:`InputFile` of the bytes ``raw`` read from ``spath`` (see :func:`read_input`)."""
    digest = _hash_in_background(raw)
    data = raw
    if spath.endswith(".gz") or raw[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise InputError(f"not a readable gzip file ({exc})", source=spath) from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]  # a BOM is not content: a file of a BOM alone is empty
    if not data or data.isspace():
        raise InputError("empty file", source=spath)
    if _COMMENT_FIRST.match(data) and not _CONTENT_LINE.search(data):
        raise InputError("empty file (only comments and blank lines)", source=spath)
    ascii = data.isascii()
    if not ascii:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = line_of_offset(data, exc.start)
            raise InputError(f"not valid UTF-8 (byte 0x{data[exc.start]:02x})", source=spath, line=line) from None
    return InputFile(spath, data, ascii, digest)


def _hash_in_background(raw: bytes) -> Future[str]:
    """SHA-256 of ``raw`` on another thread: hashlib releases the GIL, so it overlaps with parsing."""
    digest: Future[str] = Future()

    def work() -> None:
        digest.set_result(hashlib.sha256(raw).hexdigest())

    if len(raw) < 1 << 20:
        work()
    else:
        threading.Thread(target=work, name="rag_eval-sha256", daemon=True).start()
    return digest


_COMMENT_FIRST = re.compile(rb"\s*#")  # the file opens with a comment line...
_CONTENT_LINE = re.compile(rb"(?:\A|[\r\n])[ \t\v\f]*[^#\s]")  # ...and has no line of content (any line ending)
_LINE_END = re.compile(rb"[\r\n]")


def warn(message: str, category: type[Warning] = RagEvalWarning) -> None:
    """One user-facing warning of its own kind (a :class:`~rag_eval.errors.RagEvalWarning` subclass),
    attributed to the caller's code rather than to rag_eval."""
    warnings.warn(message, category, stacklevel=4)


def binary_input(spath: str, raw: bytes) -> InputFile:
    """An :class:`InputFile` of bytes that are not text (a Parquet file): no UTF-8 or emptiness checks here."""
    if not raw:
        raise InputError("empty file", source=spath)
    return InputFile(spath, raw, False, _hash_in_background(raw))
