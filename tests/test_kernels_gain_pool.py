"""The gain and pool kernels (rag_eval/metrics/_kernels_gain.py, _kernels_pool.py): G, binG, ndcg_rel, Rndcg, rbp,
rbp_resid, infAP, unj, relstring, num_q, runid as trec_eval 10.0 computes them, and ERR / nERR.

Hand-worked values on tiny inputs (ties, unjudged and pooled-but-unjudged results, grade -1, an empty ranking, a
query with no relevant judgement, p near 0 and 1); ERR and nERR against a loop written from Chapelle et al. (2009)
and against ir_measures' gdeval provider (perl, offline); every trec_eval family against the trec_eval binary on
the random hard data of tests/test_trec_eval_oracle.py (grades -2..4, ties, -c, -M, -l, -J), per query (-q): every
value the same double as trec_eval's (a trec_eval built to print %.17g) and, on two flag sets, the same text as
printed (%6.4f).

Two things trec_eval does that are easy to miss, each pinned by a test here:

- under -c, trec_eval measures a query missing from the run on one made-up result not in the pool, then resets
  the measures it names to their empty-ranking values (trec_eval.c: ``relstring``, ``unj*``, ``rbp_resid``). The
  names are compared exactly, so ``relstring_20`` prints ``'-'`` and ``rbp_resid_p=0.95`` prints 1 for such a query;
  rag_eval does the same under the trec_eval conventions (_kernels_pool.made_up_result);
- m_rbp.c normalises gains with two variables it never initialises (``min``, ``max``). When rbp is asked alone or
  in ``all_trec`` they start at 0 in trec_eval 10.0 as built here, and rag_eval takes them as 0; asked together
  with some other measures (G, ndcg, iprec_at_recall, ...) trec_eval's rbp can read other leftovers from the stack.
  rbp is compared here in a trec_eval run of its own.
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
from rag_eval.errors import RagEvalWarning
from rag_eval.metrics import PRESETS
from rag_eval.metrics._engine import evaluate_run
from rag_eval.metrics._grades import build_grade_matrix
from rag_eval.metrics._kernels_gain import _add_ones, _glibc_msort, default_max_grade, scan
from rag_eval.metrics.grammar import parse_metric

from .test_trec_eval_oracle import FLAG_SETS, _qrels_text, conventions_for, make_pair

TREC = PRESETS["trec_eval"]
DEFAULT = PRESETS["default"]


def values(qrels: dict, run: dict, names: list[str], conventions=TREC, *, scores: bool = True) -> dict[str, dict]:
    """{metric: {query: value}} from the engine (the run given as scores, or as a ranked list)."""
    q = rag_eval.Qrels.from_dict(qrels)
    r = rag_eval.Run.from_scores(run) if scores else rag_eval.Run.from_ranking(run)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RagEvalWarning)
        out = evaluate_run(q, r, [parse_metric(n) for n in names], conventions)
    return {n: dict(zip(out.account.counted, v)) for n, v in zip(names, out.values)}


# ----- hand-worked values ---------------------------------------------------------------------------------------

# one query: judged a:3 b:1 c:0 d:2 e:-1 (pooled but unjudged under trec_eval); ranked a x d e b (x not in the pool)
QRELS = {"q1": {"a": 3, "b": 1, "c": 0, "d": 2, "e": -1}}
RANKED = {"q1": ["a", "x", "d", "e", "b"]}
EPS = 0.00001


def test_hand_worked_values_of_one_query():
    v = values(
        QRELS,
        RANKED,
        [
            "g",
            "bing",
            "ndcg_rel",
            "rndcg",
            "rbp",
            "rbp(p=0.5)",
            "rbp_resid",
            "infap",
            "unjudged@1",
            "unjudged@2",
            "unjudged@7",
            "relstring",
            "relstring@3",
            "num_q",
            "runid",
            "rbp(gains=1:0.5;2:0.7;3:1)",
            "rbp@2",
            "rbp_resid@2",
        ],
        scores=False,
    )
    one = {name: per["q1"] for name, per in v.items()}
    # rbp: gains 3, 2, 1 divided by the largest (3) as it is above 1; ranks 1, 3, 5
    assert one["rbp(p=0.5)"] == pytest.approx(0.5 * (1 + 2 / 3 * 0.25 + 1 / 3 * 0.0625), abs=1e-15)  # 0.59375
    assert one["rbp"] == pytest.approx(0.1 * (1 + 2 / 3 * 0.81 + 1 / 3 * 0.9**4), abs=1e-15)
    assert one["rbp(gains=1:0.5;2:0.7;3:1)"] == pytest.approx(0.1 * (1 + 0.7 * 0.81 + 0.5 * 0.9**4), abs=1e-15)
    assert one["rbp@2"] == pytest.approx(0.1, abs=1e-15)  # only a, in the first 2 ranks
    # rbp_resid: x (rank 2) and e (rank 4) unjudged, and p^5 for the ranks past the ranking
    assert one["rbp_resid"] == pytest.approx(0.9**5 + 0.1 * (0.9 + 0.9**3), abs=1e-15)
    assert one["rbp_resid@2"] == pytest.approx(0.9**2 + 0.1 * 0.9, abs=1e-15)
    # binG: a (0 non-relevant above), d (1 above: x), b (2 above: x, e); R = 3 (a, b, d)
    assert one["bing"] == pytest.approx((1 + 1 / math.log2(3) + 1 / math.log2(4)) / 3, abs=1e-15)
    # infAP: a at rank 0 counts 1; d at j=2 with 1 relevant above; b at j=4 with 2 relevant and e pooled above
    d = 1 / 3 + (2 / 3) * (1 / 2) * ((1 + EPS) / (1 + 2 * EPS))
    b = 1 / 5 + (4 / 5) * (3 / 4) * ((2 + EPS) / (2 + 2 * EPS))
    assert one["infap"] == pytest.approx((1 + d + b) / 3, abs=1e-15)
    # ndcg_rel: nDCG at each relevant retrieved (a, d, b) with the ideal (3, 2, 1) at that rank (capped at 3)
    dcg_a, dcg_d, dcg_b = 3.0, 3 + 2 / 2, 3 + 2 / 2 + 1 / math.log2(6)
    ideal1, ideal3 = 3.0, 3 + 2 / math.log2(3) + 1 / 2
    assert one["ndcg_rel"] == pytest.approx((dcg_a / ideal1 + dcg_d / ideal3 + dcg_b / ideal3) / 3, abs=1e-15)
    # Rndcg: the ideal gain changes at ranks 2, 3 and ends at 4; the ranking runs 2 past the ideal's end (5 >= 3 + 2)
    ideal2 = 3 + 2 / math.log2(3)
    points = [3 / 3, 3 / ideal2, (3 + 2 / 2) / ideal3, dcg_b / ideal3]
    assert one["rndcg"] == pytest.approx(sum(points) / 4, abs=1e-15)
    # G: costs max(ideal gain, 1) = 3, 2, 1, then 1 a rank; a at rank 1: 3 / log2(2 + 3 - 3), d: 2 / log2(2 + 6 - 5),
    # b: 1 / log2(2 + 8 - 6); over the ideal's total gain 6
    assert one["g"] == pytest.approx((3 / 1 + 2 / math.log2(3) + 1 / 2) / 6, abs=1e-15)
    assert one["unjudged@1"] == 0 and one["unjudged@2"] == 0.5
    assert one["unjudged@7"] == pytest.approx(2 / 7)  # x and e; ranks 6 and 7 are past the ranking: judged
    assert one["relstring"] == "3-2.1" and one["relstring@3"] == "3-2"
    assert one["num_q"] == 1.0 and one["runid"] == "run"


def test_a_negative_grade_is_judged_under_the_default_conventions():
    """Under negative_grades="nonrelevant" a grade -1 is a judged non-relevant grade: not unjudged, not pooled."""
    v = values(QRELS, RANKED, ["relstring", "unjudged@5", "infap", "rbp_resid"], DEFAULT, scores=False)
    assert v["relstring"]["q1"] == "3-2<1"
    assert v["unjudged@5"]["q1"] == pytest.approx(1 / 5)
    b = 1 / 5 + (4 / 5) * (3 / 4) * ((2 + EPS) / (2 + 1 + 2 * EPS))  # e now judged non-relevant above b
    d = 1 / 3 + (2 / 3) * (1 / 2) * ((1 + EPS) / (1 + 2 * EPS))
    assert v["infap"]["q1"] == pytest.approx((1 + d + b) / 3, abs=1e-15)
    assert v["rbp_resid"]["q1"] == pytest.approx(0.9**5 + 0.1 * 0.9, abs=1e-15)


def test_the_grade_matrix_keeps_pooled_cells_only_under_trec_eval_reading():
    q = rag_eval.Qrels.from_dict(QRELS)
    r = rag_eval.Run.from_ranking(RANKED)
    trec = build_grade_matrix(r, q, ["q1"], TREC)
    assert trec.ranks.tolist() == [0, 2, 4] and trec.grades.tolist() == [3, 2, 1]
    assert trec.pooled_rows.tolist() == [0] and trec.pooled_ranks.tolist() == [3]
    assert trec.pooled_grades.tolist() == [-1]
    default = build_grade_matrix(r, q, ["q1"], DEFAULT)
    assert default.ranks.tolist() == [0, 2, 3, 4] and len(default.pooled_rows) == 0
    cut = build_grade_matrix(r, q, ["q1"], TREC.replace(max_depth=3))
    assert len(cut.pooled_rows) == 0 and cut.ranks.tolist() == [0, 2]
    condensed = build_grade_matrix(r, q, ["q1"], TREC.replace(unjudged="remove"))
    assert len(condensed.pooled_rows) == 0 and condensed.ranks.tolist() == [0, 1, 2]


def test_score_ties_follow_the_tie_rule():
    """Tied scores: trec_eval's order is doc id descending, so 'b' (grade 0) comes before 'a' (grade 2)."""
    qrels = {"q": {"a": 2, "b": 0, "c": -1}}
    run = {"q": {"a": 1.0, "b": 1.0, "c": 0.5, "z": 0.5}}
    v = values(qrels, run, ["relstring", "bing", "err(max_grade=2)", "rbp"])
    assert v["relstring"]["q"] == "02-."  # z before c (descending ids), z not in the pool
    assert v["bing"]["q"] == pytest.approx(1 / math.log2(3))
    assert v["err(max_grade=2)"]["q"] == pytest.approx(0.75 / 2)
    assert v["rbp"]["q"] == pytest.approx(0.1 * 0.9)  # gain 2 / 2 at rank 2
    mine = values(qrels, run, ["relstring"], TREC.replace(ties="doc_id"))
    assert mine["relstring"]["q"] == "20.-"


