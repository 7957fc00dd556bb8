"""The kernels of _kernels_cut.py and _kernels_sets.py: interpolated precision (iprec_at_recall, 11pt_avg), cutoffs
that are not ranks (rprec_mult, relative_precision), gm_map and gm_bpref per query, and the set measures.

Hand-worked values on tiny inputs (ties, unjudged results, an empty ranking, a query with no relevant, a ranking
shorter than R x mult, a recall level whose cutoff is a half), then every family against the real trec_eval 10.0
on the random hard pairs of tests/test_trec_eval_oracle.py under each of its flag sets: per query and ``all``,
as printed (``%6.4f``) and as the same double (the ``%.17g`` build). Until the reports print these families, the
``all`` line of a mean family is compared with the plain sequential mean of the per-query values, a sum family's
with their sum, and gm_map's and gm_bpref's with trec_eval's geometric mean of them (``meas_avg.c``).
"""

from __future__ import annotations

import math
import subprocess
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import rag_eval
from rag_eval.errors import DuplicateJudgement, InputError, NearMissIds
from rag_eval.metrics import PRESETS
from rag_eval.metrics._engine import account_queries, evaluate_run
from rag_eval.metrics._grades import build_grade_matrix
from rag_eval.metrics._kernels_cut import DEFAULT_LEVELS, eleven_point_average, interpolated_precision, trec_round
from rag_eval.metrics._qrels_stats import QrelsStats
from rag_eval.metrics._registry import KERNELS, KernelInputs, load_kernels
from rag_eval.metrics.grammar import parse_metric
from rag_eval.metrics.trec_eval_measures import trec_eval_metrics

from .test_trec_eval_oracle import FLAG_SETS, _qrels_text, conventions_for, make_pair

DEFAULT = PRESETS["default"]
TREC = PRESETS["trec_eval"]


def values(qrels: rag_eval.Qrels, run: rag_eval.Run, metric: str, conventions=DEFAULT) -> dict[str, float]:
    """``{query: value}`` of one metric, through the engine (parse_metric, evaluate_run, the registry)."""
    result = evaluate_run(qrels, run, [parse_metric(metric)], conventions)
    return dict(zip(result.account.counted, result.values[0].tolist()))


class _Spec:
    """A metric as a kernel reads it (family, k, param), for parameters the canonical grammar does not keep as
    given (11pt_avg's levels in trec_eval's unsorted order)."""

    def __init__(self, family: str, k=None, **param: str) -> None:
        self.family, self.k, self.param = family, k, param

    def __str__(self) -> str:
        return f"{self.family}{self.param}"


def kernel_values(qrels, run, spec: _Spec, conventions=DEFAULT) -> np.ndarray:
    """One kernel called directly with the engine's inputs."""
    account = account_queries(qrels, run, conventions)
    matrix = build_grade_matrix(run, qrels, account.counted, conventions)
    stats = QrelsStats(qrels, account.counted, conventions)
    load_kernels()
    t = conventions.relevance_threshold
    return KERNELS[spec.family](
        KernelInputs(matrix, stats, conventions, spec, spec.k, t, run, lambda t: matrix.grades >= t)
    )


# ----- hand-worked values -------------------------------------------------------------------------------------------

# q1: R = 3 (d1, d3, d4), judged non-relevant d2; ranked d1 x d3 d2 y (x, y unjudged): relevant at ranks 1 and 3,
#     precision there 1 and 2/3. q2: judged only non-relevant, d5 returned. q3: judged, not in the run (counted as
#     an empty ranking). q5: R = 5, relevant at ranks 1, 2, 5, 6: precision 1, 1, 3/5, 2/3.
QRELS = rag_eval.Qrels.from_dict(
    {
        "q1": {"d1": 1, "d2": 0, "d3": 2, "d4": 1},
        "q2": {"d5": 0},
        "q3": {"d6": 1},
        "q5": {f"r{i}": 1 for i in range(1, 6)},
    }
)
RUN = rag_eval.Run.from_ranking(
    {
        "q1": ["d1", "x", "d3", "d2", "y"],
        "q2": ["d5"],
        "q5": ["r1", "r2", "n1", "n2", "r3", "r4"],
    }
)


def test_trec_round_is_c_lround():
    x = np.array([0.49999999999999994, 0.5, 1.5, 2.5, -2.5, -0.5, 0.0, 2.4999999999999996, 3.0000000000000004])
    assert trec_round(x).tolist() == [0, 1, 2, 3, -3, -1, 0, 2, 3]


