"""Checked conversions of the fields readers take from files: one rule per kind of field, for every reader.
See docs/bad-input.md.

A field outside what its kind can hold (a time that leaves years 1 to 9999 once in UTC, an integer beyond its
range, a NaN, ``true`` where an integer is expected, a number of a thousand digits) is refused with an
:class:`~rag_eval.errors.InputError` naming the file, the line (or span, or row) and the field, never an
``OverflowError`` from deep inside. Numbers given as text follow :mod:`rag_eval.data.numeric` (plain ASCII
decimals). A columnar reader checks whole columns and reports the first bad row: :func:`first_bad`.
"""

from __future__ import annotations

import datetime as dt
import math
import numbers
import re
from decimal import Decimal
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from .numeric import GRADE_TEXT, is_bool, is_nan_text, score_text

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1
#: the times any reader accepts, in UTC (what ``datetime`` holds)
TIME_MIN = dt.datetime.min.replace(tzinfo=dt.UTC)
TIME_MAX = dt.datetime.max.replace(tzinfo=dt.UTC)
_MAX_DIGITS = 40  # longer integer text is out of every range here (and int() refuses text of over 4300 digits)
_UNIX_SECONDS = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?")


class At(NamedTuple):
    """Where a field is: the file (``source``), its line, and a place within (``span resourceSpans[0]...``,
    ``row 3``, ``query 'q1'``), said before the problem. (A tuple: made once per record, cheaply.)"""

    source: str | None = None
    line: int | None = None
    where: str | None = None

    def error(self, problem: str) -> InputError:
        return InputError(f"{self.where}: {problem}" if self.where else problem, source=self.source, line=self.line)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}...{text[-10:]} ({len(text)} characters)"


def integer(value: Any, field: str, at: At, *, low: int = INT64_MIN, high: int = INT64_MAX, what: str = "") -> int:
    """``value`` as an int within ``[low, high]``: an int (never a bool), an integral finite float, or plain ASCII
    digits (``12``, ``-3``, ``1.0``). ``what`` says the range in words (``"0 or more"``)."""
    if is_bool(value):
        raise at.error(f"{field} {value!r} is not an integer")
    number: int | None = None
    if isinstance(value, str):
        text = value.strip()
        if GRADE_TEXT.fullmatch(text):
            digits = text.partition(".")[0].lstrip("+-").lstrip("0")
            if len(digits) > _MAX_DIGITS:
                raise at.error(f"{field} {_show(value)} is out of range ({what or f'{low} to {high}'})")
            number = int(text.partition(".")[0])
    elif isinstance(value, (numbers.Integral, np.integer)):
        number = int(value)
    elif isinstance(value, (float, np.floating, Decimal)):
        finite = value.is_finite() if isinstance(value, Decimal) else math.isfinite(value)
        if finite and value == int(value):
            number = int(value)
    if number is None:
        raise at.error(f"{field} {_show(value)} is not an integer")
    if not low <= number <= high:
        raise at.error(f"{field} {_show(value)} is out of range ({what or f'{low} to {high}'})")
    return number


def count(value: Any, field: str, at: At) -> int:
    """A count: an integer, 0 or more, within int64."""
    try:
        amount = integer(value, field, at, what="0 or more, within int64")
    except InputError as exc:
        if "is not an integer" not in exc.problem or is_bool(value):
            raise
        raise at.error(f"{field} {_show(value)} is not an integer of 0 or more") from None
    if amount < 0:
        raise at.error(
            f"{field} {_show(value)} " + ("is not an integer of 0 or more" if isinstance(value, str) else "is negative")
        )
    return amount


def number(value: Any, field: str, at: At) -> float:
    """A finite float: a number (never a bool), or a plain ASCII decimal; NaN, infinities and overflow refused."""
    if is_bool(value):
        raise at.error(f"{field} {value!r} is not a number")
    out: float | None = None
    if isinstance(value, str):
        if is_nan_text(value.strip()):
            raise at.error(f"{field} {value!r} is NaN")
        out = score_text(value.strip())
    elif isinstance(value, (numbers.Real, np.number, Decimal)):
        try:
            out = float(value)
        except OverflowError:
            raise at.error(f"{field} {_show(value)} is out of range (too large for a float)") from None
    if out is None:
        raise at.error(f"{field} {_show(value)} is not a number")
    if out != out:
        raise at.error(f"{field} is NaN")
    if math.isinf(out):
        raise at.error(f"{field} {_show(value)} is not finite")
    return out


