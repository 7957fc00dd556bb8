"""The grammar for every family of the catalogue, and trec_eval's names and -m arguments read as trec_eval reads
them (rag_eval.metrics.trec_eval_measures): canonical strings, round trips, trec_eval's printed names."""

from __future__ import annotations

import warnings

import pytest

from rag_eval import InputError
from rag_eval.errors import TrecEvalParametersIgnored, TrecEvalParameterTruncated
from rag_eval.metrics.catalogue import FAMILIES
from rag_eval.metrics.grammar import Metric, parse_metric
from rag_eval.metrics.trec_eval_measures import NICKNAMES, TREC_MEASURES, trec_eval_metrics, trec_eval_name

from .conftest import CONFORMANCE, need_shared

# input -> canonical string -> trec_eval's printed name (None: trec_eval has none, the canonical string is printed)
ROUND_TRIPS = [
    ("iprec_at_recall(level=0.1)", "iprec_at_recall(level=0.1)", "iprec_at_recall_0.10"),
    ("iprec_at_recall(level=.125)", "iprec_at_recall(level=0.125)", "iprec_at_recall_0.12"),  # %3.2f, as C prints
    ("iprec_at_recall(level=1)", "iprec_at_recall(level=1)", "iprec_at_recall_1.00"),
    ("iprec_at_recall_0.10", "iprec_at_recall(level=0.1)", "iprec_at_recall_0.10"),
    ("11pt_avg", "11pt_avg", "11pt_avg"),
    ("11pt_avg(levels=0.75;0.25;.5)", "11pt_avg(levels=0.25;0.5;0.75)", "11pt_avg_0.25,0.5,0.75"),
    ("11pt_avg(levels=0;0.1;0.2;0.3;0.4;0.5;0.6;0.7;0.8;0.9;1)", "11pt_avg", "11pt_avg"),  # the default
    ("11pt_avg_.25,.5,.75", "11pt_avg(levels=0.25;0.5;0.75)", "11pt_avg_.25,.5,.75"),  # as typed
    ("rprec_mult(mult=0.2)", "rprec_mult(mult=0.2)", "Rprec_mult_0.20"),
    ("rprec_mult(mult=5.0)", "rprec_mult(mult=5)", "Rprec_mult_5.00"),
    ("Rprec_mult_0.20", "rprec_mult(mult=0.2)", "Rprec_mult_0.20"),
    ("utility", "utility", "utility"),
    ("utility(weights=1;-1;0;0)", "utility", "utility"),
    ("utility(weights=2;-1;0;0)", "utility(weights=2;-1;0;0)", "utility_2,-1,0,0"),
    ("utility(weights=2.50;-1e0;0;-0)", "utility(weights=2.5;-1;0;0)", "utility_2.5,-1,0,0"),
    ("utility_2,-1,0,0", "utility(weights=2;-1;0;0)", "utility_2,-1,0,0"),
    ("set_f(beta=0.5)", "set_f(beta=0.5)", "set_F_0.5"),
    ("set_f(beta=1.0)", "set_f", "set_F"),
    ("set_F", "set_f", "set_F"),
    ("set_F_0.25", "set_f(beta=0.25)", "set_F_0.25"),
    ("rbp(p=0.5)", "rbp(p=0.5)", "rbp_p=0.5"),
    ("rbp(p=0.9)", "rbp", "rbp"),
    ("rbp", "rbp", "rbp"),
    ("rbp(p=0.5,gains=2:3)", "rbp(gains=2:3,p=0.5)", "rbp_p=0.5,2=3"),
    ("rbp_p=0.5", "rbp(p=0.5)", "rbp_p=0.5"),
    ("rbp_resid(p=0.95)", "rbp_resid(p=0.95)", "rbp_resid_p=0.95"),
    ("rbp_resid", "rbp_resid", "rbp_resid"),
    ("rbp@10", "rbp@10", None),
    ("err(max_grade=3)@10", "err(max_grade=3)@10", None),
    ("nerr(max_grade=03)", "nerr(max_grade=3)", None),
    ("err@20", "err@20", None),
    ("relstring@20", "relstring@20", "relstring_20"),
    ("relstring@10", "relstring", "relstring"),  # trec_eval's default length
    ("relstring_20", "relstring@20", "relstring_20"),
    ("relstring", "relstring", "relstring"),
    ("unjudged@5", "unjudged@5", "unj_5"),
    ("unj_5", "unjudged@5", "unj_5"),
    ("relative_P_5", "relative_precision@5", "relative_P_5"),
    ("relative_precision@5", "relative_precision@5", "relative_P_5"),
    ("g", "g", "G"),
    ("G", "g", "G"),
    ("g(gains=1:3;2:9)", "g(gains=1:3;2:9)", "G_1=3,2=9"),
    ("G_1=3,2=9", "g(gains=1:3;2:9)", "G_1=3,2=9"),
    ("binG", "bing", "binG"),
    ("ndcg_rel(gains=2:9)", "ndcg_rel(gains=2:9)", "ndcg_rel_2=9"),
    ("ndcg_rel", "ndcg_rel", "ndcg_rel"),
    ("Rndcg", "rndcg", "Rndcg"),
    ("rndcg(gains=1:2)", "rndcg(gains=1:2)", "Rndcg_1=2"),
    ("ndcg_1=3,2=9,4=4.5", "ndcg(gains=1:3;2:9;4:4.5)", "ndcg_1=3,2=9,4=4.5"),
    ("ndcg(gain=linear,gains=1:3)", "ndcg(gain=linear,gains=1:3)", "ndcg_1=3"),
    ("infAP", "infap", "infAP"),
    ("gm_map", "gm_map", "gm_map"),
    ("gm_bpref", "gm_bpref", "gm_bpref"),
    ("set_P", "set_precision", "set_P"),
    ("set_relative_P", "set_relative_precision", "set_relative_P"),
    ("set_recall", "set_recall", "set_recall"),
    ("set_map", "set_map", "set_map"),
    ("num_nonrel_judged_ret", "num_nonrel_judged_ret", "num_nonrel_judged_ret"),
    ("num_q", "num_q", "num_q"),
    ("runid", "runid", "runid"),
    ("ndcg_cut_10", "ndcg@10", "ndcg_cut_10"),  # no dialect: the conventions' gain, as before
    ("map_cut_5", "ap@5", "map_cut_5"),
    ("success_1", "hit@1", "success_1"),
    ("P(ties=trec_eval)@5", "precision(ties=trec_eval)@5", "P_5"),
    ("P(ties=input_order)@5", "precision(ties=input_order)@5", None),  # trec_eval cannot rank so
]


