"""Column names: ours, and the ones PyTerrier, ir_measures and BEIR use for the same thing."""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import InputError


def pick_column(available: Iterable[object], candidates: tuple[str, ...], noun: str) -> str:
    """The first of ``candidates`` present in ``available``; an error listing them when none is."""
    names = [str(a) for a in available]
    for name in candidates:
        if name in names:
            return name
    raise InputError(f"no {noun} named {' or '.join(repr(c) for c in candidates)} (found {names})")


def find_column(available: Iterable[object], candidates: tuple[str, ...]) -> str | None:
    names = [str(a) for a in available]
    return next((c for c in candidates if c in names), None)
