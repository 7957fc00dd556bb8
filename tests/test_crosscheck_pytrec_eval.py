"""rag_eval against pytrec_eval (pytrec-eval-terrier) on random data full of the hard cases, to 1e-9 per query.

Every generated data set has score ties (scores rounded to a few values), unjudged results, grades -1..3,
queries judged only non-relevant, short and empty per-query runs, queries in the qrels only and in the run only.
pytrec_eval gets exactly the dicts the Run is built from. A second test checks the exponential-gain nDCG of the
default conventions against a small pure-Python implementation written here, to the same double (trec_eval's
order of operations: each gain divided by log2(rank + 1), added in rank order).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import pytrec_eval

import rag_eval

SEEDS = [0, 1, 2, 3, 4, 5, 6, 7]

# pytrec_eval's measure set and the names it reports per query
PYTREC_MEASURES = {
    "map",
    "ndcg",
    "P.5,10",
    "recall.5,100",
    "ndcg_cut.3,10",
    "map_cut.10",
    "success.1,5",
    "recip_rank",
    "Rprec",
    "bpref",
    "num_ret",
    "num_rel",
    "num_rel_ret",
}
REPORTED = [
    "map",
    "ndcg",
    "P_5",
    "P_10",
    "recall_5",
    "recall_100",
    "ndcg_cut_3",
    "ndcg_cut_10",
    "map_cut_10",
    "success_1",
    "success_5",
    "recip_rank",
    "Rprec",
    "bpref",
    "num_ret",
    "num_rel",
    "num_rel_ret",
]


def _random_data(seed: int, *, num_docs: int = 25) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """Qrels and run dicts with every hard case in them, reproducible from ``seed``.

    Doc ids ``d0..d24`` compare differently as strings and as numbers ("d9" > "d10"), so the tie rule matters.
    """
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(num_docs)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    # q00..q11 are judged and retrieved; q12, q13 only judged; q14, q15 only retrieved
    for i in range(16):
        qid = f"q{i:02d}"
        if i < 14:
            judged = rng.choice(docs, size=int(rng.integers(1, 12)), replace=False)
            if i % 5 == 3:  # judged, but nothing relevant
                grades = rng.choice([-1, 0], size=len(judged))
            else:
                grades = rng.choice([-1, 0, 0, 1, 1, 2, 3], size=len(judged))
            qrels[qid] = {str(d): int(g) for d, g in zip(judged, grades)}
        if i < 12 or i >= 14:
            if i == 4:  # an empty ranking for a judged query
                run[qid] = {}
                continue
            length = int(rng.integers(1, 4)) if i % 4 == 1 else int(rng.integers(1, num_docs + 1))
            retrieved = rng.choice(docs, size=length, replace=False)
            # few distinct scores: many ties, including ties between relevant and non-relevant documents
            scores = np.round(rng.random(length) * 3) / 2 - 0.5
            run[qid] = {str(d): float(s) for d, s in zip(retrieved, scores)}
    return qrels, run


def _per_query(report: rag_eval.Report, run_name: str) -> dict[str, dict[str, float]]:
    frame = report.per_query
    frame = frame[frame["run"] == run_name]
    out: dict[str, dict[str, float]] = {}
    for qid, metric, value in zip(frame["query_id"], frame["metric"], frame["value"]):
        out.setdefault(qid, {})[metric] = float(value)
    return out


def _compare(expected: dict[str, dict[str, float]], report: rag_eval.Report) -> None:
    ours = _per_query(report, "run")
    assert set(ours) == set(expected)
    for qid, measures in expected.items():
        for trec_name in REPORTED:
            metric = str(rag_eval.parse_metric(trec_name))
            assert ours[qid][metric] == pytest.approx(measures[trec_name], abs=1e-9, rel=0), (qid, trec_name)


def test_generated_data_has_the_hard_cases():
    qrels, run = _random_data(0)
    grades = [g for judged in qrels.values() for g in judged.values()]
    assert {-1, 0, 1, 2, 3} <= set(grades)
    assert any(len(set(s.values())) < len(s) for s in run.values())  # ties
    assert any(d not in qrels.get(q, {}) for q, s in run.items() for d in s)  # unjudged
    assert {} in run.values()
    assert set(qrels) - set(run) == {"q12", "q13"}
    assert set(run) - set(qrels) == {"q14", "q15"}
    assert any(all(g <= 0 for g in judged.values()) for judged in qrels.values())
    assert any(0 < len(s) <= 3 for s in run.values())


@pytest.mark.parametrize("seed", SEEDS)
def test_trec_eval_preset_matches_pytrec_eval(seed):
    qrels, run = _random_data(seed)
    expected = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_MEASURES).evaluate(run)
    report = rag_eval.evaluate(
        rag_eval.Qrels.from_dict(qrels), rag_eval.Run.from_scores(run), REPORTED, conventions="trec_eval"
    )
    # pytrec_eval measures the judged queries present in the run (an empty ranking included), like the preset
    assert set(expected) == set(qrels) & set(run)
    _compare(expected, report)


@pytest.mark.parametrize("seed", SEEDS[:4])
@pytest.mark.parametrize("level", [2, 3])
def test_relevance_level_matches_pytrec_eval(seed, level):
    qrels, run = _random_data(seed)
    expected = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_MEASURES, relevance_level=level).evaluate(run)
    conventions = rag_eval.metrics.PRESETS["trec_eval"].replace(relevance_threshold=level)
    report = rag_eval.evaluate(
        rag_eval.Qrels.from_dict(qrels), rag_eval.Run.from_scores(run), REPORTED, conventions=conventions
    )
    _compare(expected, report)


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_judged_docs_only_matches_pytrec_eval(seed):
    """trec_eval -J (pytrec_eval's judged_docs_only_flag) is unjudged='remove'."""
    qrels, run = _random_data(seed)
    expected = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_MEASURES, judged_docs_only_flag=True).evaluate(run)
    conventions = rag_eval.metrics.PRESETS["trec_eval"].replace(unjudged="remove")
    report = rag_eval.evaluate(
        rag_eval.Qrels.from_dict(qrels), rag_eval.Run.from_scores(run), REPORTED, conventions=conventions
    )
    _compare(expected, report)


