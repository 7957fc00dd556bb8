"""Ids that differ only in how they are written: a classic source of silent zeros, checked in one place.
See docs/bad-input.md.

A run that calls a query ``"001"``, ``" 1"``, ``"Q1"`` or ``"café"`` (decomposed, NFD) while the qrels call it
``"1"``, ``"1"``, ``"q1"`` or ``"café"`` (composed, NFC) scores 0 on it without an error: they are different ids.
rag_eval keeps them different (merging them would be a guess) and says so when two ids of two inputs differ only in

- surrounding whitespace, leading zeros (``"007"`` and ``"7"``),
- Unicode normalisation (NFD and NFC spellings of one text),
- Unicode compatibility forms (NFKC: the ligature ``"ﬁ"`` and ``"fi"``, full-width ``"１"`` and ``"1"``),
- case (``"D7"`` and ``"d7"``; case folded as Unicode does, for every language alike: Turkish dotless ``"ı"`` is no
  ``"i"``).

Every join of ids from two inputs calls :func:`near_misses` on the ids that did not match (never on the matched
ones: the check costs nothing where ids line up) and :func:`near_miss_line` for the warning, or both at once,
:func:`warn_near_misses`.
"""

from __future__ import annotations

import re
import unicodedata
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from ..errors import NearMissIds

__all__ = ["loose", "near_miss_hint", "near_miss_line", "near_misses", "warn_near_misses"]


def _zeros(text: str) -> str:
    return text.lstrip("0") or text[:1]


def _nfc(text: str) -> str:
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def _nfkc(text: str) -> str:
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def _case(text: str) -> str:
    return _nfkc(text.casefold())


#: each kind of difference: what it is called, and the step that removes it (applied in this order)
STEPS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("surrounding whitespace", str.strip),
    ("Unicode normalisation", _nfc),
    ("Unicode compatibility forms (NFKC)", _nfkc),
    ("case", _case),
    ("leading zeros", _zeros),  # last: full-width zeros are zeros once NFKC has made them ASCII
)


def loose(identifier: str) -> str:
    """``identifier`` with every difference of :data:`STEPS` removed (``" Ｄ7 "`` -> ``"d7"``): equal loose forms
    mark a near miss, never a match."""
    for _, step in STEPS:
        identifier = step(identifier)
    return identifier


_EDGES = re.compile(r"^[^\S\n]+|[^\S\n]+$", re.MULTILINE)  # what str.strip removes, line by line
_ZEROS = re.compile(r"^0+(?=[^\n])", re.MULTILINE)  # leading zeros, one kept where the id is all zeros


def loose_forms(identifiers: Sequence[str]) -> list[str]:
    """:func:`loose` of each id, computed on the ids joined by line breaks in a few whole-text passes (every step
    of :data:`STEPS` works line by line alike), or id by id where an id holds a line break itself."""
    joined = "\n".join(identifiers)
    if not identifiers or joined.count("\n") != len(identifiers) - 1:
        return [loose(i) for i in identifiers]
    text = _EDGES.sub("", joined)
    if not text.isascii():
        text = unicodedata.normalize("NFKC", unicodedata.normalize("NFC", text))
    text = text.casefold()
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return _ZEROS.sub("", text).split("\n")


def _form(text: str) -> str:
    """The Unicode normal form ``text`` is written in (``NFC`` first), for the warning."""
    for form in ("NFC", "NFD", "NFKC", "NFKD"):
        if unicodedata.is_normalized(form, text):
            return form
    return "mixed"


def difference(a: str, b: str) -> str | None:
    """What alone two different ids with the same :func:`loose` form differ in, in words (``"case"``, ``"Unicode
    normalisation (NFD vs NFC)"``, ``"surrounding whitespace and case"``); None when they differ otherwise (or not
    at all)."""
    if a == b:
        return None
    kinds = []
    for name, step in STEPS:
        after_a, after_b = step(a), step(b)
        if (after_a, after_b) != (a, b):
            if name == "Unicode normalisation":
                name = f"{name} ({_form(a)} vs {_form(b)})"
            kinds.append(name)
        a, b = after_a, after_b
        if a == b:
            return " and ".join(kinds)
    return None