@pytest.mark.parametrize(
    ("level", "q1", "q5"),
    [
        (0.0, 1.0, 1.0),  # cutoff 0: the best precision anywhere
        (0.1, 1.0, 1.0),  # 0.3 -> 0 (q1); 0.5 -> 1 (q5)
        (0.2, 1.0, 1.0),  # 0.6 -> 1
        (0.5, 2 / 3, 2 / 3),  # 1.5 -> 2 (q1); 2.5 -> 3 (q5; NumPy's round-half-even would say 2 and give 1.0)
        (0.7, 2 / 3, 2 / 3),  # 2.1 -> 2; 3.5 -> 4
        (0.9, 0.0, 0.0),  # 2.7 -> 3 relevant, but 2 were found (q1); 4.5 -> 5, but 4 (q5)
        (1.0, 0.0, 0.0),
    ],
)
def test_interpolated_precision_by_hand(level, q1, q5):
    got = values(QRELS, RUN, f"iprec_at_recall(level={level})")
    assert got == pytest.approx({"q1": q1, "q2": 0.0, "q3": 0.0, "q5": q5}, abs=1e-15)


def test_eleven_point_average_by_hand():
    got = values(QRELS, RUN, "11pt_avg")
    # q1: levels 0..0.4 give 1, 0.5..0.8 give 2/3, 0.9 and 1 give 0; q5: 0..0.4 -> 1 (0.4 x 5 = 2 -> 1), 0.5..0.8 ->
    # 2/3 (0.6 x 5 = 3, 0.8 x 5 = 4), 0.9, 1 -> 0
    assert got == pytest.approx({"q1": (5 + 4 * 2 / 3) / 11, "q2": 0.0, "q3": 0.0, "q5": (5 + 4 * 2 / 3) / 11})
    three = values(QRELS, RUN, "11pt_avg(levels=0.2;0.5;0.8)")
    assert three["q1"] == pytest.approx((1 + 2 / 3 + 2 / 3) / 3)


def test_unsorted_levels_follow_trec_eval_loop():
    """trec_eval does not sort 11pt_avg's levels: a level after a higher one in its list takes the best precision
    overall (its backward sweep has passed it), and a level left above the relevant retrieved before any level it
    reaches takes 0. Levels 0.5, 0.2, 1, 0 on q1 (cutoffs 2, 1, 3, 0 relevant; 2 retrieved): the sweep starts at
    the last level (0: cutoff 0 is never met, so every level takes the end's best precision, 1)."""
    got = kernel_values(QRELS, RUN, _Spec("11pt_avg", levels="0.5;0.2;1;0"))
    assert got[0] == pytest.approx(1.0)
    # 0.5, 0.2 (cutoffs 2, 1): the sweep starts at 0.2 and meets 1 at the first relevant (1); 0.5's 2 is behind
    # it by then: the best overall, 1. In order (0.2, 0.5) the sweep meets 2 first (2/3), then 1 (1)
    assert kernel_values(QRELS, RUN, _Spec("11pt_avg", levels="0.5;0.2"))[0] == 1.0
    assert kernel_values(QRELS, RUN, _Spec("11pt_avg", levels="0.2;0.5"))[0] == pytest.approx((1 + 2 / 3) / 2)
    # 0.5, 0.9 (cutoffs 2, 3): 3 is above the 2 found, skipped (0); 2 is met (2/3)
    assert kernel_values(QRELS, RUN, _Spec("11pt_avg", levels="0.5;0.9"))[0] == pytest.approx((2 / 3) / 2)
    # 0.9, 0.5 (cutoffs 3, 2): the sweep starts at 0.5 (2 is met: 2/3), then 3 is passed: the best overall, 1
    assert kernel_values(QRELS, RUN, _Spec("11pt_avg", levels="0.9;0.5"))[0] == pytest.approx((1 + 2 / 3) / 2)


