"""Ids are ``str`` end to end: the checks and the one warning when ints are converted."""

from __future__ import annotations

import numbers
from typing import Any, Iterable

import numpy as np

from ..errors import InputError
from ._io import warn


def _convert(value: Any, what: str, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    raise InputError(f"{what} {value!r} is a {type(value).__name__}, not a str", source=where)


def check_ids(values: np.ndarray, what: str, where: str) -> np.ndarray:
    """Return ``values`` (an object array) with every id a ``str``.

    Ints are converted with one warning for the whole array (pandas and JSON turn numeric ids such as SciFact's
    into ints, and an int never equals the string in the qrels: every match would silently be a zero).
    Anything else is an error.
    """
    kinds = set(map(type, values))
    if kinds <= {str}:
        return values
    converted = np.fromiter((_convert(v, what, where) for v in values), dtype=object, count=len(values))
    warn(f"{where}: {what}s given as int were converted to str")
    return converted


def check_id_list(values: Iterable[Any], what: str, where: str) -> list[str]:
    array = np.fromiter(values, dtype=object)
    return check_ids(array, what, where).tolist()
