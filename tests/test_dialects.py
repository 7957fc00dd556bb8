"""Names pasted from ir_measures and ranx mean there what they compute there (rag_eval.metrics.dialects).

A table of round trips: foreign string -> canonical string -> value, the values checked against ir_measures and
ranx themselves on random data with score ties, graded judgements, queries missing from the run and queries
without a relevant document. ranx JIT-compiles on its first call (40 s to minutes): its test is marked slow.
"""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest

from rag_eval.data.qrels import Qrels
from rag_eval.data.run import Run
from rag_eval.errors import InputError
from rag_eval.metrics._engine import evaluate_run
from rag_eval.metrics._registry import KERNELS, load_kernels
from rag_eval.metrics.conventions import Conventions
from rag_eval.metrics.dialects import parse_foreign
from rag_eval.metrics.grammar import Metric, parse_metric

# (foreign name, canonical rag_eval metric)
IR_MEASURES = [
    ("P@5", "precision(rel=1,ties=trec_eval)@5"),
    ("P(rel=2)@5", "precision(rel=2,ties=trec_eval)@5"),
    ("R@10", "recall(rel=1,ties=trec_eval)@10"),
    ("Success@3", "hit(rel=1,ties=trec_eval)@3"),
    ("RR", "mrr(rel=1,ties=trec_eval)"),
    ("RR(rel=2)", "mrr(rel=2,ties=trec_eval)"),
    ("RR@5", "mrr(rel=1,ties=doc_id)@5"),  # the msmarco provider: ties by doc id ascending
    ("AP", "ap(rel=1,ties=trec_eval)"),
    ("AP@5", "ap(rel=1,ties=trec_eval)@5"),
    ("AP(rel=2)", "ap(rel=2,ties=trec_eval)"),
    ("Rprec", "r_precision(rel=1,ties=trec_eval)"),
    ("nDCG", "ndcg(gain=linear,ties=trec_eval)"),
    ("nDCG@10", "ndcg(gain=linear,ties=trec_eval)@10"),
    ("nDCG(gains={0:0,1:1,2:5,3:10})@5", "ndcg(gain=linear,gains=0:0;1:1;2:5;3:10,ties=trec_eval)@5"),
    ("nDCG(dcg='exp-log2')@5", "ndcg(gain=exp,ties=trec_eval)@5"),  # gdeval
    ("ERR@5", "err(max_grade=4,ties=trec_eval)@5"),  # gdeval
    ("Bpref", "bpref(rel=1,ties=trec_eval)"),
    ("Judged@5", "judged(empty=zero,per=returned,ties=doc_id)@5"),
    ("Judged@20", "judged(empty=zero,per=returned,ties=doc_id)@20"),
    ("Judged", "judged(empty=zero,per=returned,ties=doc_id)@1000000000"),
    ("NumRet", "num_ret"),
    ("NumRet(rel=2)", "num_rel_ret(rel=2)"),
    ("NumRelRet", "num_rel_ret(rel=1)"),
    ("SetP", "set_precision(rel=1)"),
    ("SetRelP", "set_relative_precision(rel=1)"),
    ("SetR", "set_recall(rel=1)"),
    ("SetF", "set_f(rel=1)"),
    ("SetF(beta=0.5)", "set_f(beta=0.5,rel=1)"),
    ("SetAP", "set_map(rel=1)"),
    ("infAP", "infap(rel=1,ties=trec_eval)"),
    ("MAP", "ap(rel=1,ties=trec_eval)"),
    ("NDCG@10", "ndcg(gain=linear,ties=trec_eval)@10"),
]
RANX = [
    ("precision@5", "precision(rel=1,ties=input_order)@5"),
    ("precision@5-l2", "precision(rel=2,ties=input_order)@5"),
    ("precision", "set_precision(rel=1)"),
    ("recall@10", "recall(rel=1,ties=input_order)@10"),
    ("recall", "set_recall(rel=1)"),
    ("f1", "set_f(rel=1)"),
    ("hit_rate@3", "hit(rel=1,ties=input_order)@3"),
    ("hit_rate", "hit(rel=1,ties=input_order)@1000000000"),
    ("r-precision", "r_precision(rel=1,ties=input_order)"),
    ("mrr", "mrr(rel=1,ties=input_order)"),
    ("mrr@3", "mrr(rel=1,ties=input_order)@3"),
    ("map", "ap(rel=1,ties=input_order)"),
    ("map@5", "ap(rel=1,ties=input_order)@5"),  # divided by R, as trec_eval's map_cut
    ("ndcg", "ndcg(gain=linear,ties=input_order)"),
    ("ndcg@10", "ndcg(gain=linear,ties=input_order)@10"),
    ("ndcg@10-l2", "ndcg(gain=linear,rel=2,ties=input_order)@10"),
    ("ndcg_burges@10", "ndcg(gain=exp,ties=input_order)@10"),
    ("bpref", "bpref(rel=1,ties=input_order)"),
]