def test_sorted_levels_are_the_mean_of_interpolated_precision():
    """With levels in order, 11pt_avg is the mean of iprec_at_recall at the levels (added from the last)."""
    rng = np.random.default_rng(5)
    n, depth = 40, 30
    rows = np.repeat(np.arange(n), depth)
    ranks = np.tile(np.arange(depth), n)
    rel = rng.random(n * depth) < 0.2
    R = np.bincount(rows[rel], minlength=n) + rng.integers(0, 4, n)
    each = interpolated_precision(rows, ranks, rel, R, DEFAULT_LEVELS)
    expected = np.zeros(n)
    for j in reversed(range(len(DEFAULT_LEVELS))):
        expected = expected + each[:, j]
    assert np.array_equal(eleven_point_average(rows, ranks, rel, R, DEFAULT_LEVELS), expected / 11)


def test_rprec_mult_by_hand():
    # q1, R = 3, 5 returned: mult 0.2 -> rank (long)(0.6 + 0.9) = 1: 1/1; 0.4 -> 2: 1/2; 1 -> 3: 2/3;
    # 2 -> 6, beyond the 5 returned: 2/6 (the ranking filled with non-relevant); q2, q3 score 0
    for mult, q1 in ((0.2, 1.0), (0.4, 0.5), (1, 2 / 3), (2, 2 / 6)):
        got = values(QRELS, RUN, f"rprec_mult(mult={mult})")
        assert got["q1"] == pytest.approx(q1) and got["q2"] == got["q3"] == 0.0
    # q5, R = 5: mult 0.1 -> (long)(0.5 + 0.9) = 1: 1; mult 1.2 -> (long)(6.9) = 6: 4/6; mult 3 -> 15: 4/15
    assert values(QRELS, RUN, "rprec_mult(mult=0.1)")["q5"] == 1.0
    assert values(QRELS, RUN, "rprec_mult(mult=1.2)")["q5"] == pytest.approx(4 / 6)
    assert values(QRELS, RUN, "rprec_mult(mult=3)")["q5"] == pytest.approx(4 / 15)


def test_relative_precision_by_hand():
    assert values(QRELS, RUN, "relative_precision@2") == {"q1": 0.5, "q2": 0.0, "q3": 0.0, "q5": 1.0}
    got = values(QRELS, RUN, "relative_precision@10")  # past R: recall (2/3, 4/5)
    assert got == pytest.approx({"q1": 2 / 3, "q2": 0.0, "q3": 0.0, "q5": 4 / 5})


def test_set_measures_by_hand():
    got = {
        m: values(QRELS, RUN, m)
        for m in (
            "set_precision",
            "set_relative_precision",
            "set_recall",
            "set_map",
            "set_f",
            "set_f(beta=4)",
            "num_nonrel_judged_ret",
        )
    }
    assert got["set_precision"] == pytest.approx({"q1": 2 / 5, "q2": 0.0, "q3": 0.0, "q5": 4 / 6})
    assert got["set_relative_precision"] == pytest.approx({"q1": 2 / 3, "q2": 0.0, "q3": 0.0, "q5": 4 / 5})
    assert got["set_recall"] == pytest.approx({"q1": 2 / 3, "q2": 0.0, "q3": 0.0, "q5": 4 / 5})
    assert got["set_map"] == pytest.approx({"q1": 4 / 15, "q2": 0.0, "q3": 0.0, "q5": 16 / 30})
    # F1 = 2PR / (P + R); beta=4 weighs recall by 4 as trec_eval's set_F.4 does: 5PR / (4P + R), the usual F2
    P, R = 2 / 5, 2 / 3
    assert got["set_f"]["q1"] == pytest.approx(2 * P * R / (P + R))
    assert got["set_f(beta=4)"]["q1"] == pytest.approx(5 * P * R / (4 * P + R))
    assert got["set_f"]["q2"] == got["set_f"]["q3"] == 0.0
    assert got["num_nonrel_judged_ret"] == {"q1": 1.0, "q2": 1.0, "q3": 0.0, "q5": 0.0}


def test_utility_by_hand():
    # q1: a = 2 relevant retrieved, b = 3 others retrieved, c = 1 relevant missed; d = a - retrieved - R = -6 (a
    # collection of 0 documents, as trec_eval without -N)
    assert values(QRELS, RUN, "utility")["q1"] == 2 - 3
    got = values(QRELS, RUN, "utility(weights=2;-1;-1;0.5)")
    assert got["q1"] == 4 - 3 - 1 + 0.5 * -6
    assert got["q2"] == -1 + 0.5 * -1  # one judged non-relevant retrieved, R = 0
    assert got["q3"] == -1 + 0.5 * -1  # nothing retrieved, one relevant missed: c = 1, d = -1


