"""Kernels for graded gain measures beyond nDCG: g, bing, ndcg_rel, rndcg, rbp, rbp_resid (as trec_eval 10.0
computes them), err, nerr. See docs/metrics.md ("How the code reads names and computes values").
"""

from __future__ import annotations

import math

import numpy as np

from ..data.qrels import Qrels
from ..errors import InputError
from . import _kernels as K
from ._kernels_pool import made_up_result
from ._registry import KernelInputs
from .grammar import gains_map

__all__ = ["LEVEL_TABLE_LIMIT", "default_max_grade", "scan"]

LEVEL_TABLE_LIMIT = 4096  # gain tables emulated level by level up to this many levels (grade + 1)
DENSE_BUDGET = 1 << 22  # cells of a dense [queries x depth] block at a time (32 MB of float64)
_TWO53 = 2.0**53


# ----- sequential arithmetic, vectorised over queries ---------------------------------------------------------


def scan(values: np.ndarray, rows: np.ndarray, n: int, op: str = "add") -> np.ndarray:
    """Inclusive running sum (``op="add"``) or product (``"mul"``) of ``values`` within each row (cells sorted by
    row), each computed in order from the row's first cell, as a C loop would: bit for bit that loop's result.

    Rows are laid side by side in a padded ``[rows x longest]`` block (padding 0 for a sum, 1 for a product: it
    changes no value) and accumulated along the row; when that block would be too large for the cells it holds,
    the cells are accumulated one column (position in the row) at a time instead.
    """
    values = np.asarray(values, np.float64)
    if len(values) == 0:
        return values.copy()
    counts = np.bincount(rows, minlength=n)
    starts = np.cumsum(counts) - counts
    position = np.arange(len(rows)) - starts[rows]
    width = int(counts.max())
    used = np.flatnonzero(counts)
    if len(used) * width <= max(4 * len(values), DENSE_BUDGET):
        local = np.full(n, -1, np.int64)
        local[used] = np.arange(len(used))
        block = np.full((len(used), width), 0.0 if op == "add" else 1.0)
        block[local[rows], position] = values
        accumulate = np.cumsum if op == "add" else np.cumprod
        running: np.ndarray = accumulate(block, axis=1)[local[rows], position]
        return running
    out = values.copy()
    order = np.argsort(position, kind="stable")
    bounds = np.searchsorted(position[order], np.arange(width + 1))
    for j in range(1, width):  # a loop over positions (depth), each step over every row that long
        cells = order[bounds[j] : bounds[j + 1]]
        out[cells] = out[cells - 1] + values[cells] if op == "add" else out[cells - 1] * values[cells]
    return out


def _add_ones(start: np.ndarray, times: np.ndarray) -> np.ndarray:
    """``start + 1.0 + 1.0 + ...`` (``times`` additions, one at a time, each rounded), vectorised.

    Within a binade [2^e, 2^(e+1)) below 2^53 every addition of 1 is exact, so the additions are taken a binade at
    a time, and only the one that crosses into the next binade is rounded (by NumPy, as the C loop rounds it).
    From 2^53 on, 1 is at most half an ulp: after at most two additions the sum no longer moves.
    """
    x = np.asarray(start, np.float64).copy()
    m = np.asarray(times, np.int64).copy()
    for _ in range(4 * 64):
        going = m > 0
        if not going.any():
            return x
        small = going & (x < _TWO53) & (x >= 0)
        if small.any():
            xs = x[small]
            top = np.ldexp(1.0, np.frexp(np.maximum(xs, 1.0))[1])  # the next power of two above xs
            room = np.ceil(top - xs).astype(np.int64) - 1  # additions that stay below it (top - xs is exact)
            step = np.minimum(m[small], np.maximum(room, 0))
            xs = xs + step
            left = m[small] - step
            crossing = left > 0
            xs[crossing] = xs[crossing] + 1.0
            left[crossing] -= 1
            x[small], m[small] = xs, left
        big = going & ~small
        if big.any():  # beyond 2^53 (or below 0, which sums of costs >= 1 never are): one addition at a time
            x[big] = x[big] + 1.0
            m[big] -= 1
            stuck = big & (m > 0) & (x >= _TWO53) & (x + 1.0 == x)
            m[stuck] = 0
    raise AssertionError("unreachable: _add_ones did not converge")