def _canonical(text: str) -> str:
    """The canonical string as today's grammar prints it (it may drop a parameter at its default, as beta=1)."""
    return str(parse_metric(text))


@pytest.mark.parametrize(("foreign", "canonical"), IR_MEASURES)
def test_ir_measures_names_map_to_their_canonical_metric(foreign, canonical):
    metric = parse_foreign(foreign, "ir_measures")
    assert str(metric) == _canonical(canonical)
    assert parse_metric(str(metric)) == metric  # the canonical string reads back as the same metric


@pytest.mark.parametrize(("foreign", "canonical"), RANX)
def test_ranx_names_map_to_their_canonical_metric(foreign, canonical):
    metric = parse_foreign(foreign, "ranx")
    assert str(metric) == _canonical(canonical)
    assert parse_metric(str(metric)) == metric


def test_without_a_dialect_todays_grammar_holds():
    # rag_eval's own ndcg@10 follows the conventions: exponential gain by default, not ir_measures' linear one
    own = parse_metric("ndcg@10")
    assert own == Metric("ndcg", 10) and "gain" not in own.param
    assert parse_foreign("nDCG@10", "ir_measures") != own
    qrels = Qrels.from_dict({"q": {"a": 1, "b": 3}})
    run = Run.from_scores({"q": {"a": 2.0, "b": 1.0}})
    values = evaluate_run(qrels, run, [own, parse_foreign("nDCG@10", "ir_measures")], Conventions()).values
    # exp: DCG = 1 + 7/log2(3), ideal = 7 + 1/log2(3); linear: DCG = 1 + 3/log2(3), ideal = 3 + 1/log2(3)
    l3 = np.log2(3.0)
    assert values[0][0] == pytest.approx((1 + 7 / l3) / (7 + 1 / l3))
    assert values[1][0] == pytest.approx((1 + 3 / l3) / (3 + 1 / l3))
    assert values[0][0] != pytest.approx(values[1][0])


def test_a_pinned_tie_rule_overrides_the_conventions():
    # a, b, c tie; only "a" is relevant: trec_eval's rule (doc id descending) ranks it third, doc_id's first
    qrels = Qrels.from_dict({"q": {"a": 1, "b": 0}})
    run = Run.from_scores({"q": {"b": 1.0, "c": 1.0, "a": 1.0}})
    metrics = [parse_metric(m) for m in ("mrr", "mrr(ties=doc_id)", "mrr(ties=input_order)", "mrr(ties=trec_eval)")]
    for conv in (Conventions(), Conventions(ties="doc_id"), Conventions(ties="input_order")):
        values = [float(v[0]) for v in evaluate_run(qrels, run, metrics, conv).values]
        assert values[1:] == [1.0, 1 / 3, 1 / 3]  # whatever the conventions say
        assert values[0] == {"trec_eval": 1 / 3, "doc_id": 1.0, "input_order": 1 / 3}[conv.ties]
    # a run in given order is never re-sorted: ties= changes nothing there
    given = Run.from_ranking({"q": ["c", "a", "b"]})
    assert [float(v[0]) for v in evaluate_run(qrels, given, metrics, Conventions()).values] == [0.5] * 4


def test_judged_denominator_and_empty_top():
    qrels = Qrels.from_dict({"q1": {"a": 1, "b": 0}, "q2": {"x": 1}, "q3": {"y": 1}})
    run = Run.from_scores({"q1": {"a": 3.0, "b": 2.0, "u": 1.0}, "q2": {"v": 1.0}})  # q3 missing: an empty ranking
    metrics = [
        parse_metric(m) for m in ("judged@5", "judged(per=k)@5", "judged(empty=zero)@5", "judged(per=k,empty=zero)@2")
    ]
    values = evaluate_run(qrels, run, metrics, Conventions()).values
    np.testing.assert_array_equal(values[0], [2 / 3, 0.0, np.nan])  # judged / min(k, returned); NaN when empty
    np.testing.assert_array_equal(values[1], [2 / 5, 0.0, 0.0])  # judged / k
    np.testing.assert_array_equal(values[2], [2 / 3, 0.0, 0.0])
    np.testing.assert_array_equal(values[3], [1.0, 0.0, 0.0])


