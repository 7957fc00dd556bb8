"""Kernels that read the pool: infap (grade -1 is pooled but unjudged), unjudged, relstring; and num_q, runid.
See docs/metrics.md ("How the code reads names and computes values").
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from . import _kernels as K
from ._registry import KernelInputs
from .catalogue import FAMILIES
from .conventions import follows_trec_eval

INFAP_EPSILON = 0.00001  # trec_eval.h
STRING_BUDGET = 1 << 26  # bytes of a [queries x length] character block before relstring builds strings one by one


def made_up_result(ki: KernelInputs) -> np.ndarray | None:
    """Which counted queries trec_eval measures on its made-up result, or None where there are none.

    Under -c, trec_eval measures a query missing from the run on a ranking of one document that is not in the pool
    (trec_eval.c, ``bogus_ranking``), then resets to their empty-ranking values the measures whose printed name is
    exactly ``num_ret``, ``utility``, ``relstring``, ``unj...`` or ``rbp_resid``. A measure printed with parameters
    (``relstring_20``, ``rbp_resid_p=0.95``) keeps its value on that one document; every other family here has the
    same value on it as on an empty ranking. So under the trec_eval conventions with ``missing_run="zero"`` (and
    no ``-J``, which drops that document) those two measures give trec_eval's value there.
    """
    conv = ki.conventions
    if conv.missing_run != "zero" or conv.unjudged != "keep" or not follows_trec_eval(conv):
        return None
    missing = ki.stats.returned(ki.run) == 0
    return missing if missing.any() else None


def infap(ki: KernelInputs) -> np.ndarray:
    """m_infap.c (Yilmaz & Aslam 2006): for each relevant result at 0-based rank j (j > 0), with r relevant,
    ``nr`` judged non-relevant and u pooled-but-unjudged results above it (results not in the pool are skipped)::

        1/(j+1) + (j/(j+1)) * ((r + nr + u)/j) * ((r + eps)/(r + nr + 2 eps))

    (1 at rank 0), summed in rank order and divided by R.
    """
    m = ki.matrix
    n = m.num_queries
    rel = ki.relevant(ki.threshold)
    judged = len(m.rows)
    rows = np.concatenate([m.rows, m.pooled_rows])
    ranks = np.concatenate([m.ranks, m.pooled_ranks])
    kind = np.concatenate([np.where(rel, 2, 1), np.zeros(len(m.pooled_rows), np.int64)])  # 0 pooled, 1 non-rel, 2 rel
    if len(m.pooled_rows):
        order = np.lexsort((ranks, rows))
        rows, ranks, kind = rows[order], ranks[order], kind[order]
    elif judged == 0:
        return np.zeros(n)
    counts = np.bincount(rows, minlength=n)
    first = np.cumsum(counts) - counts
    start = first[rows]

    def before(flags: np.ndarray) -> np.ndarray:  # flagged cells above each cell, within its query (exact ints)
        running = np.cumsum(flags) - flags
        above: np.ndarray = running - running[np.minimum(start, len(running) - 1)]
        return above

    is_rel = kind == 2
    rel_above = before(is_rel)  # rel_so_far - 1 at a relevant cell
    nonrel_above = before(kind == 1)
    pooled_above = before(kind == 0)
    r, j = rel_above[is_rel], ranks[is_rel].astype(np.float64)
    nr, u = nonrel_above[is_rel], pooled_above[is_rel]
    with np.errstate(divide="ignore", invalid="ignore"):
        term = 1.0 / (j + 1.0) + (j / (j + 1.0)) * ((r + nr + u) / j) * (
            (r + INFAP_EPSILON) / ((r + nr).astype(np.float64) + 2 * INFAP_EPSILON)
        )
    term = np.where(j == 0, 1.0, term)
    total = np.bincount(rows[is_rel], weights=term, minlength=n)
    R = ki.stats.num_relevant(ki.threshold)
    return np.where(R > 0, total / np.where(R > 0, R, 1), total)


def unjudged(ki: KernelInputs) -> np.ndarray:
    """m_unjudged.c (unj): results in the top k that are pooled but unjudged or not in the pool, over k; ranks past
    the ranking count as judged. NaN (0/0) for a per-query cutoff of 0."""
    m = ki.matrix
    k = K.bound(ki.k)
    top = np.minimum(m.lengths, k)
    judged = K.count_per_query(m.rows, K.within(m.rows, m.ranks, k), m.num_queries)
    out = np.full(m.num_queries, np.nan)
    kk = np.broadcast_to(np.asarray(k, np.float64), out.shape)
    np.divide((top - judged).astype(np.float64), kk, out=out, where=kk > 0)
    return out


def relstring_chars(grades: np.ndarray) -> np.ndarray:
    """m_relstring.c's character (as a byte) for judged grades: '0'-'9', '>' above 9, '<' below 0 (a negative grade
    judged non-relevant, under negative_grades="nonrelevant")."""
    out = np.where(grades > 9, ord(">"), ord("0") + np.clip(grades, 0, 9))
    return np.where(grades < 0, ord("<"), out).astype(np.uint8)


def relstring(ki: KernelInputs) -> np.ndarray:
    """m_relstring.c: the grades of the top k (default 10) as one str per query, e.g. ``'0110-.2'``: '-' not in the
    pool, '.' pooled but unjudged (a grade below 0 under the trec_eval conventions)."""
    m = ki.matrix
    n = m.num_queries
    k = ki.k if ki.k is not None else FAMILIES["relstring"].cutoff_default or 0  # m_relstring.c: "-m relstring.10"
    length = np.minimum(m.lengths, k)
    width = int(length.max(initial=0))
    out = np.empty(n, dtype=object)
    if width == 0:
        out[:] = ""
        return _made_up(ki, out)
    inside = K.within(m.rows, m.ranks, k)
    pooled = K.within(m.pooled_rows, m.pooled_ranks, k)
    if n * width <= STRING_BUDGET:
        block = np.zeros((n, width), np.uint8)  # b"\0" past a query's length: NumPy's bytes drop trailing NULs
        block[np.arange(width)[None, :] < length[:, None]] = ord("-")
        block[m.pooled_rows[pooled], m.pooled_ranks[pooled]] = ord(".")
        block[m.rows[inside], m.ranks[inside]] = relstring_chars(m.grades[inside])
        out[:] = block.view(f"S{width}").ravel().astype(str)
        return _made_up(ki, out)
    offsets = np.concatenate([[0], np.cumsum(length)])  # a long string: one flat buffer, sliced per query
    flat = np.full(int(offsets[-1]), ord("-"), np.uint8)
    flat[offsets[m.pooled_rows[pooled]] + m.pooled_ranks[pooled]] = ord(".")
    flat[offsets[m.rows[inside]] + m.ranks[inside]] = relstring_chars(m.grades[inside])
    text = flat.tobytes().decode("ascii")
    bounds = offsets.tolist()
    out[:] = [text[a:b] for a, b in pairwise(bounds)]
    return _made_up(ki, out)


def _made_up(ki: KernelInputs, out: np.ndarray) -> np.ndarray:
    missing = made_up_result(ki)
    if missing is not None and ki.metric.trec_name != "relstring":
        out[missing] = "-"  # the made-up document, not in the pool (see made_up_result)
    return out


def num_q(ki: KernelInputs) -> np.ndarray:
    """m_num_q.c: 1 per counted query (summed over queries: the number of queries)."""
    return np.ones(ki.matrix.num_queries)


def runid(ki: KernelInputs) -> np.ndarray:
    """m_runid.c: the run's tag (a TREC file's last line's), else its name, for every counted query."""
    run = ki.run
    tag = getattr(run, "tag", None) or run.name
    out = np.empty(ki.matrix.num_queries, dtype=object)
    out[:] = str(tag)
    return out