def test_an_empty_ranking_and_a_query_without_relevant():
    """q2 is judged but missing from the run (-c: an empty ranking); q3 is judged only non-relevant."""
    qrels = {"q1": {"a": 1}, "q2": {"b": 2, "c": 1}, "q3": {"d": 0, "e": 0}}
    run = {"q1": {"a": 1.0}, "q3": {"d": 2.0, "x": 1.0}}
    names = [
        "g",
        "bing",
        "ndcg_rel",
        "rndcg",
        "rbp",
        "rbp_resid",
        "infap",
        "unjudged@5",
        "relstring",
        "err",
        "nerr",
        "nerr@1",
        "num_q",
    ]
    v = values(qrels, run, names, TREC.replace(missing_run="zero"))
    for name in names[:-1]:
        expected = "" if name == "relstring" else 0.0
        assert v[name]["q2"] == expected, name
    assert v["relstring"]["q3"] == "0-" and v["unjudged@5"]["q3"] == pytest.approx(0.2)
    for name in ["g", "bing", "ndcg_rel", "rndcg", "rbp", "infap", "err", "nerr"]:
        assert v[name]["q3"] == 0.0, name
    assert v["rbp_resid"]["q3"] == pytest.approx(0.81 + 0.1 * 0.9)
    assert v["num_q"] == {"q1": 1.0, "q2": 1.0, "q3": 1.0}
    assert v["rbp_resid"]["q1"] == 0.0  # nothing unjudged: trec_eval's 0, though ranks past the ranking remain