@pytest.mark.parametrize(
    ("text", "dialect", "message"),
    [
        ("ndcg@10", "ir_measures", "did you mean 'nDCG'"),
        ("nDGC@10", "ir_measures", "did you mean 'nDCG'"),
        ("NDCG@10", "ranx", "did you mean 'ndcg'"),
        ("mapp@10", "ranx", "did you mean 'map'"),
        ("RBP", "ir_measures", "rag_eval cannot compute it"),
        ("alpha_nDCG@20", "ir_measures", "rag_eval cannot compute it"),
        ("Compat(p=0.9)", "ir_measures", "rag_eval cannot compute it"),
        ("IPrec@0.2", "ir_measures", "trec_eval 9's code"),
        ("NumRel", "ir_measures", "missing_run='skip'"),
        ("NumQ", "ir_measures", "missing_run='skip'"),
        ("hits@10", "ranx", "rag_eval cannot compute it"),
        ("dcg@10", "ranx", "rag_eval cannot compute it"),
        ("f1@10", "ranx", "rag_eval cannot compute it"),
        ("rbp.95", "ranx", "rag_eval cannot compute it"),
        ("P", "ir_measures", "needs a cutoff"),
        ("ERR", "ir_measures", "only with a cutoff"),
        ("nDCG(dcg='exp-log2')", "ir_measures", "give a cutoff"),
        ("nDCG(judged_only=True)@10", "ir_measures", "unjudged='remove'"),
        ("P(foo=1)@5", "ir_measures", "no parameter 'foo'"),
        ("P(rel=True)@5", "ir_measures", "must be an integer"),
        ("P@5.5", "ir_measures", "must be an integer"),
        ("P@0", "ir_measures", "must be 1 or more"),
        ("P(rel=2)@5@6", "ir_measures", "cannot read"),
        ("__import__('os').system('x')", "ir_measures", "ir_measures metric"),
        ("P(2)@5", "ir_measures", "must be named"),
        ("nDCG(dcg='exp')@5", "ir_measures", "'log2' or 'exp-log2'"),
        ("ndcg.10", "ranx", "write 'ndcg@10'"),
        ("P@5", "pyterrier", "unknown metric dialect"),
    ],
)
def test_foreign_names_that_cannot_be_read_say_why(text, dialect, message):
    with pytest.raises(InputError, match=None) as caught:
        parse_foreign(text, dialect)
    assert message in str(caught.value)


# --- values, checked against the tools themselves --------------------------------------------------------------


def _random_data(seed: int, *, every_query_relevant: bool = False, depth: int = 15):
    """Numeric query ids (gdeval reads only those), grades 0-3, scores in steps of 0.5 (many ties, and exact in
    float32: pytrec_eval keeps scores in single precision), rankings of at most ``depth`` results."""
    rng = random.Random(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(1, 31):
        qid = str(q)
        docs = [f"d{i:02d}" for i in range(25)]
        judged = rng.sample(docs, rng.randint(1, 12))
        grades = {d: rng.choice([0, 0, 1, 1, 2, 3]) for d in judged}
        if q % 7 == 0 and not every_query_relevant:
            grades = {d: 0 for d in judged}  # no relevant document
        elif every_query_relevant and not any(grades.values()):
            grades[judged[0]] = 1
        qrels[qid] = grades
        if q % 11 == 5 and not every_query_relevant:
            continue  # a query missing from the run
        returned = rng.sample(docs, rng.randint(1, depth))
        rng.shuffle(returned)
        run[qid] = {d: rng.randint(0, 6) / 2 for d in returned}
    return qrels, run


def _ours(qrels, run, metric: Metric) -> dict[str, float]:
    result = evaluate_run(Qrels.from_dict(qrels), Run.from_scores(run), [metric], Conventions())
    return dict(zip(result.account.counted, result.values[0].tolist()))


def _needs_kernel(metric: Metric) -> None:
    load_kernels()
    if metric.family not in KERNELS:  # every family registers its kernel (rag_eval.metrics.catalogue)
        pytest.skip(f"the kernel of {metric.family!r} has not landed yet")


@pytest.mark.parametrize(("foreign", "canonical"), IR_MEASURES)
@pytest.mark.parametrize("seed", [1, 2])
def test_values_agree_with_ir_measures(foreign, canonical, seed):
    ir_measures = pytest.importorskip("ir_measures")
    metric = parse_foreign(foreign, "ir_measures")
    _needs_kernel(metric)
    gdeval = foreign.startswith(("ERR", "nDCG(dcg="))
    qrels, run = _random_data(seed, every_query_relevant=gdeval)  # gdeval.pl divides by 0 on a query without
    measure = ir_measures.parse_measure(foreign)
    theirs = {m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, run)}
    ours = _ours(qrels, run, metric)
    assert set(theirs) == set(ours)
    tolerance = 6e-6 if gdeval else 1e-12  # gdeval prints 5 decimals, and ir_measures reads those
    for qid, value in ours.items():
        assert value == pytest.approx(theirs[qid], abs=tolerance), (qid, foreign, str(metric))


