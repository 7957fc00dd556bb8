"""Small cases worked out by hand: every expected value is derived in the comment beside it.

The main case is one query ``q1`` with a known ranking and known grades:

    judgements of q1: d1=3, d2=0, d3=1, d4=2, d5=-1, d6=1      relevant (grade >= 1): d1, d3, d4, d6 -> R = 4
                                                               grade >= 2: d1, d4                    -> R = 2
    ranking of q1:   rank 1  x1  unjudged
                     rank 2  d3  1   relevant
                     rank 3  d2  0
                     rank 4  d1  3   relevant
                     rank 5  d5  -1  (non-relevant by default; unjudged under the trec_eval preset)
                     rank 6  x2  unjudged
                     rank 7  d4  2   relevant                  (d6 is never retrieved)

Relevant ranks: 2, 4, 7. Discounts: 1/log2(rank + 1), so rank 1 -> 1, rank 2 -> 1/log2(3), rank 3 -> 1/2,
rank 4 -> 1/log2(5), rank 7 -> 1/log2(8) = 1/3.
"""

from __future__ import annotations

import math
from math import log2

import pytest

import rag_eval
from rag_eval.metrics import PRESETS

QRELS = {
    "q1": {"d1": 3, "d2": 0, "d3": 1, "d4": 2, "d5": -1, "d6": 1},
    "q2": {"d1": 1, "d2": 0},
}
RANKING = {
    "q1": ["x1", "d3", "d2", "d1", "d5", "x2", "d4"],
    "q2": [],  # an empty ranking for a judged query
}
L3, L5 = log2(3), log2(5)


def _values(qrels, run, metrics, conventions="default") -> dict[tuple[str, str], float]:
    report = rag_eval.evaluate(qrels, run, metrics, conventions=conventions)
    frame = report.per_query
    return {(q, m): float(v) for q, m, v in zip(frame["query_id"], frame["metric"], frame["value"])}


def _q1(metric: str, conventions="default") -> float:
    values = _values(QRELS, rag_eval.Run.from_ranking(RANKING), [metric], conventions)
    return values[("q1", str(rag_eval.parse_metric(metric)))]


