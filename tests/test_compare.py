"""Comparisons: every number checked against a reference (SciPy, exact enumeration, statsmodels, ranx), the
bootstrap interval's coverage, and compare() on runs, saved reports and the stages of a pipeline."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from scipy import stats

import rag_eval
from rag_eval.cli import main
from rag_eval.stages import Hit, Pipeline, Reranker, Retriever
from rag_eval.statistics import paired as S


def _pairs(seed: int, n: int):
    rng = np.random.default_rng(seed)
    a = np.round(rng.uniform(size=n), 2)
    b = np.clip(np.round(a + rng.normal(0.05, 0.2, size=n), 2), 0, 1)
    b[: n // 5] = a[: n // 5]  # ties
    return a, b


@pytest.mark.parametrize("seed", range(5))
def test_t_and_wilcoxon_equal_scipy(seed):
    a, b = _pairs(seed, 40)
    assert S.t_test(a, b) == stats.ttest_rel(a, b).pvalue
    assert S.wilcoxon_test(a, b) == stats.wilcoxon(a, b).pvalue


def _exact(diff: np.ndarray) -> float:
    observed = abs(diff.mean())
    means = [abs(np.dot(signs, diff)) / len(diff) for signs in itertools.product((-1, 1), repeat=len(diff))]
    return sum(m >= observed - 1e-12 for m in means) / len(means)


@pytest.mark.parametrize("seed", range(4))
def test_randomization_test_is_exact_on_small_samples(seed):
    a, b = _pairs(seed, 10)
    diff = a - b
    assert S.randomization_test(diff, permutations=10000, seed=0) == _exact(diff)


def test_monte_carlo_randomization_agrees_with_exact_within_error():
    a, b = _pairs(7, 14)  # 2^14 = 16384 assignments
    diff = a - b
    exact = _exact(diff)
    sampled = S.randomization_test(diff, permutations=4000, seed=1)  # fewer than 2^14: sampled
    assert abs(sampled - exact) < 4 * np.sqrt(exact * (1 - exact) / 4000) + 1e-3


def test_randomization_agrees_with_ranx_fisher_within_monte_carlo_error():
    ranx = pytest.importorskip(
        "ranx", reason="ranx is a benchmark extra (its numba JIT takes ~40 s); pip install -e '.[bench]'"
    )
    from ranx.statistical_tests import fisher_randomization_test

    a, b = _pairs(3, 200)
    theirs = fisher_randomization_test(a, b, n_permutations=5000, max_p=1.0, random_seed=42)[0]
    ours = S.randomization_test(a - b, permutations=5000, seed=0)
    assert ranx is not None and abs(ours - theirs) < 4 * np.sqrt(max(ours, 0.01) * (1 - ours) / 5000) + 2e-3


def test_bootstrap_interval_covers_the_true_difference_about_95_percent_of_the_time():
    rng = np.random.default_rng(0)
    hits = 0
    trials = 300
    for t in range(trials):
        diff = 0.1 + rng.normal(0, 0.3, size=60)  # true mean difference 0.1
        low, high = S.paired_bootstrap_ci(diff, resamples=500, confidence=0.95, seed=t)
        hits += low <= 0.1 <= high
    assert 0.90 <= hits / trials <= 0.985


@pytest.mark.parametrize("method, theirs", [("holm", "holm"), ("bh", "fdr_bh")])
def test_corrections_equal_statsmodels(method, theirs):
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(5)
    for _ in range(20):
        p = rng.uniform(size=int(rng.integers(1, 30))) ** 2
        p[rng.uniform(size=len(p)) < 0.2] = p[0]  # ties
        expected = multipletests(p, alpha=0.05, method=theirs)[1]
        np.testing.assert_allclose(S.correct(p, method), expected, rtol=0, atol=1e-12)
    assert np.isnan(S.correct(np.array([0.01, np.nan, 0.04]), "holm")[1])


# ----- compare() ------------------------------------------------------------------------------------------------
QRELS = {f"q{i}": {"a": 1, "b": 2} for i in range(12)}


def _runs():
    good = rag_eval.Run.from_ranking(
        {f"q{i}": ["b", "a", "x"] if i % 4 else ["x", "b", "a"] for i in range(12)}, name="good"
    )
    poor = rag_eval.Run.from_ranking({f"q{i}": ["x", "y", "a"] for i in range(12)}, name="poor")
    short = rag_eval.Run.from_ranking({f"q{i}": ["a", "b"] for i in range(10)}, name="short")  # q10, q11 missing
    return good, poor, short


def test_compare_runs_by_hand():
    good, poor, short = _runs()
    report = rag_eval.evaluate(
        QRELS, [good, poor, short], ["mrr", "recall@2"], conventions=rag_eval.Conventions(missing_run="skip")
    )
    # short beats poor by the same amount on each of its 10 queries: announced (issue 27)
    with pytest.warns(rag_eval.errors.DegenerateInterval, match=r"short vs poor, mrr \(10 queries, each \+0\.6667\)"):
        result = rag_eval.compare(report, baseline="poor", test="t")
    row = result.table.set_index(["system", "metric"]).loc[("good", "mrr")]
    # good: mrr 1 on 9 queries, 1/2 on 3 (q0, q4, q8); poor: 1/3 everywhere
    assert row["diff"] == pytest.approx((9 * 1 + 3 * 0.5) / 12 - 1 / 3)
    assert (row.wins, row.ties, row.losses) == (12, 0, 0)
    assert row.p_value == stats.ttest_rel(report.values("good", "mrr"), report.values("poor", "mrr")).pvalue
    short_row = result.table.set_index(["system", "metric"]).loc[("short", "mrr")]
    assert short_row.n == 10 and short_row.n_unpaired == 2  # q10, q11 were not measured for short
    assert (short_row.only_system, short_row.only_baseline, short_row.degenerate) == (0, 2, True)
    assert "left out of short vs poor, mrr: 2 only in 'poor' (q10, q11)" in str(result)
    assert (
        result.settings["test"] == "t"
        and result.settings["correction"] == "holm"
        and result.settings["hypotheses"] == 4
    )
    holm = S.correct(result.table["p_value"].to_numpy(), "holm")
    np.testing.assert_array_equal(result.table["p_adjusted"].to_numpy(), holm)
    assert (result.table["rejected"] == (holm < 0.05)).all()


def test_outputs_and_saved_reports(tmp_path):
    good, poor, _ = _runs()
    report = rag_eval.evaluate(QRELS, [good, poor], ["mrr", "recall@2", "judged@2"])
    report.save(tmp_path / "r.parquet")
    result = rag_eval.compare(str(tmp_path / "r.parquet"), baseline="poor")
    # poor's top 2 (x, y) are never judged; good's are, but for x on q0, q4, q8
    assert result.settings["unjudged_share"] == {
        "good": pytest.approx(1 - report.mean("good", "judged@2")),
        "poor": 1.0,
    }
    assert result.settings["unjudged_share"]["good"] == pytest.approx(3 * 0.5 / 12)
    text = str(result)
    assert "against 'poor'" in text and "*" in text  # good beats poor significantly on mrr
    assert result.to_markdown().startswith("| system | metric |") and r"\begin{tabular}" in result.to_latex()
    import matplotlib

    matplotlib.use("Agg")
    assert result.plot().get_xlabel() == "difference from poor"
    assert "<table" in result._repr_html_()


class Fixed(Retriever):
    def search(self, query, k):
        return [Hit(d, 1.0) for d in ("x", "a", "b", "y")]


class Smart(Reranker):
    def rerank(self, query, hits):
        return sorted(hits, key=lambda h: h.doc_id not in ("a", "b"))


def test_compare_the_stages_of_a_pipeline():
    result = Pipeline(Fixed("bm25"), Smart("rerank"), depth=4, budget=2).run({q: q for q in QRELS})
    report = rag_eval.evaluate(QRELS, result, ["ndcg@budget", "recall@budget"])
    with pytest.warns(rag_eval.errors.DegenerateInterval):  # every query gains the same (issue 27)
        comparison = rag_eval.compare(report, baseline="bm25", metrics=["ndcg@budget"])
    row = comparison.table.iloc[0]
    assert row.system.endswith("/rerank") and row.baseline.endswith("/bm25")
    assert (
        row["diff"] > 0 and row.wins == 12 and row.p_value == 2 / 2**12
    )  # exact: only the observed signs and their mirror
    assert (
        comparison.settings["pipelines"][0]["depth"] == 4
        and comparison.settings["pipelines"][0]["budget"] == "budget(2)"
    )
    assert (
        "comparison: against" in comparison.card.render()
        and "holm correction over 1 hypotheses" in comparison.card.render()
    )


def test_cli_compare(tmp_path, capsys):
    good, poor, _ = _runs()
    qrels = rag_eval.Qrels.from_dict(QRELS)
    qrels.to_trec(tmp_path / "qrels.txt")
    good.to_trec(tmp_path / "good.trec", tag="good")
    poor.to_trec(tmp_path / "poor.trec", tag="poor")
    args = ["compare", tmp_path / "qrels.txt", tmp_path / "good.trec", tmp_path / "poor.trec", "-m", "mrr"]
    assert main([str(a) for a in [*args, "--baseline", tmp_path / "poor.trec", "--format", "json"]]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["comparison"][0]["system"] == "good" and payload["card"]["comparison"]["test"] == "randomization"
    assert main([str(a) for a in [*args, "--baseline", "poor", "--format", "csv", "--test", "wilcoxon"]]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("system,baseline,metric,n,n_nan,n_unpaired,mean")
    assert main([str(a) for a in [*args, "--baseline", "nobody"]]) == 2
    assert "neither a run name" in capsys.readouterr().err


def test_the_card_of_a_comparison_names_every_report_and_the_judged_share_it_used():
    good, poor, _ = _runs()
    first = rag_eval.evaluate(QRELS, {"good": good}, ["mrr", "judged@2"])
    with pytest.warns(rag_eval.errors.LowJudgedShare):
        second = rag_eval.evaluate(QRELS, {"poor": poor}, ["mrr", "judged@2"])
    result = rag_eval.compare([first, second], baseline="poor")
    text = result.card.render()
    assert "  run 'good': 12 queries counted" in text
    assert "  report 2 of the comparison (default conventions):\n    qrels 'qrels': in memory\n" in text
    assert "    run 'poor': 12 queries counted" in text
    # the unjudged share is 1 - the judged share on each report's card, at the smallest cutoff
    assert result.settings["unjudged_share"] == {"good": pytest.approx(0.125), "poor": 1.0}
    assert result.settings["unjudged_at"] == {"good": "judged@2", "poor": "judged@2"}
    assert "unjudged share: good 12.5% (1 - judged@2), poor 100.0% (1 - judged@2)" in text