def test_the_pinned_rules_matter_on_this_data():
    # the value checks above would not catch a dropped pin if the data could not tell the rules apart
    qrels, run = _random_data(1)
    for foreign, plain in [("nDCG@10", "ndcg@10"), ("RR@5", "mrr(rel=1)@5"), ("Judged@20", "judged@20")]:
        pinned = _ours(qrels, run, parse_foreign(foreign, "ir_measures"))
        own = _ours(qrels, run, parse_metric(plain))
        assert any(not (np.isnan(a) and np.isnan(own[q])) and a != own[q] for q, a in pinned.items()), foreign


@pytest.mark.slow
def test_values_agree_with_ranx():
    ranx = pytest.importorskip("ranx")
    from numba.core.errors import NumbaTypeSafetyWarning  # ranx's own kernels cast its hashed ids: not ours

    warnings.simplefilter("ignore", NumbaTypeSafetyWarning)  # pytest restores the filters after the test
    qrels, run = _random_data(3)  # at most 15 results a query: ranx's (numba's) sort keeps ties in input order
    theirs_qrels, theirs_run = ranx.Qrels(qrels), ranx.Run(run)
    judged_nonrel = {q for q, g in qrels.items() if min(g.values()) < 1 and max(g.values()) >= 1}
    names = [foreign for foreign, _ in RANX]  # all at once: with one metric and return_mean=False, ranx 0.3.21
    # looks its result up by the bare name ('precision' for 'precision@5') and raises KeyError
    every = ranx.evaluate(
        theirs_qrels, theirs_run, names, return_mean=False, make_comparable=True, save_results_in_run=False
    )
    for foreign in names:
        metric = parse_foreign(foreign, "ranx")
        theirs = dict(zip(sorted(qrels), np.asarray(every[foreign]).tolist()))
        ours = _ours(qrels, run, metric)
        for qid, value in ours.items():
            if foreign == "bpref":
                if qid not in run:  # an empty ranking
                    assert value == theirs[qid] == 0.0
                    continue
                if qid not in judged_nonrel:
                    continue  # ranx's bpref is 0/0 (NaN) without a judged non-relevant document; trec_eval's is not
                # ranx 0.3.21's bpref over many queries at once is 0 on most of them here (each query alone gives
                # trec_eval's value): ask ranx one query at a time
                alone = ranx.evaluate(
                    ranx.Qrels({qid: qrels[qid]}),
                    ranx.Run({qid: run[qid]}),
                    ["bpref", "mrr"],
                    return_mean=False,
                    save_results_in_run=False,
                )
                theirs[qid] = float(alone["bpref"][0])
            assert value == pytest.approx(theirs[qid], abs=1e-12), (qid, foreign, str(metric))


def test_ir_measures_iprec_is_trec_eval_9s_so_it_is_refused():
    # R = 6, one relevant at rank 1: level 0.2 needs lround(1.2) = 1 relevant in trec_eval 10.0 (precision 1 there),
    # (long)(1.2 + 0.9) = 2 in trec_eval 9, which pytrec_eval and so ir_measures run (none there: 0)
    ir_measures = pytest.importorskip("ir_measures")
    qrels = {"1": {f"r{i}": 1 for i in range(6)}}
    run = {"1": {"r0": 2.0, "x": 1.0}}
    theirs = [m.value for m in ir_measures.iter_calc([ir_measures.parse_measure("IPrec@0.2")], qrels, run)]
    assert theirs == [0.0]
    assert _ours(qrels, run, parse_metric("iprec_at_recall(level=0.2)")) == {"1": 1.0}
    with pytest.raises(InputError, match="trec_eval 9"):
        parse_foreign("IPrec@0.2", "ir_measures")


def test_the_grammar_imports_no_module_that_reads_other_tools_names():
    """The grammar is the bottom of the metric names: dialects and trec_eval_measures build on it and register
    their readers into it (rag_eval.metrics imports them), so there is no import circle among the three."""
    import ast
    from pathlib import Path

    import rag_eval.metrics.grammar as grammar

    tree = ast.parse(Path(grammar.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported == {"__future__", "collections.abc", "dataclasses", "_checks", "errors", "catalogue"}
    assert sorted(grammar._DIALECT_READERS) == sorted(grammar.DIALECTS)
    assert len(grammar._PRINTED_READERS) == 1
    with pytest.raises(RuntimeError, match="registered twice"):
        grammar.register_dialect("ranx", lambda text: parse_metric(text))
    with pytest.raises(RuntimeError, match="not one of"):
        grammar.register_dialect("pyterrier", lambda text: parse_metric(text))
