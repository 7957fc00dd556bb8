"""Traffic-weighted means: a report made with a sampled QuerySet has the Hajek estimator sum(w * y) / sum(w)
(w = frequency / inclusion probability) and its stratified bootstrap interval beside the per-query mean; a report
without one has no new column."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from rag_eval import InputError, Pipeline, Qrels, QuerySet, Report, Run, evaluate
from rag_eval.data.queryset import QueryProvenance, QuerySetCard
from rag_eval.ground_truth.querysets import sample_queries
from rag_eval.reports.weighted import hajek_bootstrap
from rag_eval.stages import Hit, Retriever

TRAFFIC = ["traffic_mean", "traffic_ci_low", "traffic_ci_high"]

# query -> (frequency, stratum, inclusion probability)
DRAWN = {
    "q1": (40, "head", 0.5),
    "q2": (25, "head", 0.5),
    "q3": (30, "head", 0.5),
    "q4": (3, "tail", 0.1),
    "q5": (1, "tail", 0.1),
    "q6": (2, "tail", 0.1),
    "q7": (1, "tail", 0.1),
}
# each query's ranking; the relevant document is "r": its reciprocal rank is the query's mrr
RANKINGS = {
    "q1": ["r", "x"],
    "q2": ["x", "r"],
    "q3": ["x", "y", "z", "r"],
    "q4": ["x", "y", "z", "w"],
    "q5": ["r"],
    "q6": ["x", "y", "r"],
    "q7": ["x", "r"],
}
MRR = {"q1": 1.0, "q2": 0.5, "q3": 0.25, "q4": 0.0, "q5": 1.0, "q6": 1 / 3, "q7": 0.5}


def _sampled(drawn=DRAWN) -> QuerySet:
    card = QuerySetCard(
        source="log.csv",
        stratify=("frequency",),
        allocation="proportional",
        strata={"head": {"queries": 6, "sampled": 3}, "tail": {"queries": 40, "sampled": 4}},
        sample_size=len(drawn),
        seed=7,
    )
    return QuerySet(
        {q: f"question {q}" for q in drawn},
        {
            q: QueryProvenance(source="log.csv", frequency=f, stratum=s, inclusion_probability=p)
            for q, (f, s, p) in drawn.items()
        },
        card,
    )


def _qrels() -> Qrels:
    return Qrels.from_dict({q: {"r": 1} for q in RANKINGS})


def _run() -> Run:
    return Run.from_ranking(RANKINGS, name="bm25")


def _row(report: Report, metric: str, stage: str | None = None):
    s = report.summary
    s = s[s["metric"] == metric] if stage is None else s[(s["metric"] == metric) & (s["stage"] == stage)]
    assert len(s) == 1
    return s.iloc[0]


def test_the_traffic_weighted_mean_is_the_hand_computed_hajek_estimator_beside_the_per_query_mean():
    queries = _sampled()
    report = evaluate(_qrels(), _run(), ["mrr", "hit@1"], queries=queries)
    weights = {q: Fraction(f) / Fraction(p).limit_denominator() for q, (f, _, p) in DRAWN.items()}
    assert queries.weights("traffic") == pytest.approx({q: float(w) for q, w in weights.items()}, rel=1e-15)
    mrr = {q: Fraction(v).limit_denominator() for q, v in MRR.items()}
    hajek = sum(weights[q] * mrr[q] for q in DRAWN) / sum(weights.values())
    row = _row(report, "mrr")
    assert abs(row["traffic_mean"] - float(hajek)) < 1e-12
    assert hajek == Fraction(85, 156)  # (80 + 25 + 15 + 0 + 10 + 20/3 + 5) / 260, by hand
    assert abs(row["mean"] - sum(MRR.values()) / 7) < 1e-12  # the per-query mean stays what it was
    assert abs(row["traffic_mean"] - row["mean"]) > 0.03  # the head weighs more: a different number
    success = _row(report, "hit@1")
    hits = {"q1", "q5"}
    expected = sum(weights[q] for q in hits) / sum(weights.values())
    assert abs(success["traffic_mean"] - float(expected)) < 1e-12
    assert report.query_weights == queries.weights("traffic")
    assert list(report.summary.columns) == [
        "run", "metric", "mean", "sum", "std", "median", "ci_low", "ci_high", *TRAFFIC, "n", "n_nan",
    ]  # fmt: skip


def test_the_interval_holds_the_estimate_and_is_seeded():
    report = evaluate(_qrels(), _run(), ["mrr"], queries=_sampled())
    row = _row(report, "mrr")
    assert row["traffic_ci_low"] <= row["traffic_mean"] <= row["traffic_ci_high"]
    assert row["traffic_ci_low"] < row["traffic_ci_high"]
    again = evaluate(_qrels(), _run(), ["mrr"], queries=_sampled())
    assert _row(again, "mrr")[TRAFFIC].tolist() == row[TRAFFIC].tolist()
    a = report.summarize(seed=3).iloc[0]
    b = report.summarize(seed=3).iloc[0]
    c = report.summarize(seed=4).iloc[0]
    assert a[TRAFFIC].tolist() == b[TRAFFIC].tolist()
    assert a["traffic_mean"] == c["traffic_mean"]
    assert (a["traffic_ci_low"], a["traffic_ci_high"]) != (c["traffic_ci_low"], c["traffic_ci_high"])


def test_the_bootstrap_resamples_within_each_stratum():
    # constant within each stratum, equal weights within each: every stratified resample gives the same mean
    values = np.array([[1.0], [1.0], [1.0], [0.0], [0.0]])
    weights = np.array([2.0, 2.0, 2.0, 5.0, 5.0])
    strata = ["a", "a", "a", "b", "b"]
    mean, low, high = hajek_bootstrap(values, weights, strata, resamples=500, confidence=0.95, seed=0)
    assert mean[0] == pytest.approx(6 / 16, abs=1e-15)
    assert low[0] == pytest.approx(6 / 16, abs=1e-15) and high[0] == pytest.approx(6 / 16, abs=1e-15)
    # one stratum: the resamples mix the values and the interval opens
    mean, low, high = hajek_bootstrap(values, weights, ["all"] * 5, resamples=500, confidence=0.95, seed=0)
    assert mean[0] == pytest.approx(6 / 16, abs=1e-15) and low[0] < mean[0] < high[0]


def test_nan_values_are_left_out_of_the_weighted_mean():
    values = np.array([[1.0, 1.0], [np.nan, 0.0], [0.0, 0.0]])
    weights = np.array([1.0, 3.0, 4.0])
    mean, low, high = hajek_bootstrap(values, weights, [None, None, None], resamples=50, confidence=0.9, seed=0)
    assert mean.tolist() == pytest.approx([1 / 5, 1 / 8], abs=1e-15)
    assert all(lo <= m <= hi for lo, m, hi in zip(low, mean, high, strict=True))


def test_equal_weights_give_the_per_query_mean():
    queries = QuerySet.from_dict({q: f"question {q}" for q in RANKINGS})
    report = evaluate(_qrels(), _run(), ["mrr", "ndcg@3"], queries=queries)
    for metric in ("mrr", "ndcg@3"):
        row = _row(report, metric)
        assert abs(row["traffic_mean"] - row["mean"]) < 1e-12


def test_a_queryset_from_sample_queries_weights_by_frequency_over_inclusion_probability():
    frequencies = {f"q{i}": f for i, f in enumerate([500, 300, 200, 90, 60, 40, 30, 20, 10, 5, 3, 2, 1, 1, 1], 1)}
    population = QuerySet(
        {q: f"question {q}" for q in frequencies},
        {q: QueryProvenance(source="t", frequency=f) for q, f in frequencies.items()},
    )
    sample = sample_queries(population, 8, seed=1)
    assert len(sample) == 8 and sample.card.strata
    rankings = {q: (["r"] if int(q[1:]) % 2 else ["x", "r"]) for q in sample}
    report = evaluate(
        Qrels.from_dict({q: {"r": 1} for q in sample}), Run.from_ranking(rankings), ["mrr"], queries=sample
    )
    w = {q: sample.provenance[q].frequency / sample.provenance[q].inclusion_probability for q in sample}
    y = {q: 1.0 if int(q[1:]) % 2 else 0.5 for q in sample}
    expected = sum(w[q] * y[q] for q in sample) / sum(w.values())
    assert abs(_row(report, "mrr")["traffic_mean"] - expected) < 1e-12
    assert report.card.query_set == sample.card.to_dict()
    assert "query set card:" in report.card.render()


class _Fixed(Retriever):
    def config(self):
        return {}

    def search(self, query, k):
        qid = query.split()[-1]
        return [Hit(d, float(10 - i)) for i, d in enumerate(RANKINGS[qid])]


def test_a_pipeline_run_on_a_queryset_reports_both_means_and_the_card():
    queries = _sampled()
    result = Pipeline(_Fixed("fixed"), depth=5).run(queries, progress=False)
    assert result.query_set is queries
    assert type(result.queries) is dict and result.queries == dict(queries)
    report = evaluate(_qrels(), result, ["mrr"])
    assert report.staged and report.card.query_set == queries.card.to_dict()
    row = _row(report, "mrr", stage="fixed")
    weights = queries.weights("traffic")
    expected = sum(weights[q] * MRR[q] for q in MRR) / sum(weights.values())
    assert abs(row["traffic_mean"] - expected) < 1e-12
    assert abs(row["mean"] - sum(MRR.values()) / 7) < 1e-12
    plain = Pipeline(_Fixed("fixed"), depth=5).run(dict(queries), progress=False)
    assert plain.query_set is None
    assert not set(TRAFFIC) & set(evaluate(_qrels(), plain, ["mrr"]).summary.columns)


def test_a_report_without_a_queryset_has_no_new_columns_and_the_weights_survive_save(tmp_path):
    plain = evaluate(_qrels(), _run(), ["mrr"])
    assert not set(TRAFFIC) & set(plain.summary.columns) and plain.query_weights is None
    assert plain.card.query_set is None
    weighted = evaluate(_qrels(), _run(), ["mrr"], queries=_sampled())
    weighted.save(tmp_path / "w.parquet")
    plain.save(tmp_path / "p.parquet")
    back = Report.load(tmp_path / "w.parquet")
    assert back.card.query_set == weighted.card.query_set
    assert back.summary[TRAFFIC].values.tolist() == weighted.summary[TRAFFIC].values.tolist()
    assert not set(TRAFFIC) & set(Report.load(tmp_path / "p.parquet").summary.columns)


def test_bad_input_names_the_query():
    queries = _sampled({q: v for q, v in DRAWN.items() if q != "q6"})
    with pytest.raises(InputError, match=r"'q6'.*not in the query set"):
        evaluate(_qrels(), _run(), ["mrr"], queries=queries)
    missing = QuerySet(
        {"q1": "a", "q2": "b"},
        {
            "q1": QueryProvenance(source="t", frequency=2, stratum="head", inclusion_probability=0.5),
            "q2": QueryProvenance(source="t", frequency=1, stratum="tail"),
        },
        QuerySetCard(strata={"head": {"queries": 2}, "tail": {"queries": 1}}),
    )
    one = Run.from_ranking({"q1": ["r"], "q2": ["r"]})
    with pytest.raises(InputError, match=r"'q2'.*no inclusion probability"):
        evaluate(Qrels.from_dict({"q1": {"r": 1}, "q2": {"r": 1}}), one, ["mrr"], queries=missing)
    with pytest.raises(TypeError, match="QuerySet"):
        evaluate(_qrels(), _run(), ["mrr"], queries=dict(_sampled()))  # type: ignore[arg-type]


def test_geometric_metrics_get_a_weighted_geometric_mean():
    queries = _sampled()
    report = evaluate(_qrels(), _run(), ["gm_map"], queries=queries)
    weights = queries.weights("traffic")
    logs = {q: math.log(max(v, 1e-5)) for q, v in MRR.items()}  # one relevant document: ap = reciprocal rank
    expected = math.exp(sum(weights[q] * logs[q] for q in MRR) / sum(weights.values()))
    assert abs(_row(report, "gm_map")["traffic_mean"] - expected) < 1e-12
