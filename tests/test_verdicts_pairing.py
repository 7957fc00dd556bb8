"""Issue 27, classes 1, 2 and 12(a): a verdict says what it rests on. Every metric knows its direction; a paired
comparison says how many queries were on one side only (and the gate refuses them unless allowed); an interval
below its method's minimum n is inconclusive (gate) or refused (estimate), and a zero-width one is announced."""

from __future__ import annotations

import math
import re

import pytest

import rag_eval
from rag_eval.cli import main
from rag_eval.drivers.gating import gate
from rag_eval.errors import DegenerateInterval, InputError
from rag_eval.metrics import direction, higher_is_better
from rag_eval.metrics.catalogue import FAMILIES, REPORTED
from rag_eval.statistics import prediction_powered as P
from rag_eval.statistics.paired import MIN_N, UnpairedQueries

# --- 12(a): every metric knows its direction ---


@pytest.mark.parametrize(
    "name",
    [
        "recall@10",
        "ndcg@10",
        "ndcg_cut_10",
        "P@5",
        "map",
        "mrr",
        "judged@10",
        "recall@budget",
        "ndcg@depth",
        "rerank_gain@budget",
        "cand_ndcg@budget",
        "loss.delivered",
        "num_rel_ret",
        "set_f(beta=4)",
        "utility",
    ],
)
def test_higher_is_better(name: str) -> None:
    assert higher_is_better(name) is True
    assert direction(name) == "higher"


@pytest.mark.parametrize(
    "name",
    [
        "loss.never_retrieved",
        "loss.below_depth",
        "loss.reranked_out",
        "loss.failed",
        "unjudged@10",
        "unj@5",
        "rbp_resid",
        "rbp_resid(p=0.5)@10",
        "num_nonrel_judged_ret",
        "latency",
        "latency.p95",
        "LOSS.Never_Retrieved",
    ],
)
def test_lower_is_better(name: str) -> None:
    assert higher_is_better(name) is False
    assert direction(name) == "lower"


@pytest.mark.parametrize("name", ["num_ret", "num_rel", "num_q", "relstring@10", "runid"])
def test_no_better_side_is_refused(name: str) -> None:
    assert direction(name) == "none"
    with pytest.raises(InputError, match="no better side"):
        higher_is_better(name)


@pytest.mark.parametrize("name", ["recal@10", "loss.nowhere", "latency.p99", "", "gain@budget"])
def test_unknown_name_is_refused(name: str) -> None:
    with pytest.raises(InputError):
        higher_is_better(name)


def test_direction_is_read_from_the_family_records() -> None:
    lower = {n for n, f in {**FAMILIES, **REPORTED}.items() if f.direction == "lower"}
    fates = {n for n in REPORTED if n.startswith("loss.")}
    assert {"unjudged", "rbp_resid", "num_nonrel_judged_ret", "latency", "latency.p50", "latency.p95"} <= lower
    assert fates - lower == {"loss.delivered"} and len(fates) >= 5  # every other fate is a loss
    for name, family in {**FAMILIES, **REPORTED}.items():
        written = f"{name}@5" if family.cutoff == "required" else name
        written = {"iprec_at_recall": "iprec_at_recall(level=0.1)", "rprec_mult": "rprec_mult(mult=0.2)"}.get(
            name, written
        )
        if family.direction != "none":
            assert higher_is_better(written) is (name not in lower), name


# --- helpers: plain reports of P@10 (and unjudged@10), query q's value hits[q] / 10 ---

IDS40 = [f"q{i:02d}" for i in range(40)]


