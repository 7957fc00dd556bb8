"""Numbers are plain ASCII decimals: one rule for every reader and constructor (files, dicts, JSONL, frames).
See docs/bad-input.md.

Python's ``float()`` and ``int()`` also read ``1_0`` (as 10), non-ASCII digits (``١``) and surrounding whitespace;
trec_eval's ``atof``/``atol`` read ``1_0`` as 1 and stop at the first character they do not know. A number that
two tools read differently is refused here rather than read one way silently:

- a **score** is ``[+-]?(digits[.[digits]]|.digits)([eE][+-]?digits)?`` with ASCII digits, or ``inf`` /
  ``infinity`` in any case with an optional sign (trec_eval's ``strtod`` reads the same value for each of these);
  NaN is refused;
- a **grade** is ``[+-]?digits``, or an integral decimal such as ``1.0`` or ``2.`` (read as 1 and 2, as ``atol``
  does); ``1e2`` is refused (``atol`` reads 1, ``float`` 100).

Values that are already numbers (``int``, ``float``, NumPy numbers) are taken as they are, but never a boolean.
A ``str`` in a dict, a JSON line or a DataFrame is read by the same rule as the field of a file.
The C reader (``rag_eval/_speedups.c``: ``plain_score``, ``plain_grade``) implements the same grammar.
"""

from __future__ import annotations

import math
import numbers
import re
from decimal import Decimal
from typing import Any

import numpy as np

SCORE_TEXT = re.compile(
    r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)"
)
GRADE_TEXT = re.compile(r"[+-]?[0-9]+(?:\.0*)?")
NAN_TEXT = re.compile(r"[+-]?nan", re.IGNORECASE)


def score_text(text: str) -> float | None:
    """``text`` read as a score, or None when it is not a plain ASCII decimal (NaN is None too: see
    :func:`is_nan_text`)."""
    if SCORE_TEXT.fullmatch(text) is None:
        return None
    return float(text)


def is_nan_text(text: str) -> bool:
    return NAN_TEXT.fullmatch(text) is not None


def grade_text(text: str) -> int | None:
    """``text`` read as a grade, or None when it is not a plain ASCII integer (``1.0`` is 1)."""
    if GRADE_TEXT.fullmatch(text) is None:
        return None
    digits = text.partition(".")[0]
    try:
        return int(digits)
    except ValueError:  # over 4300 digits: Python's int() refuses such text (no cost on the common path)
        return LongInteger(digits)


class LongInteger(int):
    """An integer written with more digits than Python reads (over 4300): out of every range a field has, so it
    stands in as +-10**40 and shows as its text, abbreviated (for the error that refuses it)."""

    text: str

    def __new__(cls, text: str) -> LongInteger:
        value = super().__new__(cls, -(10**40) if text.startswith("-") else 10**40)
        value.text = text
        return value

    def __repr__(self) -> str:
        return f"{self.text[:20]}...{self.text[-5:]} ({len(self.text)} characters)"

    __str__ = __repr__


def is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def score_value(value: Any) -> float | str:
    """A score given as a value (dict, JSON, DataFrame cell): the float, or why it is not one (a str, to go after
    ``score {value!r} ``). NaN is returned as a float; the caller names it."""
    if is_bool(value):
        return "is a boolean, not a number"
    if isinstance(value, str):
        score = score_text(value)
        if score is None:
            return "is not a number" if not is_nan_text(value) else "is NaN"
        return score
    if isinstance(value, (numbers.Real, np.floating, np.integer, Decimal)):
        try:
            return float(value)
        except OverflowError:
            return "is too large for a float"
        except (TypeError, ValueError):
            return "is not a number"
    return "is not a number"


def grade_value(value: Any) -> int | str:
    """A grade given as a value: the int, or why it is not one."""
    if is_bool(value):
        return "is a boolean, not an integer"
    if isinstance(value, str):
        grade = grade_text(value)
        return "is not an integer" if grade is None else grade
    if isinstance(value, (numbers.Integral, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isfinite(value) and value.is_integer():
            return int(value)
    return "is not an integer"