def test_persistence_near_0_and_1():
    qrels = {"q": {"a": 1, "b": 1}}
    run = {"q": ["a", "x", "b"]}
    v = values(
        qrels,
        run,
        ["rbp(p=0.000001)", "rbp(p=0.999999)", "rbp_resid(p=0.000001)", "rbp_resid(p=0.999999)"],
        scores=False,
    )
    assert v["rbp(p=0.000001)"]["q"] == pytest.approx((1 - 1e-6) * (1 + 1e-12), abs=1e-18)
    assert v["rbp(p=0.999999)"]["q"] == pytest.approx(1e-6 * (1 + 0.999999**2), rel=1e-9)
    assert v["rbp_resid(p=0.000001)"]["q"] == pytest.approx(1e-18 + (1 - 1e-6) * 1e-6, rel=1e-9)
    # almost nothing is settled at p ~ 1: the residual is nearly all of the scale
    assert v["rbp_resid(p=0.999999)"]["q"] == pytest.approx(0.999999**3 + 1e-6 * 0.999999, rel=1e-12)


def test_err_and_nerr_by_hand():
    qrels = {"q": {"a": 2, "b": 0, "c": 1, "d": 2}}
    run = {"q": ["a", "b", "c"]}
    v = values(
        qrels,
        run,
        [
            "err(max_grade=2)",
            "err(max_grade=2)@1",
            "nerr(max_grade=2)",
            "err(max_grade=3)",
            "err(max_grade=2,rel=2)",
            "err",
            "nerr@2",
        ],
        scores=False,
    )
    # R = 3/4, 0, 1/4: 3/4 + (1 - 3/4) (1/4) / 3
    assert v["err(max_grade=2)"]["q"] == pytest.approx(0.75 + 0.25 * 0.25 / 3, abs=1e-15)
    assert v["err(max_grade=2)@1"]["q"] == 0.75
    assert v["err"]["q"] == v["err(max_grade=2)"]["q"]  # max_grade defaults to the qrels' largest grade, 2
    assert v["err(max_grade=3)"]["q"] == pytest.approx(3 / 8 + (5 / 8) * (1 / 8) / 3, abs=1e-15)
    assert v["err(max_grade=2,rel=2)"]["q"] == 0.75
    # the ideal: a, d (3/4 each), then c: 3/4 + (1/4)(3/4)/2 + (1/16)(1/4)/3
    ideal = 0.75 + 0.25 * 0.75 / 2 + 0.0625 * 0.25 / 3
    assert v["nerr(max_grade=2)"]["q"] == pytest.approx((0.75 + 0.25 * 0.25 / 3) / ideal, abs=1e-15)
    assert v["nerr@2"]["q"] == pytest.approx(0.75 / (0.75 + 0.25 * 0.75 / 2), abs=1e-15)


