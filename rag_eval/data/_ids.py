"""Ids are ``str`` end to end: the checks, and one warning per call when ints are converted."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ..errors import IdsConverted, InputError
from ._io import warn


def as_id(value: Any, what: str, where: str) -> tuple[str, bool]:
    """``(value as str, whether it was converted)``; an id that is neither str nor int is an error."""
    if isinstance(value, str):
        return value, False
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value)), True
    raise InputError(f"{what} {value!r} is a {type(value).__name__}, not a str", source=where)


class IdCheck:
    """Checks the ids of one constructor call and warns once, at the end, if any int was converted.

    pandas and JSON turn numeric ids (SciFact's, say) into ints, and an int never equals the string in the
    qrels: every match would silently be a zero. So ints are converted, and the user is told once.
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self.converted: list[str] = []

    def __enter__(self) -> IdCheck:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None and self.converted:
            kinds = " and ".join(f"{what}s" for what in dict.fromkeys(self.converted))
            warn(f"{self.where}: {kinds} given as int were converted to str", IdsConverted)

    def note(self, what: str) -> None:
        self.converted.append(what)

    def array(self, values: np.ndarray, what: str) -> np.ndarray:
        """``values`` (an object array) with every id a str."""
        if set(map(type, values)) <= {str}:
            return values
        out = np.empty(len(values), dtype=object)
        for i, v in enumerate(values):
            out[i], changed = as_id(v, what, self.where)
            if changed:
                self.note(what)
        return out


_TREC_WHITESPACE = frozenset(" \t\n\r\x0b\x0c")  # what a TREC reader (and trec_eval) splits fields on


def unwritable_reason(value: str, fmt: str = "trec") -> str | None:
    """Why ``value`` cannot round-trip through a file of format ``fmt`` (``"trec"``: whitespace-separated fields,
    ``#`` lines skipped as comments; ``"jsonl"``: JSON strings), or None when it can."""
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not a str"
    if value == "":
        return "is empty"
    if fmt == "trec":
        if value.startswith("#"):
            return "starts with '#', so the line would be read back as a comment"
        if any(c in _TREC_WHITESPACE for c in value):
            return "holds whitespace, which separates the fields of a TREC line"
    return None


def check_writable(ids, what: str, where: str | None, fmt: str = "trec") -> None:
    """Refuse, before anything is written, the first of ``ids`` that cannot round-trip through ``fmt``: an
    InputError naming it (``what``: e.g. ``"query id"``; ``where``: the file or object being written)."""
    for value in ids:
        reason = unwritable_reason(value, fmt)
        if reason is not None:
            raise InputError(f"{what} {value!r} {reason}: it cannot be written to a {fmt} file and read back",
                             source=where)
