"""Ranking by score: the row-wise sort and search helpers against plain NumPy, and ties at the extremes."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

import rag_eval
from rag_eval.data.ranking import ranked_permutation, score_order, search_rows, sort_rows, strictly_decreasing_scores


def _ragged(seed: int):
    rng = np.random.default_rng(seed)
    lengths = rng.choice([0, 1, 2, 3, 17, 64, 300], size=40)
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    scores = np.round(rng.normal(size=int(offsets[-1])), 1)  # many ties
    return offsets, scores


@pytest.mark.parametrize("seed", range(4))
def test_score_order_sorts_each_query_descending(seed):
    offsets, scores = _ragged(seed)
    perm = score_order(offsets, scores)
    for a, b in pairwise(offsets):
        assert sorted(perm[a:b].tolist()) == list(range(a, b))  # stays within its query
        assert (np.diff(scores[perm[a:b]]) <= 0).all()


@pytest.mark.parametrize("seed", range(4))
def test_sort_rows_and_search_rows_match_numpy_per_row(seed):
    offsets, scores = _ragged(seed)
    ordered = sort_rows(offsets, scores.copy())
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(offsets) - 1, size=200)
    needles = np.round(rng.normal(size=200), 1)
    for side in ("left", "right"):
        found = search_rows(ordered, offsets[rows], offsets[rows + 1], needles, side)
        for r, needle, f in zip(rows, needles, found):
            segment = np.sort(scores[offsets[r] : offsets[r + 1]])
            assert f - offsets[r] == np.searchsorted(segment, needle, side=side)


def test_ranked_permutation_breaks_ties_by_each_rule():
    offsets = np.array([0, 4])
    scores = np.array([1.0, 2.0, 1.0, 1.0])
    docs = np.array(["d10", "x", "d9", "d2"], dtype=object)
    by = {
        rule: docs[ranked_permutation(offsets, scores, docs, rule)].tolist()
        for rule in ("trec_eval", "doc_id", "input_order")
    }
    assert by == {
        "trec_eval": ["x", "d9", "d2", "d10"],  # strings: "d9" > "d2" > "d10"
        "doc_id": ["x", "d10", "d2", "d9"],
        "input_order": ["x", "d10", "d9", "d2"],
    }


@pytest.mark.parametrize(("rule", "p_at_2"), [("trec_eval", 0.0), ("doc_id", 0.5), ("input_order", 0.5)])
def test_ties_at_minus_infinity_follow_the_tie_rule(rule, p_at_2):
    with pytest.warns(UserWarning, match="2 infinite score"):
        run = rag_eval.Run.from_scores({"q": {"a": float("-inf"), "b": float("-inf"), "c": 1.0}})
    report = rag_eval.evaluate({"q": {"a": 1}}, run, ["P@2"], conventions=rag_eval.Conventions(ties=rule))
    assert report.values("run", "P@2")["q"] == p_at_2


def test_exported_scores_strictly_decrease_and_keep_their_values():
    offsets = np.array([0, 3, 6, 8])
    ranked = np.array([2.0, 2.0, 1.0, 0.5, 0.7, 0.1, 0.0, 0.0])  # query 1 rises: not an order by score
    out = strictly_decreasing_scores(offsets, ranked)
    for a, b in pairwise(offsets):
        assert (np.diff(out[a:b]) < 0).all()
    assert out[0] == 2.0 and abs(out[1] - 2.0) < 1e-15 and out[2] == 1.0
    assert out[3:6].tolist() == [3.0, 2.0, 1.0]
    assert out[6] == 0.0 and out[7] < 0.0


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_tied_judged_results_are_placed_the_same_in_any_chunking(monkeypatch, chunk):
    from rag_eval.metrics import _grades as grades

    rng = np.random.default_rng(11)
    scores = {f"q{q}": {f"d{d}": float(rng.integers(0, 4)) for d in range(int(rng.integers(1, 30)))} for q in range(25)}
    qrels = {q: {f"d{d}": int(rng.integers(0, 3)) for d in range(0, 30, 2)} for q in scores}
    run = rag_eval.Run.from_scores(scores)
    expected = rag_eval.evaluate(qrels, run, ["ap", "ndcg@5", "mrr"], conventions="trec_eval").per_query
    monkeypatch.setattr(grades, "TIE_CHUNK", chunk)
    got = rag_eval.evaluate(qrels, run, ["ap", "ndcg@5", "mrr"], conventions="trec_eval").per_query
    assert got.equals(expected)
    import pytrec_eval

    ours = rag_eval.evaluate(qrels, run, ["ap"], conventions="trec_eval").values("run", "ap")
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"map"}).evaluate(scores)
    assert all(abs(ours[q] - theirs[q]["map"]) < 1e-12 for q in theirs)


def test_grade_matrix_holds_the_grades_in_ranked_order():
    from rag_eval.metrics._grades import UNJUDGED, build_grade_matrix

    run = rag_eval.Run.from_scores({"q1": {"a": 1.0, "b": 3.0, "c": 2.0, "x": 2.0}, "q2": {"a": 5.0}})
    qrels = rag_eval.Qrels.from_dict({"q1": {"a": 2, "b": 0, "c": 1}, "q2": {"z": 1}, "q3": {"a": 1}})
    matrix = build_grade_matrix(run, qrels, ["q1", "q2", "q3"], rag_eval.Conventions())
    # q1 by score: b (3), then the tie x/c broken by doc id descending: x, c; then a
    assert matrix.dense().tolist() == [[0, UNJUDGED, 1, 2], [UNJUDGED] * 4, [UNJUDGED] * 4]
    assert matrix.lengths.tolist() == [4, 1, 0]
    condensed = build_grade_matrix(run, qrels, ["q1", "q2", "q3"], rag_eval.Conventions(unjudged="remove", max_depth=3))
    assert condensed.dense().tolist() == [[0, 1], [UNJUDGED] * 2, [UNJUDGED] * 2]
    assert condensed.lengths.tolist() == [2, 0, 0]