# ----- one query, every metric ----------------------------------------------------------------------------------
Q1_DEFAULT = [
    # precision@k: relevant in the top k / k
    ("precision@1", 0.0),  # x1 is not relevant
    ("P@2", 1 / 2),  # d3
    ("P@5", 2 / 5),  # d3, d1
    ("P@10", 3 / 10),  # 7 returned, 3 relevant; divided by 10, not by 7
    ("P(rel=2)@5", 1 / 5),  # grade >= 2 in the top 5: d1 only
    # recall@k: relevant in the top k / R
    ("recall@2", 1 / 4),  # d3 of d1, d3, d4, d6
    ("recall@5", 2 / 4),  # d3, d1
    ("recall@10", 3 / 4),  # d3, d1, d4; d6 was not retrieved
    ("recall(rel=2)@10", 2 / 2),  # d1, d4 of d1, d4
    # hit@k
    ("hit@1", 0.0),
    ("hit@2", 1.0),
    # mrr: first relevant at rank 2
    ("mrr", 1 / 2),
    ("mrr@1", 0.0),  # nothing relevant in the top 1
    ("mrr@3", 1 / 2),
    ("mrr(rel=2)", 1 / 4),  # first grade >= 2 is d1 at rank 4
    # ap: precision at each relevant rank, summed, / R: (1/2 + 2/4 + 3/7) / 4 = (1 + 3/7) / 4 = 5/14
    ("ap", 5 / 14),
    ("ap@5", (1 / 2 + 2 / 4) / 4),  # ranks 2 and 4 only, still / R = 4 -> 1/4
    ("ap@3", (1 / 2) / 4),  # rank 2 only -> 1/8
    # r_precision: top R = 4 is x1, d3, d2, d1 -> 2 relevant / 4
    ("r_precision", 2 / 4),
    # bpref: judged non-relevant N = 2 (d2, d5), min(N, R) = 2.
    #   d3 (rank 2): none above -> 1; d1 (rank 4): d2 above -> 1 - 1/2; d4 (rank 7): d2, d5 above -> 1 - 2/2 = 0
    #   (1 + 1/2 + 0) / R = 1.5 / 4
    ("bpref", 1.5 / 4),
    # ndcg, gain 2^g - 1: d3 -> 1 at rank 2, d1 -> 7 at rank 4, d4 -> 3 at rank 7.
    #   ideal: gains 7, 3, 1, 1 (grades 3, 2, 1, 1) at ranks 1..4: 7 + 3/log2(3) + 1/2 + 1/log2(5) = 9.823465...
    #   @5: DCG = 1/log2(3) + 7/log2(5) = 3.645665... -> 0.371118...
    ("ndcg@5", (1 / L3 + 7 / L5) / (7 + 3 / L3 + 1 / 2 + 1 / L5)),
    #   no cutoff: DCG adds 3/3 for d4 -> 4.645665... / 9.823465... = 0.472915...
    ("ndcg", (1 / L3 + 7 / L5 + 3 / 3) / (7 + 3 / L3 + 1 / 2 + 1 / L5)),
    #   @3: DCG = 1/log2(3) = 0.630929...; ideal @3 = 7 + 3/log2(3) + 1/2 = 9.392789... -> 0.067171...
    ("ndcg@3", (1 / L3) / (7 + 3 / L3 + 1 / 2)),
    # ndcg, linear gain g: d3 -> 1, d1 -> 3; ideal 3, 2, 1, 1: 3 + 2/log2(3) + 1/2 + 1/log2(5) = 5.192536...
    #   @5: DCG = 1/log2(3) + 3/log2(5) = 1.922959... -> 0.370331...
    ("ndcg(gain=linear)@5", (1 / L3 + 3 / L5) / (3 + 2 / L3 + 1 / 2 + 1 / L5)),
    # gains map: grade 3 -> 10, grade 1 -> 0.5, grade 2 keeps 2^2 - 1 = 3.
    #   @5: DCG = 0.5/log2(3) + 10/log2(5) = 4.622230...; ideal 10, 3, 0.5, 0.5: 10 + 3/log2(3) + 0.5/2 +
    #   0.5/log2(5) = 12.358127... -> 0.374023...
    ("ndcg(gains=3:10;1:0.5)@5", (0.5 / L3 + 10 / L5) / (10 + 3 / L3 + 0.5 / 2 + 0.5 / L5)),
    # rel=2: only grades >= 2 earn gain: d1 -> 7 at rank 4; ideal 7, 3: 7 + 3/log2(3) = 8.892789...
    #   @5: 7/log2(5) = 3.014735... -> 0.339009...
    ("ndcg(rel=2)@5", (7 / L5) / (7 + 3 / L3)),
    # judged@k: judged share of the top min(k, 7)
    ("judged@1", 0.0),  # x1
    ("judged@5", 4 / 5),  # d3, d2, d1, d5 (a grade of -1 is a judgement by default)
    ("judged@10", 5 / 7),  # of 7 returned: x1 and x2 are unjudged
    # recall_ceiling@k = min(k, R) / R
    ("recall_ceiling@2", 2 / 4),
    ("recall_ceiling@10", 1.0),
    ("recall_ceiling(rel=2)@1", 1 / 2),
    # counts
    ("num_rel", 4.0),
    ("num_rel(rel=2)", 2.0),
    ("num_ret", 7.0),
    ("num_rel_ret", 3.0),  # d3, d1, d4
    ("num_rel_ret(rel=2)", 2.0),  # d1, d4
]


@pytest.mark.parametrize(("metric", "expected"), Q1_DEFAULT, ids=[m for m, _ in Q1_DEFAULT])
def test_one_query_by_hand(metric, expected):
    assert _q1(metric) == pytest.approx(expected, abs=1e-12, rel=0)


Q1_TREC_EVAL = [
    # the grade -1 of d5 is "in the pool, not judged": judged non-relevant N = 1 (d2 only), min(N, R) = 1.
    #   d3: none above -> 1; d1: d2 above -> 1 - 1/1 = 0; d4: d2 above (d5 no longer counts) -> 0.  1 / 4
    ("bpref", 1 / 4),
    ("judged@5", 3 / 5),  # d3, d2, d1
    ("judged@10", 4 / 7),
    # linear gain is the preset's: same as ndcg(gain=linear)@5 above
    ("ndcg@5", (1 / L3 + 3 / L5) / (3 + 2 / L3 + 1 / 2 + 1 / L5)),
    ("ndcg(gain=exp)@5", (1 / L3 + 7 / L5) / (7 + 3 / L3 + 1 / 2 + 1 / L5)),
    ("ap", 5 / 14),  # a non-relevant grade of -1 changes nothing for the binary metrics
    ("num_ret", 7.0),
]


@pytest.mark.parametrize(("metric", "expected"), Q1_TREC_EVAL, ids=[m for m, _ in Q1_TREC_EVAL])
def test_one_query_by_hand_trec_eval_preset(metric, expected):
    assert _q1(metric, "trec_eval") == pytest.approx(expected, abs=1e-12, rel=0)


