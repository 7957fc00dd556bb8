"""Records of how a thing was made, checked when read (layer 1): one re-draw of a seeded sample, and the hash a
file records of its own content.

A file that says how it was drawn (a seed, a size, strata, inclusion probabilities) or what it holds (a SHA-256) is
checked against that record when it is read, and a mismatch is an :class:`~rag_eval.errors.InputError` naming
the file and what differs: a hand-edited sample must never pass for the seeded draw it claims to be
(docs/bad-input/records.md, "Records of how a thing was made, checked when read").
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["body_of", "content_sha256", "differ", "redraw", "sample_card_problem", "saved_sha256"]

_SHOWN = 5  # ids named in a difference before "... and k more"


def redraw(frame: Sequence[tuple[str, Sequence[str]]], sizes: Sequence[int], seed: int) -> set[str]:
    """The ids a seeded draw gives: for each stratum of ``frame`` in order (its members sorted), ``sizes[h]`` of
    them without replacement, all from one ``numpy.random.default_rng(seed)``, as
    :func:`rag_eval.ground_truth.draw_human_sample` (one stratum) and :func:`rag_eval.ground_truth.sample_queries`
    draw them."""
    rng = np.random.default_rng(seed)
    drawn: set[str] = set()
    for (_, members), size in zip(frame, sizes, strict=True):
        if size:
            population = sorted(members)
            drawn.update(population[i] for i in rng.choice(len(population), size=size, replace=False).tolist())
    return drawn


def content_sha256(data: bytes) -> str:
    """The SHA-256 of bytes (a whole file's, or the part of it a header describes)."""
    return hashlib.sha256(data).hexdigest()


def _named(ids: Collection[str]) -> str:
    ordered = sorted(ids)
    more = f" ... and {len(ordered) - _SHOWN} more" if len(ordered) > _SHOWN else ""
    return ", ".join(repr(q) for q in ordered[:_SHOWN]) + more


def differ(have: Collection[str], want: Collection[str], *, have_name: str, want_name: str) -> str:
    """How two sets of ids differ, in words: ``2 in the file but not the draw ('a', 'b'); 2 in the draw but not
    the file ('c', 'd')``."""
    mine, theirs = set(have) - set(want), set(want) - set(have)
    parts = []
    if mine:
        parts.append(f"{len(mine)} in {have_name} but not in {want_name} ({_named(mine)})")
    if theirs:
        parts.append(f"{len(theirs)} in {want_name} but not in {have_name} ({_named(theirs)})")
    return "; ".join(parts)


def saved_sha256(card: Mapping[str, Any], body: bytes) -> str:
    """The SHA-256 a saved query set's header records: of its card (canonical JSON) and of the lines after the
    header (trailing whitespace aside), so that an edit of either is seen."""
    canonical = json.dumps(card, sort_keys=True, ensure_ascii=False).encode("utf-8")
    return content_sha256(canonical + b"\n" + body.rstrip())


def body_of(data: bytes) -> bytes:
    """What follows a file's first line (its header)."""
    end = data.find(b"\n")
    return data[end + 1 :] if end >= 0 else b""


def sample_card_problem(card: Any, stratum: Mapping[str, str | None], inclusion: Mapping[str, float | None]) -> str:
    """What a query set's sample record (its card's sample size and strata table) says that its queries do not
    (each query's ``stratum`` and ``inclusion`` probability), or ``""``."""
    table = card.strata or {}
    n = len(stratum)
    if card.sample_size is not None and card.sample_size != n:
        return f"its card records a sample of {card.sample_size} queries and the file holds {n}"
    unknown = sorted({s for s in stratum.values() if s not in table}, key=str)
    if unknown:
        return f"queries in stratum {unknown[0]!r}, which the card's strata do not list"
    counts = Counter(stratum.values())
    for name, row in table.items():
        if not isinstance(row, Mapping):
            return f"the card's stratum {name!r} is not an object"
        sampled, size, p = row.get("sampled"), row.get("queries"), row.get("inclusion_probability")
        if counts.get(name, 0) != sampled:
            held = counts.get(name, 0)
            return f"its card records {sampled!r} queries drawn from stratum {name!r} and the file holds {held}"
        if not isinstance(size, int) or isinstance(size, bool) or size < 1 or not isinstance(p, (int, float)):
            return f"the card's stratum {name!r} lacks its size ('queries') or inclusion probability"
        if not math.isclose(p, sampled / size, rel_tol=1e-9):
            return f"the card's stratum {name!r}: inclusion probability {p!r} is not {sampled} / {size}"
    off = [q for q, s in stratum.items() if not _same(inclusion[q], table[s]["inclusion_probability"])]
    if off:
        q = off[0]
        return (
            f"{len(off)} queries have an inclusion probability that is not their stratum's (e.g. {q!r}: "
            f"{inclusion[q]!r}, not {table[stratum[q]]['inclusion_probability']!r})"
        )
    return ""


def _same(p: float | None, q: float) -> bool:
    return p is not None and math.isclose(p, q, rel_tol=1e-9)