def test_utility_of_a_missing_query_is_trec_eval_c():
    """trec_eval -c measures a missing query on one phantom document outside the pool, and resets the measure named
    plain 'utility' (default weights) to 0; with weights given, the phantom counts as retrieved non-relevant."""
    trec_c = TREC.replace(missing_run="zero")
    assert values(QRELS, RUN, "utility", trec_c)["q3"] == 0.0
    assert values(QRELS, RUN, "utility(weights=2;-1;-1;0.5)", trec_c)["q3"] == -1 - 1 + 0.5 * (0 - 1 - 1)
    # typed at the default weights (trec_eval's -m utility.1,-1,0,0), the name is not plain 'utility': no reset
    assert values(QRELS, RUN, trec_eval_metrics(["utility.1,-1,0,0"])[0], trec_c)["q3"] == -1.0
    assert values(QRELS, RUN, trec_eval_metrics(["utility"])[0], trec_c)["q3"] == 0.0
    # -J drops the phantom (it is not judged)
    assert values(QRELS, RUN, "utility(weights=2;-1;-1;0.5)", trec_c.replace(unjudged="remove"))["q3"] == -1 - 0.5
    # a query condensed to nothing by -J is not missing: its value stays
    condensed = rag_eval.Run.from_ranking({"q1": ["x"], "q2": ["d5"], "q3": ["d6"], "q5": ["r1"]})
    assert (
        values(QRELS, condensed, "utility(weights=2;-1;-1;0.5)", trec_c.replace(unjudged="remove"))["q1"]
        == -3 + 0.5 * -3
    )


def test_gm_map_and_gm_bpref_are_ap_and_bpref_per_query():
    assert values(QRELS, RUN, "gm_map") == pytest.approx(
        {"q1": (1 + 2 / 3) / 3, "q2": 0.0, "q3": 0.0, "q5": (1 + 1 + 3 / 5 + 4 / 6) / 5}
    )
    # q1: bpref with R = 3, one judged non-relevant (d2), ranked after both relevant: 2 / 3
    assert values(QRELS, RUN, "gm_bpref")["q1"] == pytest.approx(2 / 3)
    for family, same in (("gm_map", "ap"), ("gm_bpref", "bpref")):
        assert values(QRELS, RUN, family) == values(QRELS, RUN, same)


def test_ties_follow_the_tie_rule():
    """Two results tied on score: trec_eval's rule puts doc id 'b' (non-relevant) before 'a' (relevant)."""
    qrels = rag_eval.Qrels.from_dict({"q": {"a": 1, "b": 0}})
    run = rag_eval.Run.from_scores({"q": {"a": 1.0, "b": 1.0, "c": 0.5}})
    assert values(qrels, run, "iprec_at_recall(level=1)")["q"] == 0.5
    assert values(qrels, run, "rprec_mult(mult=1)")["q"] == 0.0  # rank (long)(1.9) = 1: 'b'
    assert values(qrels, run, "relative_precision@1")["q"] == 0.0
    by_id = DEFAULT.replace(ties="doc_id")
    assert values(qrels, run, "iprec_at_recall(level=1)", by_id)["q"] == 1.0
    assert values(qrels, run, "rprec_mult(mult=1)", by_id)["q"] == 1.0
    assert values(qrels, run, "set_precision")["q"] == values(qrels, run, "set_precision", by_id)["q"] == 1 / 3


def test_the_cached_precisions_belong_to_their_matrix():
    """iprec_at_recall keeps the precision at each relevant result for the evaluation (its levels come in elevens):
    a second matrix of the same evaluation (a metric's own tie rule) gets its own, not the first one's."""
    qrels = rag_eval.Qrels.from_dict({"q": {"a": 1, "b": 0}})
    run = rag_eval.Run.from_scores({"q": {"a": 1.0, "b": 1.0, "c": 0.5}})
    account = account_queries(qrels, run, DEFAULT)
    stats = QrelsStats(qrels, account.counted, DEFAULT)
    load_kernels()
    got = []
    for ties in ("trec_eval", "doc_id", "trec_eval"):
        matrix = build_grade_matrix(run, qrels, account.counted, DEFAULT.replace(ties=ties))
        ki = KernelInputs(
            matrix,
            stats,
            DEFAULT,
            parse_metric("iprec_at_recall(level=1)"),
            None,
            1,
            run,
            lambda t, matrix=matrix: matrix.grades >= t,
        )
        got.append(float(KERNELS["iprec_at_recall"](ki)[0]))
    assert got == [0.5, 1.0, 0.5]