def near_misses(left: Iterable[str], right: Iterable[str]) -> list[tuple[str, str, str]]:
    """``(left id, right id, how they differ)`` for each ``left`` id that equals a ``right`` id after :func:`loose`
    (the first such right id). Give it the ids each side holds that the other does not: the matched ids are never
    looked at."""
    rights = right if isinstance(right, Sequence) else list(right)
    if not rights:
        return []
    forms = loose_forms(rights)
    by_form = dict(zip(reversed(forms), reversed(rights), strict=True))  # the first right id of each form
    lefts = left if isinstance(left, Sequence) else list(left)
    left_forms = loose_forms(lefts)
    if by_form.keys().isdisjoint(left_forms):  # the common case: no near miss, no loop over the ids
        return []
    out = []
    for a, form in zip(lefts, left_forms, strict=True):
        b = by_form.get(form)
        if b is not None and b != a:
            kind = difference(a, b)
            if kind is not None:
                out.append((a, b, kind))
    return out


def near_miss_line(
    pairs: Sequence[tuple[str, str, str]],
    *,
    subject: str,
    ids: str,
    other: str,
    left: str,
    right: str,
    consequence: str,
) -> str | None:
    """One line for the pairs of :func:`near_misses` (None for none): ``subject`` is the input warned about (``"run
    'bm25'"``), ``ids`` what is counted (``"query id(s)"``), ``other`` an id of the other input (``"a qrels id"``),
    ``left`` and ``right`` the two inputs in the example (``"run"``, ``"qrels"``; may be empty), ``consequence``
    what follows."""
    if not pairs:
        return None
    a, b, kind = pairs[0]
    kinds = Counter(k for _, _, k in pairs)
    pair = f"e.g. {left + ' ' if left else ''}{a!r} vs {right + ' ' if right else ''}{b!r}"
    if len(kinds) == 1:
        what, example = f"only in {kind}", pair
    else:
        what = "only in " + ", or in ".join(kinds)
        example = ", ".join(f"{n} in {k}" for k, n in kinds.most_common()) + f"; {pair}: {kind}"
    return f"{subject}: {len(pairs)} {ids} differ from {other} {what} ({example}); {consequence}"


def warn_near_misses(
    left: Iterable[str],
    right: Iterable[str],
    *,
    subject: str,
    ids: str,
    other: str,
    left_name: str,
    right_name: str,
    consequence: str,
    stacklevel: int,
) -> list[tuple[str, str, str]]:
    """Warn once (:class:`~rag_eval.errors.NearMissIds`; ``stacklevel`` counts from the caller, as
    :func:`rag_eval.data.joins.user_stacklevel` gives it) about the ids of ``left`` that are not in ``right`` but
    are written like one of ``right`` that is not in ``left``; the pairs, [] when none. The two sides' differences
    are taken with set operations (no Python call per id), and only they are compared."""
    mine, theirs = set(left), set(right)
    pairs = near_misses(sorted(mine - theirs), sorted(theirs - mine))
    line = near_miss_line(
        pairs, subject=subject, ids=ids, other=other, left=left_name, right=right_name, consequence=consequence
    )
    if line:
        warnings.warn(line, NearMissIds, stacklevel=stacklevel + 1)
    return pairs


def near_miss_hint(ids: Iterable[str], others: Iterable[str], other: str) -> str:
    """For an error about ``ids`` missing from ``others``: ``" (e.g. 'Q1' is written like the judge report's 'q1',
    differing only in case)"``, or "" when none of them is written like one of ``others`` (which ``other`` names)."""
    mine = set(ids)
    found = near_misses(sorted(mine), sorted(set(others) - mine))
    if not found:
        return ""
    a, b, kind = found[0]
    more = f"; {len(found)} such ids" if len(found) > 1 else ""
    return f" (e.g. {a!r} is written like {other} {b!r}, differing only in {kind}{more})"
