"""The bootstrap and the randomization test draw their random numbers a chunk at a time (O(n) memory): the chunk
size changes neither the stream of draws nor the values."""

from __future__ import annotations

import numpy as np
import pytest

from rag_eval.reports import summary
from rag_eval.statistics import paired as S


@pytest.fixture
def tiny_chunks(monkeypatch):
    monkeypatch.setattr(summary, "CHUNK", 8)  # a row or 4 rows per call at n = 7 and 13: many calls


def test_chunk_rows_bounds_the_draws_held_at_once():
    assert summary.chunk_rows(1_000_000, 1000) == 1  # at a million queries, one resample of indices at a time
    assert summary.chunk_rows(1_000_000, 10000, multiple=4) == 4
    assert summary.chunk_rows(1000, 1000) == 1000  # capped by the resamples asked
    assert summary.chunk_rows(300_000, 10000, multiple=4) == 4 * (summary.CHUNK // 300_000 // 4 or 1)
    assert summary.chunk_rows(0, 5) == 5


@pytest.mark.parametrize("n", [7, 13])
def test_the_chunk_size_changes_no_value(n, monkeypatch):
    diff = np.linspace(-0.3, 0.5, n) ** 3
    values = np.column_stack([diff, np.arange(n) % 3 / 2.0])
    whole = (
        S.randomization_test(np.r_[diff, diff, diff][: 3 * n], permutations=1003, seed=3),
        S.paired_bootstrap_ci(diff, resamples=301, confidence=0.9, seed=4),
        summary.bootstrap_means(values, resamples=301, seed=5),
    )
    monkeypatch.setattr(summary, "CHUNK", 8)
    chunked = (
        S.randomization_test(np.r_[diff, diff, diff][: 3 * n], permutations=1003, seed=3),
        S.paired_bootstrap_ci(diff, resamples=301, confidence=0.9, seed=4),
        summary.bootstrap_means(values, resamples=301, seed=5),
    )
    assert chunked[0] == whole[0]
    assert chunked[1] == whole[1]
    np.testing.assert_allclose(chunked[2], whole[2], rtol=0, atol=1e-15)


def test_the_stream_is_the_one_drawn_in_a_single_call(tiny_chunks):
    # the sign-flip test with its signs drawn by hand in one call, as before the chunks
    diff = np.array([0.2, -0.1, 0.05, 0.3, -0.02, 0.11, 0.07])
    signs = np.random.default_rng(9).integers(0, 2, size=(99, 7), dtype=np.int8).astype(np.float64) * 2 - 1
    hits = np.count_nonzero(np.abs(signs @ diff) / 7 >= abs(diff.mean()) - 1e-12 * 0.3)
    assert S.randomization_test(diff, permutations=99, seed=9) == (hits + 1) / 100  # 2^7 > 99: sampled
    # the bootstrap's indices likewise
    picks = np.random.default_rng(2).integers(0, 7, size=(50, 7))
    np.testing.assert_allclose(
        summary.bootstrap_means(diff[:, None], resamples=50, seed=2)[:, 0], diff[picks].mean(axis=1), atol=1e-15
    )


def test_known_values_stay(tiny_chunks):
    # the values 0.2.0 gave (it drew 1000 and 200 rows per call): drawn a row or 4 rows at a time, the same
    diff = np.array([0.2, -0.1, 0.05, 0.3, -0.02, 0.11, 0.07, 0.0, 0.4, -0.25, 0.13, 0.09, -0.04, 0.01, 0.22, 0.3])
    assert S.randomization_test(diff, permutations=1000, seed=0) == 0.03896103896103896
    low, high = S.paired_bootstrap_ci(diff, resamples=1000, confidence=0.95, seed=0)
    assert (low, high) == (0.014359375000000016, 0.17625)