def test_unjudged_results_and_condensing():
    """Unjudged results count as retrieved non-relevant; under unjudged="remove" (-J) they are gone."""
    qrels = rag_eval.Qrels.from_dict({"q": {"a": 1, "b": 0}})
    run = rag_eval.Run.from_ranking({"q": ["x", "y", "a", "b"]})
    assert values(qrels, run, "set_precision")["q"] == 0.25
    assert values(qrels, run, "iprec_at_recall(level=0)")["q"] == pytest.approx(1 / 3)
    assert values(qrels, run, "num_nonrel_judged_ret")["q"] == 1.0
    condensed = DEFAULT.replace(unjudged="remove")
    assert values(qrels, run, "set_precision", condensed)["q"] == 0.5
    assert values(qrels, run, "iprec_at_recall(level=0)", condensed)["q"] == 1.0
    assert values(qrels, run, "utility", condensed)["q"] == 0.0  # 1 relevant, 1 judged non-relevant retrieved


def test_an_emptied_ranking_is_nan_only_where_trec_eval_divides_0_by_0():
    """-J removes every result of q1 (all unjudged): trec_eval's interpolated precision there is 0 / 0 (-nan) at a
    level whose cutoff is below 1, and so is 11pt_avg; at a level above it, 0. Under -c -J a missing query's
    phantom result goes too (NaN); under -c alone it stays (0). The default conventions score an empty ranking 0."""
    qrels = rag_eval.Qrels.from_dict({"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}})
    run = rag_eval.Run.from_ranking({"q1": ["x", "y"], "q2": ["d2"]})
    trec_j = TREC.replace(unjudged="remove", missing_run="zero")
    level0 = values(qrels, run, "iprec_at_recall(level=0)", trec_j)
    assert math.isnan(level0["q1"]) and level0["q2"] == 1.0 and math.isnan(level0["q3"])
    assert values(qrels, run, "iprec_at_recall(level=0.5)", trec_j) == {"q1": 0.0, "q2": 1.0, "q3": 0.0}
    assert math.isnan(values(qrels, run, "11pt_avg", trec_j)["q1"])
    assert values(qrels, run, "iprec_at_recall(level=0)", TREC.replace(missing_run="zero"))["q3"] == 0.0
    for conventions in (DEFAULT.replace(unjudged="remove"), DEFAULT):
        assert values(qrels, run, "iprec_at_recall(level=0)", conventions) == {"q1": 0.0, "q2": 1.0, "q3": 0.0}
        assert values(qrels, run, "11pt_avg", conventions)["q1"] == 0.0
    # the other families stay numbers: nothing retrieved is precision 0
    assert (
        values(qrels, run, "set_precision", trec_j)["q1"] == values(qrels, run, "rprec_mult(mult=1)", trec_j)["q1"] == 0
    )


def test_a_per_query_budget_cuts_the_set():
    """A per-query cutoff (a token budget's) makes the set what was delivered."""
    metrics = [parse_metric(m) for m in ("set_precision", "set_recall", "iprec_at_recall(level=0.5)")]
    cut = evaluate_run(QRELS, RUN, metrics, DEFAULT, cutoffs=[{"q1": 2, "q5": 1}] * 3)
    got = {str(m): dict(zip(cut.account.counted, v.tolist())) for m, v in zip(metrics, cut.values)}
    assert got["set_precision"] == {"q1": 0.5, "q2": 0.0, "q3": 0.0, "q5": 1.0}
    assert got["set_recall"] == pytest.approx({"q1": 1 / 3, "q2": 0.0, "q3": 0.0, "q5": 1 / 5})
    assert got["iprec_at_recall(level=0.5)"] == {"q1": 0.0, "q2": 0.0, "q3": 0.0, "q5": 0.0}


def test_kernels_refuse_what_they_cannot_read():
    with pytest.raises(InputError, match="needs the parameter level="):
        kernel_values(QRELS, RUN, _Spec("iprec_at_recall"))
    with pytest.raises(InputError, match="finite"):
        kernel_values(QRELS, RUN, _Spec("11pt_avg", levels="0.5;nan"))
    with pytest.raises(InputError, match="4 decimals"):
        kernel_values(QRELS, RUN, _Spec("utility", weights="1;2"))
    with pytest.raises(InputError, match="0 or more"):
        kernel_values(QRELS, RUN, _Spec("set_f", beta="-1"))
    with pytest.raises(InputError, match="needs a cutoff"):
        kernel_values(QRELS, RUN, _Spec("relative_precision"))


# ----- against trec_eval --------------------------------------------------------------------------------------------

SEEDS = range(0, 240, 4)  # 60 of the oracle's random hard pairs
RPREC_MULTS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)  # m_Rprec_mult.c
REL_P_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)  # m_rel_P.c
SETS = {
    "set_P": "set_precision",
    "set_relative_P": "set_relative_precision",
    "set_recall": "set_recall",
    "set_map": "set_map",
    "num_nonrel_judged_ret": "num_nonrel_judged_ret",
}