def _report(hits: dict[str, int], *, qids=IDS40, conventions="default", unjudged: dict[str, int] | None = None):
    """P@10, recall@10 and unjudged@10 of one run ``sys``: each query of ``qids`` has 10 relevant documents; the
    run answers the queries of ``hits`` (hits[q] relevant, then unjudged[q] unjudged, then judged non-relevant)."""
    unjudged = unjudged or {}
    qrels = {q: {f"{q}-r{i}": 1 for i in range(10)} | {f"{q}-x{i}": 0 for i in range(10)} for q in qids}
    ranking = {}
    for q, j in hits.items():
        u = unjudged.get(q, 0)
        ranking[q] = [f"{q}-r{i}" for i in range(j)] + [f"{q}-u{i}" for i in range(u)]
        ranking[q] += [f"{q}-x{i}" for i in range(10 - j - u)]
    return rag_eval.evaluate(
        rag_eval.Qrels.from_dict(qrels),
        {"sys": rag_eval.Run.from_ranking(ranking)},
        ["P@10", "recall@10", "unjudged@10"],
        judged_threshold=0,
        conventions=conventions,
    )


def _hits(ids, pattern):
    return {q: pattern[i % len(pattern)] for i, q in enumerate(ids)}


CONVENTIONS = ["default", "trec_eval", rag_eval.Conventions(missing_run="skip"), rag_eval.Conventions(gain="linear")]


# --- class 1: comparisons over fewer queries than their inputs ---


@pytest.mark.parametrize("test", ["randomization", "t", "wilcoxon", "bootstrap"])
@pytest.mark.parametrize("conventions", CONVENTIONS, ids=str)
def test_a_candidate_answering_half_the_queries_never_passes(conventions, test):
    """The issue's case: a candidate that answers 20 of 40 queries. Where the conventions score a missing query 0
    it is a regression; where they skip it, the gate refuses (exit 2) unless unpaired queries are allowed."""
    base = _report(_hits(IDS40, [5, 6, 7]), conventions=conventions)
    half = _report(_hits(IDS40[:20], [5, 6, 7]), conventions=conventions)
    conv = rag_eval.metrics.PRESETS[conventions] if isinstance(conventions, str) else conventions
    skipped = conv.missing_run == "skip"
    if not skipped:
        result = gate(base, half, ["P@10:0.01"], test=test)
        assert result.verdict == "regression" and result.rules[0].n == 40 and result.rules[0].n_unpaired == 0
        return
    with pytest.raises(UnpairedQueries) as caught:
        gate(base, half, ["P@10:0.01"], test=test)
    message = str(caught.value)
    assert "20 only in the baseline (q20, q21, q22, q23, q24, and 15 more); 20 measured on both" in message
    assert "--allow-different unpaired" in message
    with pytest.warns(DegenerateInterval):  # the 20 answered are the baseline's own: every difference 0
        result = gate(base, half, ["P@10:0.01"], allow={"unpaired"}, test=test)
    r = result.rules[0]
    assert (r.n, r.n_unpaired, len(r.only_baseline), r.only_candidate) == (20, 20, 20, ())
    text = result.to_text()
    assert "LEFT OUT (allowed, unpaired): n 20 paired; left out: 20 only in the baseline (q20, q21" in text
    assert "20 queries measured on one side only were left out (allowed)" in text
    assert "left out: 20 only in the baseline" in result.to_markdown()
    junit = result.to_junit()
    assert "left out: 20 only in the baseline (q20" in junit


@pytest.mark.parametrize("conventions", ["trec_eval", rag_eval.Conventions(missing_run="skip")], ids=str)
def test_a_baseline_with_fewer_queries_and_sides_missing_different_ones(conventions):
    base = _report(_hits(IDS40[:30], [5, 6]), conventions=conventions)
    cand = _report(_hits(IDS40, [5, 6]), conventions=conventions)
    with pytest.raises(UnpairedQueries, match=r"10 only in the candidate \(q30, q31, q32, q33, q34, and 5 more\)"):
        gate(base, cand, ["P@10:0.01"])
    # both sides lack queries the other has: both named
    one = _report(_hits(IDS40[:25], [5, 6, 4]), conventions=conventions)
    other = _report(_hits(IDS40[3:], [6, 5, 4]), conventions=conventions)
    with pytest.raises(UnpairedQueries) as caught:
        gate(one, other, ["P@10:0.01", "recall@10:0.01"])
    assert "3 only in the baseline (q00, q01, q02)" in str(caught.value)
    assert "15 only in the candidate (q25, q26, q27, q28, q29, and 10 more)" in str(caught.value)
    result = gate(one, other, ["P@10:0.01"], allow={"unpaired"}, test="t")
    r = result.rules[0]
    assert (r.n, r.n_unpaired, r.only_baseline) == (22, 18, ("q00", "q01", "q02"))
    assert r.only_candidate[:2] == ("q25", "q26") and len(r.only_candidate) == 15


