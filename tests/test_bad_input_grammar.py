"""Bad metric names and parameters (the grammar, trec_eval's names and -m arguments): each an InputError naming
the metric and the parameter, never another metric. One test per row of docs/bad-input/values.md "## Metric names"."""

from __future__ import annotations

import pytest

from rag_eval import InputError
from rag_eval.errors import TrecEvalParametersIgnored, TrecEvalParameterTruncated
from rag_eval.metrics.grammar import Metric, parse_metric
from rag_eval.metrics.trec_eval_measures import trec_eval_metrics


def _error(function, *args, **kwargs) -> str:
    with pytest.raises(InputError) as info:
        function(*args, **kwargs)
    return str(info.value)


def test_a_parameter_out_of_its_range_is_refused():
    assert _error(parse_metric, "iprec_at_recall(level=1.5)") == (
        "metric 'iprec_at_recall(level=1.5)': level must be in [0, 1], not 1.5 (a recall level)"
    )
    assert _error(parse_metric, "iprec_at_recall(level=-0.1)").endswith(
        "level must be in [0, 1], not -0.1 (a recall level)"
    )
    assert _error(parse_metric, "11pt_avg(levels=0.5;2)") == (
        "metric '11pt_avg(levels=0.5;2)': each of levels must be in [0, 1], not 2 (a recall level)"
    )
    assert _error(parse_metric, "rprec_mult(mult=0)") == (
        "metric 'rprec_mult(mult=0)': mult must be in (0, 1000000], not 0 (a multiple of R, the number of relevant "
        "documents)"
    )
    assert _error(parse_metric, "set_f(beta=-1)").startswith("metric 'set_f(beta=-1)': beta must be at least 0, not -1")
    for p in ("0", "1", "1.5", "-0.5"):
        assert _error(parse_metric, f"rbp(p={p})") == (
            f"metric 'rbp(p={p})': p must be in (0, 1), not {p} (RBP's persistence: the chance of going on to the next "
            "rank)"
        )
    assert (
        _error(parse_metric, "err(max_grade=0)@10")
        == "metric 'err(max_grade=0)@10': max_grade must be 1 or more, not 0"
    )
    assert _error(parse_metric, "nerr(max_grade=1001)") == (
        "metric 'nerr(max_grade=1001)': max_grade must be at most 1000, not 1001"
    )
    # the same checks on a Metric built by hand
    assert "level must be in [0, 1]" in _error(Metric, "iprec_at_recall", None, {"level": "2"})
    # and on trec_eval's -m arguments, naming the argument
    assert _error(trec_eval_metrics, ["iprec_at_recall..10,1.5"]) == (
        "trec_eval measure 'iprec_at_recall..10,1.5': level must be in [0, 1], not 1.5 (a recall level)"
    )
    assert _error(trec_eval_metrics, ["rbp.p=1"]) == (
        "trec_eval measure 'rbp.p=1': p must be in (0, 1), not 1 (RBP's persistence: the chance of going on to the "
        "next rank)"
    )
    assert _error(trec_eval_metrics, ["Rprec_mult.0,1"]).startswith("trec_eval measure 'Rprec_mult.0,1': mult must be")


def test_a_parameter_number_spelled_oddly_is_refused():
    for text in (
        "rbp(p=0x0.8)",
        "rbp(p=0_5)",
        "rbp(p=nan)",
        "iprec_at_recall(level=inf)",
        "rbp(p=٠.5)",
        "utility(weights=1;-1;0;1e999)",
    ):
        message = _error(parse_metric, text)
        assert message.startswith(f"metric {text!r}: ")
        assert "finite number" in message or "plain decimal number" in message or "largest double" in message
    assert _error(parse_metric, "rbp(p=0_5)") == (
        "metric 'rbp(p=0_5)': p '0_5' is not a plain decimal number (ASCII digits, an optional '-', '.' and exponent: "
        "no '_', hex, inf or nan)"
    )
    assert _error(trec_eval_metrics, ["iprec_at_recall.0x1"]) == (
        "trec_eval measure 'iprec_at_recall.0x1': '0x1' is not a plain decimal number (ASCII digits, an optional "
        "'-', '.' and exponent: no '_', hex, inf or nan)"
    )


def test_a_required_parameter_missing_is_refused():
    assert _error(parse_metric, "iprec_at_recall") == (
        "metric 'iprec_at_recall' needs the parameter level=, e.g. 'iprec_at_recall(level=0.1)'"
    )
    assert (
        _error(parse_metric, "rprec_mult")
        == "metric 'rprec_mult' needs the parameter mult=, e.g. 'rprec_mult(mult=0.2)'"
    )
    assert "needs the parameter level=" in _error(Metric, "iprec_at_recall")
    # trec_eval's printed names always carry the value
    assert _error(parse_metric, "Rprec_mult", dialect="trec_eval") == (
        "trec_eval measure name 'Rprec_mult': trec_eval prints Rprec_mult with its cutoff, e.g. 'Rprec_mult_0.2'"
    )