def _powers(p: float, length: int) -> np.ndarray:
    """``cur_p`` of m_rbp.c at ranks 0..length: 1, p, p*p, ... each the previous times p (not p**i)."""
    out = np.full(length + 1, p)
    out[0] = 1.0
    return np.cumprod(out)


def _sequential_row_sums(
    table: np.ndarray, lengths: np.ndarray, skip_rows: np.ndarray, skip_ranks: np.ndarray
) -> np.ndarray:
    """Per row r, ``table[0] + table[1] + ... + table[lengths[r] - 1]`` added in order, leaving out the positions
    ``(skip_rows, skip_ranks)``: dense blocks of rows of similar length, each accumulated along the row."""
    n = len(lengths)
    out = np.zeros(n)
    by_length = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[by_length]
    local = np.full(n, -1, np.int64)
    i = int(np.searchsorted(sorted_lengths, 1))  # rows of length 0 sum to 0
    while i < n:
        lo, hi = i + 1, n  # the most rows from i whose block (rows x the longest of them) fits the budget
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if (mid - i) * int(sorted_lengths[mid - 1]) <= DENSE_BUDGET:
                lo = mid
            else:
                hi = mid - 1
        j = lo
        rows = by_length[i:j]
        width = int(sorted_lengths[j - 1])
        block = np.broadcast_to(table[:width], (len(rows), width)).copy()
        block[np.arange(width)[None, :] >= lengths[rows][:, None]] = 0.0
        local[rows] = np.arange(len(rows))
        mine = local[skip_rows] >= 0
        block[local[skip_rows[mine]], skip_ranks[mine]] = 0.0
        out[rows] = np.cumsum(block, axis=1)[:, -1]
        local[rows] = -1
        i = j
    return out


# ----- trec_eval's gain table (gain_init.c) ---------------------------------------------------------------------


def _c_compare(a: float, b: float) -> int:
    """trec_eval's comp_rel_gain: ``return (a - b)`` converted to int, truncating (x86-64 cvttsd2si: a difference
    beyond the int range, or NaN, becomes INT_MIN)."""
    d = a - b
    if d != d or not (-2147483649.0 < d < 2147483648.0):
        return -(2**31)
    return int(d)