def _invocations() -> list[tuple[list[str], dict[str, str]]]:
    """trec_eval's -m arguments, each with {trec_eval's printed name: rag_eval's metric}."""
    defaults = {f"iprec_at_recall_{v:3.2f}": f"iprec_at_recall(level={v})" for v in DEFAULT_LEVELS}
    defaults |= {
        "11pt_avg": "11pt_avg",
        "set_F": "set_f",
        "utility": "utility",
        "gm_map": "gm_map",
        "gm_bpref": "gm_bpref",
    } | SETS
    defaults |= {f"Rprec_mult_{v:3.2f}": f"rprec_mult(mult={v})" for v in RPREC_MULTS}
    defaults |= {f"relative_P_{k}": f"relative_precision@{k}" for k in REL_P_CUTOFFS}
    first = [
        "iprec_at_recall",
        "11pt_avg",
        "Rprec_mult",
        "relative_P",
        "set_P",
        "set_relative_P",
        "set_recall",
        "set_map",
        "set_F",
        "utility",
        "num_nonrel_judged_ret",
        "gm_map",
        "gm_bpref",
    ]
    levels, mults, cuts = (0.05, 0.33, 0.5, 0.95), (0.1, 0.35, 3.3), (1, 3, 7)
    params = {f"iprec_at_recall_{v:3.2f}": f"iprec_at_recall(level={v})" for v in levels}
    params |= {f"Rprec_mult_{v:3.2f}": f"rprec_mult(mult={v})" for v in mults}
    params |= {f"relative_P_{k}": f"relative_precision@{k}" for k in cuts}
    params |= {
        "11pt_avg_0.25,0.5,0.75": "11pt_avg(levels=0.25;0.5;0.75)",
        "set_F_0.25": "set_f(beta=0.25)",
        "utility_2,-1,-1,0.5": "utility(weights=2;-1;-1;0.5)",
    }
    second = [
        "iprec_at_recall." + ",".join(map(str, levels)),
        "Rprec_mult." + ",".join(map(str, mults)),
        "relative_P." + ",".join(map(str, cuts)),
        "11pt_avg.0.25,0.5,0.75",
        "set_F.0.25",
        "utility.2,-1,-1,0.5",
    ]
    third = {"set_F_4": "set_f(beta=4)", "utility_1,-1,0,0.5": "utility(weights=1;-1;0;0.5)"}
    # typed at its defaults, utility is the canonical 'utility' but trec_eval's 'utility_1,-1,0,0', which -c does
    # not reset to 0 for a missing query (the Metric keeps trec_eval's spelling)
    typed = {"utility_1,-1,0,0": trec_eval_metrics(["utility.1,-1,0,0"])[0]}
    return [
        (first, defaults),
        (second, params),
        (["set_F.4", "utility.1,-1,0,0.5"], third),
        (["utility.1,-1,0,0"], typed),
    ]


INVOCATIONS = _invocations()
GEOMETRIC = {"gm_map", "gm_bpref"}
SUMMED = {"num_nonrel_judged_ret"}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> list[tuple[int, Path, dict[bool, Path], dict[bool, Path]]]:
    folder = tmp_path_factory.mktemp("cut_sets")
    out = []
    for seed in SEEDS:
        pair = make_pair(seed)
        run = folder / f"{seed}.run"
        run.write_text(pair.run_text, encoding="utf-8")
        ours, theirs = {}, {}
        for complete in (True, False):
            drop = set() if complete else pair.qrels_only
            ours[complete] = folder / f"{seed}.{complete}.qrels"
            ours[complete].write_text(_qrels_text(pair.qrels_lines, drop=drop, dedupe=False), encoding="utf-8")
            theirs[complete] = folder / f"{seed}.{complete}.dedup.qrels"
            theirs[complete].write_text(_qrels_text(pair.qrels_lines, drop=drop, dedupe=True), encoding="utf-8")
        out.append((seed, run, ours, theirs))
    return out