def test_default_max_grade_is_the_qrels_largest_whatever_the_run():
    q = rag_eval.Qrels.from_dict({"q1": {"a": 1}, "q2": {"b": 4}})
    assert default_max_grade(q) == 4
    assert default_max_grade(rag_eval.Qrels.from_dict({"q": {"a": 0}})) == 1
    # q2 left out (not in the run, trec_eval preset): R_1 is still (2 - 1) / 2^4
    v = values({"q1": {"a": 1}, "q2": {"b": 4}}, {"q1": {"a": 1.0}}, ["err"])
    assert v["err"] == {"q1": 1 / 16}


# ----- the sequential arithmetic -------------------------------------------------------------------------------


def test_scan_adds_and_multiplies_in_order_within_each_row():
    rng = np.random.default_rng(3)
    rows = np.sort(rng.integers(0, 50, size=2000))
    x = rng.random(2000) * 10.0 ** rng.integers(-8, 8, size=2000)
    for op in ("add", "mul"):
        expected = np.empty_like(x)
        for r in np.unique(rows):
            acc = None
            for i in np.flatnonzero(rows == r):
                acc = x[i] if acc is None else (acc + x[i] if op == "add" else acc * x[i])
                expected[i] = acc
        assert np.array_equal(scan(x, rows, 50, op), expected)
    skewed = np.concatenate([np.zeros(30000, np.int64), np.arange(1, 3000)])  # one long row: the column loop
    y = rng.random(len(skewed))
    assert np.array_equal(scan(y, skewed, 3000)[:30000], np.cumsum(y[:30000]))


