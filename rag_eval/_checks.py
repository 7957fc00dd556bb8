"""Checks of a public function's arguments (below every layer), in the spirit of scikit-learn's parameter validation:
each returns the value, normalised (a Python int, a float, a str, a Path), or raises an
:class:`~rag_eval.errors.InputError` (a ValueError) naming the argument, in one format:

- ``{what} must be an int, not {type} {value!r}``; ``{what} must be {low} or more, not ...``; ``... at most ...``
- ``{what} must be a finite number, not ...``; ``{what} must lie in (0, 1), not ...`` (``must be 0 or more``, ``must
  be at most 1``: one bound)
- ``unknown {what} {value!r}; choose one of a, b, c``
- ``{what} must be a finite number of seconds, not ...``; ``{what} must be more than 0 seconds, not ...``
- ``{what} must be a path (a str or an os.PathLike), not {type}``; ``{what} must not be empty``

A public function checks its arguments once, on entry; the functions it calls trust them.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from .errors import InputError

__all__ = [
    "MAX_CUTOFF",
    "check_choice",
    "check_int",
    "check_number",
    "check_path",
    "check_seconds",
    "check_share",
    "shortened",
    "within",
]

MAX_CUTOFF = 10**9  # the largest cutoff (and depth, budget, count): far beyond any ranking, exact in int64 and float64

Closed = Literal["neither", "left", "right", "both"]


def check_int(value: Any, what: str, *, low: int | None = 1, high: int | None = MAX_CUTOFF) -> int:
    """``value`` as an int if it is one (a Python or NumPy integer, never a bool, a float or a str) within
    ``low..high`` (by default a count: 1 to :data:`MAX_CUTOFF`; None: no bound)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{what} must be an int, not {type(value).__name__} {value!r}")
    value = int(value)
    return within(value, what, low, high, str(value))


def within(value: int, what: str, low: int | None, high: int | None, shown: str) -> int:
    """``value`` if it lies within ``low..high``; else an InputError naming ``what`` and showing ``shown`` (the
    text it was read from, cut short when long)."""
    if low is not None and value < low:
        raise InputError(f"{what} must be {low} or more, not {shortened(shown)}")
    if high is not None and value > high:
        raise InputError(f"{what} must be at most {high}, not {shortened(shown)}")
    return value


def shortened(digits: str) -> str:
    """``digits`` cut short when long (a number read from a user's text may have thousands of them)."""
    return digits if len(digits) <= 40 else f"{digits[:20]}...({len(digits)} characters)"


def check_number(
    value: Any,
    what: str,
    *,
    low: float | None = None,
    high: float | None = None,
    closed: Closed = "both",
    why: str = "",
) -> float:
    """``value`` as a float if it is a finite real number (never a bool, a str or NaN) in the interval from ``low``
    to ``high`` (None: unbounded), ``closed`` at neither end, the ``left``, the ``right`` or ``both``; ``why``
    (e.g. ``" (the tuning share of the queries)"``) follows the interval in the message."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise InputError(f"{what} must be a finite number, not {_shown(value)}")
    number = float(value)
    left, right = closed in ("left", "both"), closed in ("right", "both")
    if (low is not None and (number < low or (number == low and not left))) or (
        high is not None and (number > high or (number == high and not right))
    ):
        if high is None:
            bound = f"be {low:g} or more" if left else f"be more than {low:g}"
        elif low is None:
            bound = f"be at most {high:g}" if right else f"be less than {high:g}"
        else:
            bound = f"lie in {'[' if left else '('}{low:g}, {high:g}{']' if right else ')'}"
        raise InputError(f"{what} must {bound}{why}, not {_shown(value)}")
    return number


def check_share(value: Any, what: str, *, closed: Closed = "neither", why: str = "") -> float:
    """``value`` as a float in (0, 1) (a level alpha, a confidence, a power, a share), or [0, 1] etc. by
    ``closed``: :func:`check_number` from 0 to 1."""
    return check_number(value, what, low=0.0, high=1.0, closed=closed, why=why)


def check_choice(value: Any, what: str, choices: Iterable[str]) -> str:
    """``value`` if it is one of ``choices`` (strs); else ``unknown {what} {value!r}; choose one of ...``."""
    allowed = tuple(choices)
    if not isinstance(value, str) or value not in allowed:
        raise InputError(f"unknown {what} {value!r}; choose one of {', '.join(allowed)}")
    return value


def check_seconds(value: Any, what: str, *, zero: bool = False) -> float:
    """A finite number of seconds as a float, > 0 (or >= 0 with ``zero``): NaN would pass every comparison
    unnoticed, and a bool is no duration."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise InputError(f"{what} must be a finite number of seconds, not {_shown(value)}")
    if value < 0 or (value == 0 and not zero):
        raise InputError(f"{what} must be {'0 or more' if zero else 'more than 0'} seconds, not {_shown(value)}")
    return float(value)


def check_path(value: Any, what: str) -> Path:
    """``value`` (a str or an ``os.PathLike``, not empty) as a Path."""
    if isinstance(value, bytes) or not isinstance(value, (str, os.PathLike)):
        raise InputError(f"{what} must be a path (a str or an os.PathLike), not {type(value).__name__}")
    text = os.fspath(value)
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{what} must not be empty, not {text!r}")
    return Path(text)


def _shown(value: Any) -> str:
    """A value as it is written in Python: ``1.5``, ``nan``, ``'0.5'``, ``True`` (a NumPy scalar as its Python
    value: ``0.5``, not ``np.float64(0.5)``)."""
    if isinstance(value, numbers.Number) and hasattr(value, "item"):
        value = value.item()
    return repr(value)