def _trec_eval(
    binary: Path, flags: list[str], measures: list[str], qrels: Path, run: Path
) -> dict[tuple[str, str], str]:
    args = [str(binary), "-q", *flags]
    for m in measures:
        args += ["-m", m]
    done = subprocess.run([*args, str(qrels), str(run)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{' '.join(args)}: exit {done.returncode}: {done.stderr}"
    return {(p[0].strip(), p[1]): p[2] for p in (line.split("\t") for line in done.stdout.splitlines())}


def _all_line(name: str, per_query: list[float]) -> float:
    """What trec_eval's ``all`` line holds for these per-query values (meas_acc.c, meas_avg.c)."""
    total = 0.0
    if name in GEOMETRIC:
        for v in per_query:
            total += math.log(max(v, 1e-5))
        return math.exp(total / len(per_query))
    for v in per_query:
        total += v
    return total if name in SUMMED else total / len(per_query)


def _printed(name: str, value: float) -> str:
    """As trec_eval prints it: a count as an integer, else %6.4f; NaN (0 / 0 in C) as glibc prints it."""
    if math.isnan(value):
        return "  -nan"
    return f"{int(value)}" if name in SUMMED else f"{value:6.4f}"


def _exactly(theirs: str, value: float) -> bool:
    return float(theirs) == value or (math.isnan(float(theirs)) and math.isnan(value))


@pytest.mark.parametrize("flag_set", list(FLAG_SETS), ids=lambda f: f.replace("-", "").replace(" ", "_") or "none")
def test_every_family_agrees_with_trec_eval(trec_eval_binary, trec_eval_exact_binary, files, flag_set):
    flags = FLAG_SETS[flag_set]
    complete = "-c" in flags
    conventions = conventions_for(flags)
    problems: list[str] = []
    compared = 0
    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs = [
            [
                (
                    pool.submit(_trec_eval, trec_eval_binary, flags, measures, theirs[complete], run),
                    pool.submit(_trec_eval, trec_eval_exact_binary, flags, measures, theirs[complete], run),
                )
                for measures, _ in INVOCATIONS
            ]
            for _, run, _, theirs in files
        ]
        for (seed, run_path, ours, _), pair_jobs in zip(files, jobs):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DuplicateJudgement)
                warnings.simplefilter("ignore", NearMissIds)
                qrels, run = rag_eval.Qrels.from_trec(ours[complete]), rag_eval.Run.from_trec(run_path)
                for (_, names), (printed_job, exact_job) in zip(INVOCATIONS, pair_jobs):
                    metrics = [parse_metric(m) for m in names.values()]  # a Metric stays itself
                    result = evaluate_run(qrels, run, metrics, conventions)
                    printed, exact = printed_job.result(), exact_job.result()
                    for name, per_query in zip(names, result.values):
                        label = f"pair {seed} [{flag_set}] {name}"
                        lines = [(q, v) for q, v in zip(result.account.counted, per_query.tolist())]
                        if name not in GEOMETRIC:  # trec_eval prints gm_map and gm_bpref in the all line only
                            for q, v in lines:
                                compared += 1
                                if printed.get((name, q)) != _printed(name, v):
                                    problems.append(
                                        f"{label} {q}: trec_eval {printed.get((name, q))!r}, rag_eval {v!r}"
                                    )
                                elif not _exactly(exact[(name, q)], v):
                                    problems.append(f"{label} {q}: trec_eval {exact[(name, q)]}, rag_eval {v!r}")
                        whole = _all_line(name, [v for _, v in lines])
                        compared += 1
                        if printed.get((name, "all")) != _printed(name, whole) or not _exactly(
                            exact[(name, "all")], whole
                        ):
                            problems.append(f"{label} all: trec_eval {exact.get((name, 'all'))}, rag_eval {whole!r}")
                    theirs_names = {m for m, q in printed if q != "all"} | {m for m, q in printed if m in GEOMETRIC}
                    assert theirs_names == set(names), f"pair {seed}: trec_eval printed {sorted(theirs_names)}"
    assert compared > 5_000 and not problems, f"{len(problems)} differ, e.g.:\n" + "\n".join(problems[:25])


def test_unsorted_11pt_levels_agree_with_trec_eval(trec_eval_exact_binary, files):
    """trec_eval's ``-m 11pt_avg.0.5,0.2,1,0.9,0`` (levels out of order: trec_eval keeps them so), per query, as
    the same double: the kernel replays trec_eval's loop for any order."""
    problems, compared = [], 0
    for levels in ("0.5,0.2,1,0.9,0", "0.9,0.1,0.5", "0.3,0.7,0.2,0.2"):
        for flag_set in ("no flag", "-c -M 20 -l 2", "-J"):
            flags = FLAG_SETS[flag_set]
            complete = "-c" in flags
            for seed, run_path, ours, theirs in files[::2]:
                exact = _trec_eval(trec_eval_exact_binary, flags, [f"11pt_avg.{levels}"], theirs[complete], run_path)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DuplicateJudgement)
                    warnings.simplefilter("ignore", NearMissIds)
                    qrels, run = rag_eval.Qrels.from_trec(ours[complete]), rag_eval.Run.from_trec(run_path)
                    account = account_queries(qrels, run, conventions_for(flags))
                    got = kernel_values(
                        qrels, run, _Spec("11pt_avg", levels=levels.replace(",", ";")), conventions_for(flags)
                    )
                for q, v in zip(account.counted, got.tolist()):
                    compared += 1
                    if not _exactly(exact[(f"11pt_avg_{levels}", q)], v):
                        problems.append(
                            f"pair {seed} [{flag_set}] {levels} {q}: trec_eval "
                            f"{exact[(f'11pt_avg_{levels}', q)]}, rag_eval {v!r}"
                        )
    assert compared > 500 and not problems, f"{len(problems)} differ, e.g.:\n" + "\n".join(problems[:25])


