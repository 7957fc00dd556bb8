"""How metrics are computed: vectorised kernels over a block of the grade matrix.

Each kernel takes a block's ranked grades ``G`` (int32 ``[queries, ranks]``, :data:`UNJUDGED` past each row's
end) and per-query statistics of the qrels, and returns one float per query. No Python loop over queries.
Definitions and names live in :mod:`rag_eval.metrics.catalogue`.
"""

from __future__ import annotations

import numpy as np

from .grades import UNJUDGED


def _safe_div(num: np.ndarray, den: np.ndarray | float) -> np.ndarray:
    den = np.asarray(den, dtype=np.float64)
    out = np.zeros(np.broadcast(num, den).shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


def relevant(G: np.ndarray, threshold: int, k: int | None = None) -> np.ndarray:
    """Boolean ``[queries, min(k, ranks)]``: the result is relevant (grade >= threshold)."""
    return (G if k is None else G[:, :k]) >= threshold


def precision(rel: np.ndarray, k: int) -> np.ndarray:
    """Relevant in the top k / k (k, even when fewer than k were returned)."""
    return rel[:, :k].sum(axis=1) / k


def recall(rel: np.ndarray, k: int | None, R: np.ndarray) -> np.ndarray:
    return _safe_div(rel[:, :k].sum(axis=1), R)


def hit(rel: np.ndarray, k: int) -> np.ndarray:
    return rel[:, :k].any(axis=1).astype(np.float64)


def reciprocal_rank(rel: np.ndarray, k: int | None) -> np.ndarray:
    top = rel[:, :k]
    if top.shape[1] == 0:
        return np.zeros(len(top))
    first = top.argmax(axis=1)
    return np.where(top.any(axis=1), 1.0 / (first + 1), 0.0)


def average_precision(rel: np.ndarray, k: int | None, R: np.ndarray) -> np.ndarray:
    """Sum over relevant ranks i <= k of (relevant in the top i) / i, divided by R (trec_eval's map, map_cut)."""
    top = rel[:, :k]
    if top.shape[1] == 0:
        return np.zeros(len(top))
    cum = np.cumsum(top, axis=1, dtype=np.float64)
    precision_at = cum / np.arange(1, top.shape[1] + 1)
    return _safe_div((precision_at * top).sum(axis=1), R)


def r_precision(rel: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Relevant in the top R / R (a ranking shorter than R counts what it has)."""
    if rel.shape[1] == 0:
        return np.zeros(len(rel))
    cum = np.cumsum(rel, axis=1, dtype=np.int64)
    at = np.clip(np.minimum(R, rel.shape[1]) - 1, 0, None)
    hits = cum[np.arange(len(rel)), at]
    return _safe_div(np.where(R > 0, hits, 0), R)


def bpref(G: np.ndarray, threshold: int, R: np.ndarray, judged_nonrelevant: np.ndarray) -> np.ndarray:
    """Buckley & Voorhees (SIGIR 2004), as trec_eval computes it: for each relevant result,
    ``1 - min(n, R) / min(N, R)`` where n counts the judged non-relevant results ranked above it and N all the
    judged non-relevant documents of the query (a term is 1 when n = 0); summed and divided by R."""
    if G.shape[1] == 0:
        return np.zeros(len(G))
    rel = G >= threshold
    nonrel = (G < threshold) & (G != UNJUDGED)
    above = np.cumsum(nonrel, axis=1) - nonrel
    Rc = R[:, None]
    denom = np.minimum(judged_nonrelevant, R)[:, None]
    penalty = _safe_div(np.minimum(above, Rc), np.broadcast_to(denom, above.shape))
    terms = np.where(above > 0, 1.0 - penalty, 1.0)
    return _safe_div((terms * rel).sum(axis=1), R)


def discounts(width: int) -> np.ndarray:
    """1 / log2(rank + 1) for ranks 1..width."""
    return 1.0 / np.log2(np.arange(2, width + 2, dtype=np.float64))


def dcg(gains: np.ndarray, k: int | None) -> np.ndarray:
    top = gains[:, :k]
    return top @ discounts(top.shape[1]) if top.shape[1] else np.zeros(len(top))


def ndcg(gains: np.ndarray, k: int | None, ideal: np.ndarray) -> np.ndarray:
    return _safe_div(dcg(gains, k), ideal)


def judged(G: np.ndarray, k: int, lengths: np.ndarray) -> np.ndarray:
    """Share of the top min(k, returned) results that have a judgement; 0 for an empty ranking."""
    top = G[:, :k]
    return _safe_div((top != UNJUDGED).sum(axis=1), np.minimum(k, lengths))


def recall_ceiling(R: np.ndarray, k: int) -> np.ndarray:
    return _safe_div(np.minimum(k, R), R)


def gain_table(
    low: int, high: int, rule: str, gains: dict[int, float] | None, rel: int | None
) -> tuple[np.ndarray, int]:
    """Gain of every grade in ``[low, high]`` as a table, and the offset to index it: ``table[g - offset]``.

    A grade earns the gain rule's value (``exp``: 2^g - 1, ``linear``: g) when it is positive (and >= ``rel``
    when given); ``gains`` overrides single grades (as trec_eval's ``ndcg.1=3,2=9``). Index 0 is the gain of
    anything below ``low``: :data:`UNJUDGED` and padding, gain 0.
    """
    offset = low - 1
    grades = np.arange(offset, high + 1)
    earns = grades > 0 if rel is None else grades >= max(rel, 1)
    values = np.where(earns, np.exp2(grades.astype(np.float64)) - 1 if rule == "exp" else grades, 0.0)
    values[0] = 0.0
    if gains:
        for g, v in gains.items():
            if low <= g <= high:
                values[g - offset] = v
    return values.astype(np.float64), offset


def lookup_gains(G: np.ndarray, table: np.ndarray, offset: int) -> np.ndarray:
    return table[np.clip(G - offset, 0, len(table) - 1)]


def ideal_dcg(
    query_of: np.ndarray, gains: np.ndarray, num_queries: int, cutoffs: list[int | None]
) -> dict[int | None, np.ndarray]:
    """Ideal DCG per query at each cutoff: the query's positive gains, best first, discounted by rank.

    ``query_of[i]`` is the query of judged document ``i`` and ``gains[i]`` its gain.
    """
    positive = gains > 0
    q, g = query_of[positive], gains[positive]
    order = np.lexsort((-g, q))
    q, g = q[order], g[order]
    counts = np.bincount(q, minlength=num_queries)
    rank = np.arange(len(q)) - np.repeat(np.cumsum(counts) - counts, counts)
    weighted = g * (1.0 / np.log2(rank + 2.0))
    out = {}
    for k in cutoffs:
        w = weighted if k is None else np.where(rank < k, weighted, 0.0)
        out[k] = np.bincount(q, weights=w, minlength=num_queries)
    return out