def test_a_nan_value_is_left_out_and_named(tmp_path):
    # judged@k of an empty top k is NaN (0/0): a query the candidate returned nothing for
    qrels = {q: {f"{q}-r": 1} for q in IDS40[:12]}
    full = {q: [f"{q}-r", "z"] for q in IDS40[:12]}
    empty_one = dict(full, q03=[])
    base = rag_eval.evaluate(qrels, {"sys": rag_eval.Run.from_ranking(full)}, ["judged@2"], judged_threshold=0)
    cand = rag_eval.evaluate(qrels, {"sys": rag_eval.Run.from_ranking(empty_one)}, ["judged@2"], judged_threshold=0)
    with pytest.warns(DegenerateInterval):
        result = gate(base, cand, ["judged@2:0.1"], test="t")
    r = result.rules[0]
    assert (r.n, r.n_nan, r.nan_ids) == (11, 1, ("q03",))
    assert "left out: 1 NaN on either side (q03)" in result.to_text()


def test_compare_shows_the_queries_on_one_side_only():
    base = _report(_hits(IDS40, [5, 6, 7]), conventions="trec_eval")
    renamed = rag_eval.evaluate(
        rag_eval.Qrels.from_dict({q: {f"{q}-r{i}": 1 for i in range(10)} for q in IDS40}),
        {"cand": rag_eval.Run.from_ranking({q: [f"{q}-r{i}" for i in range(3)] for q in IDS40[5:]})},
        ["P@10"],
        conventions="trec_eval",
    )
    result = rag_eval.compare([base, renamed], baseline="sys", metrics=["precision@10"])
    row = result.table.iloc[0]
    assert (row.n, row.n_unpaired, row.only_system, row.only_baseline) == (35, 5, 0, 5)
    text = str(result)
    assert "unpaired" in text.splitlines()[1]
    assert "left out of cand vs sys, precision@10: 5 only in 'sys' (q00, q01, q02, q03, q04)" in text
    assert "5 only in 'sys'" in result.to_markdown()


# --- class 2: intervals below their method's minimum n, and of zero width ---


@pytest.mark.parametrize("test", ["randomization", "t", "wilcoxon", "bootstrap"])
@pytest.mark.parametrize("n", [1, 2])
def test_one_or_two_paired_queries_are_inconclusive_under_every_test(test, n):
    """The issue's case: gate --test bootstrap on one paired query said PASS with [+0.0000, +0.0000]."""
    ids = IDS40[:n]
    base = _report(_hits(ids, [5, 4]), qids=ids)
    cand = _report(_hits(ids, [5, 4]), qids=ids)
    if n >= MIN_N[test]:  # t at n = 2: its own interval, every difference 0: announced
        with pytest.warns(DegenerateInterval):
            result = gate(base, cand, ["P@10:0.05"], test=test)
        assert result.rules[0].degenerate and "zero width" in result.to_text()
        return
    result = gate(base, cand, ["P@10:0.05"], test=test)
    r = result.rules[0]
    assert r.verdict == "inconclusive" and result.exit_code == 3 and math.isnan(r.ci_low) and r.min_n == MIN_N[test]
    assert f"no interval (n {n} is below {test}, min n {MIN_N[test]})" in result.to_text()
    assert f"below the {test} interval's minimum of {MIN_N[test]}" in result.to_text()
    assert f"{test} test (min n {MIN_N[test]})" in result.to_text()


