"""The regression gate (rag_eval.drivers.gating, rag-eval gate, rag_eval.testing): the decision rule on hand-made
reports with the numbers worked out here (Student's t interval from SciPy, the power tools' MDD), the correction
across rules, the randomization test's inverted interval, refusals and overrides, the exit codes through
rag_eval.cli.main, the JUnit file validated against Jenkins' JUnit schema (tests/data/junit), the Markdown summary,
assert_no_regression, the CI example script run locally; and on SciFact (slow) a BM25 pipeline with a function
reranker: an identical candidate passes, one that reverses the top 5 is a regression, a small change (ranks 2 and 3
swapped) on 20 queries is inconclusive."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import xmlschema
from scipy import stats

import rag_eval
from rag_eval.cli import main
from rag_eval.drivers.gating import NotComparable, Rule, gate
from rag_eval.errors import DegenerateInterval
from rag_eval.renderers.result_folder import comparable, differences
from rag_eval.statistics.paired import (
    UnpairedQueries,
    bootstrap_test,
    paired_bootstrap_ci,
    randomization_interval,
    randomization_test,
    t_interval,
)
from rag_eval.statistics.power_analysis import t_minimum_detectable_difference, t_queries_needed
from rag_eval.testing import assert_no_regression

from .conftest import DATASETS, ROOT, need_shared

XSD = ROOT / "tests" / "data" / "junit" / "junit-10.xsd"
SCRIPT = ROOT / "docs" / "ci" / "retrieval-gate.sh"
WORKFLOW = ROOT / "docs" / "ci" / "retrieval-gate.yml"


def _report(hits: dict[str, int], *, run: str = "sys", extra_judged: int = 0, conventions: str = "default"):
    """A plain report of P@10 where query q's value is hits[q] / 10: each query has 10 relevant documents (and
    ``extra_judged`` judged non-relevant ones), the run returns hits[q] of them and 10 - hits[q] others."""
    qrels = {q: {f"{q}-r{i}": 1 for i in range(10)} | {f"{q}-x{i}": 0 for i in range(extra_judged)} for q in hits}
    ranking = {q: [f"{q}-r{i}" for i in range(j)] + [f"{q}-n{i}" for i in range(10 - j)] for q, j in hits.items()}
    return rag_eval.evaluate(
        rag_eval.Qrels.from_dict(qrels),
        {run: rag_eval.Run.from_ranking(ranking)},
        ["P@10", "recall@10"],
        judged_threshold=0,
        conventions=conventions,
    )


def _pair(base: list[int], cand: list[int]):
    ids = [f"q{i:02d}" for i in range(len(base))]
    return _report(dict(zip(ids, base, strict=True))), _report(dict(zip(ids, cand, strict=True)))


def _t_numbers(diff: np.ndarray, confidence: float) -> tuple[float, float]:
    n = len(diff)
    half = stats.t.ppf(1 - (1 - confidence) / 2, n - 1) * diff.std(ddof=1) / math.sqrt(n)
    return diff.mean() - half, diff.mean() + half


# 30 queries: baseline 5/10 each
BASE30 = [5] * 30
SAME_MEAN = [4, 4, 4, 6, 6, 6] + [5] * 24  # diffs: three -0.1, three +0.1, 24 zeros: mean 0
DROP = [3] * 20 + [4] * 10  # diffs: twenty -0.2, ten -0.1: mean -1/6
FEW_BASE = [5, 5, 5, 5, 5, 5]
FEW_CAND = [2, 6, 3, 5, 4, 6]  # diffs -0.3, +0.1, -0.2, 0, -0.1, +0.1: mean -1/15


def test_pass_regression_and_inconclusive_with_the_t_interval():
    alpha = 0.05
    base, same = _pair(BASE30, SAME_MEAN)
    result = gate(base, same, [Rule("P@10", 0.05)], test="t", alpha=alpha)
    (r,) = result.rules
    diff = (np.array(SAME_MEAN) - np.array(BASE30)) / 10
    low, high = _t_numbers(diff, 0.95)
    assert (r.ci_low, r.ci_high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    assert low == pytest.approx(-0.0170, abs=1e-4)  # mean 0, sd 0.0455, t(0.975, 29) 2.045
    assert r.verdict == "pass" and result.verdict == "pass" and result.exit_code == 0 and result.passed
    assert r.difference == pytest.approx(0.0, abs=1e-15) and r.n == 30 and (r.wins, r.ties, r.losses) == (3, 24, 3)
    assert r.p_value == pytest.approx(stats.ttest_rel(np.array(SAME_MEAN) / 10, np.array(BASE30) / 10).pvalue)
    assert [w.query_id for w in r.worse] == ["q00", "q01", "q02"]
    assert [w.change for w in r.worse] == pytest.approx([-0.1, -0.1, -0.1])
    assert r.worse[0].baseline == 0.5 and r.worse[0].candidate == pytest.approx(0.4)

    base, drop = _pair(BASE30, DROP)
    r = gate(base, drop, ["P@10:0.05"], test="t").rules[0]
    diff = (np.array(DROP) - np.array(BASE30)) / 10
    low, high = _t_numbers(diff, 0.95)
    assert r.ci_high == pytest.approx(high, abs=1e-12) and high < -0.05
    assert r.difference == pytest.approx(-1 / 6) and r.verdict == "regression"
    assert len(r.worse) == 30 and r.worse[0].change == pytest.approx(-0.2) and r.worse[-1].change == pytest.approx(-0.1)
    assert r.worse[0].query_id == "q00" and r.worse[-1].query_id == "q29"  # ties in order of query id

    base, few = _pair(FEW_BASE, FEW_CAND)
    result = gate(base, few, ["P@10:0.05"], test="t")
    r = result.rules[0]
    diff = (np.array(FEW_CAND) - np.array(FEW_BASE)) / 10
    low, high = _t_numbers(diff, 0.95)
    assert (r.ci_low, r.ci_high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    assert low < -0.05 < high and r.verdict == "inconclusive"
    assert result.exit_code == 3 and not result.passed
    sd = diff.std(ddof=1)
    assert r.minimum_detectable_difference == pytest.approx(t_minimum_detectable_difference(sd, 6, 0.05, 0.8))
    assert r.queries_needed == t_queries_needed(0.05, sd, 0.05, 0.8)
    assert r.queries_needed > 6 and r.minimum_detectable_difference > 0.05
    assert f"about {r.queries_needed} queries needed to tell a drop of 0.05" in result.to_text()
    assert gate(base, few, ["P@10:0.05"], test="t", inconclusive="pass").exit_code == 0


def test_the_correction_sets_the_level_of_every_interval():
    base, drop = _pair(BASE30, DROP)
    rules = ["P@10:0.05", "recall@10:0.05", "P@10:0.5"]
    diff = (np.array(DROP) - np.array(BASE30)) / 10
    holm = gate(base, drop, rules, test="t", correction="holm")
    assert holm.alpha_rule == pytest.approx(0.05 / 3)
    low, _ = _t_numbers(diff, 1 - 0.05 / 3)
    assert holm.rules[0].ci_low == pytest.approx(low, abs=1e-12) and holm.rules[0].confidence == pytest.approx(
        1 - 0.05 / 3
    )
    p = stats.ttest_rel(np.array(DROP) / 10, np.array(BASE30) / 10).pvalue
    assert [r.p_adjusted for r in holm.rules] == pytest.approx([min(1, 3 * p)] * 3)  # Holm with three equal p
    assert [r.verdict for r in holm.rules] == ["regression", "regression", "pass"]  # a drop of 0.17 < 0.5
    assert holm.verdict == "regression" and holm.exit_code == 1
    none = gate(base, drop, rules, test="t", correction="none")
    assert none.alpha_rule == 0.05 and none.rules[0].ci_low == pytest.approx(_t_numbers(diff, 0.95)[0], abs=1e-12)
    bh = gate(base, drop, rules, test="t", correction="bh")
    assert bh.alpha_rule == pytest.approx(3 * 0.05 / 3)  # all three rejected by BH: R = 3, level R * alpha / m
    base, same = _pair(BASE30, SAME_MEAN)
    assert gate(base, same, rules, test="t", correction="bh").alpha_rule == pytest.approx(0.05 / 3)  # R = 0 -> 1
    assert "holm over 3 rules: alpha 0.05/3" in holm.to_text()


def test_the_randomization_interval_inverts_the_randomization_test():
    rng = np.random.default_rng(3)
    diff = np.round(rng.normal(-0.02, 0.1, size=40), 3)
    low, high = randomization_interval(diff, confidence=0.95, permutations=2000, seed=0)
    assert low < diff.mean() < high
    for bound, outward in ((low, -1), (high, 1)):
        inside = randomization_test(diff - (bound - outward * 1e-6), permutations=2000, seed=0)
        outside = randomization_test(diff - (bound + outward * 1e-6), permutations=2000, seed=0)
        assert inside >= 0.05 > outside
    # at 5 queries the exact test cannot reject at 0.05 (p >= 2/32): the interval is the whole line, so inconclusive
    assert randomization_interval(diff[:5], confidence=0.95, permutations=10000, seed=0) == (-math.inf, math.inf)
    base, few = _pair([5] * 5, [1] * 5)
    r = gate(base, few, ["P@10:0.01"]).rules[0]
    assert r.difference == pytest.approx(-0.4) and r.verdict == "inconclusive" and r.p_value == pytest.approx(2 / 32)
    # below the randomization test's minimum n (6) no interval is shown: inconclusive, saying why (issue 27)
    assert "no interval (n 5 is below randomization, min n 6)" in gate(base, few, ["P@10:0.01"]).to_text()


def test_the_bootstrap_test_is_the_inversion_of_its_interval():
    rng = np.random.default_rng(5)
    diff = rng.normal(0.03, 0.1, size=50)
    low, high = paired_bootstrap_ci(diff, resamples=4000, confidence=0.9, seed=0)
    p = bootstrap_test(diff, resamples=4000, seed=0)
    assert (p < 0.1) == (low > 0 or high < 0)
    assert bootstrap_test(np.zeros(10), resamples=100, seed=0) == 1.0
    assert t_interval(np.full(4, -0.1), confidence=0.95) == (pytest.approx(-0.1), pytest.approx(-0.1))
    base, drop = _pair(BASE30, DROP)
    for test in ("bootstrap", "wilcoxon"):  # both decide on the bootstrap interval of the mean
        r = gate(base, drop, ["P@10:0.05"], test=test, resamples=2000).rules[0]
        assert (r.ci_low, r.ci_high) == paired_bootstrap_ci(
            (np.array(DROP) - np.array(BASE30)) / 10, resamples=2000, confidence=0.95, seed=0
        )
        assert r.verdict == "regression"
    assert gate(base, drop, ["P@10:0.05"], test="wilcoxon").rules[0].p_value == pytest.approx(
        stats.wilcoxon(np.array(DROP) / 10, np.array(BASE30) / 10).pvalue
    )


def test_rules_parse_and_refuse_bad_ones():
    assert Rule.parse("ndcg@budget:0.01") == Rule("ndcg@budget", 0.01)
    assert Rule.parse("recall@depth:bm25:0.02") == Rule("recall@depth", 0.02, "bm25")
    assert Rule.parse("ndcg(gains=1:3;2:9)@10:0.01") == Rule("ndcg(gains=1:3;2:9)@10", 0.01)
    assert str(Rule("ndcg@budget", 0.01, "rerank")) == "ndcg@budget [rerank] max drop 0.01"
    for bad in ("ndcg@10", "a:b:c:0.1", "ndcg@10:1_0", "ndcg@10:x"):
        with pytest.raises(ValueError, match="rule"):
            Rule.parse(bad)
    with pytest.raises(ValueError, match="max_drop must be a finite number >= 0"):
        Rule("ndcg@10", -0.1)
    base, same = _pair(BASE30, SAME_MEAN)
    with pytest.raises(ValueError, match=r"does not measure 'ndcg@5'.*it measures \['precision@10', 'recall@10'\]"):
        gate(base, same, ["ndcg@5:0.01"])
    with pytest.raises(ValueError, match="is given twice"):
        gate(base, same, ["P@10:0.01", "P@10:0.01"])
    with pytest.raises(ValueError, match="unknown test 'sign'"):
        gate(base, same, ["P@10:0.01"], test="sign")
    with pytest.raises(ValueError, match="cannot allow"):
        gate(base, same, ["P@10:0.01"], allow={"everything"})
    assert gate(base, same, ["p@10:0.05"]).rules[0].metric == "precision@10"  # canonical, as the report names it


def test_floor_rules_parse_and_refuse_bad_ones():
    assert Rule.parse("P@10 >= 0.3") == Rule("P@10", floor=0.3)
    assert Rule.parse("recall@depth:bm25>=0.25") == Rule("recall@depth", stage="bm25", floor=0.25)
    assert Rule.parse("ndcg(gains=1:3;2:9)@10 >= 0.1") == Rule("ndcg(gains=1:3;2:9)@10", floor=0.1)
    assert str(Rule("ndcg@budget", stage="rerank", floor=0.3)) == "ndcg@budget [rerank] >= 0.3"
    for bad in ("P@10 >= x", "a:b:c >= 0.1", "P@10 >= ", "P@10 >= 0.1:0.2"):
        with pytest.raises(ValueError, match="expected METRIC >= FLOOR"):
            Rule.parse(bad)
    for neither_or_both in ({}, {"max_drop": 0.1, "floor": 0.2}):
        with pytest.raises(ValueError, match=r"give max_drop .a drop from the baseline. or floor, one of them"):
            Rule("P@10", **neither_or_both)
    with pytest.raises(ValueError, match="floor must be a finite number"):
        Rule("P@10", floor=math.inf)


@pytest.mark.parametrize(("floor", "verdict"), [(0.2, "pass"), (1 / 3, "inconclusive"), (0.5, "regression")])
def test_a_floor_rule_holds_the_candidates_mean_against_the_floor(floor, verdict):
    base, cand = _pair(BASE30, DROP)  # the candidate's P@10: twenty 0.3, ten 0.4 (mean 1/3); the baseline unread
    rule = gate(base, cand, [Rule("P@10", floor=floor)], test="t").rules[0]
    values = np.array(DROP) / 10
    low, high = _t_numbers(values - floor, 0.95)
    assert (rule.n, rule.n_nan, rule.verdict) == (30, 0, verdict)
    assert rule.ci_low == pytest.approx(low, abs=1e-12) and rule.ci_high == pytest.approx(high, abs=1e-12)
    assert rule.candidate_mean == pytest.approx(1 / 3) and rule.difference == pytest.approx(1 / 3 - floor)
    assert rule.baseline_mean == pytest.approx(floor) and rule.baseline_system == f"the floor {floor:g}"
    assert rule.p_value == pytest.approx(stats.ttest_1samp(values, floor).pvalue, abs=1e-12)
    assert len(rule.worse) == int((values < floor).sum())
    shown = f"the mean's interval [{floor + low:.4f}, {floor + high:.4f}]"
    said = {"pass": "is above the floor", "regression": "is below the floor", "inconclusive": "holds the floor"}
    assert rule.reason().startswith(f"{shown} {said[verdict]} {floor:g}")
    assert f"n 30 of the candidate's, against the floor {floor:g}; none left out" in rule.numbers()
    if verdict == "regression":
        assert rule.worst(2) == "below the floor on 30 queries: q00 0.3000, q01 0.3000, and 28 more"


def test_a_floor_rule_on_the_command_line(tmp_path, capsys):
    base, drop = _pair(BASE30, DROP)
    b, d = _saved(tmp_path, "b", base), _saved(tmp_path, "d", drop)
    assert main(["gate", b, d, "--rule", "P@10 >= 0.2", "--test", "t"]) == 0
    assert "PASS  precision@10 [sys], >= 0.2" in capsys.readouterr().out
    summary = tmp_path / "s.md"
    assert main(["gate", b, d, "--rule", "P@10>=0.5", "--rule", "P@10:0.5", "--markdown", str(summary)]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION  precision@10 [sys], >= 0.5" in out and "PASS  precision@10 [sys], max drop 0.5" in out
    text = summary.read_text("utf-8")
    assert "30 queries below the floor (10 largest drops):" in text and "| query | floor | candidate | change |" in text


def test_refuses_what_is_not_comparable_and_prints_the_override():
    ids = [f"q{i:02d}" for i in range(30)]
    base = _report(dict(zip(ids, BASE30, strict=True)))
    other_qrels = _report(dict(zip(ids, BASE30, strict=True)), extra_judged=1)  # a judged non-relevant doc more
    with pytest.raises(NotComparable) as caught:
        gate(base, other_qrels, ["P@10:0.05"])
    message = str(caught.value)
    assert message.startswith("baseline and candidate are not comparable: qrels: sha256:")
    assert "in baseline" in message and "in candidate" in message and "--allow-different qrels" in message
    with pytest.warns(DegenerateInterval, match="30 queries, each"):  # the same values: zero width (issue 27)
        result = gate(base, other_qrels, ["P@10:0.05"], allow={"qrels"})
    assert result.verdict == "pass" and len(result.overrides) == 1 and result.rules[0].degenerate
    assert "OVERRIDE (allowed to differ): qrels: sha256:" in result.to_text()
    assert "**Override** (allowed to differ): qrels" in result.to_markdown()

    fewer = _report(dict(zip(ids[:29], BASE30[:29], strict=True)))  # another query set: qrels and queries differ
    with pytest.raises(NotComparable, match=r"qrels: .*; queries: sha256:\w+ in baseline"):
        gate(base, fewer, ["P@10:0.05"])
    found = differences(base, fewer, names=("main", "branch"))
    assert [what for what, _ in found] == ["qrels", "queries"] and found[1][1].endswith(" in branch")
    assert comparable(base, fewer) == [line.replace("main", "a").replace("branch", "b") for _, line in found]
    # the query sets may differ, but a query only one side measured is refused unless allowed too (issue 27)
    with pytest.raises(UnpairedQueries, match=r"1 only in the baseline \(q29\); 29 measured on both"):
        gate(base, fewer, ["P@10:0.05"], allow={"qrels", "queries"})
    with pytest.warns(DegenerateInterval):
        result = gate(base, fewer, ["P@10:0.05"], allow={"qrels", "queries", "unpaired"})
    assert result.rules[0].n == 29 and result.rules[0].n_unpaired == 1 and result.rules[0].only_baseline == ("q29",)
    assert "left out: 1 only in the baseline (q29)" in result.to_text()

    trec = _report(dict(zip(ids, BASE30, strict=True)), conventions="trec_eval")
    with pytest.raises(NotComparable, match=r"conventions differ in .*gain"):
        gate(base, trec, ["P@10:0.05"])


def _tiny_pipeline_report(reranker, budget: int = 3):
    from rag_eval.adapters import functions
    from rag_eval.examples import BEIR_FOLDER

    collection = rag_eval.Collection.from_beir(BEIR_FOLDER)

    def overlap(query, k):
        words = set(query.lower().split())
        scored = [(d, len(words & set(c.content.lower().split()))) for d, c in collection.corpus.items()]
        return sorted(scored, key=lambda x: (-x[1], x[0]))[:k]

    pipe = rag_eval.Pipeline(
        functions.retriever(overlap, name="overlap"),
        functions.reranker(reranker, name="rerank"),
        depth=10,
        budget=budget,
    )
    return rag_eval.evaluate(collection.qrels, {"p": pipe.run(collection.queries)}, judged_threshold=0), collection


def _keep(query, hits):
    return list(hits)


def _reverse5(query, hits):
    return list(hits[:5])[::-1] + list(hits[5:])


def test_stage_aware_rules_and_a_different_budget():
    base, _ = _tiny_pipeline_report(_keep)
    worse, _ = _tiny_pipeline_report(_reverse5)
    with pytest.warns(DegenerateInterval, match="recall@depth"):  # the reranker leaves recall@depth as it was
        result = gate(base, worse, ["ndcg@budget:0.01", "recall@depth:0.01"], test="t")
    ndcg, recall = result.rules
    assert ndcg.candidate_system == "p/rerank" and recall.candidate_system == "p/overlap"  # the last that has it
    assert ndcg.difference < 0 and recall.difference == 0 and recall.verdict == "pass"
    with pytest.raises(ValueError, match="has no stage or run 'dense'"):
        gate(base, worse, ["ndcg@budget:dense:0.01"])
    other_budget, _ = _tiny_pipeline_report(_keep, budget=4)
    with pytest.raises(NotComparable, match=r"budget: budget\(3\) in baseline, budget\(4\) in candidate"):
        gate(base, other_budget, ["ndcg@budget:0.01"])


def test_junit_validates_against_the_schema_and_carries_the_numbers(tmp_path):
    schema = xmlschema.XMLSchema(str(XSD))
    base, drop = _pair(BASE30, DROP)
    base2, few = _pair(FEW_BASE, FEW_CAND)
    for inconclusive in ("fail", "pass"):
        for b, c, rules in ((base, drop, ["P@10:0.05", "P@10:0.5"]), (base2, few, ["P@10:0.05"])):
            path = tmp_path / f"junit-{inconclusive}-{len(rules)}.xml"
            result = gate(b, c, rules, test="t", inconclusive=inconclusive)
            result.write_junit(path)
            schema.validate(str(path))  # raises on any violation
            root = ET.parse(path).getroot()
            cases = root.findall("./testsuite/testcase")
            assert len(cases) == len(rules) == int(root.get("tests"))
            failed = [c for c in cases if c.find("failure") is not None]
            skipped = [c for c in cases if c.find("skipped") is not None]
            assert int(root.get("failures")) == len(failed)
            assert int(root.find("testsuite").get("skipped")) == len(skipped)
            for case, r in zip(cases, result.rules, strict=True):
                assert case.get("name") == f"{r.rule} (sys)"
                if r.verdict == "regression" or (r.verdict == "inconclusive" and inconclusive == "fail"):
                    message = case.find("failure").get("message")
                    assert case.find("failure").get("type") == r.verdict
                elif r.verdict == "inconclusive":
                    message = case.find("skipped").get("message")
                else:
                    assert case.find("failure") is None and case.find("skipped") is None
                    continue
                assert message.startswith(f"{r.verdict}: difference {r.difference:+.4f}")
                assert f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}]" in message
    props = {p.get("name"): p.get("value") for p in ET.parse(path).getroot().iter("property")}
    assert props["test"] == "t" and props["inconclusive"] == "pass" and props["verdict"] == "inconclusive"


def test_markdown_summary_lists_rules_and_the_queries_that_got_worse():
    base, drop = _pair(BASE30, DROP)
    text = gate(base, drop, ["P@10:0.05"], test="t").to_markdown()
    lines = text.splitlines()
    assert lines[0] == "## Retrieval gate: REGRESSION (exit 1)"
    row = next(line for line in lines if line.startswith("| P@10 max drop 0.05 |"))
    assert "| sys | 30 | 0.5000 | 0.3333 | -0.1667 |" in row and row.endswith("| **regression** |")
    assert "30 queries got worse (10 largest drops):" in text
    assert "| q00 | 0.5000 | 0.3000 | -0.2000 |" in text
    assert sum(re.match(r"\| q\d\d \|", line) is not None for line in lines) == 10


def test_assert_no_regression():
    base, same = _pair(BASE30, SAME_MEAN)
    result = assert_no_regression(base, same, metric="P@10", max_drop=0.05, test="t")
    assert result.verdict == "pass"
    base, drop = _pair(BASE30, DROP)
    with pytest.raises(AssertionError, match=r"(?s)rag-eval gate: REGRESSION \(exit 1\).*precision@10"):
        assert_no_regression(base, drop, metric="P@10", max_drop=0.05, test="t")
    base, few = _pair(FEW_BASE, FEW_CAND)
    with pytest.raises(AssertionError, match="INCONCLUSIVE"):
        assert_no_regression(base, few, rules=["P@10:0.05"], test="t")
    assert assert_no_regression(base, few, rules=["P@10:0.05"], test="t", inconclusive="pass").verdict == (
        "inconclusive"
    )
    with pytest.raises(ValueError, match="needs max_drop"):
        assert_no_regression(base, few, metric="P@10")
    assert "pytest" not in Path(rag_eval.testing.__file__).read_text().split('"""')[2]  # no plugin, no pytest import


