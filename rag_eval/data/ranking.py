"""Turning scores into a ranking: score descending within each query, ties broken by a named rule (docs/bad-input.md).

A run's entries are grouped by query in CSR form: query ``i`` owns entries ``offsets[i]:offsets[i+1]``. The
functions here return a permutation of entry indices, in ranked order, grouped the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import numpy as np

from .._checks import check_choice

TieRule = Literal["trec_eval", "doc_id", "input_order"]
TIE_RULES: dict[str, str] = {
    "trec_eval": "doc id descending, compared as strings (what trec_eval, pytrec_eval and ir_measures do)",
    "doc_id": "doc id ascending, compared as strings",
    "input_order": "the order in which the entries were given",
}


def _row_blocks(offsets: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Yield ``(starts, valid, index)`` for groups of queries of similar length (powers of two), so that a
    row-wise operation can run on padded matrices whose padding never more than doubles the work:
    ``starts[:, None] + column`` addresses an entry where ``valid``; ``index`` lists those entries row by row."""
    lengths = np.diff(offsets)
    rows_all = np.flatnonzero(lengths > 1)
    if len(rows_all) == 0:
        return
    buckets = np.ceil(np.log2(lengths[rows_all])).astype(np.int64)
    for b in np.unique(buckets):
        rows = rows_all[buckets == b]
        width = int(lengths[rows].max())
        starts = offsets[rows][:, None]
        valid = np.arange(width) < lengths[rows][:, None]
        yield starts, valid, (starts + np.arange(width))[valid]


def _uniform_width(offsets: np.ndarray) -> int | None:
    lengths = np.diff(offsets)
    if len(lengths) and (lengths == lengths[0]).all():
        return int(lengths[0])
    return None


def score_order(offsets: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Entry indices sorted by score descending within each query; the order among equal scores is arbitrary."""
    width = _uniform_width(offsets)
    if width is not None:
        if width == 0:
            return np.arange(len(scores), dtype=np.int64)
        order = np.argsort(-scores.reshape(-1, width), axis=1)
        order += offsets[:-1, None]
        return order.ravel()
    perm = np.arange(len(scores), dtype=np.int64)
    for starts, valid, index in _row_blocks(offsets):
        matrix = np.full(valid.shape, np.nan)
        matrix[valid] = -scores[index]  # NaN padding sorts last
        perm[index] = (starts + np.argsort(matrix, axis=1))[valid]
    return perm


def sort_rows(offsets: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Sort each query's segment of ``values`` ascending, in place; returns ``values``."""
    width = _uniform_width(offsets)
    if width is not None:
        if width:
            values.reshape(-1, width).sort(axis=1)
        return values
    for _, valid, index in _row_blocks(offsets):
        matrix = np.full(valid.shape, np.inf)
        matrix[valid] = values[index]
        matrix.sort(axis=1)  # +inf padding sorts last
        values[index] = matrix[valid]
    return values


def search_rows(
    sorted_values: np.ndarray, starts: np.ndarray, ends: np.ndarray, needles: np.ndarray, side: str = "left"
) -> np.ndarray:
    """``np.searchsorted(..., side)`` of each needle within its own segment ``sorted_values[starts[i]:ends[i]]``
    (each segment ascending), for all needles at once: a vectorised binary search of about log2(longest
    segment) steps (a C twin measured no faster end to end: RESULTS.md, "The C extension")."""
    lo, hi = starts.copy(), ends.copy()
    last = len(sorted_values) - 1
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) >> 1
        probe = sorted_values[np.minimum(mid, last)]
        right = probe < needles if side == "left" else probe <= needles
        right &= active
        np.copyto(lo, mid + 1, where=right)
        np.copyto(hi, mid, where=active & ~right)