def test_utility_weights_are_exactly_four():
    assert _error(parse_metric, "utility(weights=1;-1)") == (
        "metric 'utility(weights=1;-1)': weights='1;-1' must be exactly 4 numbers w1;w2;w3;w4 (relevant retrieved, "
        "non-relevant retrieved, relevant missed, non-relevant missed), not 2"
    )
    assert _error(trec_eval_metrics, ["utility.1,-1,0"]) == (
        "trec_eval measure 'utility.1,-1,0': utility takes exactly 4 coefficients (relevant retrieved, non-relevant "
        "retrieved, relevant missed, non-relevant missed), not 3"
    )


def test_recall_levels_repeated_or_unsorted_in_trec_eval_syntax_are_refused():
    assert (
        _error(parse_metric, "11pt_avg(levels=0.5;.5)")
        == "metric '11pt_avg(levels=0.5;.5)': levels='0.5;.5' repeats a level"
    )
    assert str(parse_metric("11pt_avg(levels=0.5;0.25)")) == "11pt_avg(levels=0.25;0.5)"  # the grammar sorts
    assert _error(trec_eval_metrics, ["11pt_avg..5,.25"]) == (
        "trec_eval measure '11pt_avg..5,.25': 11pt_avg's levels must increase (trec_eval's interpolation walks them "
        "in order, and gives 0.5 before 0.25 another value): sort them"
    )
    assert (
        _error(trec_eval_metrics, ["11pt_avg..5,.5"])
        == "trec_eval measure '11pt_avg..5,.5': levels='0.5;0.5' repeats a level"
    )
    assert _error(trec_eval_metrics, ["iprec_at_recall..5,.50"]) == (
        "trec_eval measure 'iprec_at_recall..5,.50': the cutoff 0.5 is given twice (trec_eval: duplicate cutoffs "
        "detected)"
    )


def test_trec_eval_cutoffs_that_atol_would_misread_are_refused():
    assert _error(trec_eval_metrics, ["P.5,5"]) == (
        "trec_eval measure 'P.5,5': the cutoff 5 is given twice (trec_eval: duplicate cutoffs detected)"
    )
    assert _error(trec_eval_metrics, ["P.10,10.5"]).endswith(
        "the cutoff 10 is given twice (trec_eval: duplicate cutoffs detected)"
    )
    assert _error(trec_eval_metrics, ["P.0,5"]) == (
        "trec_eval measure 'P.0,5': a cutoff must be 1 or more, not 0 (trec_eval: Negative cutoff detected)"
    )
    assert _error(trec_eval_metrics, ["P.1e3"]) == (
        "trec_eval measure 'P.1e3': cutoff '1e3' is not a plain decimal integer (ASCII digits 0-9; trec_eval's atol "
        "would read 1)"
    )
    assert _error(trec_eval_metrics, ["P.10x"]).endswith("trec_eval's atol would read 10)")
    assert _error(trec_eval_metrics, ["P.5,,10"]) == (
        "trec_eval measure 'P.5,,10': cutoff '' is not a plain decimal integer (ASCII digits 0-9; trec_eval's atol "
        "would read 0)"
    )
    assert _error(trec_eval_metrics, ["P."]) == (
        "trec_eval measure 'P.': nothing after the '.' (write 'P' for its default parameters, or e.g. 'P.10')"
    )
    assert (
        _error(trec_eval_metrics, ["P.2000000000"])
        == "trec_eval measure 'P.2000000000': cutoff '2000000000' is beyond 1000000000 (10^9)"
    )


def test_a_fractional_trec_eval_cutoff_is_read_as_trec_eval_reads_it_with_a_warning():
    with pytest.warns(TrecEvalParameterTruncated) as caught:
        metrics = trec_eval_metrics(["ndcg_cut.10,20,23.4", "relstring.20.5"])
    assert [m.trec_name for m in metrics] == ["relstring_20.5", "ndcg_cut_10", "ndcg_cut_20", "ndcg_cut_23"]
    assert [str(m) for m in metrics] == [
        "relstring@20",
        "ndcg(gain=linear)@10",
        "ndcg(gain=linear)@20",
        "ndcg(gain=linear)@23",
    ]
    assert [str(w.message) for w in caught] == [  # one per argument, in trec_eval's order of measures
        "trec_eval measure 'relstring.20.5': cutoff '20.5' read as trec_eval reads it (atol): 20",
        "trec_eval measure 'ndcg_cut.10,20,23.4': cutoff '23.4' read as trec_eval reads it (atol): 23",
    ]
    # a printed name holds what trec_eval printed: no fraction there
    assert "not a plain decimal integer" in _error(parse_metric, "ndcg_cut_23.4", dialect="trec_eval")


