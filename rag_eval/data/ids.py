"""Ids are ``str`` end to end, normalised in this one place before anything is merged (docs/bad-input.md).

Every reader and constructor (dicts, DataFrames, JSONL, Parquet, TREC files) passes its ids through
:class:`IdCheck`: a ``str`` is kept (as a plain ``str``), an ``int`` is converted (with one warning per call), and
anything else is refused. Two different keys that become the same id once converted (``7`` and ``"7"``) are an
InputError naming both: merged silently they would count one document twice (recall 2.0) or lose a query.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Iterable, Sequence
from itertools import compress, repeat
from operator import not_
from types import TracebackType
from typing import Any

import numpy as np

from ..errors import IdsConverted, InputError
from .input_files import warn


def as_id(value: Any, what: str, where: str) -> tuple[str, bool]:
    """``(value as str, whether it was converted)``; an id that is neither str nor int is an error."""
    if type(value) is str:
        return value, False
    if isinstance(value, str):  # a subclass (numpy.str_, ...): its plain str value
        return str.__str__(value), False
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        return str(int(value)), True
    raise InputError(f"{what} {value!r} is a {type(value).__name__}, not a str", source=where)


class IdCheck:
    """Normalises the ids of one constructor call, refuses collisions, and warns once, at the end, if any int was
    converted.

    pandas and JSON turn numeric ids (SciFact's, say) into ints, and an int never equals the string in the
    qrels: every match would silently be a zero. So ints are converted, and the user is told once.
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self.converted: list[str] = []

    def __enter__(self) -> IdCheck:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if kind is None and self.converted:
            kinds = " and ".join(f"{what}s" for what in dict.fromkeys(self.converted))
            warn(f"{self.where}: {kinds} given as int were converted to str", IdsConverted)

    def note(self, what: str) -> None:
        self.converted.append(what)

    def array(
        self,
        values: np.ndarray,
        what: str,
        *,
        groups: np.ndarray | Sequence[str] | None = None,
        group_names: Sequence[str] | None = None,
        unit: str | None = None,
        labels: Sequence[int] | None = None,
        line: bool = False,
    ) -> np.ndarray:
        """``values`` (an object array) with every id a plain str.

        Two values that differ (an int and a str) but become the same id are an InputError naming both: among all
        ``values``, or, with ``groups`` (a code per value), within one group (doc ids within one query; the group
        is named from ``group_names``). ``unit`` and ``labels`` (``"row"`` and the row numbers, ``"line"`` and the
        line numbers) say where each value is; with ``line``, the error's line is the later one.
        """
        types = set(map(type, values))
        if types <= {str}:
            return values
        if types <= {str, int}:  # the common case (pandas and JSON give ints), converted on the whole column
            out = np.fromiter(map(str, values), object, len(values))
            converted = np.fromiter(map(isinstance, values, repeat(int)), bool, len(values))
            self.note(what)
            if not converted.all() and _collide(out, converted, groups):
                self._refuse_collisions(values, out, converted, what, groups, group_names, unit, labels, line)
            return out
        out = np.empty(len(values), dtype=object)
        converted = np.zeros(len(values), dtype=bool)
        for i, v in enumerate(values.tolist()):
            try:
                out[i], converted[i] = as_id(v, what, self.where)
            except InputError as exc:
                if unit is None:
                    raise
                at = labels[i] if labels is not None else i
                if line:
                    raise InputError(exc.problem, source=self.where, line=at) from None
                raise InputError(f"{unit} {at}: {exc.problem}", source=self.where) from None
        if converted.any():
            self.note(what)
            if not converted.all():
                self._refuse_collisions(values, out, converted, what, groups, group_names, unit, labels, line)
        return out

    def keys(self, mapping_keys: Iterable[object], what: str, context: str = "") -> list[str]:
        """The keys of one mapping as plain strs; two keys that become the same id are an InputError."""
        values = np.fromiter(mapping_keys, dtype=object)
        types = set(map(type, values))
        if types <= {str}:
            strs: list[str] = values.tolist()
            return strs
        if types <= {str, int}:  # converted on the whole column
            texts = list(map(str, values))
            self.note(what)
            if len(set(texts)) == len(texts):
                return texts
        out = np.empty(len(values), dtype=object)
        converted = np.zeros(len(values), dtype=bool)
        for i, v in enumerate(values.tolist()):
            out[i], converted[i] = as_id(v, f"{context}{what}", self.where)
        if converted.any():
            self.note(what)
        if len(set(out.tolist())) != len(out):  # distinct keys, equal ids
            first: dict[str, int] = {}
            for i, text in enumerate(out.tolist()):
                if text in first:
                    a, b = values[first[text]], values[i]
                    raise InputError(
                        f"{context}{what}s {a!r} and {b!r} are the same id once converted to str", source=self.where
                    )
                first[text] = i
        ids: list[str] = out.tolist()
        return ids

    def _refuse_collisions(
        self,
        values: np.ndarray,
        out: np.ndarray,
        converted: np.ndarray,
        what: str,
        groups: np.ndarray | Sequence[str] | None,
        group_names: Sequence[str] | None,
        unit: str | None,
        labels: Sequence[int] | None,
        line: bool,
    ) -> None:
        seen: dict[Any, tuple[int, bool]] = {}
        codes: Sequence[Any] | None = groups.tolist() if isinstance(groups, np.ndarray) else groups
        for i, (text, was_int) in enumerate(zip(out.tolist(), converted.tolist(), strict=True)):
            key = text if codes is None else (codes[i], text)
            known = seen.get(key)
            if known is None:
                seen[key] = (i, was_int)
            elif known[1] != was_int:
                j = known[0]
                context = ""
                if codes is not None:
                    group = codes[i] if group_names is None else group_names[codes[i]]
                    context = f"query {group!r}: "
                if unit is None:
                    raise InputError(
                        f"{context}{what}s {values[j]!r} and {values[i]!r} are the same id once converted to str",
                        source=self.where,
                    )
                at_j = labels[j] if labels is not None else j
                at_i = labels[i] if labels is not None else i
                problem = (
                    f"{context}{what}s {values[j]!r} ({unit} {at_j}) and {values[i]!r} ({unit} {at_i}) are "
                    "the same id once converted to str"
                )
                raise InputError(problem, source=self.where, line=at_i if line else None)


def _collide(out: np.ndarray, converted: np.ndarray, groups: np.ndarray | Sequence[str] | None) -> bool:
    """Whether an id converted from an int equals one given as a str (within one group, with ``groups``)."""
    codes = groups.tolist() if isinstance(groups, np.ndarray) else groups
    texts = out.tolist()
    if codes is None:
        ints = set(out[converted].tolist())
        return not ints.isdisjoint(out[~converted].tolist())
    pairs = list(zip(codes, texts, strict=True))
    chosen = converted.tolist()
    ints = set(compress(pairs, chosen))
    return not ints.isdisjoint(compress(pairs, map(not_, chosen)))


_TREC_WHITESPACE = frozenset(" \t\n\r\x0b\x0c")  # what a TREC reader (and trec_eval) splits fields on
_TREC_SPACE = re.compile("[ \t\n\r\x0b\x0c]")


def unwritable_reason(value: str, fmt: str = "trec", *, starts_line: bool = True) -> str | None:
    """Why ``value`` cannot round-trip through a file of format ``fmt`` (``"trec"``: whitespace-separated fields,
    ``#`` lines skipped as comments; ``"jsonl"``: JSON strings), or None when it can. ``starts_line``: the value is
    the first field of a line (only there does a leading ``#`` make the line a comment)."""
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not a str"
    if value == "":
        return "is empty"
    if fmt == "trec":
        if starts_line and value.startswith("#"):
            return "starts with '#', so the line would be read back as a comment"
        if any(c in _TREC_WHITESPACE for c in value):
            return "holds whitespace, which separates the fields of a TREC line"
    return None


def check_writable(
    ids: Iterable[str], what: str, where: str | None, fmt: str = "trec", *, starts_line: bool = True
) -> None:
    """Refuse, before anything is written, the first of ``ids`` that cannot round-trip through ``fmt``: an
    InputError naming it (``what``: e.g. ``"query id"``; ``where``: the file or object being written;
    ``starts_line``: see :func:`unwritable_reason`)."""
    values = list(ids)
    if fmt == "trec" and all(type(v) is str for v in values):  # the common case, checked in one pass
        joined = "\x00".join(values)
        if (
            not _TREC_SPACE.search(joined)
            and "\x00\x00" not in f"\x00{joined}\x00"
            and not (starts_line and ("\x00#" in f"\x00{joined}"))
        ):
            return
    for value in values:
        reason = unwritable_reason(value, fmt, starts_line=starts_line)
        if reason is not None:
            raise InputError(
                f"{what} {value!r} {reason}: it cannot be written to a {fmt} file and read back", source=where
            )