def test_relevance_threshold_convention_is_rel_parameter():
    # relevance_threshold=2 makes every binary metric use grade >= 2, as P(rel=2) does: d1 (rank 4), d4 (rank 7)
    conventions = PRESETS["default"].replace(relevance_threshold=2)
    assert _q1("P@5", conventions) == pytest.approx(1 / 5)
    assert _q1("mrr", conventions) == pytest.approx(1 / 4)
    assert _q1("ap", conventions) == pytest.approx((1 / 4 + 2 / 7) / 2)  # R = 2
    assert _q1("num_rel", conventions) == 2.0
    # an explicit rel= in the name wins over the conventions
    assert _q1("P(rel=1)@5", conventions) == pytest.approx(2 / 5)


# ----- empty rankings -------------------------------------------------------------------------------------------
EMPTY = [
    ("precision@5", 0.0),
    ("recall@5", 0.0),
    ("hit@5", 0.0),
    ("mrr", 0.0),
    ("mrr@5", 0.0),
    ("ap", 0.0),
    ("ap@5", 0.0),
    ("r_precision", 0.0),
    ("bpref", 0.0),
    ("ndcg", 0.0),
    ("ndcg@5", 0.0),
    ("num_ret", 0.0),
    ("num_rel_ret", 0.0),
    ("judged@5", math.nan),  # nothing returned: 0/0, NaN (counted in the summary's n_nan)
    ("num_rel", 1.0),  # d1: the qrels still count
    ("recall_ceiling@5", 1.0),  # min(5, 1) / 1: depends on the qrels only
]


@pytest.mark.parametrize("conventions", ["default", "trec_eval"])
@pytest.mark.parametrize(("metric", "expected"), EMPTY, ids=[m for m, _ in EMPTY])
def test_empty_ranking_scores_0(metric, expected, conventions):
    # q2 is in the run with no results: counted under both presets (it is not missing from the run)
    values = _values(QRELS, rag_eval.Run.from_ranking(RANKING), [metric], conventions)
    value = values[("q2", str(rag_eval.parse_metric(metric)))]
    assert (math.isnan(value) and math.isnan(expected)) or value == expected


def test_run_with_no_queries_scores_every_judged_query_0():
    # missing_run="zero" (default): both judged queries are counted as empty rankings
    values = _values(QRELS, rag_eval.Run.from_scores({}), ["ap", "P@5", "num_rel"])
    assert values == {
        ("q1", "ap"): 0.0,
        ("q1", "precision@5"): 0.0,
        ("q1", "num_rel"): 4.0,
        ("q2", "ap"): 0.0,
        ("q2", "precision@5"): 0.0,
        ("q2", "num_rel"): 1.0,
    }


def test_run_with_no_queries_under_trec_eval_preset_measures_nothing():
    report = rag_eval.evaluate(QRELS, rag_eval.Run.from_scores({}), ["ap"], conventions="trec_eval")
    assert report.per_query.empty
    assert report.card.queries[0].counted == 0
    assert _reasons(report.card.queries[0].left_out) == {"missing_run": ["q1", "q2"]}


# ----- ties -----------------------------------------------------------------------------------------------------
# a, b, c tie at 1.0 (given in the order b, c, a); only c is relevant
TIE_QRELS = {"q": {"a": 0, "b": 0, "c": 1}}
TIE_SCORES = {"q": {"b": 1.0, "c": 1.0, "a": 1.0, "z": 0.5}}


@pytest.mark.parametrize(
    ("ties", "expected"),
    [
        ("trec_eval", 1.0),  # doc id descending: c, b, a -> c at rank 1
        ("doc_id", 1 / 3),  # ascending: a, b, c -> c at rank 3
        ("input_order", 1 / 2),  # as given: b, c, a -> c at rank 2
    ],
)
def test_tie_rule_decides_the_order_of_equal_scores(ties, expected):
    conventions = PRESETS["default"].replace(ties=ties)
    values = _values(TIE_QRELS, rag_eval.Run.from_scores(TIE_SCORES), ["mrr", "P@1"], conventions)
    assert values[("q", "mrr")] == expected
    assert values[("q", "precision@1")] == (1.0 if expected == 1.0 else 0.0)


@pytest.mark.parametrize(
    ("ties", "expected"),
    [
        ("trec_eval", 1 / 2),  # as strings "d9" > "d10": d9 first, then d10
        ("doc_id", 1.0),  # "d10" < "d9": d10 first
    ],
)
def test_tie_rule_compares_doc_ids_as_strings(ties, expected):
    conventions = PRESETS["default"].replace(ties=ties)
    run = rag_eval.Run.from_scores({"q": {"d9": 0.5, "d10": 0.5}})
    assert _values({"q": {"d10": 1}}, run, ["mrr"], conventions)[("q", "mrr")] == expected