def test_add_ones_rounds_as_one_addition_at_a_time():
    rng = np.random.default_rng(5)
    start = np.concatenate(
        [
            rng.random(200) * 10.0 ** rng.integers(0, 6, 200),
            [0.0, 1.0, 2.0**53 - 3, 2.0**53 + 2, 2.0**60, 7.9999999999999991],
        ]
    )
    times = rng.integers(0, 3000, len(start))
    out = _add_ones(start, times)
    for s, t, o in zip(start.tolist(), times.tolist(), out.tolist()):
        x = s
        for _ in range(t):
            x = x + 1.0
        assert o == x, (s, t)


def test_glibc_merge_sort_with_trec_evals_truncating_comparator():
    """gain_init.c sorts by ``(int)(a - b)``: 3.5 and 3 compare equal (kept in order), 1e10 is 'less' than 0."""
    assert _glibc_msort([(1, 3.5), (0, 0.0), (3, 3.0)]) == [(0, 0.0), (1, 3.5), (3, 3.0)]
    assert _glibc_msort([(2, 1e10), (0, 0.0), (1, 1.0)])[0] == (2, 1e10)


# ----- ERR against references -----------------------------------------------------------------------------------


def reference_err(grades_in_rank_order: list[int], k: int | None, max_grade: int, rel: int | None = None) -> float:
    """ERR written from Chapelle et al. (2009), section 4: a user stops at rank r with probability R_r."""
    err, still = 0.0, 1.0
    for r, g in enumerate(grades_in_rank_order[:k] if k else grades_in_rank_order, start=1):
        stop = (2**g - 1) / 2**max_grade if g > 0 and (rel is None or g >= rel) else 0.0
        err += still * stop / r
        still *= 1 - stop
    return err


def random_graded(seed: int, queries: int = 40):
    rng = np.random.default_rng(seed)
    qrels, run = {}, {}
    for i in range(queries):
        docs = [f"d{j}" for j in range(int(rng.integers(1, 60)))]
        judged = rng.choice(docs, size=int(rng.integers(1, len(docs) + 1)), replace=False)
        qrels[str(100 + i)] = {str(d): int(rng.choice([-1, 0, 0, 1, 2, 3, 4])) for d in judged}
        pool = docs + [f"x{j}" for j in range(20)]
        returned = rng.choice(pool, size=int(rng.integers(0, min(50, len(pool)))), replace=False)
        if len(returned):
            run[str(100 + i)] = {str(d): float(s) for d, s in zip(returned, rng.integers(0, 8, len(returned)) / 4)}
    return qrels, run


def ranked_grades(qrels: dict, run: dict, q: str) -> list[int]:
    """The query's grades in trec_eval's order (score descending, doc id descending), 0 where unjudged."""
    by_id = sorted(run.get(q, {}).items(), reverse=True)
    order = sorted(by_id, key=lambda item: -item[1])  # stable: ties keep doc id descending
    return [qrels[q].get(d, 0) for d, _ in order]


@pytest.mark.parametrize("seed", range(4))
def test_err_and_nerr_agree_with_the_reference_loop(seed):
    qrels, run = random_graded(seed)
    names = ["err", "err@5", "err(max_grade=6)@10", "err(rel=2)@3", "nerr", "nerr@5", "nerr(max_grade=5,rel=3)@10"]
    v = values(qrels, run, names, TREC.replace(missing_run="zero"))
    top = max(g for judged in qrels.values() for g in judged.values())
    compared = 0
    for name in names:
        metric = parse_metric(name)
        m = int(metric.param.get("max_grade", top))
        rel = metric.rel
        for q in qrels:
            mine = reference_err(ranked_grades(qrels, run, q), metric.k, m, rel)
            if metric.family == "nerr":
                best = reference_err(sorted(qrels[q].values(), reverse=True), metric.k, m, rel)
                mine = mine / best if best > 0 else 0.0
            assert v[name][q] == pytest.approx(mine, rel=1e-12, abs=1e-15), (name, q)
            compared += 1
    assert compared == len(names) * len(qrels)
    assert any(0 < v["nerr"][q] < 1 for q in qrels) and any(v["err(rel=2)@3"][q] > 0 for q in qrels)


