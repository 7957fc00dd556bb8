"""Per-query statistics of the judgements (R, judged non-relevant, ideal gains) for the counted queries.

Computed on demand and cached for one evaluation of one run. Kernel modules may add methods here (each cached
under its own key), so that a statistic of the qrels is computed once whatever metrics need it.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import repeat
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..data.qrels import Qrels
from . import _kernels as K
from .conventions import Conventions

if TYPE_CHECKING:
    from ..data.run import Run

__all__ = ["QrelsStats"]


T = TypeVar("T")


class QrelsStats:
    """Per-query statistics of the judgements for the counted queries, computed on demand and cached."""

    def __init__(
        self,
        qrels: Qrels,
        query_ids: list[str],
        conventions: Conventions,
        rows: np.ndarray | None = None,
        run_rows: tuple[Run, np.ndarray] | None = None,
    ) -> None:
        """``rows``: each query's row in the qrels' columns, and ``run_rows``: a run with the row of each of its
        queries (-1: not one of ``query_ids``), where the caller has them (:func:`~.engine.account_queries`)."""
        _, offsets, grades = qrels.columns
        if rows is None:
            rows = qrels.rows_of(query_ids)
            if (rows < 0).any():
                raise KeyError(query_ids[int(np.flatnonzero(rows < 0)[0])])
        lengths = offsets[rows + 1] - offsets[rows]
        self.n = len(query_ids)
        self.query_ids = query_ids
        # every query, in order: the qrels' own columns (read-only), not copies of them
        self._whole = len(rows) == len(offsets) - 1 and np.array_equal(rows, np.arange(len(rows)))
        if self._whole:
            self.grades, self.query_of = grades, qrels._judgement_rows
        else:
            shift = offsets[rows] - (np.cumsum(lengths) - lengths)
            self.grades = grades[np.repeat(shift, lengths) + np.arange(int(lengths.sum()))]
            self.query_of = np.repeat(np.arange(self.n), lengths)
        if conventions.negative_grades == "unjudged":  # in the pool but not judged: not counted anywhere
            judged = self.grades >= 0
            if not judged.all():
                self.grades, self.query_of = self.grades[judged], self.query_of[judged]
        self._arrays: dict[object, np.ndarray] = {}  # per-query statistics, computed once per key
        self._best: dict[object, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # K.best_gains per gain rule
        self._max_grade: int | None = None
        self._cache: dict[object, Any] = {}  # what kernel modules derive themselves (see cached)
        self._qrels = qrels
        self._run_rows = run_rows

    def num_relevant(self, t: int) -> np.ndarray:
        key = ("R", t)
        if key not in self._arrays and self._whole and t > 0:  # a negative grade counts below any positive t
            self._arrays[key] = self._qrels._num_relevant(t)
        if key not in self._arrays:
            self._arrays[key] = np.bincount(self.query_of, weights=self.grades >= t, minlength=self.n).astype(np.int64)
        return self._arrays[key]

    def judged_nonrelevant(self, t: int) -> np.ndarray:
        key = ("N", t)
        if key not in self._arrays:
            self._arrays[key] = np.bincount(self.query_of, weights=self.grades < t, minlength=self.n).astype(np.int64)
        return self._arrays[key]

    def returned(self, run: Run) -> np.ndarray:
        """Per counted query, how many results ``run`` holds for it as given, before any depth cut or condensing
        (0 for a query the run has no line for: trec_eval -c's missing query)."""
        key = ("returned", id(run))
        if key not in self._arrays:
            if self._run_rows is not None and self._run_rows[0] is run:
                rows = self._run_rows[1]
            else:
                row_of = dict(zip(self.query_ids, range(self.n), strict=True))
                ids = run.query_ids
                rows = np.fromiter(map(row_of.get, ids, repeat(-1)), np.int64, len(ids))
            out = np.zeros(self.n, np.int64)
            inside = rows >= 0
            out[rows[inside]] = np.diff(run.offsets)[inside]
            self._arrays[key] = out
        return self._arrays[key]

    def gain_exponents(self, rule: str, gains: dict[int, float] | None, rel: int | None) -> np.ndarray:
        """Per query, the binary exponent of its largest judged gain: its gains are scaled by ``2^-e`` before
        any sum (exact, and nDCG does not change; see :func:`~rag_eval.metrics._kernels.gain_exponents`)."""
        gain_key = (rule, tuple(sorted(gains.items())) if gains else None, rel)
        if ("exponents", gain_key) not in self._arrays:
            possible = self._grade_span()  # the gain of every grade in the qrels' span, where it is narrow
            if possible is not None and K.scale_free(np.abs(K.gain_of(possible, rule, gains, rel))):
                self._arrays[("exponents", gain_key)] = np.zeros(self.n, np.int64)  # the judged gains: when asked
            else:
                judged = K.gain_of(self.grades, rule, gains, rel)
                exponents = K.gain_exponents(self.query_of, judged, self.n)
                self._arrays[("exponents", gain_key)] = exponents
                self._arrays[("scaled", gain_key)] = K.scale_gains(judged, self.query_of, exponents)
        return self._arrays[("exponents", gain_key)]

    def _grade_span(self) -> np.ndarray | None:
        """Every integer from the smallest judged grade to the largest, or None when that is over 4,096 values."""
        if not len(self.grades):
            return None
        lo, hi = int(self.grades.min()), int(self.grades.max())
        return np.arange(lo, hi + 1) if hi - lo < 4096 else None

    def _scaled_gains(self, rule: str, gains: dict[int, float] | None, rel: int | None) -> np.ndarray:
        gain_key = (rule, tuple(sorted(gains.items())) if gains else None, rel)
        if ("scaled", gain_key) not in self._arrays:  # unscaled (every exponent 0): made where first needed
            self._arrays[("scaled", gain_key)] = K.gain_of(self.grades, rule, gains, rel)
        return self._arrays[("scaled", gain_key)]

    def ideal(self, rule: str, gains: dict[int, float] | None, rel: int | None, k: K.Cutoff) -> np.ndarray:
        """Ideal DCG per query at cutoff k, of the scaled gains (see :meth:`gain_exponents`)."""
        gain_key = (rule, tuple(sorted(gains.items())) if gains else None, rel)
        if gain_key not in self._best:  # every query's positive gains, best first: once per gain rule
            scaled = self.gain_exponents(rule, gains, rel).any()
            best = None if scaled else K.best_gains_by_grade(self.query_of, self.grades, self.n, rule, gains, rel)
            if best is None:
                best = K.best_gains(self.query_of, self._scaled_gains(rule, gains, rel), self.n)
            self._best[gain_key] = best
        if isinstance(k, np.ndarray):
            return K.ideal_dcg(*self._best[gain_key], self.n, k)
        if ("ideal", gain_key, k) not in self._arrays:
            query, ranked_gains, rank = self._best[gain_key]
            self._arrays[("ideal", gain_key, k)] = K.ideal_dcg(query, ranked_gains, rank, self.n, k)
        return self._arrays[("ideal", gain_key, k)]

    def cached(self, key: object, compute: Callable[[], T]) -> T:
        """``compute()``, once per key for this evaluation: for statistics a kernel module derives itself (the
        key should start with the module's or family's name)."""
        if key not in self._cache:
            self._cache[key] = compute()
        value: T = self._cache[key]
        return value

    def max_grade(self) -> int:
        """The largest grade anywhere in the qrels (every query, counted or not), at least 1: ERR's default
        ``max_grade``, so that it depends on the qrels alone, not on which queries a run leaves out."""
        if self._max_grade is None:
            self._max_grade = max(1, int(self._qrels.columns[2].max(initial=1)))
        return self._max_grade
