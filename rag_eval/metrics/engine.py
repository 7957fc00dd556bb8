"""The metric engine: which queries count, then every requested metric of one run from its grade matrix."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..data.qrels import Qrels
from ..data.run import Run
from . import kernels as K
from .conventions import Conventions
from .grades import GradeMatrix, build_grade_matrix
from .grammar import Metric, gains_map


@dataclass
class QueryAccount:
    """Which queries a run is measured on, and the ones left out, by reason."""

    counted: list[str]
    left_out: dict[str, list[str]] = field(default_factory=dict)  # reason -> query ids (sorted)


@dataclass
class RunValues:
    """Per-query values of every metric for one run, aligned with ``account.counted``."""

    account: QueryAccount
    values: dict[Metric, np.ndarray]


REASON_NOT_IN_QRELS = "in the run but not in the qrels"
REASON_MISSING = "in the qrels but not in the run (conventions.missing_run='skip')"
REASON_NO_RELEVANT = "no relevant judgement (conventions.no_relevant='skip')"


def account_queries(qrels: Qrels, run: Run, conventions: Conventions) -> QueryAccount:
    """Decide which queries are measured: those in the qrels, less the ones the conventions leave out.

    Queries are listed in string order (as trec_eval prints them).
    """
    in_run = set(run.query_ids)
    left: dict[str, list[str]] = {}
    not_judged = sorted(in_run.difference(qrels.query_ids))
    if not_judged:
        left[REASON_NOT_IN_QRELS] = not_judged
    candidates = sorted(qrels.query_ids)
    if conventions.missing_run == "skip":
        missing = [q for q in candidates if q not in in_run]
        if missing:
            left[REASON_MISSING] = missing
            candidates = [q for q in candidates if q in in_run]
    if conventions.no_relevant == "skip":
        t = conventions.relevance_threshold
        judgements = qrels.judgements
        empty = [q for q in candidates if not any(g >= t for g in judgements[q].values())]
        if empty:
            left[REASON_NO_RELEVANT] = empty
            dropped = set(empty)
            candidates = [q for q in candidates if q not in dropped]
    return QueryAccount(candidates, left)


def evaluate_run(qrels: Qrels, run: Run, metrics: list[Metric], conventions: Conventions) -> RunValues:
    """Every metric in ``metrics`` for every counted query of ``run``."""
    account = account_queries(qrels, run, conventions)
    matrix = build_grade_matrix(run, qrels, account.counted, conventions)
    stats = _QrelsStats(qrels, account.counted, conventions)
    values = {m: np.zeros(len(account.counted)) for m in metrics}
    for block in matrix.blocks:
        _compute_block(block, metrics, conventions, stats, values)
    return RunValues(account, values)


class _QrelsStats:
    """Per-query statistics of the judgements for the counted queries, computed on demand and cached."""

    def __init__(self, qrels: Qrels, query_ids: list[str], conventions: Conventions) -> None:
        all_ids, offsets, grades = qrels.columns
        where = {q: i for i, q in enumerate(all_ids)}
        rows = np.fromiter((where[q] for q in query_ids), np.int64, len(query_ids))
        lengths = offsets[rows + 1] - offsets[rows]
        shift = offsets[rows] - (np.cumsum(lengths) - lengths)
        entries = np.repeat(shift, lengths) + np.arange(int(lengths.sum()))
        self.n = len(query_ids)
        self.grades = grades[entries]
        self.query_of = np.repeat(np.arange(self.n), lengths)
        self.unjudged_negatives = conventions.negative_grades == "unjudged"
        self._cache: dict[object, np.ndarray] = {}

    def num_relevant(self, t: int) -> np.ndarray:
        key = ("R", t)
        if key not in self._cache:
            self._cache[key] = np.bincount(self.query_of, weights=self.grades >= t, minlength=self.n).astype(np.int64)
        return self._cache[key]

    def judged_nonrelevant(self, t: int) -> np.ndarray:
        key = ("N", t)
        if key not in self._cache:
            nonrel = self.grades < t
            if self.unjudged_negatives:
                nonrel &= self.grades >= 0
            self._cache[key] = np.bincount(self.query_of, weights=nonrel, minlength=self.n).astype(np.int64)
        return self._cache[key]

    def gain_table(self, rule: str, gains: dict[int, float] | None, rel: int | None) -> tuple[np.ndarray, int]:
        key = ("table", rule, tuple(sorted(gains.items())) if gains else None, rel)
        if key not in self._cache:
            low = int(min(self.grades.min(initial=0), 0))
            high = int(max(self.grades.max(initial=0), 0))
            self._cache[key] = K.gain_table(low, high, rule, gains, rel)
        return self._cache[key]

    def ideal(self, rule: str, gains: dict[int, float] | None, rel: int | None, k: int | None) -> np.ndarray:
        key = ("ideal", rule, tuple(sorted(gains.items())) if gains else None, rel, k)
        if key not in self._cache:
            table, offset = self.gain_table(rule, gains, rel)
            judged_gains = K.lookup_gains(self.grades, table, offset)
            if self.unjudged_negatives:
                judged_gains = np.where(self.grades < 0, 0.0, judged_gains)
            self._cache[key] = K.ideal_dcg(self.query_of, judged_gains, self.n, [k])[k]
        return self._cache[key]


def _compute_block(block, metrics: list[Metric], conv: Conventions, stats: _QrelsStats, out: dict) -> None:
    G, rows = block.grades, block.rows
    rel_cache: dict[int, np.ndarray] = {}
    gains_cache: dict[object, np.ndarray] = {}

    def rel(t: int) -> np.ndarray:
        if t not in rel_cache:
            rel_cache[t] = G >= t
        return rel_cache[t]

    for m in metrics:
        t = m.rel or conv.relevance_threshold
        k = m.k
        fam = m.family
        if fam == "precision":
            v = K.precision(rel(t), k)
        elif fam == "recall":
            v = K.recall(rel(t), k, stats.num_relevant(t)[rows])
        elif fam == "hit":
            v = K.hit(rel(t), k)
        elif fam == "mrr":
            v = K.reciprocal_rank(rel(t), k)
        elif fam == "ap":
            v = K.average_precision(rel(t), k, stats.num_relevant(t)[rows])
        elif fam == "r_precision":
            v = K.r_precision(rel(t), stats.num_relevant(t)[rows])
        elif fam == "bpref":
            v = K.bpref(G, t, stats.num_relevant(t)[rows], stats.judged_nonrelevant(t)[rows])
        elif fam == "ndcg":
            rule = m.param.get("gain", conv.gain)
            gmap = gains_map(m)
            key = (rule, tuple(sorted(gmap.items())) if gmap else None, m.rel)
            if key not in gains_cache:
                table, offset = stats.gain_table(rule, gmap, m.rel)
                gains_cache[key] = K.lookup_gains(G, table, offset)
            v = K.ndcg(gains_cache[key], k, stats.ideal(rule, gmap, m.rel, k)[rows])
        elif fam == "judged":
            v = K.judged(G, k, block.lengths)
        elif fam == "recall_ceiling":
            v = K.recall_ceiling(stats.num_relevant(t)[rows], k)
        elif fam == "num_rel":
            v = stats.num_relevant(t)[rows].astype(np.float64)
        elif fam == "num_ret":
            v = block.lengths.astype(np.float64)
        elif fam == "num_rel_ret":
            v = rel(t).sum(axis=1).astype(np.float64)
        else:  # pragma: no cover - the grammar admits only the families above
            raise AssertionError(fam)
        out[m][rows] = v