@pytest.mark.parametrize("ties", ["trec_eval", "doc_id", "input_order"])
def test_a_given_order_is_never_re_sorted(ties):
    # b has the highest score but is given last: it stays at rank 3 whatever the tie rule -> mrr 1/3
    run = rag_eval.Run.from_ranking({"q": [("a", 1.0), ("c", 1.0), ("b", 2.0)]})
    conventions = PRESETS["default"].replace(ties=ties)
    assert _values({"q": {"b": 1, "a": 0}}, run, ["mrr"], conventions)[("q", "mrr")] == 1 / 3


def test_tie_between_two_non_relevant_documents_changes_nothing():
    # b and a tie and are both grade 0: any order of them gives the relevant c rank 3 -> mrr 1/3
    run = rag_eval.Run.from_scores({"q": {"a": 1.0, "b": 1.0, "c": 0.5}})
    for ties in ["trec_eval", "doc_id", "input_order"]:
        conventions = PRESETS["default"].replace(ties=ties)
        assert _values({"q": {"a": 0, "b": 0, "c": 1}}, run, ["mrr"], conventions)[("q", "mrr")] == 1 / 3


# ----- which queries are measured -------------------------------------------------------------------------------
# q1: judged and retrieved, relevant found; q2: judged only non-relevant (0 and -1), retrieved;
# q3: judged, not in the run; q4: in the run only; q5: only grade 1, retrieved
ACCOUNT_QRELS = {"q1": {"a": 1}, "q2": {"a": 0, "b": -1}, "q3": {"a": 1}, "q5": {"a": 1, "b": 0}}
ACCOUNT_RUN = {"q1": ["a"], "q2": ["a"], "q4": ["a"], "q5": ["b", "a"]}


def _reasons(left_out: dict[str, list[str]]) -> dict[str, list[str]]:
    """The card's reasons are stable keys; the sentences that explain them live in REASONS."""
    from rag_eval.metrics._engine import REASONS

    assert set(left_out) <= set(REASONS)
    return dict(left_out)


@pytest.mark.parametrize(
    ("missing_run", "no_relevant", "threshold", "expected_ap", "left_out"),
    [
        # every judged query counts; q3 as an empty ranking (0), q2 with R = 0 (0); q5: a at rank 2 -> 1/2
        ("zero", "zero", 1, {"q1": 1.0, "q2": 0.0, "q3": 0.0, "q5": 1 / 2}, {"run_only": ["q4"]}),
        ("skip", "zero", 1, {"q1": 1.0, "q2": 0.0, "q5": 1 / 2}, {"run_only": ["q4"], "missing_run": ["q3"]}),
        ("zero", "skip", 1, {"q1": 1.0, "q3": 0.0, "q5": 1 / 2}, {"run_only": ["q4"], "no_relevant": ["q2"]}),
        (
            "skip",
            "skip",
            1,
            {"q1": 1.0, "q5": 1 / 2},
            {"run_only": ["q4"], "missing_run": ["q3"], "no_relevant": ["q2"]},
        ),
        # threshold 2: nothing is relevant anywhere; no_relevant="skip" leaves every counted query out
        (
            "skip",
            "skip",
            2,
            {},
            {"run_only": ["q4"], "missing_run": ["q3"], "no_relevant": ["q1", "q2", "q5"]},
        ),
    ],
)
def test_conventions_decide_which_queries_count(missing_run, no_relevant, threshold, expected_ap, left_out):
    conventions = PRESETS["default"].replace(
        missing_run=missing_run, no_relevant=no_relevant, relevance_threshold=threshold
    )
    report = rag_eval.evaluate(ACCOUNT_QRELS, rag_eval.Run.from_ranking(ACCOUNT_RUN), ["ap"], conventions=conventions)
    per_query = report.per_query
    assert dict(zip(per_query["query_id"], per_query["value"])) == expected_ap
    assert list(per_query["query_id"]) == sorted(expected_ap)
    record = report.card.queries[0]
    assert record.counted == len(expected_ap)
    assert _reasons(record.left_out) == left_out


