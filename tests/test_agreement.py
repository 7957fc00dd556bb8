"""A model judge's agreement with people: the kappas against statsmodels, alpha against the krippendorff package,
a confusion matrix and per-grade precision and recall computed by hand, the undefined cases, the LowAgreement
warning; the agreement of the systems' rankings under human and judge qrels (Kendall's tau against SciPy with five
systems, the pairs' order and significance with three); the metric card; the labelling page's summary."""

from __future__ import annotations

import json
import sys
import warnings

import numpy as np
import pytest
from scipy import stats

import rag_eval
from rag_eval import Qrels, Run
from rag_eval.errors import InputError, LowAgreement
from rag_eval.ground_truth import JudgementLog, merge
from rag_eval.ground_truth.agreement import (
    JudgeAgreement,
    assessor_summary,
    grades_of,
    judge_agreement,
    judge_assessors,
    kappa_of,
    log_agreement,
)
from rag_eval.ground_truth.merging import cohen_kappa
from rag_eval.reports import Report
from rag_eval.statistics import RankingAgreement, ranking_agreement

from .test_labelling_browser import browser  # noqa: F401 - the fixture: Debian's chromium through Playwright

# ----- on the items both graded ------------------------------------------------------------------------------------

# the hand-computed example: 8 items in common, one item only people graded (j), one only the judge (i)
HUMAN = {"q1": {"a": 3, "b": 2, "c": 0, "d": 1}, "q2": {"e": 0, "f": 2, "g": 3, "h": 0, "j": 1}}
JUDGE = {"q1": {"a": 3, "b": 1, "c": 0, "d": 1, "i": 2}, "q2": {"e": 1, "f": 2, "g": 2, "h": 0}}


def _random_grades(seed: int, n: int = 120, noise: float = 0.8) -> tuple[dict, dict]:
    """People's grades 0..3 and a judge's: people's plus rounded Gaussian noise, clipped to the scale."""
    rng = np.random.default_rng(seed)
    people = rng.choice(4, size=n, p=[0.4, 0.25, 0.2, 0.15])
    judged = np.clip(np.rint(people + rng.normal(0.3, noise, size=n)), 0, 3).astype(int)
    human = {f"q{i // 10}": {} for i in range(n)}
    judge = {f"q{i // 10}": {} for i in range(n)}
    for i in range(n):
        human[f"q{i // 10}"][f"d{i}"] = int(people[i])
        judge[f"q{i // 10}"][f"d{i}"] = int(judged[i])
    return human, judge


@pytest.mark.parametrize("seed", range(6))
def test_kappas_equal_statsmodels_and_alpha_equals_krippendorff(seed):
    from statsmodels.stats.inter_rater import cohens_kappa

    krippendorff = pytest.importorskip("krippendorff")
    human, judge = _random_grades(seed, noise=0.5 + 0.3 * seed)
    result = judge_agreement(human, judge, warn=False)
    table = result.confusion.to_numpy()
    assert result.n == 120 and table.sum() == 120
    assert result.kappa == pytest.approx(cohens_kappa(table, return_results=False), abs=1e-12)
    assert result.weighted_kappa == pytest.approx(cohens_kappa(table, wt="quadratic", return_results=False), abs=1e-12)
    pairs = sorted((q, d) for q in human for d in human[q])
    x = [human[q][d] for q, d in pairs]
    y = [judge[q][d] for q, d in pairs]
    assert result.kappa == pytest.approx(cohen_kappa(x, y), abs=1e-12)  # the merge's own kappa
    expected_alpha = krippendorff.alpha(
        reliability_data=np.array([x, y], dtype=float), value_domain=[0, 1, 2, 3], level_of_measurement="ordinal"
    )
    assert result.alpha == pytest.approx(expected_alpha, abs=1e-12)
    binary = cohen_kappa([int(v >= 1) for v in x], [int(v >= 1) for v in y])
    assert result.binary_kappa == pytest.approx(binary, abs=1e-12)
    assert result.observed == pytest.approx(np.mean(np.array(x) == np.array(y)))