# families whose value reads only which results are relevant: the default preset (a grade below 0 judged
# non-relevant, not pooled-unjudged) gives trec_eval's per-query doubles too, where -J does not tell them apart
RELEVANCE_ONLY = {name for name in INVOCATIONS[0][1] if name not in ("num_nonrel_judged_ret", "gm_bpref")}


@pytest.mark.parametrize(
    "flag_set",
    [f for f in FLAG_SETS if "-J" not in FLAG_SETS[f]],
    ids=lambda f: f.replace("-", "").replace(" ", "_") or "none",
)
def test_the_default_preset_gives_trec_eval_values_per_query(trec_eval_exact_binary, files, flag_set):
    """Under ``conventions="default"`` with the flags' changes, the same doubles per query, but for utility of a
    query missing from the run (-c): the default measures the empty ranking (w3 x R - w4 x R), not trec_eval's
    phantom result or its reset to 0."""
    flags = FLAG_SETS[flag_set]
    complete = "-c" in flags
    conventions = DEFAULT.replace(
        **{
            k: v
            for k, v in conventions_for(flags).model_dump().items()
            if k in ("missing_run", "max_depth", "relevance_threshold")
        }
    )
    measures, names = INVOCATIONS[0]
    names = {n: m for n, m in names.items() if n in RELEVANCE_ONLY}
    problems, compared = [], 0
    for seed, run_path, ours, theirs in files[::2]:
        exact = _trec_eval(trec_eval_exact_binary, flags, measures, theirs[complete], run_path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DuplicateJudgement)
            warnings.simplefilter("ignore", NearMissIds)
            qrels, run = rag_eval.Qrels.from_trec(ours[complete]), rag_eval.Run.from_trec(run_path)
            result = evaluate_run(qrels, run, [parse_metric(m) for m in names.values()], conventions)
        in_run = set(run.query_ids)
        for name, per_query in zip(names, result.values):
            for q, v in zip(result.account.counted, per_query.tolist()):
                if name in GEOMETRIC or (name == "utility" and q not in in_run):
                    continue
                compared += 1
                if not _exactly(exact[(name, q)], v):
                    problems.append(
                        f"pair {seed} [{flag_set}] {name} {q}: trec_eval {exact[(name, q)]}, rag_eval {v!r}"
                    )
    assert compared > 2_000 and not problems, f"{len(problems)} differ, e.g.:\n" + "\n".join(problems[:25])