@pytest.mark.parametrize("text, canonical, trec_name", ROUND_TRIPS, ids=[t for t, _, _ in ROUND_TRIPS])
def test_every_family_round_trips_with_its_parameters(text, canonical, trec_name):
    metric = parse_metric(text)
    assert str(metric) == canonical
    assert metric.trec_name == (trec_name or canonical)
    again = parse_metric(canonical)
    assert again == metric and hash(again) == hash(metric) and str(again) == canonical
    if trec_name is not None and text not in NOT_READ_BACK:  # what trec_eval prints reads back as the same metric
        assert parse_metric(metric.trec_name) == metric


# printed names that do not read back as the same metric: trec_eval prints a level with two decimals, and a pinned
# gain is not in a printed name (read without a dialect, the conventions decide it; with dialect="trec_eval": linear)
NOT_READ_BACK = {
    "iprec_at_recall(level=.125)": "iprec_at_recall(level=0.12)",
    "P(ties=trec_eval)@5": "precision@5",
    "ndcg(gain=linear,gains=1:3)": "ndcg(gains=1:3)",
}


def test_printed_names_that_lose_part_of_the_metric():
    for text, read_back in NOT_READ_BACK.items():
        assert str(parse_metric(parse_metric(text).trec_name)) == read_back
    assert parse_metric("ndcg_1=3", dialect="trec_eval") == parse_metric("ndcg(gain=linear,gains=1:3)")


def test_every_family_of_the_catalogue_is_in_the_round_trip_table():
    families = {parse_metric(canonical).family for _, canonical, _ in ROUND_TRIPS}
    missing = (
        set(FAMILIES)
        - families
        - {
            "recall",
            "precision",
            "hit",
            "mrr",
            "ndcg",
            "ap",
            "r_precision",
            "bpref",
            "judged",
            "recall_ceiling",
            "num_rel",
            "num_ret",
            "num_rel_ret",
        }
    )
    assert not missing  # the 13 older families are in tests/test_grammar.py


def test_spelling_is_not_part_of_the_identity():
    typed = parse_metric("11pt_avg_.25,.5,.75")
    plain = parse_metric("11pt_avg(levels=0.25;0.5;0.75)")
    assert typed.spelling == ".25,.5,.75" and plain.spelling is None
    assert typed == plain and hash(typed) == hash(plain) and str(typed) == str(plain) and repr(typed) == repr(plain)
    assert {typed, plain} == {plain}
    assert typed.trec_name == "11pt_avg_.25,.5,.75" and plain.trec_name == "11pt_avg_0.25,0.5,0.75"
    assert Metric("utility", None, (("weights", "2;-1;0;0"),), spelling="2.0,-1,0,0").trec_name == "utility_2.0,-1,0,0"
    with pytest.raises(InputError, match="spelling"):
        Metric("utility", spelling=3)  # type: ignore[arg-type]