def _glibc_msort(items: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """glibc's qsort on these small arrays (msort.c, ``msort_with_tmp``): a top-down merge sort that takes from the
    left half while ``compare(left, right) <= 0``."""
    if len(items) <= 1:
        return list(items)
    half = len(items) // 2
    left, right = _glibc_msort(items[:half]), _glibc_msort(items[half:])
    out: list[tuple[int, float]] = []
    i = j = 0
    while i < len(left) and j < len(right):
        if _c_compare(left[i][1], right[j][1]) <= 0:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    return out + left[i:] + right[j:]


def _level_gain(level: int, gmap: dict[int, float] | None, rel: int | None) -> float:
    if gmap and level in gmap:
        return gmap[level]
    return float(level) if rel is None or level >= rel else 0.0


def _walk_table(levels: int, gmap: dict[int, float] | None, rel: int | None) -> tuple[np.ndarray, float, float]:
    """For a query whose judged grades >= 0 go up to ``levels - 1``: each level's place in trec_eval's ideal walk
    (0 first; indexed by level), the gain of the walk's first entry, and the largest gain of the table (rbp's
    normaliser, with trec_eval's min and max starting at 0)."""
    items = [(g, v) for g, v in sorted((gmap or {}).items())]  # the parameters first, then the levels they leave out
    items += [(i, _level_gain(i, None, rel)) for i in range(levels) if not gmap or i not in gmap]
    ordered = _glibc_msort(items)
    walk = np.zeros(max(levels, 1), np.int64)
    for place, (level, _) in enumerate(reversed(ordered)):
        if level < levels:
            walk[level] = place
    top = ordered[-1][1] if ordered else 0.0
    return walk, top, max([0.0] + [v for _, v in items])


def _check_gains(ki: KernelInputs) -> dict[int, float] | None:
    gmap = gains_map(ki.metric)
    if gmap and min(gmap) < 0:
        raise InputError(
            f"metric {str(ki.metric)!r}: gains= gives grade {min(gmap)} a gain; trec_eval's gain table has levels "
            "0 and above only, and would give that gain to documents outside the pool: map grades 0 and above"
        )
    return gmap


class TrecGains:
    """trec_eval's gains for one ``gains=`` map and ``rel=``: per judged cell, and the ideal walk per query."""

    def __init__(self, ki: KernelInputs, gmap: dict[int, float] | None) -> None:
        stats, rel = ki.stats, ki.metric.rel
        self.n = stats.n
        judged = stats.grades >= 0
        q, g = stats.query_of[judged], stats.grades[judged].astype(np.int64)
        top_grade = np.full(self.n, -1, np.int64)
        np.maximum.at(top_grade, q, g)
        self.levels = top_grade + 1  # trec_eval's num_rel_levels (0: no judgement >= 0)
        trivial = not gmap and rel is None  # gains are the grades: the walk is by grade, descending
        if trivial:
            walk_place = -g
            top = self.levels - 1.0
            table_max = np.maximum(self.levels - 1.0, 0.0)
            gain = g.astype(np.float64)
        else:
            walk_place = np.zeros(len(g), np.int64)
            top = np.zeros(self.n)
            table_max = np.zeros(self.n)
            for levels in np.unique(self.levels).tolist():  # a loop over distinct table sizes, not queries
                here = self.levels == levels
                if levels > LEVEL_TABLE_LIMIT:
                    query = getattr(stats, "query_ids", None)
                    where = (
                        f"metric {str(ki.metric)!r}: query {query[int(np.flatnonzero(here)[0])]!r}"
                        if query
                        else (f"metric {str(ki.metric)!r}")
                    )
                    walk_place[here[q]], top[here], table_max[here] = self._big_table(
                        levels, gmap, rel, g[here[q]], where
                    )
                    continue
                walk, first, largest = _walk_table(levels, gmap, rel)
                cells = here[q]
                walk_place[cells] = walk[g[cells]]
                top[here], table_max[here] = first, largest
            gain = self.cell_gain(g, gmap, rel)
        order = np.lexsort((walk_place, q))
        q, gain = q[order], gain[order]
        # the walk stops at the first level (with a judged document) of gain <= 0; nothing if its first entry's is
        stopped = np.cumsum(gain <= 0)
        counts = np.bincount(q, minlength=self.n)
        before = np.repeat(np.cumsum(counts) - counts, counts)
        stopped_before: np.ndarray = stopped - np.where(before > 0, stopped[np.maximum(before - 1, 0)], 0)
        keep = (stopped_before == 0) & (top[q] > 0)
        self.ideal_query = q[keep]
        self.ideal_gain = gain[keep]
        self.ideal_rank = K._position_among(self.ideal_query, self.n) - 1
        self.ideal_count = np.bincount(self.ideal_query, minlength=self.n)
        self.table_max = table_max
        self._gmap, self._rel = gmap, rel

    @staticmethod
    def cell_gain(grades: np.ndarray, gmap: dict[int, float] | None, rel: int | None) -> np.ndarray:
        """trec_eval's get_gain of each grade: the map's gain, else the grade (0 below ``rel``); a grade below 0
        (judged non-relevant under the default conventions) earns 0."""
        out = np.where(grades >= (0 if rel is None else rel), grades, 0).astype(np.float64)
        if gmap:
            for grade, value in gmap.items():
                out[grades == grade] = value
        return out

    @staticmethod
    def _big_table(
        levels: int, gmap: dict[int, float] | None, rel: int | None, grades: np.ndarray, where: str
    ) -> tuple[np.ndarray, float, float]:
        """A table too long to sort level by level (a grade of LEVEL_TABLE_LIMIT or more): exact where
        trec_eval's comparator is a true order on it, every gain a whole number below 2^31 (then no two gains
        closer than 1 compare equal, and no difference overflows the int). Equal gains may be walked in any order:
        no value changes."""
        values = list((gmap or {}).values())
        if any(v != math.floor(v) or v >= 2**31 for v in values):
            raise InputError(
                f"{where} is judged up to grade {levels - 1}; with a gain in gains= that is not a whole number below "
                f"2^31, trec_eval sorts a gain table of that many levels in an order rag_eval reproduces only up to "
                f"grade {LEVEL_TABLE_LIMIT - 1}: use whole-number gains, or grades below {LEVEL_TABLE_LIMIT}"
            )
        gains = TrecGains.cell_gain(grades, gmap, rel)
        walk_place = np.empty(len(grades), np.int64)
        walk_place[np.argsort(-gains, kind="stable")] = np.arange(len(grades))
        default = next(i for i in range(levels - 1, -1, -1) if not gmap or i not in gmap)
        largest = max([0.0, _level_gain(default, None, rel)] + values)
        return walk_place, largest, largest

    def gains_of(self, ki: KernelInputs) -> np.ndarray:
        return self.cell_gain(ki.matrix.grades, self._gmap, self._rel)


def trec_gains(ki: KernelInputs) -> TrecGains:
    gmap = _check_gains(ki)
    key = ("trec_gains", tuple(sorted(gmap.items())) if gmap else None, ki.metric.rel)
    return ki.stats.cached(key, lambda: TrecGains(ki, gmap))


def _ideal_prefix(tg: TrecGains, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Running sums of ``values`` (one per ideal entry) per query, and each query's total (0 with no entry)."""
    prefix = scan(values, tg.ideal_query, tg.n)
    total = np.zeros(tg.n)
    last = np.cumsum(tg.ideal_count) - 1
    has = tg.ideal_count > 0
    total[has] = prefix[last[has]]
    return prefix, total


def _at_rank(
    prefix: np.ndarray, query: np.ndarray, count: np.ndarray, rows: np.ndarray, ranks: np.ndarray
) -> np.ndarray:
    """The ideal running sum at rank ``min(rank, count - 1)`` of each cell's query (0 where the query has none)."""
    start = np.cumsum(count) - count
    has = count[rows] > 0
    out = np.zeros(len(rows))
    out[has] = prefix[start[rows[has]] + np.minimum(ranks[has], count[rows[has]] - 1)]
    return out


def _nonzero(ki: KernelInputs, gains: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The judged cells that earn a gain (trec_eval adds only ``results_gain != 0``), and their running DCG."""
    m = ki.matrix
    nz = gains != 0
    rows, ranks, g = m.rows[nz], m.ranks[nz], gains[nz]
    return rows, ranks, g, scan(K.discounted(g, ranks), rows, m.num_queries)


def _row_total(prefix: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    """The last running value of each row (0 for a row without cells)."""
    out = np.zeros(n)
    if len(rows):
        last = np.ones(len(rows), bool)
        last[:-1] = rows[1:] != rows[:-1]
        out[rows[last]] = prefix[last]
    return out


# ----- the trec_eval families -----------------------------------------------------------------------------------


def ndcg_rel(ki: KernelInputs) -> np.ndarray:
    """m_ndcg_rel.c: nDCG averaged over the ranks of the relevant retrieved documents, each with the ideal DCG at
    that rank (capped at the ideal's length), and the final nDCG once for every relevant document not retrieved;
    divided by the number of ideal entries."""
    tg = trec_gains(ki)
    n = tg.n
    rows, ranks, g, dcg = _nonzero(ki, tg.gains_of(ki))
    ideal_prefix, ideal_total = _ideal_prefix(tg, K.discounted(tg.ideal_gain, tg.ideal_rank))
    positive = g > 0
    with np.errstate(all="ignore"):  # where trec_eval divides by an ideal DCG of 0, so does this: inf or NaN
        terms = dcg[positive] / _at_rank(ideal_prefix, tg.ideal_query, tg.ideal_count, rows[positive], ranks[positive])
        total = np.bincount(rows[positive], weights=terms, minlength=n)
        retrieved = np.bincount(rows[positive], minlength=n)
        final = _row_total(dcg, rows, n)
        total = total + (tg.ideal_count - retrieved).astype(np.float64) * final / ideal_total
        return np.where(total > 0.0, total / tg.ideal_count, 0.0)


def g_measure(ki: KernelInputs) -> np.ndarray:
    """m_G.c: each retrieved gain over log2(2 + ideal cost so far - gain so far), summed, over the ideal's total
    gain; the cost of a rank is its ideal gain, at least 1 (1 past the ideal's end)."""
    tg = trec_gains(ki)
    n = tg.n
    rows, ranks, g, _ = _nonzero(ki, tg.gains_of(ki))
    gained = scan(g, rows, n)
    cost_prefix, cost_total = _ideal_prefix(tg, np.maximum(tg.ideal_gain, 1.0))
    _, ideal_total = _ideal_prefix(tg, tg.ideal_gain)
    count = tg.ideal_count[rows]
    inside = ranks < count
    cost = np.empty(len(rows))
    cost[inside] = _at_rank(cost_prefix, tg.ideal_query, tg.ideal_count, rows[inside], ranks[inside])
    past = ~inside
    cost[past] = _add_ones(cost_total[rows[past]], ranks[past] - count[past] + 1)
    with np.errstate(all="ignore"):
        terms = g / np.log2(2.0 + cost - gained)
        total = np.bincount(rows, weights=terms, minlength=n)
        return np.where(ideal_total > 0.0, total / np.where(ideal_total > 0.0, ideal_total, 1.0), 0.0)


def rndcg(ki: KernelInputs) -> np.ndarray:
    """m_Rndcg.c: nDCG averaged at the R levels, the ranks where the ideal gain changes (the last where it ends),
    and once more at the end of the ranking when it runs two or more ranks past the ideal's end; 0 for a query
    with no relevant judgement."""
    tg = trec_gains(ki)
    n = tg.n
    rows, ranks, _g, dcg = _nonzero(ki, tg.gains_of(ki))
    ideal_prefix, ideal_total = _ideal_prefix(tg, K.discounted(tg.ideal_gain, tg.ideal_rank))
    iq, ig, ir = tg.ideal_query, tg.ideal_gain, tg.ideal_rank
    # a boundary at rank b (1..count): the ideal gain at b differs from b - 1's, or b is the ideal's end
    end = np.ones(len(iq), bool)
    end[:-1] = iq[1:] != iq[:-1]
    change = np.zeros(len(iq), bool)
    change[:-1] = (iq[1:] == iq[:-1]) & (ig[1:] != ig[:-1])
    at = change | end  # the entry just before the boundary
    b_query, b_rank, b_ideal = iq[at], ir[at] + 1, ideal_prefix[at]
    width = int(max(ki.matrix.lengths.max(initial=0), ir.max(initial=0) + 1)) + 2
    before = np.searchsorted(rows * width + ranks, b_query * width + b_rank) - 1  # last gain cell above the rank
    before_ok = (before >= 0) & (rows[np.maximum(before, 0)] == b_query) if len(rows) else np.zeros(len(b_query), bool)
    b_dcg = np.where(before_ok, dcg[np.maximum(before, 0)] if len(rows) else 0.0, 0.0)
    lengths = ki.matrix.lengths
    count = tg.ideal_count
    tail = (count >= 1) & (lengths >= count + 2)
    final = _row_total(dcg, rows, n)
    with np.errstate(all="ignore"):
        query = np.concatenate([b_query, np.flatnonzero(tail)])
        terms = np.concatenate([b_dcg / b_ideal, final[tail] / ideal_total[tail]])
        order = np.argsort(query, kind="stable")  # per query: the boundaries by rank, then the end of the ranking
        total = np.bincount(query[order], weights=terms[order], minlength=n)
        points = np.bincount(query, minlength=n)
        value = total / points  # 0/0 = NaN where no point counts (every gain <= 0), as trec_eval's sum / 0
    return np.where(ki.stats.num_relevant(ki.threshold) > 0, value, 0.0)


def bing(ki: KernelInputs) -> np.ndarray:
    """m_binG.c: over the relevant retrieved, 1 / log2(2 + non-relevant ranked above), summed, divided by R."""
    m = ki.matrix
    rel = ki.relevant(ki.threshold)
    rows, ranks = m.rows[rel], m.ranks[rel]
    so_far = K._position_among(rows, m.num_queries)
    terms = 1.0 / np.log2((3 + ranks - so_far).astype(np.float64))
    total = np.bincount(rows, weights=terms, minlength=m.num_queries)
    return K._safe_div(total, ki.stats.num_relevant(ki.threshold))


def _persistence(ki: KernelInputs) -> float:
    return float(ki.metric.param.get("p", "0.9"))  # m_rbp.c: "double p = 0.9"


def _depth(ki: KernelInputs) -> np.ndarray:
    """Each query's ranks evaluated: its ranking, cut at the metric's k (rbp@k: the first k ranks)."""
    lengths = ki.matrix.lengths
    return lengths if ki.k is None else np.minimum(lengths, ki.k)


def rbp(ki: KernelInputs) -> np.ndarray:
    """m_rbp.c: (1 - p) sum over ranks i of gain x p^(i-1), the gains of the query's table divided by its largest
    when that is above 1 (trec_eval normalises to [0, 1]); at depth k with a cutoff."""
    p = _persistence(ki)
    tg = trec_gains(ki)
    m = ki.matrix
    gains = tg.gains_of(ki)
    scale = tg.table_max[m.rows]
    gains = np.where(scale > 1.0, gains / np.where(scale > 1.0, scale, 1.0), gains)  # (gain - 0) / (max - 0)
    keep = (gains != 0) & K.within(m.rows, m.ranks, ki.k)
    rows, ranks = m.rows[keep], m.ranks[keep]
    powers = _powers(p, int(ranks.max(initial=0)))
    total = np.bincount(rows, weights=gains[keep] * powers[ranks], minlength=m.num_queries)
    return (1.0 - p) * total


def rbp_resid(ki: KernelInputs) -> np.ndarray:
    """m_rbp_resid.c: p^depth + (1 - p) sum of p^(i-1) over the unjudged ranks i, where the ranking has any
    unjudged result in its first k; else 0 (trec_eval's value then, though ranks past the ranking remain)."""
    p = _persistence(ki)
    m = ki.matrix
    depth = _depth(ki)
    judged = K.within(m.rows, m.ranks, ki.k)
    rows, ranks = m.rows[judged], m.ranks[judged]
    unjudged = depth - np.bincount(rows, minlength=m.num_queries)
    powers = _powers(p, int(depth.max(initial=0)))
    total = _sequential_row_sums(powers, depth, rows, ranks)
    out = np.where(unjudged > 0, powers[depth] + (1 - p) * total, 0.0)
    missing = made_up_result(ki) if ki.k is None else None
    if missing is not None and ki.metric.trec_name != "rbp_resid":  # trec_eval's one made-up unjudged result
        out[missing] = 1.0 * p + (1 - p) * (0.0 + 1.0)
    return out


# ----- ERR and nERR ---------------------------------------------------------------------------------------------


def default_max_grade(qrels: Qrels) -> int:
    """ERR's and nERR's ``max_grade`` when the metric does not give one: the largest grade in ``qrels`` (at least
    1), as the card states it."""
    return max(1, int(qrels.columns[2].max(initial=1)))


def _max_grade(ki: KernelInputs) -> int:
    text = ki.metric.param.get("max_grade")
    if text is None:
        return ki.stats.max_grade()
    top = int(text)
    over = ki.stats.grades > top
    if over.any():
        i = int(np.flatnonzero(over)[0])
        query = ki.stats.query_ids[int(ki.stats.query_of[i])] if hasattr(ki.stats, "query_ids") else "?"
        raise InputError(
            f"metric {str(ki.metric)!r}: query {query!r} has a judgement of grade {int(ki.stats.grades[i])}, above "
            f"max_grade={top}: its stopping probability (2^g - 1) / 2^max_grade would exceed 1; raise max_grade "
            "or leave it out (it then defaults to the qrels' largest grade)"
        )
    return top


def _stop_probability(grades: np.ndarray, top: int, rel: int | None) -> np.ndarray:
    """R_g = (2^g - 1) / 2^top for g > 0 (and >= rel), else 0; as 2^(g - top) - 2^-top, which is the same double
    wherever 2^g is finite and has no overflow beyond."""
    earns = grades >= max(1, rel or 1)
    g = grades.astype(np.int64)
    return np.where(earns, np.ldexp(1.0, np.minimum(g, top) - top) - np.ldexp(1.0, -top), 0.0)


def _err(rows: np.ndarray, ranks: np.ndarray, prob: np.ndarray, n: int) -> np.ndarray:
    """sum over cells in rank order of prob x (still looking) / rank, still looking = prod of (1 - prob) above."""
    keep = prob > 0
    rows, ranks, prob = rows[keep], ranks[keep], prob[keep]
    looking = scan(1.0 - prob, rows, n, "mul")
    first = np.ones(len(rows), bool)
    first[1:] = rows[1:] != rows[:-1]
    above = np.where(first, 1.0, np.roll(looking, 1))
    return np.bincount(rows, weights=above * prob / (ranks + 1.0), minlength=n)


def err(ki: KernelInputs) -> np.ndarray:
    """Expected reciprocal rank (Chapelle et al. 2009) of the top k."""
    top = _max_grade(ki)
    m = ki.matrix
    inside = K.within(m.rows, m.ranks, ki.k)
    prob = _stop_probability(m.grades[inside], top, ki.metric.rel)
    return _err(m.rows[inside], m.ranks[inside], prob, m.num_queries)


def _ideal_err(ki: KernelInputs, top: int) -> np.ndarray:
    stats = ki.stats

    def compute() -> np.ndarray:
        prob = _stop_probability(stats.grades, top, ki.metric.rel)
        order = np.lexsort((-prob, stats.query_of))
        query, prob = stats.query_of[order], prob[order]
        rank = K._position_among(query, stats.n) - 1
        inside = K.within(query, rank, ki.k)
        return _err(query[inside], rank[inside], prob[inside], stats.n)

    if isinstance(ki.k, np.ndarray):
        return compute()
    return stats.cached(("err_ideal", top, ki.metric.rel, ki.k), compute)


def nerr(ki: KernelInputs) -> np.ndarray:
    """ERR over the ERR of the ideal ordering of the query's judgements at the same k (0 with no relevant)."""
    top = _max_grade(ki)
    return K._safe_div(err(ki), _ideal_err(ki, top))