@pytest.mark.parametrize("test", ["randomization", "t", "wilcoxon", "bootstrap"])
def test_the_minimum_n_is_where_the_gate_starts_deciding(test):
    """A drop of 0.7 or 0.8 on every query: a regression from the test's minimum n on, inconclusive one below."""
    k = MIN_N[test]
    for n, decides in ((k, True), (k - 1, False)):
        ids = IDS40[:n]
        base = _report(_hits(ids, [9]), qids=ids)
        drop = _report(_hits(ids, [1, 2]), qids=ids)
        r = gate(base, drop, ["P@10:0.05"], test=test).rules[0]
        assert r.n == n and r.below_min_n is not decides
        if decides:
            assert r.verdict == "regression" and r.ci_high < -0.05
        else:
            assert r.verdict == "inconclusive" and math.isnan(r.ci_low) and math.isnan(r.ci_high)


@pytest.mark.parametrize("test", ["randomization", "t", "wilcoxon", "bootstrap"])
def test_all_equal_differences_are_announced_not_shown_as_certainty(test):
    ids = IDS40[:12]
    base = _report(_hits(ids, [6]), qids=ids)
    drop = _report(_hits(ids, [4]), qids=ids)  # every query drops by exactly 0.2
    with pytest.warns(DegenerateInterval, match=r"gate, 1 of 1 rules: P@10 max drop 0.05 \(regression, 12"):
        result = gate(base, drop, ["P@10:0.05"], test=test)
    r = result.rules[0]
    assert r.verdict == "regression" and r.degenerate
    assert "every one of the 12 paired differences is -0.2000: no spread among these queries" in result.to_text()
    assert "zero width" in result.to_markdown() and "zero width" in result.to_junit()


def test_cli_gate_bootstrap_on_one_query_is_inconclusive(tmp_path, capsys):
    ids = IDS40[:1]
    b, c = tmp_path / "b.parquet", tmp_path / "c.parquet"
    _report({"q00": 5}, qids=ids).save(b)
    _report({"q00": 5}, qids=ids).save(c)
    assert main(["gate", str(b), str(c), "-m", "P@10", "--max-drop", "0.05", "--test", "bootstrap"]) == 3
    out = capsys.readouterr().out
    assert "INCONCLUSIVE" in out and "no interval (n 1 is below bootstrap, min n 10)" in out


def test_cli_gate_refuses_unpaired_and_allows_it_explicitly(tmp_path, capsys):
    b, c = tmp_path / "b.parquet", tmp_path / "c.parquet"
    _report(_hits(IDS40, [5, 6, 7]), conventions="trec_eval").save(b)
    _report(_hits(IDS40[:20], [5, 7, 6, 8]), conventions="trec_eval").save(c)
    rule = ["-m", "P@10", "--max-drop", "0.05", "--test", "t"]
    assert main(["gate", str(b), str(c), *rule]) == 2
    err = capsys.readouterr().err
    assert "20 only in the baseline (q20, q21, q22, q23, q24, and 15 more)" in err and err.count("\n") == 1
    junit = tmp_path / "j.xml"
    args = ["gate", str(b), str(c), *rule, "--allow-different", "unpaired", "--junit", str(junit)]
    assert main(args) in (0, 3)
    out = capsys.readouterr().out
    assert "n 20 paired; left out: 20 only in the baseline" in out
    assert "left out: 20 only in the baseline (q20" in junit.read_text()


# --- 12(a): directions in the gate and in compare ---


def test_gate_on_a_lower_is_better_metric_stops_a_rise_and_passes_a_drop():
    ids = IDS40[:30]
    base = _report(_hits(ids, [5]), qids=ids, unjudged=_hits(ids, [2]))
    more = _report(_hits(ids, [5]), qids=ids, unjudged=_hits(ids, [5, 4]))  # unjudged@10 rises 0.2 to 0.3
    fewer = _report(_hits(ids, [5]), qids=ids, unjudged=_hits(ids, [0, 1]))  # falls 0.1 to 0.2
    r = gate(base, more, ["unjudged@10:0.05"], test="t").rules[0]
    assert r.difference == pytest.approx(0.25) and r.verdict == "regression" and not r.higher_is_better
    assert r.losses == 30 and r.wins == 0 and len(r.worse) == 30 and r.worse[0].change == pytest.approx(0.3)
    assert "lower is better: the interval's lower bound" in r.reason()
    r = gate(base, fewer, ["unjudged@10:0.05"], test="t").rules[0]
    assert r.difference == pytest.approx(-0.15) and r.verdict == "pass" and r.wins == 30 and not r.worse
    # a rise within max_drop passes; the same rise of a higher-is-better metric would too
    slight = _report(_hits(ids, [5]), qids=ids, unjudged=_hits(ids, [2, 3, 2, 2]))
    r = gate(base, slight, ["unjudged@10:0.2"], test="t").rules[0]
    assert r.verdict == "pass" and r.difference > 0 and "is below +0.2" in r.reason()