# ----- exponential-gain nDCG against an obviously correct implementation --------------------------------------
def _reference_ndcg(judged: dict[str, int], scored: dict[str, float], k: int | None) -> float:
    """nDCG with gain 2^g - 1 (g > 0), discount 1/log2(rank + 1), ties by doc id descending; the ideal ranks
    every judged grade of the query, best first, cut at k. 0 when the ideal is 0."""
    ranking = sorted(scored, key=lambda d: (scored[d], d), reverse=True)
    if k is not None:
        ranking = ranking[:k]
    dcg = 0.0
    for i, doc in enumerate(ranking):
        grade = judged.get(doc, 0)
        if grade > 0:
            dcg += (2**grade - 1) / math.log2(i + 2)
    ideal_grades = sorted((g for g in judged.values() if g > 0), reverse=True)
    if k is not None:
        ideal_grades = ideal_grades[:k]
    idcg = 0.0
    for i, grade in enumerate(ideal_grades):
        idcg += (2**grade - 1) / math.log2(i + 2)
    return dcg / idcg if idcg > 0 else 0.0


def test_reference_ndcg_by_hand():
    # ranking by score, the tie of b and a broken doc id descending: b (grade 0), a (3), c (unjudged)
    # DCG@2 = 0 + 7 / log2(3); ideal: 7 (a), 1 (d) -> 7 + 1 / log2(3)
    judged = {"a": 3, "b": 0, "d": 1}
    scored = {"a": 1.0, "b": 1.0, "c": 0.5}
    assert _reference_ndcg(judged, scored, 2) == pytest.approx((7 / math.log2(3)) / (7 + 1 / math.log2(3)), abs=1e-15)
    assert _reference_ndcg({"a": 0}, scored, None) == 0.0


@pytest.mark.parametrize("seed", SEEDS)
def test_exp_gain_ndcg_matches_reference(seed):
    qrels, run = _random_data(seed)
    metrics = ["ndcg", "ndcg@1", "ndcg@3", "ndcg@10"]
    report = rag_eval.evaluate(rag_eval.Qrels.from_dict(qrels), rag_eval.Run.from_scores(run), metrics)
    ours = _per_query(report, "run")
    # default conventions: every judged query counts, an absent ranking as empty; run-only queries are left out
    assert set(ours) == set(qrels)
    for qid, judged in qrels.items():
        for name, k in [("ndcg", None), ("ndcg@1", 1), ("ndcg@3", 3), ("ndcg@10", 10)]:
            expected = _reference_ndcg(judged, run.get(qid, {}), k)
            assert ours[qid][name] == expected, (qid, name)  # the same double: the same order of operations