def test_a_parameter_at_its_default_is_one_metric_with_the_bare_name():
    assert (
        parse_metric("rbp")
        == parse_metric("rbp(p=0.9)")
        == parse_metric("rbp(p=.90)")
        == Metric("rbp", None, {"p": "0.9"})
    )
    assert parse_metric("rbp(p=0.8)") != parse_metric("rbp")
    assert parse_metric("set_f(beta=1)") == "set_f" and parse_metric("utility(weights=1;-1;0;-0)") == "utility"
    assert Metric("relstring", 10) == Metric("relstring") and Metric("relstring", 10).k is None


def test_trec_eval_dialect_pins_the_linear_gain_of_ndcg():
    assert str(parse_metric("ndcg_cut_10", dialect="trec_eval")) == "ndcg(gain=linear)@10"
    assert str(parse_metric("ndcg", dialect="trec_eval")) == "ndcg(gain=linear)"
    assert str(parse_metric("ndcg_1=3,2=9", dialect="trec_eval")) == "ndcg(gain=linear,gains=1:3;2:9)"
    assert parse_metric("ndcg_cut_10", dialect="trec_eval").trec_name == "ndcg_cut_10"
    assert parse_metric("ndcg_1=3,2=9", dialect="trec_eval").trec_name == "ndcg_1=3,2=9"
    # without a dialect, today's grammar: the conventions decide the gain
    assert str(parse_metric("ndcg_cut_10")) == "ndcg@10" and str(parse_metric("ndcg@10")) == "ndcg@10"
    assert str(parse_metric("P_5", dialect="trec_eval")) == "precision@5"
    assert str(parse_metric("map", dialect="trec_eval")) == "ap"
    assert str(parse_metric("recip_rank", dialect="trec_eval")) == "mrr"
    assert trec_eval_name("Rprec_mult_5.00") == "rprec_mult(mult=5)"


def test_an_unknown_dialect_lists_the_three():
    with pytest.raises(InputError) as info:
        parse_metric("P_5", dialect="pytrec_eval")
    assert str(info.value) == (
        "unknown metric dialect 'pytrec_eval'; choose one of trec_eval, ir_measures, ranx (or "
        "none: rag_eval's own grammar)"
    )


# ----- trec_eval's -m arguments ------------------------------------------------------------------------------


def _names(args):
    return [m.trec_name for m in trec_eval_metrics(args)]


DEFAULT_LISTS = {
    "P": ["P_5", "P_10", "P_15", "P_20", "P_30", "P_100", "P_200", "P_500", "P_1000"],
    "success": ["success_1", "success_5", "success_10"],
    "unj": ["unj_5", "unj_10", "unj_20"],
    "iprec_at_recall": [f"iprec_at_recall_{x / 10:3.2f}" for x in range(11)],
    "Rprec_mult": [f"Rprec_mult_{x / 10:3.2f}" for x in range(2, 21, 2)],
    "11pt_avg": ["11pt_avg"],
    "relstring": ["relstring"],
    "rbp": ["rbp"],
    "utility": ["utility"],
}


@pytest.mark.parametrize("measure", [m.name for m in TREC_MEASURES])
def test_every_measure_at_its_defaults_round_trips_through_its_printed_names(measure):
    metrics = trec_eval_metrics([measure])
    names = [m.trec_name for m in metrics]
    if measure in DEFAULT_LISTS:
        assert names == DEFAULT_LISTS[measure]
    for metric, name in zip(metrics, names):
        assert trec_eval_name(name) == metric  # printed name -> the same canonical metric
        assert parse_metric(str(metric)) == metric  # canonical -> the same metric
        assert parse_metric(name, dialect="trec_eval").trec_name == name
    if measure in ("ndcg", "ndcg_cut"):
        assert all(m.param.get("gain") == "linear" for m in metrics)
        assert all("gain" not in m.param for m in trec_eval_metrics([measure], pin_gain=False))


def test_parameters_are_read_as_trec_eval_reads_them():
    assert _names(["P.5,7,3"]) == ["P_3", "P_5", "P_7"]
    assert [str(m) for m in trec_eval_metrics(["P.5,7,3"])] == ["precision@3", "precision@5", "precision@7"]
    assert _names(["iprec_at_recall..10,.20"]) == ["iprec_at_recall_0.10", "iprec_at_recall_0.20"]
    assert _names(["Rprec_mult.5.0,0.2"]) == ["Rprec_mult_0.20", "Rprec_mult_5.00"]
    assert [str(m) for m in trec_eval_metrics(["Rprec_mult.5.0,0.2"])] == ["rprec_mult(mult=0.2)", "rprec_mult(mult=5)"]
    assert _names(["utility.2,-1,0,0"]) == ["utility_2,-1,0,0"]
    assert _names(["ndcg.1=3,2=9,4=4.5"]) == ["ndcg_1=3,2=9,4=4.5"]
    assert [str(m) for m in trec_eval_metrics(["ndcg.1=3,2=9,4=4.5"])] == ["ndcg(gain=linear,gains=1:3;2:9;4:4.5)"]
    assert _names(["11pt_avg..25,.5,.75"]) == ["11pt_avg_.25,.5,.75"]
    assert _names(["relstring.20"]) == ["relstring_20"]
    assert _names(["relstring.10"]) == ["relstring_10"]  # trec_eval prints the parameter as typed
    assert _names(["set_F.0.5"]) == ["set_F_0.5"] and str(trec_eval_metrics(["set_F.0.5"])[0]) == "set_f(beta=0.5)"
    assert _names(["rbp.p=0.5"]) == ["rbp_p=0.5"] and str(trec_eval_metrics(["rbp.p=0.5"])[0]) == "rbp(p=0.5)"
    assert str(trec_eval_metrics(["rbp.p=0.8,2=3"])[0]) == "rbp(gains=2:3,p=0.8)"
    assert str(trec_eval_metrics(["rbp_resid.p=0.8"])[0]) == "rbp_resid(p=0.8)"