def test_gate_refuses_a_metric_with_no_better_side():
    ids = IDS40[:12]
    qrels = {q: {f"{q}-r": 1} for q in ids}
    run = rag_eval.Run.from_ranking({q: [f"{q}-r", "z"] for q in ids})
    report = rag_eval.evaluate(qrels, {"sys": run}, ["num_ret"], judged_threshold=0)
    with pytest.raises(ValueError, match="num_ret has no better side"):
        gate(report, report, ["num_ret:1"])


def test_compare_counts_a_drop_of_a_lower_is_better_metric_as_a_win():
    ids = IDS40[:30]
    base = _report(_hits(ids, [5]), qids=ids, unjudged=_hits(ids, [4]))
    better = rag_eval.evaluate(
        rag_eval.Qrels.from_dict(
            {q: {f"{q}-r{i}": 1 for i in range(10)} | {f"{q}-x{i}": 0 for i in range(10)} for q in ids}
        ),
        {
            "cand": rag_eval.Run.from_ranking(
                {q: [f"{q}-r{i}" for i in range(5)] + [f"{q}-x{i}" for i in range(5)] for q in ids}
            )
        },
        ["P@10", "recall@10", "unjudged@10"],
        judged_threshold=0,
    )
    with pytest.warns(DegenerateInterval):  # unjudged falls 0.4 and precision stays: the same on every query
        result = rag_eval.compare([base, better], baseline="sys", metrics=["unjudged@10", "precision@10"])
    rows = result.table.set_index("metric")
    assert rows.loc["unjudged@10", "diff"] == pytest.approx(-0.4)
    assert (rows.loc["unjudged@10", "wins"], rows.loc["unjudged@10", "losses"]) == (30, 0)
    assert rows.loc["unjudged@10", "direction"] == "lower" and rows.loc["precision@10", "direction"] == "higher"
    assert "lower is better for unjudged@10: a drop is a win" in str(result)
    assert result.settings["directions"] == {"unjudged@10": "lower", "precision@10": "higher"}


# --- class 2 for estimates: PPI, PPI++, human-only and judge-only intervals ---


def test_ppi_with_two_agreeing_human_values_is_refused_not_shown_as_certainty():
    """The issue's case: two human-graded queries whose values agree printed [1.0, 1.0]."""
    judge = {f"q{i:02d}": 1.0 for i in range(20)}
    two = {"q00": 1.0, "q01": 1.0}
    for tuned in (True, False):
        with pytest.raises(InputError, match="needs at least 10 human-graded queries, not 2: a normal interval's"):
            P.ppi_interval(judge, two, tuned=tuned)
    with pytest.raises(InputError, match="needs at least 10 human-graded queries, not 9"):
        P.human_interval({f"q{i:02d}": 0.5 + i / 100 for i in range(9)}, population=20)
    with pytest.raises(InputError, match="needs at least 10 judge-graded queries, not 9"):
        P.judge_interval({f"q{i:02d}": 0.5 + i / 100 for i in range(9)})


