"""Properties every metric must have, on small generated qrels and runs (hypothesis).

Ids come from a small alphabet so that runs and judgements overlap, grades run from -1 to 3, and scores take
three values so that ties are common. Queries may be judged only, retrieved only, or both.
"""

from __future__ import annotations

import copy
import warnings

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import rag_eval
from rag_eval.errors import DuplicateResult
from rag_eval.metrics import PRESETS

from . import strategies
from .strategies import CONVENTIONS, COUNTS, DOCS, rankings, unique_rankings

SETTINGS = settings(max_examples=60, deadline=None)
# random qrels and runs often share no query: rightly warned (LowQueryOverlap, tested in test_bad_input_systematic)
pytestmark = pytest.mark.filterwarnings("ignore::rag_eval.errors.LowQueryOverlap")

QUERIES = ["q1", "q2", "q3"]
METRICS = [
    "recall@1",
    "recall@3",
    "precision@1",
    "precision@3",
    "P(rel=2)@3",
    "hit@2",
    "mrr",
    "mrr@2",
    "ndcg",
    "ndcg@3",
    "ndcg(gain=linear)@2",
    "ndcg(rel=2)",
    "ndcg(gains=1:3;2:9)@3",
    "ap",
    "ap@3",
    "r_precision",
    "bpref",
    "judged@3",
    "recall_ceiling@2",
    "num_rel",
    "num_ret",
    "num_rel_ret",
]
qrels_dicts = strategies.qrels_dicts(QUERIES)
score_dicts = strategies.score_dicts(QUERIES, [0.0, 0.5, 1.0])


def _values(report: rag_eval.Report, run: str = "run") -> dict[tuple[str, str], float]:
    frame = report.per_query
    frame = frame[frame["run"] == run]
    # NaN (judged@k of an empty top k is 0/0) as None, so that equal reports compare equal
    return {
        (q, m): (None if v != v else float(v)) for q, m, v in zip(frame["query_id"], frame["metric"], frame["value"])
    }


def _ranked(scores: dict[str, float]) -> list[str]:
    """trec_eval's order: score descending, ties by doc id descending."""
    return sorted(scores, key=lambda d: (scores[d], d), reverse=True)


@SETTINGS
@given(qrels=qrels_dicts, scores=score_dicts, conventions=st.sampled_from(CONVENTIONS))
# four tied grade-2 documents in the ideal order: DCG and ideal DCG summed in different orders once gave
# nDCG = 1.0000000000000002
@example(
    qrels={"q1": {"a": 2, "b": 2, "c": 2, "d10": 2}},
    scores={"q1": {"a": 0.0, "b": 0.0, "c": 0.0, "d10": 0.0}},
    conventions=PRESETS["default"],
)
def test_every_metric_lies_in_0_1(qrels, scores, conventions):
    report = rag_eval.evaluate(qrels, rag_eval.Run.from_scores(scores), METRICS, conventions=conventions)
    values = _values(report)
    assert {m for _, m in values} <= {str(rag_eval.parse_metric(m)) for m in METRICS}
    for (qid, metric), value in values.items():
        if metric in COUNTS:
            assert value >= 0 and value == int(value), (qid, metric, value)
        else:
            if value is None:  # 0/0: only judged@k of an empty top k
                assert metric.startswith("judged@"), (qid, metric)
                continue
            assert 0.0 <= value <= 1.0, (qid, metric, value)


@SETTINGS
@given(qrels=qrels_dicts, conventions=st.sampled_from(CONVENTIONS[:2]))
def test_ideal_order_has_ndcg_1(qrels, conventions):
    # every judged doc, best grade first (grade-0 and negative ones last): the ideal ranking
    ideal = {q: sorted(judged, key=lambda d: -judged[d]) for q, judged in qrels.items()}
    # a gains= map that keeps the grades' order (else the ideal order is by gain, not by grade)
    metrics = ["ndcg", "ndcg@1", "ndcg@3", "ndcg(gain=linear)@2", "ndcg(gain=exp)@5", "ndcg(gains=1:0.5;2:9;3:20)"]
    report = rag_eval.evaluate(qrels, rag_eval.Run.from_ranking(ideal), metrics, conventions=conventions)
    values = _values(report)
    for qid, judged in qrels.items():
        for metric in metrics:
            value = values[(qid, str(rag_eval.parse_metric(metric)))]
            if max(judged.values()) > 0:
                assert value == pytest.approx(1.0, abs=1e-12), (qid, metric)
            else:  # no gain anywhere: the ideal DCG is 0 and the query scores 0
                assert value == 0.0, (qid, metric)


