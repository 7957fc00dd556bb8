"""How many labels each order needs before a comparison of two systems settles: a replay on cranfield (issue 17,
"Label what matters first"). Not a test (tests/test_impact_order.py runs the same replay and asserts on it); run
from the repository root:

    .venv/bin/python benchmarks/label_order_replay.py [--dataset ../shared/datasets/cranfield] [--all-pairs] \\
        [--shuffled N]

Two real systems, built here in a second (nothing downloads): bm25s's Lucene BM25 (k1 1.5, b 0.75, English
stopwords) over cranfield's 1,400 abstracts, one with Snowball stemming (``stem``) and one without (``nostem``),
the 225 queries, the top 20 of each. They are pooled to depth 20 with :func:`rag_eval.pool`; every pooled item's
grade is hidden and replayed one label at a time: its grade in cranfield's graded qrels (``qrels/test.tsv``, 0..3),
or 0 where cranfield never judged it. Each order is replayed:

- ``depth``: the pool's own order (``strategy="depth"``: query by query, best rank first);
- ``impact``: :func:`rag_eval.ground_truth.ordering.impact_order` (no judge, so no uncertainty).

After every label, each system's per-query nDCG@20 (the harness's default gain, exponential ``2^g - 1``, and
discount ``1 / log2(rank + 1)``; the ideal DCG from the labels given so far, as the harness computes it from the
qrels) over the queries with at least one label (the queries of the qrels so far: a query with labels but no
relevant one scores 0, as the harness's default ``no_relevant="zero"``), the sign of the mean difference
(``stem - nostem``) and whether a two-sided paired t-test (SciPy's ``ttest_rel``, as ``rag_eval.compare(...,
test="t")``) rejects at alpha 0.05. Items not labelled yet are unjudged: non-relevant. Each step updates the one
query labelled (its DCGs, its ideal DCG, the running sums of the differences), so the replay of ~6,000 labels
takes well under a second; tests/test_impact_order.py checks its values against ``rag_eval.evaluate`` and
``rag_eval.compare`` at checkpoints.

Reported per order: the labels needed, the number of labels after which the sign and the significance equal those
under all the labels and stay equal to the end; and the ratio of impact's to depth's. ``--all-pairs`` repeats the
replay for every pair of six BM25 variants whose difference is significant under all labels (the robustness
table of docs/labelling.md), with a third order, ``adaptive`` (:func:`adaptive_order`: an experiment, not served
by the labelling page): the impact divided by the query's ideal DCG so far plus 1, recomputed after each label.
``--shuffled N`` replays depth order with the queries shuffled (seeds 0 to N - 1; each query's items in the pool's
order), to show how much depth order's figure owes to the order of the queries.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import rag_eval
from rag_eval.ground_truth import Pool, PoolItem
from rag_eval.ground_truth.ordering import impact_order

DATASET = Path(__file__).resolve().parent.parent.parent / "shared" / "datasets" / "cranfield"
DEPTH = 20
ALPHA = 0.05
#: the BM25 variants of --all-pairs (bm25s, Lucene BM25): name -> settings; the first two are the measured pair
VARIANTS: dict[str, dict[str, object]] = {
    "stem": {"stem": True},
    "nostem": {"stem": False},
    "stem_k1.2_b0.4": {"stem": True, "k1": 1.2, "b": 0.4},
    "nostem_allwords": {"stem": False, "stopwords": None},
    "stem_b0": {"stem": True, "b": 0.0},
    "stem_b1": {"stem": True, "b": 1.0},
}


# ----- the collection and the systems ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Cranfield:
    doc_ids: list[str]
    texts: list[str]  # each abstract's text (which, as in the original, starts with its title)
    queries: dict[str, str]
    qrels: rag_eval.Qrels


def load(folder: Path = DATASET) -> Cranfield:
    docs = [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines() if line.strip()]
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines() if line.strip()]
    return Cranfield(
        [d["_id"] for d in docs],
        [d["text"] for d in docs],
        {q["_id"]: q["text"] for q in queries},
        rag_eval.Qrels.from_beir(folder / "qrels" / "test.tsv"),
    )


def bm25_run(
    data: Cranfield,
    name: str,
    *,
    stem: bool,
    k1: float = 1.5,
    b: float = 0.75,
    stopwords: str | None = "en",
    k: int = DEPTH,
) -> rag_eval.Run:
    """bm25s's Lucene BM25 over the abstracts: each query's top ``k`` as a Run (ranked in bm25s's order)."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english") if stem else None
    index = bm25s.BM25(k1=k1, b=b, method="lucene")
    index.index(
        bm25s.tokenize(data.texts, stopwords=stopwords, stemmer=stemmer, show_progress=False), show_progress=False
    )
    ids = list(data.queries)
    asked = bm25s.tokenize([data.queries[q] for q in ids], stopwords=stopwords, stemmer=stemmer, show_progress=False)
    found, _ = index.retrieve(asked, k=k, show_progress=False, n_threads=1)
    return rag_eval.Run.from_ranking({q: [data.doc_ids[i] for i in found[n]] for n, q in enumerate(ids)}, name=name)


def hidden_grades(pooled: Pool, qrels: rag_eval.Qrels) -> dict[tuple[str, str], int]:
    """Each pooled item's grade in ``qrels``, 0 where they never judged it: the labels the replay gives back."""
    judged = qrels.to_dict()
    return {(i.query_id, i.doc_id): judged.get(i.query_id, {}).get(i.doc_id, 0) for i in pooled.items}


# ----- the replay -----------------------------------------------------------------------------------------------


@dataclass
class Replay:
    """One order replayed. Arrays hold the state after each label (index ``i``: after ``i + 1`` labels)."""

    order: str
    items: list[PoolItem]
    mean_diff: np.ndarray  # mean over the labelled queries of nDCG@k(a) - nDCG@k(b)
    p: np.ndarray  # the paired t-test's two-sided p (NaN under 2 queries)
    queries: np.ndarray  # queries with at least one label
    alpha: float
    snapshots: dict[int, dict[str, tuple[float, float]]] = field(default_factory=dict)  # n -> {query: (a, b)}

    @property
    def labels(self) -> int:
        return len(self.items)

    @property
    def sign(self) -> np.ndarray:
        return np.sign(np.where(np.abs(self.mean_diff) < 1e-12, 0.0, self.mean_diff))

    @property
    def significant(self) -> np.ndarray:
        return np.nan_to_num(self.p, nan=1.0) < self.alpha

    @property
    def final(self) -> tuple[int, bool]:
        """The sign of the mean difference and the significance under all the labels."""
        return int(self.sign[-1]), bool(self.significant[-1])

    @property
    def needed(self) -> int:
        """The number of labels after which sign and significance equal the final ones, and stay equal."""
        matched = (self.sign == self.sign[-1]) & (self.significant == self.significant[-1])
        off = np.flatnonzero(~matched)
        return 1 if len(off) == 0 else int(off[-1]) + 2


def replay(
    items: Sequence[PoolItem],
    grades: Mapping[tuple[str, str], int],
    systems: tuple[str, str],
    *,
    order: str,
    k: int = DEPTH,
    alpha: float = ALPHA,
    snapshots: Sequence[int] = (),
) -> Replay:
    """Label ``items`` in the order given, one at a time, with ``grades``; after each, the paired comparison of the
    two ``systems``' nDCG@k over the queries labelled so far (see the module doc). ``snapshots``: label counts
    after which to keep every labelled query's (nDCG a, nDCG b), for checking against the harness."""
    from scipy import stats

    a, b = systems
    keep = set(snapshots)
    dcg: dict[str, list[float]] = {}  # query -> [DCG of a, DCG of b]
    gains: dict[str, list[float]] = {}  # query -> the positive gains labelled, best first (for the ideal DCG)
    diff: dict[str, float] = {}
    total = squares = 0.0
    n = len(items)
    means, ts, counts = np.empty(n), np.empty(n), np.empty(n, dtype=np.int64)
    kept: dict[int, dict[str, tuple[float, float]]] = {}
    for step, item in enumerate(items):
        q = item.query_id
        if q not in diff:
            diff[q] = 0.0
            dcg[q] = [0.0, 0.0]
            gains[q] = []
        grade = grades[(item.query_id, item.doc_id)]
        if grade > 0:
            gain = 2.0**grade - 1.0  # the harness's default gain ("exp")
            for s, system in enumerate((a, b)):
                rank = item.ranks.get(system)
                if rank is not None and rank <= k:
                    dcg[q][s] += gain / math.log2(rank + 1.0)
            best = gains[q]
            best.append(gain)
            best.sort(reverse=True)
            ideal = sum(g / math.log2(r + 2.0) for r, g in enumerate(best[:k]))
            old, new = diff[q], (dcg[q][0] - dcg[q][1]) / ideal
            total += new - old
            squares += new * new - old * old
            diff[q] = new
        m = len(diff)
        mean = total / m
        var = (squares - m * mean * mean) / (m - 1) if m > 1 else math.nan
        means[step], counts[step] = mean, m
        if m < 2:
            ts[step] = math.nan
        elif var <= 1e-24:  # every difference alike: p = 1 with no difference, else 0 (statistics.t_test's rule)
            ts[step] = 0.0 if abs(mean) < 1e-12 else math.inf
        else:
            ts[step] = mean / math.sqrt(var / m)
        if step + 1 in keep:
            kept[step + 1] = {
                query: (
                    dcg[query][0] / _ideal(gains[query], k) if gains[query] else 0.0,
                    dcg[query][1] / _ideal(gains[query], k) if gains[query] else 0.0,
                )
                for query in diff
            }
    df = np.maximum(counts - 1, 1)
    p = np.where(np.isnan(ts), np.nan, 2.0 * stats.t.sf(np.abs(np.nan_to_num(ts, nan=0.0)), df))
    return Replay(order, list(items), means, p, counts, alpha, kept)


def _ideal(best: list[float], k: int) -> float:
    return sum(g / math.log2(r + 2.0) for r, g in enumerate(best[:k]))


def adaptive_order(
    pooled: Pool, grades: Mapping[tuple[str, str], int], systems: tuple[str, str], *, k: int = DEPTH, c: float = 1.0
) -> list[PoolItem]:
    """The order an assessor would be served if, after each label, the next item were the one of highest
    ``impact(d) / (IDCG_q + c)``: :func:`impact_order`'s weight, divided by the ideal DCG@k of the item's query
    under the labels given so far (plus ``c``, so that a query without a relevant label yet is not infinitely
    urgent). A grade moves a query's nDCG difference by ``gain * (w_a - w_b) / IDCG_q``, so this puts first the
    items of queries whose scale is still small or unknown. Ideal DCGs only grow, so priorities only fall: a lazy
    heap (a stale entry is re-pushed with its new priority) gives the exact order. Ties: the impact order's."""
    import heapq

    a, b = systems
    start = impact_order(pooled, systems=[a, b], depth=k).items  # its position breaks ties
    impact = [abs(_discount(i.ranks.get(a), k) - _discount(i.ranks.get(b), k)) for i in start]
    heap = [(-impact[n] / c, n, 0) for n in range(len(start))]
    heapq.heapify(heap)
    version: dict[str, int] = {}
    gains: dict[str, list[float]] = {}
    ideal: dict[str, float] = {}
    out: list[PoolItem] = []
    while heap:
        _, n, seen = heapq.heappop(heap)
        item = start[n]
        q = item.query_id
        if seen != version.get(q, 0):  # its query's ideal DCG grew since: push it back at its lower priority
            heapq.heappush(heap, (-impact[n] / (ideal[q] + c), n, version[q]))
            continue
        out.append(item)
        grade = grades[(q, item.doc_id)]
        if grade > 0:
            gains.setdefault(q, []).append(2.0**grade - 1.0)
            gains[q].sort(reverse=True)
            ideal[q] = _ideal(gains[q], k)
            version[q] = version.get(q, 0) + 1
    return out


def _discount(rank: int | None, k: int) -> float:
    return 0.0 if rank is None or rank > k else 1.0 / math.log2(1.0 + rank)


def qrels_after(items: Sequence[PoolItem], grades: Mapping[tuple[str, str], int], n: int) -> rag_eval.Qrels:
    """The qrels that the first ``n`` labels of ``items`` make."""
    out: dict[str, dict[str, int]] = {}
    for item in items[:n]:
        out.setdefault(item.query_id, {})[item.doc_id] = grades[(item.query_id, item.doc_id)]
    return rag_eval.Qrels.from_dict(out)


# ----- the measurement ------------------------------------------------------------------------------------------


@dataclass
class Measured:
    pair: tuple[str, str]
    pooled: Pool
    means: tuple[float, float]  # each system's mean nDCG@20 under all the labels
    depth: Replay
    impact: Replay
    adaptive: Replay | None = None

    @property
    def ratio(self) -> float:
        return self.impact.needed / self.depth.needed


def measure(
    data: Cranfield, runs: Mapping[str, rag_eval.Run], pair: tuple[str, str], *, adaptive: bool = False
) -> Measured:
    """Pool the pair to depth 20 and replay the hidden grades in depth order and in impact order (and, with
    ``adaptive``, in :func:`adaptive_order`)."""
    a, b = pair
    pooled = rag_eval.pool({a: runs[a], b: runs[b]}, depth=DEPTH, strategy="depth")
    grades = hidden_grades(pooled, data.qrels)
    by_depth = replay(pooled.items, grades, pair, order="depth")
    by_impact = replay(impact_order(pooled).items, grades, pair, order="impact")
    last = replay(pooled.items, grades, pair, order="depth", snapshots=[len(pooled)]).snapshots[len(pooled)]
    means = (float(np.mean([v[0] for v in last.values()])), float(np.mean([v[1] for v in last.values()])))
    by_adaptive = None
    if adaptive:
        by_adaptive = replay(adaptive_order(pooled, grades, pair), grades, pair, order="adaptive")
    return Measured(pair, pooled, means, by_depth, by_impact, by_adaptive)


def describe(m: Measured) -> str:
    a, b = m.pair
    _, significant = m.depth.final
    lines = [
        f"{a} vs {b}: {len(m.pooled)} pooled items over {len(m.pooled.query_ids)} queries; under all labels "
        f"nDCG@20 {m.means[0]:.4f} vs {m.means[1]:.4f} (diff {m.means[0] - m.means[1]:+.4f}), paired t p = "
        f"{m.depth.p[-1]:.3g} ({'significant' if significant else 'not significant'} at {ALPHA})",
    ]
    for r in (m.depth, m.impact) if m.adaptive is None else (m.depth, m.impact, m.adaptive):
        lines.append(
            f"  {r.order:8s} order: settled after {r.needed:5d} labels ({r.needed / r.labels:6.1%} of the pool)"
        )
    lines.append(f"  impact / depth = {m.ratio:.3f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--all-pairs", action="store_true", help="every significant pair of six BM25 variants")
    parser.add_argument("--shuffled", type=int, default=0, metavar="N", help="depth order, queries shuffled N ways")
    args = parser.parse_args()
    started = time.perf_counter()
    data = load(args.dataset)
    names = list(VARIANTS) if args.all_pairs else ["stem", "nostem"]
    runs = {name: bm25_run(data, name, **VARIANTS[name]) for name in names}  # type: ignore[arg-type]
    measured = measure(data, runs, ("stem", "nostem"), adaptive=args.all_pairs)
    print(describe(measured))
    if args.shuffled:
        grades = hidden_grades(measured.pooled, data.qrels)
        by_query: dict[str, list[PoolItem]] = {}
        for item in measured.pooled.items:
            by_query.setdefault(item.query_id, []).append(item)
        queries = list(by_query)
        needed = []
        for seed in range(args.shuffled):
            shuffled = np.random.default_rng(seed).permutation(len(queries))
            items = [item for i in shuffled for item in by_query[queries[i]]]
            needed.append(replay(items, grades, ("stem", "nostem"), order="depth").needed)
        print(
            f"  depth order, queries shuffled (seeds 0..{args.shuffled - 1}): {min(needed)} to {max(needed)} "
            f"labels, median {float(np.median(needed)):.1f}"
        )
    if args.all_pairs:
        print("\nevery pair of the six variants whose difference is significant under all labels:")
        print(f"{'pair':32s} {'items':>6s} {'p':>8s} {'depth':>6s} {'impact':>6s} {'ratio':>6s} {'adaptive':>8s} ratio")
        for pair in itertools.combinations(names, 2):
            m = measure(data, runs, pair, adaptive=True)
            if not m.depth.final[1]:
                continue
            assert m.adaptive is not None
            print(
                f"{' vs '.join(pair):32s} {len(m.pooled):6d} {m.depth.p[-1]:8.2g} {m.depth.needed:6d} "
                f"{m.impact.needed:6d} {m.ratio:6.2f} {m.adaptive.needed:8d} {m.adaptive.needed / m.depth.needed:5.2f}"
            )
    print(f"({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