def string(value: Any, field: str, at: At, *, empty: bool = False) -> str:
    """A str (non-empty after stripping unless ``empty``)."""
    if not isinstance(value, str):
        raise at.error(f"{field} {_show(value)} is not a string")
    if not empty and not value.strip():
        raise at.error(f"{field} is empty")
    return value


def time(value: Any, field: str, at: At) -> dt.datetime | None:
    """A time as an aware UTC datetime, or None for a missing or blank one: ISO 8601 text (UTC where it has no
    offset), Unix seconds (a number or its text), or a ``datetime``/``date`` (naive is UTC). It must lie within
    :data:`TIME_MIN` and :data:`TIME_MAX` once in UTC."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    span = "(times must lie within 0001-01-01 and 9999-12-31 UTC)"
    when: dt.datetime
    if isinstance(value, dt.datetime):
        when = value
    elif isinstance(value, dt.date):
        when = dt.datetime(value.year, value.month, value.day)
    elif is_bool(value):
        raise at.error(f"{field} {value!r} is not a time")
    elif isinstance(value, (numbers.Real, np.number, Decimal)):
        return _unix(value, field, at)
    elif isinstance(value, str):
        text = value.strip()
        if _UNIX_SECONDS.fullmatch(text):
            return _unix(float(text) if len(text) <= 400 else math.inf, field, at, shown=value)
        try:
            when = dt.datetime.fromisoformat(text)
        except ValueError:
            raise at.error(f"{field} {_show(value)} is neither ISO 8601 nor Unix seconds") from None
    else:
        raise at.error(f"{field} {_show(value)} is not a time")
    if when.tzinfo is None:
        return when.replace(tzinfo=dt.UTC)
    try:
        return when.astimezone(dt.UTC)
    except OverflowError:
        raise at.error(f"{field} {_show(value)} is out of range {span}") from None


def _unix(seconds: Any, field: str, at: At, shown: Any = None) -> dt.datetime:
    shown = seconds if shown is None else shown
    try:
        value = float(seconds)
    except OverflowError:
        value = math.inf
    if value != value:
        raise at.error(f"{field} is NaN, not a time")
    try:
        return dt.datetime.fromtimestamp(value, dt.UTC)
    except (OverflowError, OSError, ValueError):
        raise at.error(f"{field} {_show(shown)} is out of range (Unix seconds expected)") from None


def iso_time(value: Any, field: str, at: At) -> dt.datetime:
    """A time written as ISO 8601 text (a record rag_eval wrote: a judgement's time, a query's first seen), as an
    aware UTC datetime within :data:`TIME_MIN` and :data:`TIME_MAX`."""
    if not isinstance(value, str) or not value.strip() or _UNIX_SECONDS.fullmatch(value.strip()):
        raise at.error(f"{field} {_show(value)} is not an ISO 8601 time")
    try:
        dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise at.error(f"{field} {_show(value)} is not an ISO 8601 time") from None
    when = time(value, field, at)
    assert when is not None
    return when


def unix_nanos(value: Any, field: str, at: At) -> dt.datetime | None:
    """OTLP's ``startTimeUnixNano`` (an unsigned 64-bit count of nanoseconds, as a JSON number or its text) as an
    aware UTC datetime; 0 (OTLP: unset) and None are None."""
    if value is None:
        return None
    nanos = integer(value, field, at, low=0, high=UINT64_MAX, what="an unsigned 64-bit count of nanoseconds")
    if nanos == 0:
        return None
    seconds, rest = divmod(nanos, 1_000_000_000)
    return dt.datetime.fromtimestamp(seconds, dt.UTC).replace(microsecond=rest // 1000)


def first_bad(bad: np.ndarray) -> int | None:
    """The index of the first True of a whole-column check's mask, or None: a columnar reader checks a column at
    once and names the first bad row's line."""
    hits = np.flatnonzero(bad)
    return int(hits[0]) if len(hits) else None