@pytest.mark.parametrize("method", ["ppi++", "ppi", "human", "judge"])
def test_a_zero_width_estimate_is_announced(method):
    judge = {f"q{i:02d}": 1.0 for i in range(20)}
    human = {f"q{i:02d}": 1.0 for i in range(10)}  # 10 agreeing values: the minimum n, no spread
    make = {
        "ppi++": lambda: P.ppi_interval(judge, human),
        "ppi": lambda: P.ppi_interval(judge, human, tuned=False),
        "human": lambda: P.human_interval(human, population=20),
        "judge": lambda: P.judge_interval(judge),
    }[method]
    with pytest.warns(DegenerateInterval, match=re.escape(f"({method}, ")):
        got = make()
    assert got.degenerate and got.width == pytest.approx(0.0, abs=1e-12) and got.estimate == pytest.approx(1.0)
    assert "zero width: every value alike, no spread among these queries, not certainty" in str(got)


def test_a_census_is_exact_not_degenerate():
    human = {f"q{i:02d}": 0.3 + (i % 3) / 10 for i in range(12)}
    got = P.human_interval(human, population=12)  # every query graded: the finite-population variance is 0
    assert got.width == 0.0 and not got.degenerate


def _judged(runs: dict[str, dict[str, list[str]]], qids, conventions="default", people=False):
    qrels = {q: {"a": 1, "b": 1 if int(q[1:]) % 3 else 0, "c": 0} for q in qids}
    if people:  # people's grades differ from the judge's on some queries
        qrels = {q: {"a": 1, "b": 1, "c": 1 if int(q[1:]) % 5 == 0 else 0} for q in qids}
    return rag_eval.evaluate(
        qrels, [rag_eval.Run.from_ranking(r, name=n) for n, r in runs.items()], ["mrr"], conventions=conventions
    )


def test_judge_assisted_refuses_a_sample_below_the_minimum_naming_system_and_metric():
    qids = [f"q{i:02d}" for i in range(30)]
    orders = {q: (["a", "c"] if int(q[1:]) % 2 else ["c", "b", "a"]) for q in qids}
    judge_report = _judged({"sys": orders}, qids)
    human_report = _judged({"sys": {q: orders[q] for q in qids[:9]}}, qids[:9])
    with pytest.raises(InputError, match=r"system 'sys', metric 'mrr': needs at least 10 human-graded queries, not 9"):
        P.judge_assisted(judge_report, human_report)


def test_judge_assisted_compare_counts_and_names_the_queries_one_system_lacks():
    qids = [f"q{i:02d}" for i in range(30)]
    full = {q: (["a", "c"] if int(q[1:]) % 2 else ["c", "b", "a"]) for q in qids}
    short = {q: (["b", "a"] if int(q[1:]) % 4 else ["c", "a"]) for q in qids[:26]}  # q26..q29 unanswered
    sample = qids[::2]  # 15 human-graded
    judge_report = _judged({"full": full, "short": short}, qids, conventions="trec_eval")
    human_report = _judged(
        {"full": {q: full[q] for q in sample}, "short": {q: short[q] for q in sample if q in short}},
        sample,
        conventions="trec_eval",
        people=True,
    )
    result = P.judge_assisted(judge_report, human_report)
    diffs = result.compare(baseline="full")
    row = diffs.iloc[0]
    assert row.n_unpaired == 4 + 2 and row.n_judge == 26 and row.n_human == 13
    notes = diffs.attrs["notes"]
    assert "left out of short - full, mrr (judge-graded): 4 only in 'full' (q26, q27, q28, q29)" in notes
    assert "left out of short - full, mrr (human-graded): 2 only in 'full' (q26, q28)" in notes


def test_cli_estimate_below_the_minimum_is_one_line_exit_2(tmp_path, capsys):
    qids = [f"q{i:02d}" for i in range(30)]
    orders = {q: (["a", "c"] if int(q[1:]) % 2 else ["c", "b", "a"]) for q in qids}
    _judged({"sys": orders}, qids).save(tmp_path / "judge.parquet")
    _judged({"sys": {q: orders[q] for q in qids[:4]}}, qids[:4]).save(tmp_path / "human.parquet")
    args = ["estimate", "--judge-report", str(tmp_path / "judge.parquet")]
    assert main([*args, "--human-report", str(tmp_path / "human.parquet")]) == 2
    err = capsys.readouterr().err
    assert "needs at least 10 human-graded queries, not 4" in err and err.count("\n") == 1


