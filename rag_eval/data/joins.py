"""Joins of two user inputs (a run's doc ids and a corpus, a pool and a log, one result folder and another): each
says how many keys matched of how many, in one place (``docs/bad-input/ids-and-joins.md``, "Joins that match little or
nothing").

:func:`join` counts with whole-column work (``numpy.isin`` over the keys) and, when the match is short, warns once
per join with a :class:`~rag_eval.errors.LowJoinMatch` (``matched k of n``, with examples of what did not match),
or, when nothing matched and the output would be empty or meaningless (``required=True``), raises an
:class:`~rag_eval.errors.InputError` naming both sides.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError, LowJoinMatch, NearMissIds
from .near_miss import near_miss_line, near_misses

__all__ = ["Join", "join", "user_stacklevel"]

#: a join matching fewer than this share of its keys ("little") is announced
ANNOUNCE_BELOW = 0.5
_PACKAGE = str(Path(__file__).resolve().parents[1])


@dataclass(frozen=True)
class Join:
    """How a join went: ``matched`` of ``total`` distinct keys of the ``left`` side found on the ``right`` side,
    and a few of those that were not."""

    left: str
    right: str
    matched: int
    total: int
    missing: tuple[str, ...] = ()

    @property
    def share(self) -> float:
        return self.matched / self.total if self.total else 1.0

    def line(self) -> str:
        """``LEFT: matched k of n in RIGHT (e.g. 'a', 'b' are not)``."""
        shown = ", ".join(repr(m) for m in self.missing[:3]) + (", ..." if self.total - self.matched > 3 else "")
        tail = f" (not matched, e.g. {shown})" if self.missing else ""
        return f"{self.left}: matched {self.matched} of {self.total} in {self.right}{tail}"


def _keys(values: Iterable[str] | np.ndarray) -> np.ndarray:
    array = values if isinstance(values, np.ndarray) else np.fromiter(values, dtype=object)
    return np.unique(array.astype(object).astype(str)) if len(array) else np.array([], dtype=str)


def join(
    left: Iterable[str] | np.ndarray,
    right: Collection[str] | np.ndarray,
    *,
    what: str,
    where: str,
    required: bool = False,
    announce_below: float = ANNOUNCE_BELOW,
    consequence: str = "",
) -> Join:
    """Count how many distinct ``left`` keys are in ``right``: ``what`` names the left side's keys (``"pool doc
    ids"``), ``where`` the right side (``"the corpus of FOLDER"``). A share below ``announce_below`` warns once
    (:class:`~rag_eval.errors.LowJoinMatch`, ``consequence`` appended: what the user gets for it); nothing
    matched of something, with ``required``, is an :class:`~rag_eval.errors.InputError`."""
    keys = _keys(left)
    known = _keys(right if isinstance(right, np.ndarray) else list(right))
    hit = np.isin(keys, known) if len(keys) and len(known) else np.zeros(len(keys), bool)
    missing = keys[~hit]
    result = Join(what, where, int(hit.sum()), len(keys), tuple(str(m) for m in missing[:3]))
    if len(missing) and len(known):  # unmatched keys written like an unmatched one of the right side: said apart
        alike = near_misses(missing.tolist(), known[~np.isin(known, keys)].tolist())
        line = near_miss_line(
            alike,
            subject=what,
            ids="of them",
            other=f"a key of {where}",
            left="",
            right="",
            consequence="they are different ids, kept distinct",
        )
        if line:
            warnings.warn(line, NearMissIds, stacklevel=user_stacklevel())
    if result.total and result.matched == 0 and required:
        raise InputError(result.line() + (f": {consequence}" if consequence else "") + "; nothing to join on")
    if result.total and result.share < announce_below:
        said = result.line() + (f": {consequence}" if consequence else "")
        warnings.warn(said, LowJoinMatch, stacklevel=user_stacklevel())
    return result


def user_stacklevel() -> int:
    """The ``stacklevel`` that points a warning raised by the caller at the first frame outside rag_eval (the
    user's code, or the CLI's caller)."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level
