"""How metrics are computed: vectorised kernels over the judged cells of a grade matrix.

Every kernel receives the judged cells of a :class:`~rag_eval.metrics._grades.GradeMatrix` (``rows``,
0-based ``ranks``, sorted by row then rank) or flags derived from them, the number of queries ``n``, and
per-query statistics of the qrels; it returns one float per query. A cutoff ``k`` is an int, None (no cutoff),
or an array with one cutoff per query (a token budget delivers a different number of chunks to each query).
Unjudged cells are never relevant and never earn gain, so the judged cells decide every value. No Python loop
over queries.
Definitions and names live in :mod:`rag_eval.metrics.catalogue`.
"""

from __future__ import annotations

import numpy as np


def _safe_div(num: np.ndarray, den: np.ndarray | float) -> np.ndarray:
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.zeros(np.broadcast(num, den).shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


Cutoff = int | None | np.ndarray
Bound = int | np.ndarray  # a cutoff that is there: one for every query, or one per query


def bound(k: Cutoff) -> Bound:
    """``k`` where a measure needs a cutoff (the grammar gives these families one always: catalogue "required")."""
    if k is None:
        raise ValueError("this measure needs a cutoff, and none was given")
    return k


def within(rows: np.ndarray, ranks: np.ndarray, k: Cutoff) -> np.ndarray:
    """Which cells lie in the top k of their query."""
    if k is None:
        return np.ones(len(ranks), dtype=bool)
    inside: np.ndarray = ranks < (k[rows] if isinstance(k, np.ndarray) else k)
    return inside


def count_per_query(rows: np.ndarray, flags: np.ndarray, n: int) -> np.ndarray:
    """How many flagged cells each query has."""
    return np.bincount(rows, weights=flags, minlength=n)


def precision(rows: np.ndarray, ranks: np.ndarray, rel: np.ndarray, k: Cutoff, n: int) -> np.ndarray:
    """Relevant in the top k / k (k, even when fewer than k were returned; 0 when k is 0)."""
    return _safe_div(count_per_query(rows, rel & within(rows, ranks, k), n), bound(k))


def recall(rows: np.ndarray, ranks: np.ndarray, rel: np.ndarray, k: Cutoff, R: np.ndarray) -> np.ndarray:
    return _safe_div(count_per_query(rows, rel & within(rows, ranks, k), len(R)), R)


def hit(rows: np.ndarray, ranks: np.ndarray, rel: np.ndarray, k: Cutoff, n: int) -> np.ndarray:
    return (count_per_query(rows, rel & within(rows, ranks, k), n) > 0).astype(np.float64)


def reciprocal_rank(rows: np.ndarray, ranks: np.ndarray, rel: np.ndarray, k: Cutoff, n: int) -> np.ndarray:
    """1 / rank of the first relevant result (within the top k), 0 when there is none."""
    top = rel & within(rows, ranks, k)
    r, p = rows[top], ranks[top]
    first = np.ones(len(r), dtype=bool)
    first[1:] = r[1:] != r[:-1]
    out = np.zeros(n)
    out[r[first]] = 1.0 / (p[first] + 1)
    return out


def _position_among(rows: np.ndarray, n: int) -> np.ndarray:
    """1-based position of each cell among the cells of its query (cells sorted by row)."""
    counts = np.bincount(rows, minlength=n)
    return np.arange(1, len(rows) + 1) - np.repeat(np.cumsum(counts) - counts, counts)


def average_precision(rows: np.ndarray, ranks: np.ndarray, rel: np.ndarray, k: Cutoff, R: np.ndarray) -> np.ndarray:
    """Sum over relevant ranks i <= k of (relevant in the top i) / i, divided by R (trec_eval's map, map_cut)."""
    top = rel & within(rows, ranks, k)
    r, p = rows[top], ranks[top]
    precision_at = _position_among(r, len(R)) / (p + 1.0)
    return _safe_div(np.bincount(r, weights=precision_at, minlength=len(R)), R)


def r_precision(rows: np.ndarray, ranks: np.ndarray, rel: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Relevant in the top R / R (a ranking shorter than R counts what it has)."""
    return _safe_div(count_per_query(rows, rel & (ranks < R[rows]), len(R)), R)


def bpref(rows: np.ndarray, rel: np.ndarray, nonrel: np.ndarray, R: np.ndarray, N: np.ndarray) -> np.ndarray:
    """Buckley & Voorhees (SIGIR 2004), as trec_eval computes it: for each relevant result,
    ``1 - min(m, R) / min(N, R)`` where m counts the judged non-relevant results ranked above it and N all the
    judged non-relevant documents of the query (a term is 1 when m = 0); summed and divided by R."""
    n = len(R)
    if len(rows) == 0:
        return np.zeros(n)
    counts = np.bincount(rows, minlength=n)
    seen = np.cumsum(nonrel) - nonrel  # judged non-relevant cells before this one, over all queries
    first = np.minimum(np.cumsum(counts) - counts, len(seen) - 1)
    above = seen - np.repeat(seen[first], counts)  # ... and within its own query
    r = rows[rel]
    m = above[rel]
    Rr = R[r]
    penalty = _safe_div(np.minimum(m, Rr), np.minimum(N[r], Rr))
    terms = np.where(m > 0, 1.0 - penalty, 1.0)
    return _safe_div(np.bincount(r, weights=terms, minlength=n), R)


def discount(ranks: np.ndarray) -> np.ndarray:
    """1 / log2(rank + 1) for 1-based ranks; here ``ranks`` are 0-based. (:func:`dcg` divides by the log instead,
    as trec_eval does: ``g * (1 / log2 r)`` and ``g / log2 r`` can differ in the last bit.)"""
    return 1.0 / np.log2(ranks + 2.0)


def discounted(gains: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Each gain discounted by its 0-based rank: ``gain / log2(rank + 2)``, a division as in trec_eval's m_ndcg.c
    and m_ndcg_cut.c (NumPy's log2 and the C library's agree on every integer rank)."""
    return gains / np.log2(ranks + 2.0)


def dcg(rows: np.ndarray, ranks: np.ndarray, gains: np.ndarray, k: Cutoff, n: int) -> np.ndarray:
    """Sum of the discounted gains of each query's top k, added in rank order (cells are sorted by row, then
    rank, and ``np.bincount`` adds its weights one by one in array order: trec_eval's order of operations)."""
    weights = np.where(within(rows, ranks, k), discounted(gains, ranks), 0.0)
    return np.bincount(rows, weights=weights, minlength=n)


def ndcg(rows: np.ndarray, ranks: np.ndarray, gains: np.ndarray, k: Cutoff, ideal: np.ndarray) -> np.ndarray:
    return _safe_div(dcg(rows, ranks, gains, k, len(ideal)), ideal)


def judged(
    rows: np.ndarray, ranks: np.ndarray, k: Cutoff, lengths: np.ndarray, *, per: str = "returned", empty: str = "nan"
) -> np.ndarray:
    """Share of the top min(k, returned) results that have a judgement; NaN (0/0) when that top is empty (an
    empty ranking, or a per-query cutoff of 0): nothing there is judged or unjudged.

    ``per="k"`` divides by k itself (a ranking shorter than k counts its missing ranks as unjudged);
    ``empty="zero"`` scores 0 where the denominator is 0 (ir_measures scores a query missing from the run 0)."""
    if per == "k" and k is not None:
        top = np.broadcast_to(np.asarray(k, np.int64), lengths.shape)
    else:
        top = lengths if k is None else np.minimum(k, lengths)
    out = np.full(len(lengths), 0.0 if empty == "zero" else np.nan)
    np.divide(count_per_query(rows, within(rows, ranks, k), len(lengths)), top, out=out, where=top > 0)
    return out


def recall_ceiling(R: np.ndarray, k: Cutoff) -> np.ndarray:
    return _safe_div(np.minimum(bound(k), R), R)


def gain_of(grades: np.ndarray, rule: str, gains: dict[int, float] | None, rel: int | None) -> np.ndarray:
    """Gain of each grade: the rule's value (``exp``: 2^g - 1, ``linear``: g) when the grade is positive (and
    >= ``rel`` when given), else 0; ``gains`` overrides single grades (as trec_eval's ``ndcg.1=3,2=9``)."""
    g = grades.astype(np.float64)
    earns = grades > 0 if rel is None else grades >= max(rel, 1)
    out = np.where(earns, np.exp2(g) - 1.0 if rule == "exp" else g, 0.0)
    if gains:
        for grade, value in gains.items():
            out[grades == grade] = value
    return out


def best_gains(query_of: np.ndarray, gains: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each query's positive gains, best first: ``(query, gain, 0-based rank)`` per kept judgement.

    ``query_of[i]`` is the query of judged document ``i`` and ``gains[i]`` its gain.
    """
    positive = gains > 0
    q, g = query_of[positive], gains[positive]
    order = np.lexsort((-g, q))
    q, g = q[order], g[order]
    return q, g, _position_among(q, n) - 1


def best_gains_by_grade(
    query_of: np.ndarray, grades: np.ndarray, n: int, rule: str, gains: dict[int, float] | None, rel: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`best_gains` of the unscaled gains of ``grades``, by counting instead of sorting: a query's gains,
    best first, are its count of each distinct gain, placed in order. The same three arrays, bit for bit. None
    where the grades span more than 4,096 values (then sort)."""
    if not len(grades):
        return None
    lo, hi = int(grades.min()), int(grades.max())
    if hi - lo >= 4096:
        return None
    table = gain_of(np.arange(lo, hi + 1), rule, gains, rel)  # the gain of each grade
    earns = table > 0
    best = np.unique(table[earns])[::-1]  # the distinct positive gains, best first
    width = len(best) + 1  # one column more: the grades that earn nothing
    level = np.full(hi - lo + 1, len(best), np.int64)
    level[earns] = np.searchsorted(-best, -table[earns])
    key = query_of * width
    key += level[grades - lo]
    counts = np.bincount(key, minlength=n * width).reshape(n, width)[:, :-1]
    totals = counts.sum(axis=1)
    query = np.repeat(np.arange(n), totals)
    ranked = np.repeat(np.broadcast_to(best, counts.shape).ravel(), counts.ravel())
    rank = np.arange(len(query)) - np.repeat(np.cumsum(totals) - totals, totals)
    return query, ranked, rank


def ideal_dcg(query: np.ndarray, gains: np.ndarray, rank: np.ndarray, n: int, k: Cutoff) -> np.ndarray:
    """Ideal DCG per query at cutoff k, from :func:`best_gains`: the best gains discounted by rank, added best
    first (the order trec_eval adds them in)."""
    weights = np.where(within(query, rank, k), discounted(gains, rank), 0.0)
    return np.bincount(query, weights=weights, minlength=n)


SCALE_FREE = 2.0**900  # gains within [2^-900, 2^900]: no DCG of them leaves the normal doubles, so none is scaled


def scale_free(magnitudes: np.ndarray) -> bool:
    """Whether gains of these magnitudes (``abs`` of every gain that can occur) need no scaling: each nonzero one
    within [2^-900, 2^900] (see :func:`gain_exponents`)."""
    largest = magnitudes.max(initial=0.0)
    smallest = magnitudes.min(initial=np.inf, where=magnitudes > 0)
    return bool(largest < SCALE_FREE and smallest >= 1.0 / SCALE_FREE)


def gain_exponents(query_of: np.ndarray, gains: np.ndarray, n: int) -> np.ndarray:
    """Per query, the binary exponent ``e`` of its largest gain in magnitude (``max|gain| = m * 2^e``, ``m`` in
    [0.5, 1); 0 where a query has no gain): :func:`scale_gains` divides that query's gains by ``2^e``.

    nDCG does not change when a query's gains are scaled, and scaling by a power of two is exact: every
    division and sum of the scaled gains is the unscaled one times ``2^-e``, bit for bit, so the values equal
    trec_eval's wherever its sums stay finite, and stay finite where trec_eval's overflow (``gains=1:1e308``,
    where trec_eval prints 0.0000 for a perfect ranking).
    """
    magnitude = np.abs(gains)
    if scale_free(magnitude):  # no sum can overflow or fall below the normal doubles: scaling would change no bit
        return np.zeros(n, np.int64)
    top = np.zeros(n)
    np.maximum.at(top, query_of, magnitude)
    return np.frexp(top)[1].astype(np.int64)


def scale_gains(gains: np.ndarray, query_of: np.ndarray, exponents: np.ndarray) -> np.ndarray:
    """``gains`` of queries ``query_of`` divided by ``2^exponents[query]`` (see :func:`gain_exponents`); ``gains``
    itself where every exponent is 0."""
    if not exponents.any():
        return gains
    scaled: np.ndarray = np.ldexp(gains, -exponents[query_of])
    return scaled
