"""Reading input files: gzip, SHA-256, UTF-8 checks and line numbers, shared by every loader."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import threading
import warnings
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

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
        (a line whose first non-blank character is ``#``)."""
        for number, line in enumerate(self.text().split("\n"), start=1):
            content = line.strip(" \t\r\x0b\x0c")
            if content and not content.startswith("#"):
                yield number, line.rstrip("\r")

    def json_objects(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """Yield ``(line_number, object)`` for every JSON line (as :meth:`lines` skips blanks and comments); a
        line that is not valid JSON, or not an object, is an InputError naming the file and line."""
        for number, line in self.lines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise self.error(f"not valid JSON ({exc.msg})", number) from None
            if not isinstance(record, dict):
                raise self.error("expected a JSON object", number)
            yield number, record

    def error(self, problem: str, line: int | None = None) -> InputError:
        return InputError(problem, source=self.path, line=line)


def read_input(path: PathLike) -> InputFile:
    """Read a whole input file (``.gz`` transparently) and check that it is non-empty UTF-8."""
    spath = os.fspath(path)
    try:
        raw = Path(spath).read_bytes()
    except FileNotFoundError:
        raise InputError("no such file", source=spath) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", source=spath) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=spath) from None
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
            line = data.count(b"\n", 0, exc.start) + 1
            raise InputError(
                f"not valid UTF-8 (byte 0x{data[exc.start]:02x})", source=spath, line=line
            ) from None
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
_CONTENT_LINE = re.compile(rb"^[ \t\r\v\f]*[^#\s]", re.MULTILINE)  # ...and has no line of content


def warn(message: str, category: type[Warning] = RagEvalWarning) -> None:
    """One user-facing warning of its own kind (a :class:`~rag_eval.errors.RagEvalWarning` subclass),
    attributed to the caller's code rather than to rag_eval."""
    warnings.warn(message, category, stacklevel=4)