def _saved(tmp_path: Path, name: str, report) -> str:
    path = tmp_path / f"{name}.parquet"
    report.save(path)
    return str(path)


def test_exit_codes_through_the_cli(tmp_path, capsys):
    base, drop = _pair(BASE30, DROP)
    _, same = _pair(BASE30, SAME_MEAN)
    base_few, few = _pair(FEW_BASE, FEW_CAND)
    b, d, s = _saved(tmp_path, "b", base), _saved(tmp_path, "d", drop), _saved(tmp_path, "s", same)
    bf, f = _saved(tmp_path, "bf", base_few), _saved(tmp_path, "f", few)
    common = ["--metric", "P@10", "--max-drop", "0.05", "--test", "t"]
    assert main(["gate", b, s, *common]) == 0
    assert capsys.readouterr().out.startswith(f"rag-eval gate: PASS (exit 0)\n  baseline {b}, candidate {s}\n")
    junit, summary = tmp_path / "j.xml", tmp_path / "s.md"
    assert main(["gate", b, d, *common, "--junit", str(junit), "--markdown", str(summary)]) == 1
    assert "REGRESSION" in capsys.readouterr().out
    assert junit.exists() and summary.read_text().startswith("## Retrieval gate: REGRESSION (exit 1)")
    assert main(["gate", bf, f, *common]) == 3
    assert main(["gate", bf, f, *common, "--inconclusive", "pass"]) == 0
    capsys.readouterr()
    assert main(["gate", bf, f, "--rule", "P@10:0.05", "--rule", "recall@10:0.5", "--test", "t"]) == 3
    out = capsys.readouterr().out
    assert "holm over 2 rules" in out and out.count("INCONCLUSIVE") == 2  # the verdict line and the rule
    # 2: bad input or not comparable, one line naming the problem
    assert main(["gate", b, bf, *common]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rag-eval: error: baseline and candidate are not comparable: qrels:") and err.count("\n") == 1
    # 24 queries only in the baseline: refused (2) unless --allow-different unpaired too (issue 27)
    assert main(["gate", b, f, *common, "--allow-different", "qrels", "queries"]) == 2
    assert "24 only in the baseline (q06, q07, q08, q09, q10, and 19 more)" in capsys.readouterr().err
    assert main(["gate", b, f, *common, "--allow-different", "qrels", "queries", "unpaired"]) == 3  # the 6 in common
    out = capsys.readouterr().out
    assert "OVERRIDE (allowed to differ): qrels" in out and "n 6 paired; left out: 24 only in the baseline" in out
    assert main(["gate", b, s, "--metric", "P@10"]) == 2
    assert "--metric needs --max-drop" in capsys.readouterr().err
    assert main(["gate", b, s, "--metric", "P@10", "--max-drop", "-0.1"]) == 2
    assert "max_drop must be a finite number >= 0" in capsys.readouterr().err
    assert main(["gate", str(tmp_path / "missing"), s, *common]) == 2
    assert f"{tmp_path / 'missing'}: no such report file or result folder (baseline)" in capsys.readouterr().err
    assert main(["gate", b, s]) == 2
    assert "no rule" in capsys.readouterr().err


def _no_network_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a subprocess whose Python refuses every connection off loopback, as the suite's
    pytest-socket does (a sitecustomize that calls it), with .venv/bin first on PATH."""
    site = tmp_path / "no-network"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(
        "import pytest_socket\npytest_socket.socket_allow_hosts(['127.0.0.1', '::1'], allow_unix_socket=True)\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("GITHUB_STEP_SUMMARY", None)
    return env


def test_the_ci_script_runs_locally_with_the_network_off(tmp_path):
    env = _no_network_env(tmp_path)
    probe = (
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('192.0.2.1', 80), timeout=1)\n"
        "except Exception as e:\n"
        "    print(type(e).__name__)\n"
    )
    blocked = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert blocked.stdout.strip() == "SocketConnectBlockedError"  # pytest-socket's guard is on in its Python
    base, drop = _pair(BASE30, DROP)
    _, same = _pair(BASE30, SAME_MEAN)
    b, d, s = _saved(tmp_path, "b", base), _saved(tmp_path, "d", drop), _saved(tmp_path, "s", same)
    env |= {"GATE_METRIC": "P@10", "GATE_MAX_DROP": "0.05", "GATE_OUT": str(tmp_path / "out"), "GATE_ARGS": "--test t"}
    sh = shutil.which("sh") or "/bin/sh"
    done = subprocess.run([sh, str(SCRIPT), b, s], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("rag-eval gate: PASS (exit 0)")
    done = subprocess.run([sh, str(SCRIPT), b, d], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1 and "regression" in done.stderr
    assert (tmp_path / "out" / "junit.xml").exists()
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert summary.count("## Retrieval gate:") == 2  # appended to, as $GITHUB_STEP_SUMMARY is
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "step-summary.md")
    done = subprocess.run([sh, str(SCRIPT), b, d], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1 and (tmp_path / "step-summary.md").read_text().startswith(
        "## Retrieval gate: REGRESSION"
    )
    done = subprocess.run([sh, str(SCRIPT), b], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and "usage" in done.stderr


def test_the_workflow_calls_the_script():
    """The workflow's gate step is the script (what runs locally), called with the two folders; the JUnit file is
    kept even when the gate fails. Read as YAML where PyYAML is installed, else line by line."""
    text = WORKFLOW.read_text()
    try:
        import yaml
    except ImportError:
        runs = [line.split("run:", 1)[1].strip() for line in text.splitlines() if line.strip().startswith("run:")]
        uses = [line.split("uses:", 1)[1].strip() for line in text.splitlines() if "uses:" in line]
    else:
        steps = [step for job in yaml.safe_load(text)["jobs"].values() for step in job["steps"]]
        runs, uses = [s.get("run", "") for s in steps], [s.get("uses", "") for s in steps]
    assert "sh docs/ci/retrieval-gate.sh ci/baseline results/candidate" in runs
    assert any(u.startswith("actions/upload-artifact") for u in uses)
    assert "if: always()" in text and "gate-out/junit.xml" in text


# ----- SciFact: BM25 and a function reranker ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def scifact_folders(tmp_path_factory):
    """Result folders of BM25 (bm25s, depth 20) >> a function reranker, budget 5, on SciFact's 300 test queries:
    the baseline (keeps BM25's order), an identical candidate, one that reverses the top 5; and on the first 20
    queries, the baseline and a candidate that swaps ranks 2 and 3 (a small change)."""
    folder = need_shared(DATASETS / "scifact")
    import bm25s  # the models and bench extras (dev) bring it

    from rag_eval.adapters import functions

    collection = rag_eval.Collection.from_beir(folder)
    ids = list(collection.corpus)
    texts = [c.content for c in collection.corpus.values()]  # title and text, as BEIR joins them
    index = bm25s.BM25()
    index.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)

    def search(query_texts, k):
        found, scores = index.retrieve(
            bm25s.tokenize(list(query_texts), stopwords="en", show_progress=False), k=k, show_progress=False
        )
        return [
            [(ids[d], float(s)) for d, s in zip(row, srow, strict=True)]
            for row, srow in zip(found, scores, strict=True)
        ]

    def swap23(query, hits):
        hits = list(hits)
        return hits[:1] + hits[1:3][::-1] + hits[3:]

    retriever = functions.retriever(search, name="bm25", version="bm25s-test-scifact", batch=True)
    out = tmp_path_factory.mktemp("scifact")
    cache = out / "cache"
    first20 = dict(sorted(collection.queries.items())[:20])
    judged = collection.qrels.to_dict()
    qrels20 = rag_eval.Qrels.from_dict({q: judged[q] for q in first20})  # else the other 280 count as 0
    folders = {}
    for name, fn, queries, qrels in (
        ("baseline", _keep, collection.queries, collection.qrels),
        ("identical", _keep, collection.queries, collection.qrels),
        ("reversed", _reverse5, collection.queries, collection.qrels),
        ("baseline20", _keep, first20, qrels20),
        ("swapped20", swap23, first20, qrels20),
    ):
        reranker = functions.reranker(fn, name="rerank", version=fn.__name__)
        pipe = rag_eval.Pipeline(retriever, reranker, depth=20, budget=5)
        result = pipe.run(queries, cache=cache, batch_size=300)
        report = rag_eval.evaluate(qrels, {"bm25-rerank": result}, judged_threshold=0)
        runs = {"bm25-rerank": result}
        report.save_folder(out / name, qrels=qrels, runs=runs, collection=collection, plots=False)
        folders[name] = str(out / name)
    return folders


@pytest.mark.slow
@pytest.mark.filterwarnings("always::rag_eval.errors.DegenerateInterval")  # the CLI prints it on stderr
def test_scifact_gate_passes_the_same_fails_a_reversed_top5_and_is_inconclusive_on_20_queries(
    scifact_folders, tmp_path, capsys
):
    schema = xmlschema.XMLSchema(str(XSD))
    f = scifact_folders
    rule = ["--metric", "ndcg@budget", "--max-drop", "0.01"]
    junit = tmp_path / "junit.xml"
    assert main(["gate", f["baseline"], f["identical"], *rule, "--junit", str(junit)]) == 0
    out, err = capsys.readouterr()
    assert "PASS" in out and "difference +0.0000" in out and "n 300 paired" in out
    assert "zero width" in out and "rag-eval: warning: gate, 1 of 1 rules" in err  # identical: announced
    schema.validate(str(junit))

    assert main(["gate", f["baseline"], f["reversed"], *rule, "--junit", str(junit)]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION  ndcg@budget [bm25-rerank/rerank], max drop 0.01" in out
    schema.validate(str(junit))
    failure = ET.parse(junit).getroot().find("./testsuite/testcase/failure")
    assert failure is not None and failure.get("type") == "regression"
    # a set-based metric does not move when the top 5 is reversed: recall@budget passes
    assert main(["gate", f["baseline"], f["reversed"], "--metric", "recall@budget", "--max-drop", "0.01"]) == 0
    capsys.readouterr()

    assert main(["gate", f["baseline20"], f["swapped20"], *rule, "--junit", str(junit)]) == 3
    out = capsys.readouterr().out
    assert "INCONCLUSIVE" in out and "n 20" in out and "minimum detectable difference" in out
    schema.validate(str(junit))
    result = gate(f["baseline20"], f["swapped20"], ["ndcg@budget:0.01"])
    r = result.rules[0]
    assert r.verdict == "inconclusive" and r.n == 20 and r.losses > 0
    assert r.ci_low < -0.01 < r.ci_high and r.minimum_detectable_difference > 0.01 and r.queries_needed > 20
    # the 20-query folders differ from the 300-query ones in their query set: refused, naming it
    assert main(["gate", f["baseline"], f["swapped20"], *rule]) == 2
    assert "queries: sha256:" in capsys.readouterr().err


_CANDIDATES = """
from rag_eval import Pipeline
from rag_eval.adapters import functions


def _overlap(collection):
    def by_overlap(query, k):
        words = set(query.lower().split())
        scored = [(d, len(words & set(c.content.lower().split()))) for d, c in collection.corpus.items()]
        return sorted(scored, key=lambda x: (-x[1], x[0]))[:k]

    return functions.retriever(by_overlap, name="overlap")


def keep(collection, depth):
    rerank = functions.reranker(lambda query, hits: list(hits), name="rerank")
    return Pipeline(_overlap(collection), rerank, depth=depth, budget=3)


def reverse(collection, depth):
    rerank = functions.reranker(lambda query, hits: list(reversed(hits[:5])) + list(hits[5:]), name="rerank")
    return Pipeline(_overlap(collection), rerank, depth=depth, budget=3)
"""


def test_a_baseline_folder_and_a_pipeline_to_run(tmp_path, capsys, monkeypatch):
    """gate BASELINE --pipeline NAME --beir FOLDER runs the candidate at the baseline's depth and budget (its card)
    into -o, then gates it as it would a folder given: the verdict is gate()'s on the two folders."""
    (tmp_path / "gate_candidates.py").write_text(_CANDIDATES)
    monkeypatch.syspath_prepend(str(tmp_path))
    beir = str(ROOT / "rag_eval" / "examples" / "tiny-beir")
    base = tmp_path / "base"
    bench = ["bench", "--beir", beir, "--depth", "8", "--budget", "3", "--no-plots"]
    assert main([*bench, "--pipeline", "gate_candidates:keep", "-o", str(base)]) == 0
    capsys.readouterr()
    rule = ["-m", "ndcg@budget", "--max-drop", "0.01", "--test", "t"]
    same = tmp_path / "same"
    args = ["gate", str(base), "--pipeline", "gate_candidates:keep", "--beir", beir, "-o", str(same), *rule]
    with warnings.catch_warnings():  # the same pipeline again: every difference 0, announced (issue 27)
        warnings.simplefilter("always", DegenerateInterval)  # the CLI prints it on stderr
        assert main(args) == 0
    out, err = capsys.readouterr()
    assert "running the candidate gate_candidates:keep at the baseline's depth 8 and budget(3)" in err
    assert "PASS" in out.upper() and "zero width" in out and "rag-eval: warning: gate, 1 of 1 rules" in err
    worse = tmp_path / "worse"
    args = ["gate", str(base), "--pipeline", "gate_candidates:reverse", "--beir", beir, "-o", str(worse), *rule]
    code = main(args)
    out, _ = capsys.readouterr()
    expected = gate(str(base), str(worse), [Rule("ndcg@budget", 0.01)], test="t")
    assert code == expected.exit_code and code in (1, 3)
    assert rag_eval.Report.load_folder(worse).card.pipeline["depth"] == 8
    # what cannot be: both a candidate and a pipeline; a pipeline without its collection; -o without a pipeline
    assert main(["gate", str(base), str(same), "--pipeline", "gate_candidates:keep", *rule]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["gate", str(base), "--pipeline", "gate_candidates:keep", *rule]) == 2
    assert "give --beir FOLDER" in capsys.readouterr().err
    assert main(["gate", str(base), str(same), "-o", str(tmp_path / "x"), *rule]) == 2
    assert "go with --pipeline" in capsys.readouterr().err
    assert main(["gate", str(base), *rule]) == 2
    assert "no candidate" in capsys.readouterr().err