@SETTINGS
@given(qrels=qrels_dicts, scores=score_dicts, conventions=st.sampled_from(CONVENTIONS))
def test_recall_grows_with_k_up_to_its_ceiling(qrels, scores, conventions):
    ks = range(1, len(DOCS) + 2)
    metrics = [f"recall@{k}" for k in ks] + [f"recall_ceiling@{k}" for k in ks]
    values = _values(rag_eval.evaluate(qrels, rag_eval.Run.from_scores(scores), metrics, conventions=conventions))
    for qid in {q for q, _ in values}:
        recall = [values[(qid, f"recall@{k}")] for k in ks]
        ceiling = [values[(qid, f"recall_ceiling@{k}")] for k in ks]
        assert recall == sorted(recall), qid
        assert all(r <= c + 1e-15 for r, c in zip(recall, ceiling)), (qid, recall, ceiling)


@SETTINGS
@given(
    qrels=qrels_dicts,
    ranking=st.dictionaries(st.sampled_from(QUERIES), rankings, min_size=1),
    conventions=st.sampled_from(CONVENTIONS),
)
def test_repeated_docs_count_once_at_their_first_position(qrels, ranking, conventions):
    deduped = {q: list(dict.fromkeys(docs)) for q, docs in ranking.items()}
    has_repeats = deduped != ranking
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with_repeats = rag_eval.Run.from_ranking(ranking)
    assert [w.category for w in caught] == ([DuplicateResult] if has_repeats else [])
    if has_repeats:
        assert "repeated doc id" in str(caught[0].message)
    a = _values(rag_eval.evaluate(qrels, with_repeats, METRICS, conventions=conventions))
    b = _values(rag_eval.evaluate(qrels, rag_eval.Run.from_ranking(deduped), METRICS, conventions=conventions))
    assert a == b
    assert all(v is None or v <= 1.0 for (_, m), v in a.items() if m not in COUNTS)


@SETTINGS
@given(qrels=qrels_dicts, scores=score_dicts, threshold=st.sampled_from([1, 2, 3]))
def test_precision_times_k_counts_the_relevant_in_the_top_k(qrels, scores, threshold):
    conventions = PRESETS["default"].replace(relevance_threshold=threshold)
    ks = [1, 2, 3, 5, 10]
    values = _values(
        rag_eval.evaluate(qrels, rag_eval.Run.from_scores(scores), [f"P@{k}" for k in ks], conventions=conventions)
    )
    for qid, judged in qrels.items():  # default conventions: a judged query absent from the run counts as empty
        ranked = _ranked(scores.get(qid, {}))
        for k in ks:
            relevant = sum(1 for d in ranked[:k] if judged.get(d, -1) >= threshold)
            assert values[(qid, f"precision@{k}")] * k == pytest.approx(relevant, abs=1e-12), (qid, k)


@SETTINGS
@given(
    qrels=qrels_dicts,
    scores=score_dicts,
    ranking=st.dictionaries(st.sampled_from(QUERIES), unique_rankings, min_size=1),
    conventions=st.sampled_from(CONVENTIONS),
)
def test_evaluate_does_not_mutate_its_inputs(qrels, scores, ranking, conventions):
    before = copy.deepcopy((qrels, scores, ranking))
    qrels_obj = rag_eval.Qrels.from_dict(qrels)
    by_score = rag_eval.Run.from_scores(scores, name="scores")
    given_order = rag_eval.Run.from_ranking(ranking, name="given")
    exported = (qrels_obj.to_dict(), by_score.to_dict(), given_order.to_dict())
    first = _values(rag_eval.evaluate(qrels, [by_score, given_order], METRICS, conventions=conventions), "scores")
    rag_eval.evaluate(qrels_obj, {"x": by_score, "y": given_order}, METRICS, conventions=conventions)
    assert (qrels, scores, ranking) == before
    assert (qrels_obj.to_dict(), by_score.to_dict(), given_order.to_dict()) == exported
    # and evaluating again gives the same numbers
    again = _values(rag_eval.evaluate(qrels_obj, by_score, METRICS, conventions=conventions), "scores")
    assert again == first