def test_a_trec_eval_measure_given_two_parameter_lists_keeps_the_first_with_a_warning():
    with pytest.warns(TrecEvalParametersIgnored) as caught:
        metrics = trec_eval_metrics(["P.5", "map", "P.10", "P.5", "recall.20", "recall.30"])
    assert [m.trec_name for m in metrics] == ["map", "P_5", "recall_20"]
    assert [str(w.message) for w in caught] == [
        "trec_eval uses a measure's first parameter list only: -m P.10, -m recall.30 ignored "
        "(kept -m P.5, -m recall.20)"
    ]


def test_trec_eval_pair_parameters_that_trec_eval_would_ignore_or_misread_are_refused():
    assert _error(trec_eval_metrics, ["ndcg.1=3,,2=9"]) == (
        "trec_eval measure 'ndcg.1=3,,2=9': '' should read name=value (trec_eval: malformed pair parameters)"
    )
    assert _error(trec_eval_metrics, ["ndcg.1=3=4"]).endswith(
        "'1=3=4' should read name=value (trec_eval: malformed pair parameters)"
    )
    assert _error(trec_eval_metrics, ["ndcg.foo=3"]) == (
        "trec_eval measure 'ndcg.foo=3': unknown parameter 'foo' (ndcg takes grade=gain pairs; trec_eval ignores any "
        "other name)"
    )
    assert _error(trec_eval_metrics, ["rbp.q=0.5"]) == (
        "trec_eval measure 'rbp.q=0.5': unknown parameter 'q' (rbp takes p=persistence and grade=gain pairs; trec_eval "
        "ignores any other name)"
    )
    assert _error(trec_eval_metrics, ["ndcg.1=-3"]).endswith(
        "a gain must be 0 or more (a negative gain takes nDCG below 0)"
    )
    assert _error(trec_eval_metrics, ["ndcg.1=3,1=4"]).endswith("is repeated (grade 1 is given twice)")


def test_trec_eval_arguments_that_trec_eval_would_ignore_are_refused():
    assert _error(trec_eval_metrics, ["official.5"]) == (
        "trec_eval measure 'official.5': the nickname 'official' takes no parameters (trec_eval ignores them)"
    )
    assert _error(trec_eval_metrics, ["map.5"]) == "trec_eval measure 'map.5': map takes no parameters"
    assert (
        _error(trec_eval_metrics, ["set_F.0.5,2"])
        == "trec_eval measure 'set_F.0.5,2': set_F takes one parameter (beta), not 2"
    )
    assert (
        _error(trec_eval_metrics, ["relstring.10,20"])
        == "trec_eval measure 'relstring.10,20': relstring takes one length, not 2"
    )


def test_trec_eval_measures_that_need_other_input_are_refused_as_out_of_scope():
    assert _error(trec_eval_metrics, ["all_prefs"]) == (
        "trec_eval measure 'all_prefs': the nickname 'all_prefs' needs preference files (trec_eval -R prefs), which "
        "rag_eval does not read (out of scope)"
    )
    assert _error(trec_eval_metrics, ["qrels_jg"]).startswith(
        "trec_eval measure 'qrels_jg': the nickname 'qrels_jg' needs judgement groups"
    )
    assert _error(trec_eval_metrics, ["prefs_simp"]) == (
        "trec_eval measure 'prefs_simp': rag_eval does not compute prefs_simp (it needs preference files)"
    )
    assert _error(trec_eval_metrics, ["map_avgjg"]) == (
        "trec_eval measure 'map_avgjg': rag_eval does not compute map_avgjg (it needs judgement groups (qrels_jg))"
    )
    assert _error(trec_eval_metrics, ["yaap"]).startswith("trec_eval measure 'yaap': rag_eval does not compute yaap")


def test_an_unknown_trec_eval_measure_or_printed_name_is_refused_with_a_suggestion():
    assert (
        _error(trec_eval_metrics, ["ndcg_cutt.10"])
        == "unknown trec_eval measure 'ndcg_cutt.10'; did you mean 'ndcg_cut'?"
    )
    assert _error(parse_metric, "P5", dialect="trec_eval") == "unknown trec_eval measure name 'P5'; did you mean 'P'?"
    assert _error(parse_metric, "P_5,10", dialect="trec_eval").startswith(
        "trec_eval measure name 'P_5,10' names 2 measures"
    )
    # without a dialect, a printed name with a bad value says what is wrong with it, not "unknown"
    assert _error(parse_metric, "iprec_at_recall_1.50") == (
        "trec_eval measure 'iprec_at_recall_1.50': level must be in [0, 1], not 1.5 (a recall level)"
    )
    assert _error(parse_metric, "foo_0.5").startswith("unknown metric 'foo_0.5'")


def test_an_unknown_dialect_is_refused():
    assert _error(parse_metric, "ndcg@10", dialect="pyterrier") == (
        "unknown metric dialect 'pyterrier'; choose one of trec_eval, ir_measures, ranx (or none: rag_eval's own "
        "grammar)"
    )