def tie_groups(offsets: np.ndarray, ranked_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)``: the position ranges (in ranked order) of runs of equal scores within a query."""
    n = len(ranked_scores)
    if n < 2:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    cont = np.zeros(n + 1, dtype=bool)  # cont[i]: position i ties with position i - 1 of the same query
    cont[1:n] = ranked_scores[1:] == ranked_scores[:-1]
    cont[offsets[:-1]] = False
    starts = np.flatnonzero(~cont[:-1] & cont[1:])
    ends = np.flatnonzero(cont[:-1] & ~cont[1:]) + 1
    return starts, ends


def break_ties(perm: np.ndarray, starts: np.ndarray, ends: np.ndarray, doc_ids: np.ndarray, rule: str) -> np.ndarray:
    """Reorder each tie group ``perm[starts[g]:ends[g]]`` by ``rule``; returns a new permutation."""
    check_choice(rule, "tie rule", sorted(TIE_RULES))
    perm = perm.copy()
    if len(starts) == 0:
        return perm
    lengths = ends - starts
    positions = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths) + np.arange(lengths.sum())
    entries = perm[positions]
    group = np.repeat(np.arange(len(starts)), lengths)
    if rule == "input_order":
        key = entries
    else:
        _, rank = np.unique(doc_ids[entries], return_inverse=True)
        key = -rank if rule == "trec_eval" else rank
    perm[positions] = entries[np.lexsort((key, group))]
    return perm


def ranked_permutation(offsets: np.ndarray, scores: np.ndarray, doc_ids: np.ndarray, rule: str) -> np.ndarray:
    """The full ranking of a score-ordered run: score descending, every tie broken by ``rule``."""
    perm = score_order(offsets, scores)
    starts, ends = tie_groups(offsets, scores[perm])
    return break_ties(perm, starts, ends, doc_ids, rule)


def strictly_decreasing_scores(offsets: np.ndarray, ranked_scores: np.ndarray | None) -> np.ndarray:
    """Scores to write out so that any tool that re-sorts by score (trec_eval, pytrec_eval) keeps our order.

    Within a query whose scores already never increase, tied scores are nudged down by a few units in the
    last place (the values stay the same to ~1e-16). A query without scores, or whose scores increase somewhere
    (a given order that is not by score), gets ``n, n-1, ..., 1``.
    """
    lengths = np.diff(offsets)
    n = int(offsets[-1])
    rank = np.arange(n) - np.repeat(offsets[:-1], lengths)
    synthetic: np.ndarray = (np.repeat(lengths, lengths) - rank).astype(np.float64)
    if ranked_scores is None:
        return synthetic
    scores = ranked_scores.astype(np.float64, copy=True)
    query = np.repeat(np.arange(len(lengths)), lengths)
    rises = np.zeros(len(lengths), dtype=bool)
    step = np.zeros(n, dtype=bool)
    step[1:] = (scores[1:] >= scores[:-1]) & (query[1:] == query[:-1])
    if step.any():
        rising = np.zeros(n, dtype=bool)
        rising[1:] = (scores[1:] > scores[:-1]) & (query[1:] == query[:-1])
        rises[np.unique(query[rising])] = True
        starts, ends = tie_groups(offsets, scores)
        if len(starts):
            glen = ends - starts
            within = np.arange(glen.sum()) - np.repeat(np.cumsum(glen) - glen, glen)
            pos = np.repeat(starts, glen) + within
            scores[pos] = _ulps_below(scores[pos], within)
        still = np.zeros(n, dtype=bool)
        still[1:] = ~(scores[1:] < scores[:-1]) & (query[1:] == query[:-1])  # also catches NaN and inf
        rises[np.unique(query[still])] = True
        rises[np.unique(query[~np.isfinite(scores)])] = True
    bad = rises[query]
    scores[bad] = synthetic[bad]
    return scores


def _ulps_below(values: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Each value moved down by ``k`` representable doubles (across zero if need be); non-finite results are
    left for the caller to detect."""
    bits = values.view(np.int64)
    magnitude = bits & np.int64(0x7FFFFFFFFFFFFFFF)
    key = np.where(bits < 0, -magnitude, magnitude)  # monotone in the value; -0.0 and +0.0 share key 0
    key = key - k.astype(np.int64)
    out_bits = np.where(key < 0, (-key) | np.int64(-0x8000000000000000), key)
    out = out_bits.view(np.float64)
    return np.where(np.isfinite(values), out, values)