def test_a_fractional_cutoff_is_read_with_atol_and_said_once():
    with pytest.warns(TrecEvalParameterTruncated) as caught:
        names = _names(["ndcg_cut.10,20,23.4"])
    assert names == ["ndcg_cut_10", "ndcg_cut_20", "ndcg_cut_23"]
    assert len(caught) == 1
    assert str(caught[0].message) == (
        "trec_eval measure 'ndcg_cut.10,20,23.4': cutoff '23.4' read as trec_eval reads it (atol): 23"
    )


def test_arguments_merge_as_trec_eval_merges_them():
    # trec_eval's order (measures.c), whatever the order of the arguments; a measure named twice is one
    assert _names(["P.5", "map", "recip_rank", "map"]) == ["map", "recip_rank", "P_5"]
    # a bare measure and the same with parameters: the parameters
    assert _names(["P", "P.5"]) == ["P_5"] and _names(["P.5", "P"]) == ["P_5"]
    # a nickname and a measure's parameters: the measure in the nickname's place, with them
    names = _names(["all_trec", "relstring.20"])
    assert "relstring_20" in names and "relstring" not in names
    assert names.index("relstring_20") == names.index("P_1000") + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _names(["P.5", "P.5"]) == ["P_5"]  # the same list twice: nothing is ignored
    with pytest.warns(TrecEvalParametersIgnored) as caught:
        assert _names(["P.5", "P.10,20"]) == ["P_5"]  # trec_eval uses the first list
    assert str(caught[0].message) == (
        "trec_eval uses a measure's first parameter list only: -m P.10,20 ignored (kept -m P.5)"
    )


def _golden_names(name, summary_only):
    lines = (need_shared(CONFORMANCE) / name).read_text().splitlines()
    names = [line.split("\t")[0].strip() for line in lines if not summary_only or line.split("\t")[1] == "all"]
    return list(dict.fromkeys(names))


def test_nicknames_expand_to_what_trec_eval_prints():
    # out.test: trec_eval without -m (official); out.test.a: -m all_trec without -q, where relstring (per query only)
    # is not printed; out.test.aq prints it per query
    assert _names(["official"]) == _golden_names("out.test", True)
    all_trec = _names(["all_trec"])
    assert [n for n in all_trec if n != "relstring"] == _golden_names("out.test.a", True)
    assert "relstring" in _golden_names("out.test.aq", False) and "relstring" in all_trec
    assert len(all_trec) == 100
    assert _names(["set"]) == [
        "runid",
        "num_q",
        "num_ret",
        "num_rel",
        "num_rel_ret",
        "utility",
        "set_P",
        "set_relative_P",
        "set_recall",
        "set_map",
        "set_F",
    ]
    assert set(NICKNAMES) == {"official", "set", "all_trec"}


def test_the_measure_parameters_golden_command_gives_its_names_in_order():
    args = [
        "iprec_at_recall..10,.20,.25,.75,.50",
        "P.5,7,3",
        "recall.20,2000",
        "Rprec_mult.5.0,0.2,0.35",
        "utility.2,-1,0,0",
        "11pt_avg..25,.5,.75",
        "ndcg.1=3,2=9,4=4.5",
        "ndcg_cut.10,20,23.4",
        "success.2,5,20",
    ]
    with pytest.warns(TrecEvalParameterTruncated):
        names = _names(args)
    assert names == _golden_names("out.test.meas_params", True)
    assert names == _golden_names("out.test.meas_params", False)  # per query the same names, no runid/num_q


def test_family_names_may_start_with_a_digit():
    assert parse_metric("11pt_avg").family == "11pt_avg"
    assert parse_metric("11PT_AVG") == "11pt_avg"
    with pytest.raises(InputError, match="unknown metric '12pt_avg'"):
        parse_metric("12pt_avg")