# ----- condensed lists and depth --------------------------------------------------------------------------------
def test_unjudged_remove_condenses_the_ranking():
    # x1, x2 dropped: d3 (1), d2 (0), d1 (3), d5 (-1), d4 (2) -> relevant ranks 1, 3, 5
    conventions = PRESETS["default"].replace(unjudged="remove")
    values = _values(
        QRELS,
        rag_eval.Run.from_ranking(RANKING),
        ["P@5", "mrr", "ap", "r_precision", "bpref", "judged@5", "num_ret", "num_rel"],
        conventions,
    )
    assert values[("q1", "precision@5")] == pytest.approx(3 / 5)
    assert values[("q1", "mrr")] == 1.0
    # (1/1 + 2/3 + 3/5) / 4 = (15 + 10 + 9) / 15 / 4 = 34/60 = 17/30
    assert values[("q1", "ap")] == pytest.approx(17 / 30, abs=1e-12)
    assert values[("q1", "r_precision")] == pytest.approx(2 / 4)  # top 4: d3, d2, d1, d5
    # bpref ignores unjudged results anyway: the same 1.5 / 4 as without condensing
    assert values[("q1", "bpref")] == pytest.approx(1.5 / 4, abs=1e-12)
    # the judged share is measured on the ranking as given (condensed, it would be 1 by construction): x1 is unjudged
    assert values[("q1", "judged@5")] == pytest.approx(4 / 5)
    assert values[("q1", "num_ret")] == 5.0
    assert values[("q1", "num_rel")] == 4.0  # the qrels are unchanged


def test_unjudged_remove_under_trec_eval_preset_drops_negative_grades_too():
    # trec_eval -J: d5 (grade -1, "in the pool, unjudged") goes too: d3, d2, d1, d4 -> relevant ranks 1, 3, 4
    conventions = PRESETS["trec_eval"].replace(unjudged="remove")
    # (1 + 2/3 + 3/4) / 4 = (12 + 8 + 9) / 12 / 4 = 29/48
    assert _q1("ap", conventions) == pytest.approx(29 / 48, abs=1e-12)
    assert _q1("num_ret", conventions) == 4.0


def test_max_depth_cuts_the_ranking():
    # only x1, d3, d2 are evaluated
    conventions = PRESETS["default"].replace(max_depth=3)
    values = _values(
        QRELS,
        rag_eval.Run.from_ranking(RANKING),
        ["num_ret", "P@5", "ap", "recall@10", "mrr", "num_rel", "ndcg"],
        conventions,
    )
    assert values[("q1", "num_ret")] == 3.0
    assert values[("q1", "precision@5")] == pytest.approx(1 / 5)  # d3; still / 5
    assert values[("q1", "ap")] == pytest.approx((1 / 2) / 4)  # d3 at rank 2, / R = 4
    assert values[("q1", "recall@10")] == pytest.approx(1 / 4)
    assert values[("q1", "mrr")] == 1 / 2
    assert values[("q1", "num_rel")] == 4.0
    # the ideal is not cut: DCG = 1/log2(3) over the full ideal 9.823465... -> 0.064226...
    assert values[("q1", "ndcg")] == pytest.approx((1 / L3) / (7 + 3 / L3 + 1 / 2 + 1 / L5), abs=1e-12)


def test_max_depth_cuts_before_unjudged_are_removed():
    # trec_eval -M 3 -J: cut to x1, d3, d2 first, then drop x1 -> d3, d2 (not the top 3 of the condensed list)
    conventions = PRESETS["default"].replace(max_depth=3, unjudged="remove")
    values = _values(QRELS, rag_eval.Run.from_ranking(RANKING), ["num_ret", "mrr", "ap"], conventions)
    assert values[("q1", "num_ret")] == 2.0
    assert values[("q1", "mrr")] == 1.0
    assert values[("q1", "ap")] == pytest.approx(1 / 4)  # d3 at rank 1, / R = 4


# ----- repeated doc ids -----------------------------------------------------------------------------------------
def test_repeated_doc_counts_once_at_its_first_position():
    # x, a, x, a, b -> x, a, b: a (relevant) at rank 2, b (relevant) at rank 3; the repeats earn nothing
    with pytest.warns(UserWarning, match="repeated doc id"):
        run = rag_eval.Run.from_ranking({"q": ["x", "a", "x", "a", "b"]})
    values = _values({"q": {"a": 1, "b": 1}}, run, ["P@5", "mrr", "ap", "num_ret", "num_rel_ret"])
    assert values[("q", "precision@5")] == pytest.approx(2 / 5)
    assert values[("q", "mrr")] == 1 / 2
    assert values[("q", "ap")] == pytest.approx((1 / 2 + 2 / 3) / 2)  # 7/12
    assert values[("q", "num_ret")] == 3.0
    assert values[("q", "num_rel_ret")] == 2.0
