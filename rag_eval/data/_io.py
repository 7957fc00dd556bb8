"""Reading input files: gzip, SHA-256, UTF-8 checks and line numbers, shared by every loader."""

from __future__ import annotations

import gzip
import hashlib
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..errors import InputError

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class InputFile:
    """The decoded content of one input file, with what the metric card records about it."""

    path: str
    data: bytes  # decompressed bytes, checked to be UTF-8
    sha256: str  # of the file as stored (compressed bytes for a .gz file)

    @property
    def name(self) -> str:
        """The file name without directories and without a ``.gz`` suffix."""
        name = Path(self.path).name
        return name[:-3] if name.endswith(".gz") else name

    def text(self) -> str:
        return self.data.decode("utf-8")

    def lines(self) -> Iterator[tuple[int, str]]:
        """Yield ``(line_number, line)`` for every line that holds more than whitespace."""
        for number, line in enumerate(self.text().split("\n"), start=1):
            if line.strip(" \t\r\x0b\x0c"):
                yield number, line.rstrip("\r")

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
    digest = hashlib.sha256(raw).hexdigest()
    data = raw
    if spath.endswith(".gz") or raw[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise InputError(f"not a readable gzip file ({exc})", source=spath) from None
    if not data.strip():
        raise InputError("empty file", source=spath)
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            raise InputError(
                f"not valid UTF-8 (byte 0x{data[exc.start]:02x})", source=spath, line=line
            ) from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return InputFile(spath, data, digest)


def warn(message: str) -> None:
    """One user-facing warning, attributed to the caller's code rather than to rag_eval."""
    warnings.warn(message, UserWarning, stacklevel=4)