def test_weighted_kappa_on_a_wider_scale_equals_statsmodels():
    from statsmodels.stats.inter_rater import cohens_kappa

    rng = np.random.default_rng(11)
    people = rng.integers(1, 6, size=80)
    judged = np.clip(people + rng.integers(-1, 2, size=80), 1, 5)
    human = {"q": {f"d{i}": int(v) for i, v in enumerate(people)}}
    judge = {"q": {f"d{i}": int(v) for i, v in enumerate(judged)}}
    result = judge_agreement(human, judge, scale=(1, 5), threshold=3, warn=False)
    assert result.grades == [1, 2, 3, 4, 5]
    table = result.confusion.to_numpy()
    assert result.weighted_kappa == pytest.approx(cohens_kappa(table, wt="quadratic", return_results=False), abs=1e-12)
    assert result.kappa == pytest.approx(cohens_kappa(table, return_results=False), abs=1e-12)


def test_the_hand_computed_example():
    result = judge_agreement(HUMAN, JUDGE)  # kappa_w 11/13 is above 0.4: no warning (warnings are errors here)
    assert (result.n, result.n_human, result.n_judge) == (8, 9, 9)
    assert result.confusion.to_numpy().tolist() == [[2, 1, 0, 0], [0, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
    assert result.confusion.index.name == "human" and result.confusion.columns.name == "judge"
    assert list(result.confusion.index) == [0, 1, 2, 3] and list(result.confusion.columns) == [0, 1, 2, 3]
    assert result.observed == 5 / 8
    # p_o = 5/8; row sums 3,1,2,2 and column sums 2,3,2,1 of 8: p_e = 15/64; (40 - 15) / (64 - 15)
    assert result.kappa == pytest.approx(25 / 49, abs=1e-15)
    # quadratic: observed disagreement 3 * (1/9) / 8 = 24/576, chance 156/576: 1 - 24/156
    assert result.weighted_kappa == pytest.approx(11 / 13, abs=1e-15)
    # at grade >= 1: [[2, 1], [0, 5]]: p_o = 7/8, p_e = (3*2 + 5*6)/64 = 36/64
    assert result.binary_kappa == pytest.approx(5 / 7, abs=1e-15)
    cuts = result.per_grade.set_index("grade")
    assert cuts.loc[1, ["both", "judge_only", "people_only", "neither"]].tolist() == [5, 1, 0, 2]
    assert cuts.loc[2, ["both", "judge_only", "people_only", "neither"]].tolist() == [3, 0, 1, 4]
    assert cuts.loc[3, ["both", "judge_only", "people_only", "neither"]].tolist() == [1, 0, 1, 6]
    assert cuts["precision"].tolist() == pytest.approx([5 / 6, 1.0, 1.0])
    assert cuts["recall"].tolist() == pytest.approx([1.0, 0.75, 0.5])
    assert not result.low and result.reasons == {}
    d = result.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["confusion"] == {
        "grades": [0, 1, 2, 3],
        "counts": [[2, 1, 0, 0], [0, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]],
    }
    text = result.render()
    assert "8 item(s) graded by both" in text and "quadratic-weighted kappa 0.846" in text
    assert "kappa 0.510" in text and "grade >= 2: precision 1.000 (3 of 3), recall 0.750 (3 of 4)" in text


def test_qrels_and_a_merge_are_accepted_as_grades():
    by_dicts = judge_agreement(HUMAN, JUDGE)
    by_qrels = judge_agreement(Qrels.from_dict(HUMAN), Qrels.from_dict(JUDGE))
    assert by_qrels == by_dicts
    log = JudgementLog("unused.jsonl")
    merged = merge(Qrels.from_dict(HUMAN), log)
    assert judge_agreement(merged, JUDGE) == by_dicts


def test_no_item_in_common_is_undefined_with_a_reason_and_warned():
    with pytest.warns(LowAgreement, match="cannot be measured.*should not stand in for people's"):
        result = judge_agreement({"q1": {"a": 1}}, {"q1": {"b": 1}, "q2": {"a": 2}})
    assert result.n == 0 and result.n_human == 1 and result.n_judge == 2
    assert (result.observed, result.kappa, result.weighted_kappa, result.alpha, result.binary_kappa) == (None,) * 5
    assert set(result.reasons) == {"kappa", "weighted_kappa", "alpha", "binary_kappa"}
    assert "graded no item in common" in result.reasons["kappa"]
    assert result.low
    assert all(c.precision is None and c.recall is None for c in result.cuts)
    assert result.confusion.to_numpy().sum() == 0
    assert "cannot be measured" in result.render()
    json.dumps(result.to_dict())  # no NaN: None


def test_one_grade_only_is_undefined_never_nan():
    same = {"q1": {"a": 2, "b": 2, "c": 2}}
    with pytest.warns(LowAgreement, match="cannot be measured"):
        result = judge_agreement(same, same)
    assert result.observed == 1.0
    assert result.kappa is None and result.weighted_kappa is None and result.alpha is None
    assert result.binary_kappa is None  # all relevant at grade >= 1
    assert "chance is 1" in result.reasons["kappa"] and "every grade given is 2" in result.reasons["alpha"]
    cuts = result.per_grade.set_index("grade")
    assert cuts.loc[2, "precision"] == 1.0 and cuts.loc[2, "recall"] == 1.0
    assert result.cuts[2].precision is None and result.cuts[2].recall is None  # the frame shows them as missing
    assert cuts.loc[[3], ["precision", "recall"]].isna().all(axis=None)
    assert "the judge graded no item >= 3" in cuts.loc[3, "reason"]
    assert "people graded no item >= 3" in cuts.loc[3, "reason"]
    # one rater constant, the other not: kappa is defined, and 0 (no agreement beyond chance)
    result = judge_agreement(same, {"q1": {"a": 2, "b": 1, "c": 3}}, warn=False)
    assert result.kappa == 0.0 and result.weighted_kappa == 0.0


def test_kappa_of_a_table_in_one_cell_is_undefined():
    assert kappa_of(np.array([[0, 0], [0, 5]]))[0] is None
    assert kappa_of(np.array([[0, 0], [0, 5]]), weights="quadratic")[0] is None
    assert kappa_of(np.array([[0, 5], [0, 0]])) == (0.0, None)  # always disagreeing, each constant: 0, not 1 - 1/0


def test_low_agreement_is_warned_and_can_be_silenced():
    human, judge = _random_grades(3, noise=0.5)
    inverted = {q: {d: 3 - g for d, g in docs.items()} for q, docs in human.items()}
    with pytest.warns(LowAgreement, match=r"quadratic-weighted kappa of -0\.\d+ on 120 item\(s\), below 0\.4"):
        result = judge_agreement(human, inverted)
    assert result.low and result.weighted_kappa < 0
    silent = judge_agreement(human, inverted, warn=False)  # warnings are errors here: none is given
    assert silent.low and silent == result
    good = judge_agreement(human, judge)  # noise 0.5: high agreement, no warning
    assert not good.low and good.weighted_kappa > 0.6
    with pytest.warns(LowAgreement):
        judge_agreement(human, judge, warn_below=0.99)


@pytest.mark.parametrize(
    "human, judge, kwargs, match",
    [
        ({"q1": {"a": 4}}, JUDGE, {}, r"human: query 'q1', doc 'a': grade 4 is outside the scale 0\.\.3"),
        (HUMAN, {"q9": {"z": -1}}, {}, r"judge: query 'q9', doc 'z': grade -1 is outside"),
        (HUMAN, {"q9": {"z": True}}, {}, r"judge: query 'q9', doc 'z': grade True is not an int"),
        (HUMAN, {"q9": {"z": 1.5}}, {}, r"grade 1\.5 is not an int"),
        (HUMAN, JUDGE, {"threshold": 0}, r"threshold 0: expected an int grade above 0 and at most 3"),
        (HUMAN, JUDGE, {"scale": (3, 3)}, r"scale \(3, 3\)"),
        (HUMAN, [1, 2], {}, r"judge: expected Qrels"),
    ],
)
def test_bad_input_names_what_is_wrong(human, judge, kwargs, match):
    with pytest.raises(InputError, match=match):
        judge_agreement(human, judge, **kwargs)


def test_without_krippendorff_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "krippendorff", None)
    with pytest.raises(ImportError, match=r"pip install 'rag-eval-stages\[judges\]'"):
        judge_agreement(HUMAN, JUDGE)


# ----- from a judgement log ----------------------------------------------------------------------------------------


def _log(tmp_path):
    log = JudgementLog.open(tmp_path / "log.jsonl")
    fingerprint = {"fingerprint": "9c41e07b2d10"}
    for q, docs in HUMAN.items():
        for d, g in docs.items():
            log.append(q, d, g, assessor="alice")
    log.append("q1", "a", 1, assessor="bob")  # alice 3, bob 1: their lower median is 1
    log.append("q1", "b", 0, assessor="alice")  # alice's later grade of b supersedes her 2
    for q, docs in JUDGE.items():
        for d, g in docs.items():
            log.append(q, d, g, assessor="umbrela", judge=fingerprint)
    return log


def test_a_logs_people_and_judges(tmp_path):
    log = _log(tmp_path)
    assert judge_assessors(log) == ["umbrela"]
    assert grades_of(log, "umbrela") == JUDGE
    people = grades_of(log, ["alice", "bob"])
    assert people["q1"]["a"] == 1 and people["q1"]["b"] == 0 and people["q2"] == HUMAN["q2"]
    result = log_agreement(log, judge="umbrela", warn=False)  # people: alice and bob
    assert result.names == ("alice, bob", "umbrela")
    expected = judge_agreement(people, JUDGE, warn=False)
    assert (result.kappa, result.weighted_kappa, result.counts) == (
        expected.kappa,
        expected.weighted_kappa,
        expected.counts,
    )
    only_alice = log_agreement(tmp_path / "log.jsonl", judge="umbrela", people="alice", warn=False)
    assert only_alice.counts == judge_agreement(grades_of(log, "alice"), JUDGE, warn=False).counts
    with pytest.raises(InputError, match=r"assessor\(s\) \['carol'\] not in the log"):
        grades_of(log, "carol")
    with pytest.raises(InputError, match="judge 'carol' is not an assessor of the log"):
        log_agreement(log, judge="carol")
    with pytest.raises(InputError, match="is both the judge and one of the people"):
        log_agreement(log, judge="umbrela", people=["alice", "umbrela"])


# ----- rankings of systems -----------------------------------------------------------------------------------------

QUERIES = [f"q{i}" for i in range(6)]


def _systems(k: int) -> dict[str, Run]:
    """System s{n} (n < k <= 5) puts r1..r{n} first, then its own non-relevant docs n{n}_1.., on each query; on
    query q{i}, when n + i is even, r5 comes after r{n} (so that the per-query values vary): under people's qrels
    (r1..r5 relevant) P@5 is n/5 and (n+1)/5 on alternate queries."""
    runs = {}
    for n in range(k):
        ranking = {}
        for i, q in enumerate(QUERIES):
            docs = [f"r{j}" for j in range(1, n + 1)] + [f"n{n}_{j}" for j in range(1, 6 - n)]
            if (n + i) % 2 == 0:
                docs = docs[:n] + ["r5"] + docs[n:-1]
            ranking[q] = docs
        runs[f"s{n}"] = Run.from_ranking(ranking, name=f"s{n}")
    return runs


def _qrels(relevant: dict[str, int], k: int) -> Qrels:
    """Every doc any system retrieves is judged (so no judged-share warning): ``relevant`` grades, the rest 0."""
    docs = {f"r{j}" for j in range(1, 6)} | {f"n{n}_{j}" for n in range(k) for j in range(1, 6)}
    return Qrels.from_dict({q: {d: relevant.get(d, 0) for d in sorted(docs)} for q in QUERIES})


HUMAN_RELEVANT = {f"r{j}": 1 for j in range(1, 6)}


def test_kendall_tau_with_five_systems_equals_scipy_and_a_swap_is_warned():
    runs = _systems(5)
    human = rag_eval.evaluate(_qrels(HUMAN_RELEVANT, 5), runs, ["P@5"])
    # the judge misses r4, and takes two of s3's non-relevant docs for relevant: s3 (1.0) overtakes s4 (0.7)
    judged = {**HUMAN_RELEVANT, "r4": 0, "n3_1": 1, "n3_2": 1}
    judge = rag_eval.evaluate(_qrels(judged, 5), runs, ["P@5"])
    with pytest.warns(LowAgreement, match=r"rank the systems unlike people's on precision@5: .*Kendall's tau 0\.800"):
        result = ranking_agreement(human, judge, "P@5")
    assert isinstance(result, RankingAgreement) and result.method == "kendall_tau"
    systems = [f"s{n}" for n in range(5)]
    assert list(result.systems) == systems
    hm = [human.mean(s, "P@5") for s in systems]
    jm = [judge.mean(s, "P@5") for s in systems]
    assert [result.human_means[s] for s in systems] == pytest.approx(hm)
    assert [result.judge_means[s] for s in systems] == pytest.approx(jm)
    expected = stats.kendalltau(hm, jm)
    assert result.tau == pytest.approx(expected.statistic) and result.tau_p_value == pytest.approx(expected.pvalue)
    assert result.tau == pytest.approx(0.8)  # one discordant pair of ten: 1 - 2 * 1/10
    assert result.top_human == ("s4",) and result.top_judge == ("s3",) and not result.top_match
    assert result.low and dict(result.n_queries) == dict.fromkeys(systems, 6)
    assert len(result.pairs) == 10
    d = result.to_dict()
    assert json.loads(json.dumps(d)) == d and d["top_match"] is False
    assert "Kendall's tau 0.800" in result.render()


def test_the_same_ranking_gives_tau_one_and_no_warning():
    runs = _systems(5)
    human = rag_eval.evaluate(_qrels(HUMAN_RELEVANT, 5), runs, ["P@5", "ndcg@5"])
    # the judge grades the relevant docs higher, which keeps P@5 and the order of every system
    judge = rag_eval.evaluate(_qrels(dict.fromkeys(HUMAN_RELEVANT, 3), 5), runs, ["P@5", "ndcg@5"])
    result = ranking_agreement(human, judge, "ndcg@5")  # warnings are errors here: none is given
    assert result.tau == pytest.approx(1.0) and result.top_match and not result.low
    assert result.metric == "ndcg@5"


def test_three_systems_compare_the_pairs_order_and_significance():
    runs = _systems(3)
    human = rag_eval.evaluate(_qrels(HUMAN_RELEVANT, 3), runs, ["P@5"])
    # the judge misses r2: s1 and s2 tie on P@5 under it (0.3 each), where people see s2 ahead by 0.2
    judge = rag_eval.evaluate(_qrels({**HUMAN_RELEVANT, "r2": 0}, 3), runs, ["P@5"])
    with pytest.warns(LowAgreement, match=r"2 of 3 pair\(s\) agree in order and significance \(t test"):
        result = ranking_agreement(human, judge, "P@5")
    assert result.method == "pairs" and result.tau is None and "too few for Kendall's tau" in result.reasons["tau"]
    table = result.pairs.set_index(["system_a", "system_b"])
    assert list(table.index) == [("s0", "s1"), ("s0", "s2"), ("s1", "s2")]
    for (a, b), row in table.iterrows():
        for role, report in (("human", human), ("judge", judge)):
            x, y = report.values(a, "P@5").to_numpy(), report.values(b, "P@5").to_numpy()
            diff = x - y
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
                p = 1.0 if not diff.any() else (0.0 if np.all(diff == diff[0]) else stats.ttest_rel(x, y).pvalue)
            assert row[f"p_{role}"] == pytest.approx(p)
            assert row[f"diff_{role}"] == pytest.approx(diff.mean())
            assert row[f"significant_{role}"] == (p < 0.05)
    assert table.loc[("s1", "s2"), "diff_judge"] == pytest.approx(0.0)
    assert not table.loc[("s1", "s2"), "order_agrees"] and not table.loc[("s1", "s2"), "agrees"]
    assert table.loc[("s0", "s1"), "agrees"] and table.loc[("s0", "s2"), "agrees"]
    assert result.pair_share == pytest.approx(2 / 3) and result.low
    assert "disagree: s1 - s2" in result.render()


def test_ranking_agreement_on_the_queries_both_reports_hold():
    runs = _systems(3)
    human_qrels = _qrels(HUMAN_RELEVANT, 3).to_dict()
    fewer = {q: human_qrels[q] for q in QUERIES[:4]}  # people graded four of the six queries
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fewer queries judged than run: the report says so
        human = rag_eval.evaluate(fewer, runs, ["P@5"])
    judge = rag_eval.evaluate(_qrels(HUMAN_RELEVANT, 3), runs, ["P@5"])
    result = ranking_agreement(human, judge, "P@5", test="wilcoxon")
    assert dict(result.n_queries) == {"s0": 4, "s1": 4, "s2": 4}
    assert result.pair_share == 1.0 and not result.low
    assert result.judge_means["s2"] == pytest.approx(judge.values("s2", "P@5")[QUERIES[:4]].mean())


def test_ranking_agreement_refuses_what_cannot_be_compared():
    human = rag_eval.evaluate(_qrels(HUMAN_RELEVANT, 3), _systems(3), ["P@5"])
    other = rag_eval.evaluate(_qrels(HUMAN_RELEVANT, 2), _systems(2), ["P@5", "recall@5"])
    with pytest.raises(InputError, match=r"the same systems: only in human_report: \['s2'\]"):
        ranking_agreement(human, other, "P@5")
    with pytest.raises(InputError, match=r"metric 'R@5' is not in human_report|metric 'recall@5'"):
        ranking_agreement(human, other, "recall@5")
    with pytest.raises(InputError, match="test 'z'"):
        ranking_agreement(human, human, "P@5", test="z")
    one = rag_eval.evaluate(_qrels(HUMAN_RELEVANT, 1), _systems(1), ["P@5"])
    with pytest.raises(InputError, match="two systems or more"):
        ranking_agreement(one, one, "P@5")


# ----- the metric card ---------------------------------------------------------------------------------------------


def test_the_card_shows_the_judges_agreement_and_keeps_it(tmp_path):
    runs = _systems(3)
    report = rag_eval.evaluate(_qrels(HUMAN_RELEVANT, 3), runs, ["P@5"])
    items = judge_agreement(HUMAN, JUDGE)
    ranking = ranking_agreement(report, report, "P@5")
    assert report.card.judge_agreement is None
    shown = report.with_judge_agreement(items, ranking)
    assert shown.card.judge_agreement == {"items": [items.to_dict()], "rankings": [ranking.to_dict()]}
    assert report.card.judge_agreement is None  # the report given is unchanged
    text = shown.card.render()
    assert (
        "  judge agreement: judge 'judge' against people: 8 item(s) graded by both; same grade 62.5%, kappa 0.510, "
        "quadratic-weighted kappa 0.846 (at least 0.4)" in text
    )
    assert (
        "  judge ranking agreement: 3 systems ranked by precision@5 under human and judge qrels: 3 of 3 pair(s)" in text
    )
    assert shown.summary.equals(report.summary)
    path = tmp_path / "report.parquet"
    shown.save(path)
    assert Report.load(path).card.judge_agreement == shown.card.judge_agreement
    again = shown.with_judge_agreement(items)  # added to what the card holds
    assert len(again.card.judge_agreement["items"]) == 2
    with pytest.raises(TypeError, match="JudgeAgreement or a RankingAgreement"):
        report.with_judge_agreement({"kappa": 1})


# ----- the labelling page ------------------------------------------------------------------------------------------


def test_the_labelling_page_shows_the_assessors_agreement_with_a_judge(tmp_path):
    from .test_labelling_server import Running, make_pool

    made, _ = make_pool(tmp_path)
    out = tmp_path / "out.qrels"
    grades = [3, 2, 0, 0, 1, 0, 2]  # alice's grades of the pool's seven items, in its order
    judged = [3, 1, 0, 1, 1, 0, 2]  # the judge's
    log = JudgementLog.open(out.with_name(out.name + ".judgements.jsonl"))
    for item, g in zip(made.items, judged, strict=True):
        log.append(item.query_id, item.doc_id, g, assessor="umbrela", judge={"fingerprint": "9c41e07b2d10"})
    running = Running(made, out)
    try:
        status, empty = running.request("GET", "/api/agreement")
        assert status == 200 and empty["assessor"] == "alice"
        assert [j["n"] for j in empty["judges"]] == [0] and empty["judges"][0]["low"] is True
        for i, g in enumerate(grades):
            assert running.judge(i, g)[0] == 200
        status, shown = running.request("GET", "/api/agreement")
        assert running.request("GET", "/api/agreement", token=None)[0] == 403
    finally:
        running.stop()
    assert status == 200 and len(shown["judges"]) == 1
    entry = shown["judges"][0]
    pairs = [(i.query_id, i.doc_id) for i in made.items]
    mine = {}
    theirs = {}
    for (q, d), g, h in zip(pairs, grades, judged, strict=True):
        mine.setdefault(q, {})[d] = g
        theirs.setdefault(q, {})[d] = h
    expected = judge_agreement(mine, theirs, names=("alice", "umbrela"), warn=False).to_dict()
    assert entry["n"] == 7 and entry["confusion"] == expected["confusion"]
    assert entry["kappa"] == pytest.approx(expected["kappa"])
    assert entry["weighted_kappa"] == pytest.approx(expected["weighted_kappa"])
    assert entry["alpha"] == pytest.approx(expected["alpha"])
    assert entry["line"].startswith("judge 'umbrela' against alice: 7 item(s) graded by both")
    page = running.server.site.page.decode()  # the page the server served
    assert 'id="agreement"' in page and '"/api/agreement"' in page


def test_the_summary_without_a_judge_or_without_krippendorff(tmp_path, monkeypatch):
    log = _log(tmp_path)
    summary = assessor_summary(log, "alice", scale=(0, 3))
    assert [j["judge"] for j in summary["judges"]] == ["umbrela"]
    monkeypatch.setitem(sys.modules, "krippendorff", None)
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    without = assessor_summary(log, "alice", scale=(0, 3))["judges"][0]
    assert without["alpha"] is None and "pip install 'rag-eval-stages[judges]'" in without["reasons"]["alpha"]
    assert without["kappa"] == summary["judges"][0]["kappa"]
    people_only = JudgementLog(tmp_path / "x.jsonl", [j for j in log if j.judge is None])
    assert assessor_summary(people_only, "alice", scale=(0, 3))["judges"] == []


def test_the_results_are_values():
    a = judge_agreement(HUMAN, JUDGE)
    assert isinstance(a, JudgeAgreement) and a == judge_agreement(HUMAN, JUDGE)


def test_the_stages_of_a_pipeline_are_systems_named_run_slash_stage():
    from rag_eval.stages import Hit, Pipeline, Reranker, Retriever

    class Fixed(Retriever):
        def search(self, query, k):
            return [Hit(d, 1.0) for d in ("x", "a", "b", "y")]

    class Smart(Reranker):  # a and b first
        def rerank(self, query, hits):
            return sorted(hits, key=lambda h: h.doc_id not in ("a", "b"))

    result = Pipeline(Fixed("bm25"), Smart("rerank"), depth=4, budget=2).run({q: q for q in QUERIES})
    people = {q: {"a": 2, "b": 1, "x": 0, "y": 0} for q in QUERIES}
    judge = {q: {"a": 0, "b": 0, "x": 2, "y": 1} for q in QUERIES}  # the judge has it backwards
    human_report = rag_eval.evaluate(people, result, ["ndcg@budget"])
    judge_report = rag_eval.evaluate(judge, result, ["ndcg@budget"])
    with pytest.warns(LowAgreement, match=r"0 of 1 pair\(s\) agree"):
        agreement = ranking_agreement(human_report, judge_report, "ndcg@budget")
    run = human_report.runs[0]
    assert agreement.systems == (f"{run}/bm25", f"{run}/rerank")
    assert agreement.top_human == (f"{run}/rerank",) and agreement.top_judge == (f"{run}/bm25",)
    row = agreement.pairs.iloc[0]
    assert row["diff_human"] < 0 < row["diff_judge"] and not row["order_agrees"]
    assert row["n_human"] == row["n_judge"] == 6


@pytest.mark.browser
def test_the_page_shows_the_agreement_when_every_item_is_judged(browser, tmp_path):  # noqa: F811 - the fixture
    from playwright.sync_api import expect

    from .test_labelling_server import Running, make_pool

    made, _ = make_pool(tmp_path)
    out = tmp_path / "out.qrels"
    log = JudgementLog.open(out.with_name(out.name + ".judgements.jsonl"))
    for item, g in zip(made.items, [3, 1, 0, 1, 1, 0, 2], strict=True):
        log.append(item.query_id, item.doc_id, g, assessor="umbrela", judge={"fingerprint": "9c41e07b2d10"})
    running = Running(made, out)
    page = browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.set_default_timeout(10_000)
    try:
        page.goto(running.server.url)
        for i, g in enumerate([3, 2, 0, 0, 1, 0, 2]):
            page.wait_for_selector(f"#item[data-index='{i}']")
            page.keyboard.press(str(g))
        page.wait_for_selector("#done:not([hidden])")
        expect(page.locator("#agreement")).to_contain_text(
            "Agreement: judge 'umbrela' against alice: 7 item(s) graded by both; same grade 71.4%"
        )
    finally:
        page.close()
        running.stop()
    assert problems == []