# --- the other paired paths: assert_no_regression, power, tune's held-out value ---


def test_assert_no_regression_refuses_unpaired_queries_as_bad_input():
    from rag_eval.testing import assert_no_regression

    base = _report(_hits(IDS40, [5, 6, 7]), conventions="trec_eval")
    half = _report(_hits(IDS40[:20], [6, 8, 7, 9]), conventions="trec_eval")
    with pytest.raises(UnpairedQueries, match="20 only in the baseline"):
        assert_no_regression(base, half, metric="P@10", max_drop=0.05)
    result = assert_no_regression(base, half, metric="P@10", max_drop=0.05, allow={"unpaired"}, test="t")
    assert result.rules[0].n == 20 and result.rules[0].n_unpaired == 20
    # a rise of a lower-is-better metric is a regression: AssertionError with the verdict
    ids = IDS40[:30]
    before = _report(_hits(ids, [5]), qids=ids, unjudged=_hits(ids, [1]))
    after = _report(_hits(ids, [5]), qids=ids, unjudged=_hits(ids, [4, 5]))
    with pytest.raises(AssertionError, match="lower is better"):
        assert_no_regression(before, after, metric="unjudged@10", max_drop=0.05, test="t")


def test_power_from_a_report_names_the_queries_left_out():
    ids = IDS40[:30]
    qrels = rag_eval.Qrels.from_dict({q: {f"{q}-r{i}": 1 for i in range(10)} for q in ids})
    runs = {
        "a": rag_eval.Run.from_ranking({q: [f"{q}-r{i}" for i in range(1 + k % 4)] for k, q in enumerate(ids)}),
        "b": rag_eval.Run.from_ranking({q: [f"{q}-r{i}" for i in range(2 + k % 3)] for k, q in enumerate(ids[:24])}),
    }
    report = rag_eval.evaluate(qrels, runs, ["P@10"], conventions="trec_eval")
    analysis = rag_eval.power(report, baseline="a", metric="P@10")
    assert (analysis.n, analysis.n_unpaired) == (24, 6)
    assert "left out of the pilot: 6 only in 'a' (q24, q25, q26, q27, q28, and 1 more)" in analysis.to_text()


def test_the_held_out_value_says_what_it_rests_on():
    from rag_eval.drivers.tuning import HeldOut

    few = HeldOut("recall@budget", 0.5, math.nan, math.nan, 6, 1, 0.95, n_queries=8, not_measured=("q7",))
    assert few.interval() == (
        "no interval: n 6 is below the bootstrap's minimum n 10 (95% bootstrap, min n 10; n=6 of 8 held-out "
        "queries; 1 NaN left out; 1 not measured, left out (q7))"
    )
    flat = HeldOut("recall@budget", 1.0, 1.0, 1.0, 12, 0, 0.95, n_queries=12, degenerate=True)
    assert flat.interval().endswith("n=12 of 12 held-out queries; zero width: every value the same, not certainty)")


def test_compare_below_the_bootstrap_minimum_shows_no_interval():
    ids = IDS40[:5]
    one = _report(_hits(ids, [5, 6, 3, 7, 4]), qids=ids)
    two = rag_eval.evaluate(
        rag_eval.Qrels.from_dict({q: {f"{q}-r{i}": 1 for i in range(10)} for q in ids}),
        {"b": rag_eval.Run.from_ranking({q: [f"{q}-r{i}" for i in range(k)] for q, k in zip(ids, [6, 6, 5, 7, 2])})},
        ["P@10"],
    )
    result = rag_eval.compare([one, two], baseline="sys", metrics=["precision@10"])
    row = result.table.iloc[0]
    assert row.n == 5 and math.isnan(row.ci_low) and math.isnan(row.ci_high)
    assert "sys" in str(result) and "b vs sys, precision@10: no interval, n 5 is below bootstrap's minimum n 10" in (
        str(result)
    )
    assert "intervals: paired bootstrap, min n 10" in str(result)
