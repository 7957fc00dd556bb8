"""rag_eval.power: the analytic path against statsmodels' TTestPower, its numbers checked by simulation, the resampling
path by a smaller simulation, bad input, the CLI on a saved report, and compare's margin wording and card."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import rag_eval
from rag_eval.cli import main
from rag_eval.statistics import paired as S
from rag_eval.statistics import power_analysis as P

statsmodels_power = pytest.importorskip("statsmodels.stats.power", reason="statsmodels is in the dev extra")
TTestPower = statsmodels_power.TTestPower


# ----- the t path against statsmodels ----------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.1, 0.05 / 6])
@pytest.mark.parametrize("d", [0.1, 0.25, 0.5, 1.0, -0.4])
@pytest.mark.parametrize("n", [2, 3, 10, 37, 200, 5000])
def test_power_at_n_equals_statsmodels(alpha, d, n):
    ours = P.t_power(d * 0.3, 0.3, n, alpha)  # effect and sd in a metric's units: d = effect / sd
    theirs = TTestPower().power(effect_size=d, nobs=n, alpha=alpha, alternative="two-sided")
    if np.isnan(theirs):
        # SciPy's nct.cdf underflows to NaN in the far tail (n = 200, d = 1), so statsmodels' sum is NaN; that tail
        # is below 1e-20, and statsmodels' one-sided power at alpha / 2 is the other tail alone
        side = "larger" if d > 0 else "smaller"
        theirs = TTestPower().power(effect_size=d, nobs=n, alpha=alpha / 2, alternative=side)
        assert not np.isnan(theirs)
        assert ours == pytest.approx(theirs, abs=1e-6)
    else:
        assert ours == pytest.approx(theirs, abs=1e-6)


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.05 / 4])
@pytest.mark.parametrize("target", [0.8, 0.9, 0.5])
@pytest.mark.parametrize("d", [0.05, 0.2, 0.35, 0.8, 1.5])
def test_queries_needed_is_the_ceiling_of_statsmodels_solution(alpha, target, d):
    sd = 0.17
    theirs = TTestPower().solve_power(effect_size=d, alpha=alpha, power=target, alternative="two-sided")
    assert P.t_queries_needed(d * sd, sd, alpha, target) == math.ceil(theirs)
    diffs = _normal_pilot(n=40, sd=sd, seed=3)
    result = rag_eval.power(diffs, alpha=alpha, power=target, effect=d * sd)
    expected = TTestPower().solve_power(
        effect_size=d * sd / result.sd, alpha=alpha, power=target, alternative="two-sided"
    )
    assert result.queries_needed == math.ceil(expected)
    # and it is the smallest: one query fewer falls short
    n = result.queries_needed
    assert P.t_power(d * sd, result.sd, n, alpha) >= target
    assert n == 2 or P.t_power(d * sd, result.sd, n - 1, alpha) < target


def _normal_pilot(n: int, sd: float, seed: int, mean: float = 0.0) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    return {f"q{i}": float(v) for i, v in enumerate(rng.normal(mean, sd, size=n))}


@pytest.mark.parametrize("n", [5, 30, 150])
@pytest.mark.parametrize(("alpha", "target"), [(0.05, 0.8), (0.01, 0.9), (0.1, 0.5)])
def test_the_power_at_the_minimum_detectable_difference_is_the_target(n, alpha, target):
    pilot = _normal_pilot(n, 0.2, seed=n)
    result = rag_eval.power(pilot, alpha=alpha, power=target)
    assert result.n == n and result.sd == pytest.approx(np.std(list(pilot.values()), ddof=1), rel=1e-12)
    mdd = result.minimum_detectable_difference
    assert P.t_power(mdd, result.sd, n, alpha) == pytest.approx(target, abs=1e-9)
    assert TTestPower().power(mdd / result.sd, n, alpha) == pytest.approx(target, abs=1e-6)
    theirs = TTestPower().solve_power(nobs=n, alpha=alpha, power=target, alternative="two-sided")
    assert mdd / result.sd == pytest.approx(theirs, rel=1e-5)  # statsmodels' own root finding stops sooner


def test_the_correction_divides_alpha_among_the_comparisons():
    pilot = _normal_pilot(60, 0.1, seed=1)
    one = rag_eval.power(pilot, effect=0.04)
    four = rag_eval.power(pilot, effect=0.04, comparisons=4)
    assert (one.comparisons, four.comparisons, four.alpha, four.alpha_per_test) == (1, 4, 0.05, 0.0125)
    assert four.minimum_detectable_difference > one.minimum_detectable_difference
    assert four.queries_needed == math.ceil(
        TTestPower().solve_power(effect_size=0.04 / four.sd, alpha=0.0125, power=0.8, alternative="two-sided")
    )
    text = str(four)
    assert "alpha 0.05 over 4 comparisons (Bonferroni: 0.0125 per test), power 0.8" in text
    assert f"queries needed to detect a difference of 0.04: {four.queries_needed}" in text


def test_a_simulation_detects_the_minimum_detectable_difference_at_the_stated_power():
    """2,000 simulated pilots of n normal differences whose true mean is the reported MDD at n: the paired t-test
    (SciPy's, through compare's own t_test) rejects at alpha in 80% of them, within 3 points."""
    n, sd, alpha = 25, 0.15, 0.05
    mdd = rag_eval.power(_normal_pilot(n, sd, seed=11), alpha=alpha).minimum_detectable_difference
    sd_pilot = np.std(list(_normal_pilot(n, sd, seed=11).values()), ddof=1)
    rng = np.random.default_rng(2024)
    trials = 2000
    sets = rng.normal(mdd, sd_pilot, size=(trials, n))  # the pilot's sd is the truth in this simulation
    detected = sum(S.t_test(row, np.zeros(n)) < alpha for row in sets)
    assert abs(detected / trials - 0.8) <= 0.03
    # and a difference half as large is detected far less often: the check can fail
    half = sum(S.t_test(row, np.zeros(n)) < alpha for row in rng.normal(mdd / 2, sd_pilot, size=(trials, n)))
    assert half / trials < 0.5


def test_queries_needed_detects_the_effect_at_the_stated_power_in_simulation():
    sd, effect, alpha = 0.2, 0.08, 0.05
    result = rag_eval.power(_normal_pilot(50, sd, seed=5), effect=effect, alpha=alpha)
    n = result.queries_needed
    rng = np.random.default_rng(7)
    sets = rng.normal(effect, result.sd, size=(1500, n))
    t = sets.mean(axis=1) / (sets.std(axis=1, ddof=1) / math.sqrt(n))
    rate = np.mean(2 * stats.t.sf(np.abs(t), n - 1) < alpha)
    assert abs(rate - 0.8) <= 0.03


# ----- the resampling path ----------------------------------------------------------------------------------------


def test_the_simulated_randomization_test_is_compare_s():
    """The vectorised p-values of the resampling path equal statistics.randomization_test on each simulated set."""
    rng = np.random.default_rng(0)
    centred = np.round(rng.normal(0, 0.2, size=30), 2)
    centred -= centred.mean()
    for m, permutations in ((8, 10000), (40, 500)):  # exact enumeration, then sampled signs
        simulated = P._Simulated(centred, m, test="randomization", simulations=25, permutations=permutations, seed=3)
        for delta in (0.0, 0.05):
            ours = simulated.p_values(delta)
            theirs = [S.randomization_test(s + delta, permutations=permutations, seed=3) for s in simulated.sets]
            np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)
        t_sim = P._Simulated(centred, m, test="t", simulations=10, permutations=permutations, seed=3)
        np.testing.assert_allclose(
            t_sim.p_values(0.05), [S.t_test(s + 0.05, np.zeros(m)) for s in t_sim.sets], rtol=1e-9
        )


@pytest.mark.slow
def test_the_resampling_path_detects_its_difference_at_the_stated_power():
    """A skewed pilot (many zero differences, a long tail); the resampling path's MDD at n, checked by 400 fresh
    query sets drawn from the same distribution and tested as compare tests them (randomization test)."""
    rng = np.random.default_rng(8)
    n = 40
    population = np.concatenate([np.zeros(60), rng.exponential(0.15, size=40) * rng.choice([-1, 1], size=40)])
    pilot = {f"q{i}": float(v) for i, v in enumerate(rng.choice(population, size=n))}
    result = rag_eval.power(pilot, method="resample", simulations=400, permutations=500, seed=1, effect=0.05)
    assert result.method == "resample" and result.test == "randomization" and result.simulations == 400
    mdd = result.minimum_detectable_difference
    assert 0 < mdd < math.inf
    diffs = np.array(list(pilot.values()))
    centred = diffs - diffs.mean()
    check = np.random.default_rng(99)
    trials = 400
    detected = sum(
        S.randomization_test(centred[check.integers(0, n, size=n)] + mdd, permutations=500, seed=t) < 0.05
        for t in range(trials)
    )
    assert abs(detected / trials - 0.8) <= 0.07  # 400 trials: a binomial sd of 2 points, and the search's own noise
    # the t path on the same pilot is near it, and the queries needed is where the simulated power crosses 0.8
    t_result = rag_eval.power(pilot, effect=0.05)
    assert 0.7 < mdd / t_result.minimum_detectable_difference < 1.4
    needed = result.queries_needed
    assert needed is not None and 0.6 < needed / t_result.queries_needed < 1.6
    simulated = P._Simulated(
        np.sign(diffs.mean()) * centred, needed, test="randomization", simulations=400, permutations=500, seed=1
    )
    assert simulated.power(0.05, 0.05) >= 0.8


# ----- from a report ----------------------------------------------------------------------------------------------

QRELS = {f"q{i}": {"a": 1, "b": 2, "c": 1} for i in range(24)}


def _report():
    rng = np.random.default_rng(4)
    docs = ["a", "b", "c", "x", "y", "z"]
    runs = {}
    for name in ("bm25", "dense", "hybrid"):
        runs[name] = rag_eval.Run.from_ranking({q: list(rng.permutation(docs)) for q in QRELS}, name=name)
    return rag_eval.evaluate(QRELS, runs, ["ndcg@3", "recall@3"], judged_threshold=0)


def test_from_a_report_pairs_the_systems_by_query():
    report = _report()
    result = rag_eval.power(report, baseline="bm25", system="dense", metric="ndcg@3", effect=0.1)
    diffs = (report.values("dense", "ndcg@3") - report.values("bm25", "ndcg@3")).to_numpy()
    assert result.n == 24 and result.sd == pytest.approx(np.std(diffs, ddof=1))
    assert result.mean_difference == pytest.approx(diffs.mean())
    assert (result.system, result.baseline, result.metric) == ("dense", "bm25", "ndcg@3")
    assert result.comparisons == 4  # compare(report, baseline="bm25"): 2 systems x 2 metrics
    same = rag_eval.power({f"q{i}": d for i, d in enumerate(diffs)}, effect=0.1, comparisons=4)
    assert same.minimum_detectable_difference == result.minimum_detectable_difference
    assert same.queries_needed == result.queries_needed
    assert "ndcg@3: 'dense' against 'bm25'" in result.to_text()


def test_from_one_system_and_an_assumed_correlation():
    report = _report()
    result = rag_eval.power(report, system="dense", metric="ndcg@3", correlation=0.6, effect=0.1)
    values = report.values("dense", "ndcg@3").to_numpy()
    assert result.sd == pytest.approx(np.std(values, ddof=1) * math.sqrt(2 * 0.4))
    assert result.correlation == 0.6 and result.baseline is None and result.comparisons == 1
    assert result.queries_needed == math.ceil(
        TTestPower().solve_power(effect_size=0.1 / result.sd, alpha=0.05, power=0.8, alternative="two-sided")
    )
    with pytest.raises(ValueError, match="resamples paired differences"):
        rag_eval.power(report, system="dense", metric="ndcg@3", correlation=0.6, method="resample")


@pytest.mark.parametrize(
    ("pilot", "kwargs", "message"),
    [
        ({}, {}, "no queries"),
        ({"q1": 0.1}, {}, "at least 2 paired queries; the pilot has 1"),
        ({"q1": 0.1, "q2": 0.1, "q3": 0.1}, {}, r"do not vary \(all 0.1, sd 0\)"),
        ({"q1": 0.1, "q2": float("nan")}, {}, "'q2': the difference nan is not finite"),
        ({"q1": 0.1, "q2": "high"}, {}, "'q2': the difference 'high' is not a number"),
        ({"q1": 0.1, "q2": 0.3}, {"alpha": 1.5}, r"alpha must lie in \(0, 1\), not 1.5"),
        ({"q1": 0.1, "q2": 0.3}, {"alpha": 0}, r"alpha must lie in \(0, 1\), not 0"),
        ({"q1": 0.1, "q2": 0.3}, {"power": 1.0}, r"power must lie in \(0.05, 1\)"),
        ({"q1": 0.1, "q2": 0.3}, {"effect": 0}, "effect must be a finite, nonzero difference"),
        ({"q1": 0.1, "q2": 0.3}, {"method": "bayes"}, "unknown method 'bayes'"),
        ({"q1": 0.1, "q2": 0.3}, {"comparisons": 0}, "comparisons must be a whole number >= 1"),
        ({"q1": 0.1, "q2": 0.3}, {"baseline": "bm25"}, "a mapping is the differences"),
    ],
)
def test_bad_input_is_refused_clearly(pilot, kwargs, message):
    with pytest.raises(ValueError, match=message):
        rag_eval.power(pilot, **kwargs)


def test_bad_input_from_a_report():
    report = _report()
    with pytest.raises(ValueError, match=r"baseline 'nobody' is not one of the systems; systems: \['bm25'"):
        rag_eval.power(report, baseline="nobody", system="dense", metric="ndcg@3")
    with pytest.raises(ValueError, match=r"2 systems besides 'bm25': name one \(system=...\)"):
        rag_eval.power(report, baseline="bm25", metric="ndcg@3")
    with pytest.raises(ValueError, match=r"name the metric \(metric=...\)"):
        rag_eval.power(report, baseline="bm25", system="dense")
    with pytest.raises(ValueError, match="metric 'mrr' is not measured"):
        rag_eval.power(report, baseline="bm25", system="dense", metric="mrr")
    with pytest.raises(ValueError, match=r"either baseline= .* or correlation="):
        rag_eval.power(report, baseline="bm25", system="dense", metric="ndcg@3", correlation=0.5)
    with pytest.raises(ValueError, match=r"correlation must lie in \[-1, 1\)"):
        rag_eval.power(report, system="dense", metric="ndcg@3", correlation=1.0)
    with pytest.raises(TypeError, match="a Report or a"):
        rag_eval.power([0.1, 0.2])  # type: ignore[arg-type]


def test_the_entry_point_is_public_and_its_module_shadows_nothing():
    assert rag_eval.power is rag_eval.statistics.power and "power" in rag_eval.__all__
    assert rag_eval.power.__module__ == "rag_eval.statistics.power_analysis"
    assert isinstance(rag_eval.power({"a": 0.1, "b": 0.3}), rag_eval.PowerAnalysis)


# ----- the command line -------------------------------------------------------------------------------------------


def test_cli_power_on_a_saved_report(tmp_path, capsys):
    report = _report()
    report.save(tmp_path / "pilot.parquet")
    argv = ["power", str(tmp_path / "pilot.parquet"), "--baseline", "bm25", "--system", "dense", "-m", "ndcg@3"]
    assert main([*argv, "--effect", "0.1", "--comparisons", "1"]) == 0
    out = capsys.readouterr().out
    expected = rag_eval.power(report, baseline="bm25", system="dense", metric="ndcg@3", effect=0.1, comparisons=1)
    assert out == expected.to_text() + "\n"
    assert f"queries needed to detect a difference of 0.1: {expected.queries_needed}" in out
    # every system against the baseline, per metric; the default correction spans compare's hypotheses
    assert main(["power", str(tmp_path / "pilot.parquet"), "--baseline", "bm25", "-m", "ndcg@3", "-m", "recall@3"]) == 0
    out = capsys.readouterr().out
    assert out.count("power analysis, ") == 4 and "'hybrid' against 'bm25'" in out
    assert out.count("alpha 0.05 over 4 comparisons (Bonferroni: 0.0125 per test), power 0.8") == 4
    # a result folder is read as well
    report.save_folder(tmp_path / "folder", plots=False)
    assert main(["power", str(tmp_path / "folder"), "--system", "dense", "-m", "recall@3", "--alpha", "0.1"]) == 0
    assert "recall@3: 'dense' against 'bm25'" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--baseline", "nobody"], "baseline 'nobody' is not one of the systems"),
        (["--alpha", "1.5"], "--alpha '1.5' is not a plain decimal number in [0, 1]"),
        (["--effect", "big"], "--effect 'big' is not a plain decimal number"),
        (["-m", "mrr"], "metric 'mrr' is not measured"),
    ],
)
def test_cli_power_bad_input_is_one_line_and_exit_2(tmp_path, capsys, extra, message):
    _report().save(tmp_path / "pilot.parquet")
    argv = ["power", str(tmp_path / "pilot.parquet"), "--system", "dense"]
    assert main([*argv, *(extra if "-m" in extra else [*extra, "-m", "ndcg@3"])]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rag-eval: error: ") and message in err and err.count("\n") == 1


def test_cli_power_on_a_missing_report(tmp_path, capsys):
    assert main(["power", str(tmp_path / "none.parquet"), "-m", "ndcg@3"]) == 2
    assert "none.parquet: no such report file or result folder" in capsys.readouterr().err


# ----- compare's margin and its card ------------------------------------------------------------------------------


def _close_runs():
    """Two runs equal on most queries: the difference is not significant."""
    base = {f"q{i}": ["a", "b", "x"] for i in range(24)}
    other = dict(base)
    other["q0"] = ["x", "a", "b"]
    other["q1"] = ["b", "x", "a"]
    return rag_eval.evaluate(
        QRELS,
        [rag_eval.Run.from_ranking(base, name="base"), rag_eval.Run.from_ranking(other, name="other")],
        ["mrr"],
        judged_threshold=0,
    )


def test_compare_with_a_margin_says_what_the_interval_rules_out():
    report = _close_runs()
    wide = rag_eval.compare(report, baseline="base", margin=0.2)
    row = wide.table.iloc[0]
    assert not row.rejected and row.ci_low > -0.2 and row.ci_high < 0.2
    assert row.conclusion == "no difference of 0.2 or more"
    narrow = rag_eval.compare(report, baseline="base", margin=0.02)
    row = narrow.table.iloc[0]
    assert row.ci_low <= -0.02 and row.ci_high >= 0  # other loses on q0 and q1: mrr 1/2 and 1
    assert row.conclusion == "inconclusive: the interval includes both 0 and -0.02"
    assert "margin 0.02" in str(narrow) and "inconclusive: the interval includes both 0 and -0.02" in str(narrow)
    # without a margin the table is as before
    assert "conclusion" not in rag_eval.compare(report, baseline="base").table.columns


def test_the_conclusion_is_decided_by_the_interval():
    from rag_eval.statistics.comparison import _conclusion

    class Row:
        def __init__(self, low, high, rejected=False):
            self.ci_low, self.ci_high, self.rejected = low, high, rejected

    assert _conclusion(Row(-0.01, 0.015), 0.02) == "no difference of 0.02 or more"
    assert _conclusion(Row(-0.01, 0.02), 0.02) == "inconclusive: the interval includes both 0 and 0.02"
    assert _conclusion(Row(-0.03, 0.02), 0.02) == "inconclusive: the interval includes both 0 and -0.02 and 0.02"
    assert _conclusion(Row(0.001, 0.05), 0.02).startswith("inconclusive: the interval includes 0.02 (and not 0)")
    assert _conclusion(Row(0.03, 0.05, rejected=True), 0.02) == "significant"
    with pytest.raises(ValueError, match="margin must be a finite difference > 0"):
        rag_eval.compare(_close_runs(), margin=-0.1)


def test_the_card_of_a_comparison_states_the_minimum_detectable_difference():
    report = _report()
    comparison = rag_eval.compare(report, baseline="bm25")
    stated = comparison.settings["minimum_detectable"]
    assert stated["power"] == 0.8 and stated["alpha_per_test"] == 0.05 / 4
    pair = next(p for p in stated["pairs"] if (p["system"], p["metric"]) == ("dense", "ndcg@3"))
    expected = rag_eval.power(report, baseline="bm25", system="dense", metric="ndcg@3")
    assert pair["n"] == 24 and pair["difference"] == pytest.approx(expected.minimum_detectable_difference)
    text = comparison.card.render()
    assert "minimum detectable difference (paired t, power 0.8, alpha 0.0125 per test): " in text
    assert f"dense ndcg@3 {expected.minimum_detectable_difference:.4g} (n=24" in text


def test_cli_compare_takes_a_margin(tmp_path, capsys):
    for name in ("base", "other"):
        run = rag_eval.Run.from_ranking(
            {q: (["x", "a", "b"] if (name, q) == ("other", "q0") else ["a", "b", "x"]) for q in QRELS}, name=name
        )
        run.to_trec(tmp_path / f"{name}.trec", tag=name)
    rag_eval.Qrels.from_dict(QRELS).to_trec(tmp_path / "qrels.txt")
    argv = ["compare", str(tmp_path / "qrels.txt"), str(tmp_path / "base.trec"), str(tmp_path / "other.trec")]
    assert main([*argv, "-m", "mrr", "--margin", "0.2", "--judged-threshold", "0", "--no-card"]) == 0
    assert "no difference of 0.2 or more" in capsys.readouterr().out
    assert main([*argv, "-m", "mrr", "--margin", "x"]) == 2
    assert "--margin 'x' is not a plain decimal number" in capsys.readouterr().err


def test_cli_power_takes_a_stage_aware_metric_as_the_report_names_it(tmp_path, capsys):
    # recall@budget is not a name of the metric grammar (its cutoff is the pipeline's budget): the CLI takes it as
    # the saved report has it, as rag_eval.power does
    from rag_eval import Pipeline, evaluate, power
    from rag_eval.adapters import functions
    from rag_eval.stages import Hit

    docs = [f"d{i}" for i in range(8)]
    first = functions.retriever(lambda q, k: [Hit(d, 1.0 / (i + 1)) for i, d in enumerate(docs[:k])], name="first")
    rerank = functions.reranker(
        lambda q, hits: sorted(hits, key=lambda h: (h.doc_id != f"d{len(q) % 8}", h.doc_id)), name="rerank"
    )
    queries = {f"q{i}": "x" * (i + 1) for i in range(12)}
    qrels = {q: {f"d{len(t) % 8}": 1, "d0": 1} for q, t in queries.items()}
    report = evaluate(qrels, Pipeline(first, rerank, depth=8, budget=2).run(queries, progress=False))
    report.save(tmp_path / "pilot.parquet")
    assert main(["power", str(tmp_path / "pilot.parquet"), "-m", "recall@budget", "--comparisons", "1"]) == 0
    printed = capsys.readouterr().out
    expected = power(report, metric="recall@budget", comparisons=1)
    assert f"{expected.minimum_detectable_difference:.4g}" in printed and "recall@budget" in printed