def test_err_agrees_with_ir_measures_gdeval(tmp_path):
    """ir_measures' gdeval provider (gdeval.pl, perl, offline): ERR@k with grades up to 4 (its MAX_JUDGMENT)."""
    ir_measures = pytest.importorskip("ir_measures")
    import shutil

    if shutil.which("perl") is None:
        pytest.skip("needs perl for ir_measures' gdeval provider")
    qrels, run = random_graded(11, queries=60)
    got = ir_measures.providers.registry["gdeval"]
    judged = [ir_measures.Qrel(q, d, g) for q, docs in qrels.items() for d, g in docs.items()]
    scored = [ir_measures.ScoredDoc(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    for k in (5, 20):
        theirs = {m.query_id: m.value for m in got.iter_calc([ir_measures.ERR @ k], judged, scored)}
        # ir_measures scores a query missing from the run 0: rag_eval's missing_run="zero"
        ours = values(qrels, run, [f"err(max_grade=4)@{k}"], TREC.replace(missing_run="zero"))[f"err(max_grade=4)@{k}"]
        assert set(theirs) <= set(ours) and len(theirs) > 40 and sum(v > 0 for v in theirs.values()) > 20
        for q, value in theirs.items():
            assert ours[q] == pytest.approx(value, abs=5.1e-6), (k, q)  # gdeval prints %.5f


# ----- against the trec_eval binary -----------------------------------------------------------------------------

NUM_PAIRS = 40
# one trec_eval run per group: a measure appears once per run (trec_eval keeps one parameter list), and rbp runs
# alone (see the module docstring)
GROUPS: list[dict[str, dict[str, str]]] = [
    {
        "G": {"G": "g"},
        "binG": {"binG": "bing"},
        "ndcg_rel": {"ndcg_rel": "ndcg_rel"},
        "Rndcg": {"Rndcg": "rndcg"},
        "rbp_resid": {"rbp_resid": "rbp_resid"},
        "infAP": {"infAP": "infap"},
        "unj": {"unj_5": "unjudged@5", "unj_10": "unjudged@10", "unj_20": "unjudged@20"},
        "relstring": {"relstring": "relstring"},
    },
    {"rbp": {"rbp": "rbp"}},
    {
        "G.1=3,2=9,4=4.5": {"G_1=3,2=9,4=4.5": "g(gains=1:3;2:9;4:4.5)"},
        "ndcg_rel.1=3,2=9,4=4.5": {"ndcg_rel_1=3,2=9,4=4.5": "ndcg_rel(gains=1:3;2:9;4:4.5)"},
        "Rndcg.1=0.5,3=2.25": {"Rndcg_1=0.5,3=2.25": "rndcg(gains=1:0.5;3:2.25)"},
        "relstring.20": {"relstring_20": "relstring@20"},
        "rbp_resid.p=0.95": {"rbp_resid_p=0.95": "rbp_resid(p=0.95)"},
    },
    {"rbp.p=0.5": {"rbp_p=0.5": "rbp(p=0.5)"}},
    {"rbp.1=0.5,3=0.25": {"rbp_1=0.5,3=0.25": "rbp(gains=1:0.5;3:0.25)"}},
    # trec_eval's comparator quirks: 2.7 vs 3 and 0.4 vs 0 compare equal; 1e10 - 0 overflows the int
    {
        "G.1=0.4,2=3.3,4=2.7": {"G_1=0.4,2=3.3,4=2.7": "g(gains=1:0.4;2:3.3;4:2.7)"},
        "ndcg_rel.3=1e10": {"ndcg_rel_3=1e10": "ndcg_rel(gains=3:1e10)"},
        "Rndcg.0=0.5,2=1.3,3=0.9": {"Rndcg_0=0.5,2=1.3,3=0.9": "rndcg(gains=0:0.5;2:1.3;3:0.9)"},
    },
    {"rbp.2=2.5,4=0.1": {"rbp_2=2.5,4=0.1": "rbp(gains=2:2.5;4:0.1)"}},
]


def c_format(value: float) -> str:
    """``printf("%6.4f")`` as glibc prints it: a NaN with its sign bit set (0.0 / 0 on x86-64) is ``  -nan``."""
    if math.isnan(value):
        return f"{'-nan' if np.signbit(value) else 'nan':>6}"
    return f"{value:6.4f}"


def _write_pair(folder: Path, seed: int, complete: bool) -> tuple[Path, Path, set[str]]:
    pair = make_pair(seed)
    run = folder / f"pair{seed}.run"
    run.write_text(pair.run_text, encoding="utf-8")
    qrels = folder / f"pair{seed}.{'c' if complete else 'nc'}.qrels"
    qrels.write_text(
        _qrels_text(pair.qrels_lines, drop=set() if complete else pair.qrels_only, dedupe=True), encoding="utf-8"
    )
    return qrels, run, pair.qrels_only if complete else set()


def _trec_eval(binary: Path, flags: list[str], group: dict, qrels: Path, run: Path) -> dict[tuple[str, str], str]:
    args = [str(binary), "-q", *flags, "-m", "num_q", "-m", "runid"]
    for spec in group:
        args += ["-m", spec]
    done = subprocess.run([*args, str(qrels), str(run)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return {(p[0].strip(), p[1]): p[2] for p in (line.split("\t") for line in done.stdout.splitlines())}


def _ours(flags: list[str], group: dict, qrels_path: Path, run_path: Path):
    names = {printed: metric for spec in group.values() for printed, metric in spec.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RagEvalWarning)
        qrels, run = rag_eval.Qrels.from_trec(qrels_path), rag_eval.Run.from_trec(run_path)
        out = evaluate_run(
            qrels, run, [parse_metric(m) for m in [*names.values(), "num_q", "runid"]], conventions_for(flags)
        )
    return names, out


def _compare(binary: Path, flags: list[str], folder: Path, *, printed: bool) -> tuple[list[str], int, int]:
    """Differences between trec_eval's per-query lines and rag_eval's values, the number compared, and how many
    of them are -c's made-up result under a parameterised name (see the module docstring)."""
    problems: list[str] = []
    compared = known = 0
    complete = "-c" in flags
    jobs = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        for seed in range(NUM_PAIRS):
            qrels, run, missing = _write_pair(folder, seed, complete)
            for group in GROUPS:
                job = pool.submit(_trec_eval, binary, flags, group, qrels, run)
                jobs.append((seed, group, qrels, run, missing, job))
        for seed, group, qrels, run, missing, job in jobs:
            theirs = job.result()
            names, out = _ours(flags, group, qrels, run)
            for (printed_name, _metric), per_query in zip(names.items(), out.values):
                for q, v in zip(out.account.counted, per_query):
                    t = theirs.get((printed_name, q))
                    text = isinstance(v, str)
                    if text:
                        mine = f"'{v}'"
                    elif printed:
                        mine = c_format(v)
                    else:
                        mine = v
                    same = (
                        t == mine
                        if (text or printed)
                        else t is not None and (float(t) == v or (math.isnan(v) and "nan" in t))
                    )
                    if q in missing and printed_name in ("relstring_20", "rbp_resid_p=0.95") and "-J" not in flags:
                        assert t == ("'-'" if text else ("1.0000" if printed else "1")), (printed_name, q, t)
                        known += 1
                    compared += 1
                    if not same:
                        problems.append(f"pair {seed} {flags}: {printed_name} {q}: trec_eval {t}, rag_eval {mine!r}")
            num_q, runid = out.values[-2], out.values[-1]
            assert theirs[("num_q", "all")] == str(int(num_q.sum()))
            assert theirs[("runid", "all")] == (runid[0] if len(runid) else None)
    return problems, compared, known


@pytest.mark.parametrize("flag_set", list(FLAG_SETS), ids=lambda f: f.replace("-", "").replace(" ", "_") or "none")
def test_every_value_is_trec_evals_double(trec_eval_exact_binary, tmp_path, flag_set):
    flags = FLAG_SETS[flag_set]
    problems, compared, known = _compare(trec_eval_exact_binary, flags, tmp_path, printed=False)
    assert not problems, f"{len(problems)} of {compared} differ, e.g.:\n" + "\n".join(problems[:20])
    assert compared > 3000
    assert (known > 0) == ("-c" in flags and "-J" not in flags)


@pytest.mark.parametrize("flag_set", ["no flag", "-c -M 20 -l 2"], ids=["none", "c_M_20_l_2"])
def test_every_value_prints_as_trec_eval_prints_it(trec_eval_binary, tmp_path, flag_set):
    problems, compared, _ = _compare(trec_eval_binary, FLAG_SETS[flag_set], tmp_path, printed=True)
    assert not problems, f"{len(problems)} of {compared} differ, e.g.:\n" + "\n".join(problems[:20])
    assert compared > 3000


def test_trec_evals_rbp_alone_and_in_all_trec_agree(trec_eval_binary, tmp_path):
    """What rag_eval's rbp copies: trec_eval's rbp on its own is its rbp in -m all_trec (same uninitialised start)."""
    for seed in range(0, NUM_PAIRS, 4):
        qrels, run, _ = _write_pair(tmp_path, seed, False)
        for flags in ([], ["-l", "2"]):
            alone = _trec_eval(trec_eval_binary, flags, {"rbp": None}, qrels, run)
            every = _trec_eval(trec_eval_binary, flags, {"all_trec": None}, qrels, run)
            rbp = {key: value for key, value in alone.items() if key[0] == "rbp"}
            assert rbp and all(every[key] == value for key, value in rbp.items())


GOLDEN = [
    ("out.test.aq", "qrels.test", "results.test", []),
    ("out.test.aqc", "qrels.test", "results.trunc", ["-c"]),
    ("out.test.aqcM", "qrels.test", "results.trunc", ["-c", "-M", "100"]),
    ("out.test.aql", "qrels.rel_level", "results.test", ["-l", "2"]),
]
GOLDEN_NAMES = {
    "G": "g",
    "binG": "bing",
    "ndcg_rel": "ndcg_rel",
    "Rndcg": "rndcg",
    "rbp": "rbp",
    "rbp_resid": "rbp_resid",
    "infAP": "infap",
    "unj_5": "unjudged@5",
    "unj_10": "unjudged@10",
    "unj_20": "unjudged@20",
    "relstring": "relstring",
    "relstring_20": "relstring@20",
}


@pytest.mark.parametrize("expected, qrels_name, run_name, flags", GOLDEN, ids=[g[0] for g in GOLDEN])
def test_trec_evals_golden_files_per_query(expected, qrels_name, run_name, flags):
    """trec_eval's own expected outputs (-m all_trec -q): every per-query line of these families, and the mean."""
    from .conftest import CONFORMANCE, need_shared

    folder = need_shared(CONFORMANCE)
    lines = (line.split("\t") for line in (folder / expected).read_text().splitlines())
    theirs = {(n.strip(), q): v for n, q, v in lines}
    names = sorted({n for n, _ in theirs if n in GOLDEN_NAMES})
    assert len(names) == 11
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RagEvalWarning)
        qrels, run = rag_eval.Qrels.from_trec(folder / qrels_name), rag_eval.Run.from_trec(folder / run_name)
        out = evaluate_run(qrels, run, [parse_metric(GOLDEN_NAMES[n]) for n in names], conventions_for(flags))
    for name, per_query in zip(names, out.values):
        for q, v in zip(out.account.counted, per_query):
            assert theirs[(name, q)] == (f"'{v}'" if isinstance(v, str) else c_format(v)), (name, q)
        if not name.startswith("relstring"):
            assert theirs[(name, "all")] == c_format(float(np.mean(per_query))), name
