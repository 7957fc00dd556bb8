"""The metric grammar: one canonical string per metric, round trips, suggestions and refusals."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval import Conventions, InputError, Metric, Qrels, Run, evaluate, parse_metric
from rag_eval.cli import main
from rag_eval.metrics.grammar import check_int, gains_map, read_int

from .conftest import ROOT

# input spelling -> canonical string
CANONICAL = [
    ("P@5", "precision@5"),
    ("p@5", "precision@5"),
    ("precision@5", "precision@5"),
    ("P_10", "precision@10"),
    ("P.10", "precision@10"),
    ("ndcg_cut_10", "ndcg@10"),
    ("ndcg_cut.10", "ndcg@10"),
    ("NDCG_CUT_10", "ndcg@10"),
    ("ndcg@10", "ndcg@10"),
    ("nDCG@10", "ndcg@10"),
    ("ndcg", "ndcg"),
    ("map", "ap"),
    ("MAP", "ap"),
    ("AP", "ap"),
    ("map_cut_10", "ap@10"),
    ("ap@10", "ap@10"),
    ("recip_rank", "mrr"),
    ("RR", "mrr"),
    ("mrr@10", "mrr@10"),
    ("Rprec", "r_precision"),
    ("R-precision", "r_precision"),
    ("success_5", "hit@5"),
    ("success@5", "hit@5"),
    ("hit@5", "hit@5"),
    ("recall_100", "recall@100"),
    ("Recall@100", "recall@100"),
    ("bpref", "bpref"),
    ("judged@10", "judged@10"),
    ("recall_ceiling@5", "recall_ceiling@5"),
    ("num_rel", "num_rel"),
    ("num_ret", "num_ret"),
    ("num_rel_ret", "num_rel_ret"),
    ("NDCG(GAIN=LINEAR)@10", "ndcg(gain=linear)@10"),
    ("ndcg( gain = linear )@ 10", "ndcg(gain=linear)@10"),
    ("ndcg(gain=exp)@10", "ndcg(gain=exp)@10"),
    ("P(rel=2)@5", "precision(rel=2)@5"),
    ("p(REL=2)@5", "precision(rel=2)@5"),
    ("ndcg(rel=2)@10", "ndcg(rel=2)@10"),
    ("ndcg(rel=2,gain=linear)@5", "ndcg(gain=linear,rel=2)@5"),
    ("ndcg(gains=2:9;1:3;4:4.5)", "ndcg(gains=1:3;2:9;4:4.5)"),
    ("ndcg(gains=1:3.0;0:0)", "ndcg(gains=0:0;1:3)"),
    ("ndcg(gains=2:9;1:3)@10", "ndcg(gains=1:3;2:9)@10"),
    # gain= says the rule for the grades gains= leaves out (trec_eval's ndcg.1=3,2=9: the others keep their grade)
    ("ndcg(gain=linear,gains=1:2)@10", "ndcg(gain=linear,gains=1:2)@10"),
    ("ndcg(gains=1:2,gain=exp)", "ndcg(gain=exp,gains=1:2)"),
]


@pytest.mark.parametrize("text, canonical", CANONICAL, ids=[t for t, _ in CANONICAL])
def test_canonical_string_and_round_trip(text, canonical):
    metric = parse_metric(text)
    assert isinstance(metric, Metric)
    assert str(metric) == canonical
    again = parse_metric(str(metric))
    assert again == metric
    assert str(again) == canonical
    assert hash(again) == hash(metric)
    assert metric == canonical  # a metric equals its canonical string (and hashes like it) ...
    assert hash(metric) == hash(canonical)
    assert parse_metric(text) == metric  # ... and any spelling parses to it
    assert parse_metric(metric) is metric


@pytest.mark.parametrize(
    "text, family, k, params",
    [
        ("P@5", "precision", 5, {}),
        ("ndcg", "ndcg", None, {}),
        ("P(rel=2)@5", "precision", 5, {"rel": "2"}),
        ("ndcg(gain=linear,rel=3)@7", "ndcg", 7, {"gain": "linear", "rel": "3"}),
    ],
)
def test_parts_of_a_parsed_metric(text, family, k, params):
    metric = parse_metric(text)
    assert (metric.family, metric.k, metric.param) == (family, k, params)
    assert metric.rel == (int(params["rel"]) if "rel" in params else None)


def test_equality_and_hashing_go_through_the_canonical_string():
    spellings = ["P@5", "p@5", "precision@5", "P_5", "P.5", "PRECISION@5"]
    metrics = {parse_metric(s) for s in spellings}
    assert len(metrics) == 1
    assert {str(m) for m in metrics} == {"precision@5"}
    assert len({parse_metric(s) for s in ["map", "ap", "AP", "map", "ndcg_cut_10", "ndcg@10"]}) == 2
    assert parse_metric("P@5") != parse_metric("P@10")
    assert parse_metric("P@5") != parse_metric("P(rel=2)@5")
    assert parse_metric("ndcg@10") != parse_metric("ndcg")
    assert parse_metric("ndcg@10") != parse_metric("ndcg(gain=linear)@10")
    assert parse_metric("ndcg@10") != "not a metric"
    assert parse_metric("ndcg@10") != 10
    assert hash(parse_metric("P_5")) == hash("precision@5")
    assert {parse_metric("P_5"): 1}[parse_metric("precision@5")] == 1


def test_metrics_are_immutable():
    metric = parse_metric("P@5")
    with pytest.raises(AttributeError):
        metric.k = 10  # type: ignore[misc]


@pytest.mark.parametrize(
    "text, suggestion",
    [
        ("ndgc@10", "ndcg"),
        ("recal@5", "recall"),
        ("precison@5", "precision"),
        ("bperf", "bpref"),
        ("recip_rnak", "mrr"),
    ],
)
def test_unknown_names_suggest_a_known_one(text, suggestion):
    with pytest.raises(InputError) as info:
        parse_metric(text)
    message = str(info.value)
    assert "did you mean" in message
    assert f"'{suggestion}'" in message
    assert text in message


def test_hopeless_name_lists_the_known_metrics():
    with pytest.raises(InputError) as info:
        parse_metric("zzzzzz")
    assert "ndcg" in str(info.value) and "precision" in str(info.value)


@pytest.mark.parametrize("text", ["ndcg@0", "P@0", "P@-1", "P_0", "P_-3", "recall@-5", "ndcg_cut_0", "success@0"])
def test_cutoff_below_one_is_refused(text):
    with pytest.raises(InputError, match="1 or more"):
        parse_metric(text)


@pytest.mark.parametrize("text", ["ndcg@x", "P@1.5", "P@"])
def test_cutoff_that_is_not_an_integer_is_refused(text):
    with pytest.raises(InputError):
        parse_metric(text)


@pytest.mark.parametrize("text", ["P", "recall", "success", "hit", "judged", "recall_ceiling", "P(rel=2)"])
def test_missing_required_cutoff_is_refused(text):
    with pytest.raises(InputError, match="needs a cutoff"):
        parse_metric(text)


@pytest.mark.parametrize("text", ["bpref@10", "bpref_10", "Rprec@5", "r_precision@5", "num_rel@10", "num_ret_100"])
def test_cutoff_on_a_metric_without_one_is_refused(text):
    with pytest.raises(InputError, match="takes no cutoff"):
        parse_metric(text)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("ndcg(foo=1)@10", "unknown parameter"),
        ("mrr(gain=linear)", "unknown parameter"),
        ("judged(rel=2)@10", "unknown parameter"),
        ("ndcg(gain=cubic)@10", "gain="),
        ("P(rel=0)@5", "1 or more"),
        ("P(rel=x)@5", "not an integer"),
        ("ap(rel=2,rel=3)", "twice"),
        ("ndcg(gains=)", "name=value"),
        ("ndcg(gains=a:b)", "grade:gain"),
        ("ndcg(gains=1:2;1:3)", "repeated"),
        ("ndcg(gain)", "name=value"),
    ],
)
def test_bad_parameters_are_refused(text, fragment):
    with pytest.raises(InputError) as info:
        parse_metric(text)
    assert fragment in str(info.value)


@pytest.mark.parametrize("text", ["", "   ", "@10", "P@5@6", "ndcg((gain=linear))", "10@ndcg"])
def test_unreadable_names_are_input_errors(text):
    with pytest.raises(InputError):
        parse_metric(text)


@pytest.mark.parametrize("value", [5, None, 1.5, ["P@5"]])
def test_non_strings_are_type_errors(value):
    with pytest.raises(TypeError):
        parse_metric(value)  # type: ignore[arg-type]


def test_input_error_is_a_value_error():
    with pytest.raises(ValueError):
        parse_metric("nope@5")


@pytest.mark.parametrize(
    "text, trec_name",
    [
        ("precision@5", "P_5"),
        ("P@10", "P_10"),
        ("ndcg@10", "ndcg_cut_10"),
        ("ndcg(gain=linear)@10", "ndcg_cut_10"),
        ("ndcg", "ndcg"),
        ("ap", "map"),
        ("ap@10", "map_cut_10"),
        ("hit@5", "success_5"),
        ("mrr", "recip_rank"),
        ("recall@100", "recall_100"),
        ("r_precision", "Rprec"),
        ("bpref", "bpref"),
        ("num_rel_ret", "num_rel_ret"),
        ("ndcg(gains=2:9;1:3;4:4.5)", "ndcg_1=3,2=9,4=4.5"),
    ],
)
def test_trec_name(text, trec_name):
    metric = parse_metric(text)
    assert metric.trec_name == trec_name


@pytest.mark.parametrize("text", ["mrr@10", "P(rel=2)@5", "judged@10", "recall_ceiling@5", "ndcg(gain=exp)@10"])
def test_trec_name_falls_back_to_the_canonical_string(text):
    metric = parse_metric(text)
    assert metric.trec_name == str(metric)


@pytest.mark.parametrize(
    "text", ["P@5", "ndcg@10", "ap@10", "hit@5", "mrr", "recall@100", "r_precision", "ap", "ndcg", "bpref"]
)
def test_trec_name_parses_back_to_the_same_metric(text):
    metric = parse_metric(text)
    assert parse_metric(metric.trec_name) == metric


def test_plain_integer_helpers():
    """read_int reads the CLI's numeric flags; check_int checks counts given in Python (depths, budgets, ranks)."""
    assert read_int(" 0010 ", "x") == 10 and read_int("-3", "x") == -3
    for text in ("1_0", "+1", "\u0661", "1.0", "", "0x10"):
        with pytest.raises(InputError, match=r"^--flag .* is not a plain decimal integer \(ASCII digits 0-9 only\)$"):
            read_int(text, "--flag")
    with pytest.raises(InputError, match=r"^--flag must be at most 5, not 7$"):
        read_int("7", "--flag", high=5)
    assert check_int(np.int32(4), "n") == 4 and type(check_int(np.int32(4), "n")) is int
    for value, message in [
        (True, "n must be an int, not bool True"),
        (0, "n must be 1 or more, not 0"),
        (2.0, "n must be an int, not float 2.0"),
        (10**9 + 1, "n must be at most 1000000000, not 1000000001"),
    ]:
        with pytest.raises(InputError) as info:
            check_int(value, "n")
        assert str(info.value) == message


def test_cli_depth_and_threshold_flags_still_read_plain_integers(capsys):
    qrels, run = ROOT / "rag_eval" / "examples" / "qrels.txt", ROOT / "rag_eval" / "examples" / "bm25.trec"
    assert (
        main(
            ["evaluate", str(qrels), str(run), "-M", "3", "-l", "1", "-m", "P@10", "--format", "csv", "-q", "--no-card"]
        )
        == 0
    )
    printed = pd.read_csv(io.StringIO(capsys.readouterr().out), dtype={"query_id": str})
    expected = evaluate(Qrels.load(qrels), Run.load(run), ["P@10"], conventions=Conventions(max_depth=3))
    values = expected.values(expected.runs[0], "P@10")
    assert printed["value"].tolist() == pytest.approx(values.tolist()) and printed["query_id"].tolist() == list(
        values.index
    )
    assert max(values) <= 0.3 and values.sum() > 0  # at most 3 of the top 10 counted


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    gains=st.dictionaries(
        st.integers(min_value=-(2**29) + 1, max_value=2**29 - 1),
        st.floats(min_value=0.0, allow_nan=False, allow_infinity=False),
        min_size=1,
        max_size=4,
    ),
    k=st.one_of(st.none(), st.integers(min_value=1, max_value=10**9)),
    style=st.sampled_from(["repr", "upper", "fixed"]),
)
def test_gains_round_trip_through_the_canonical_string(gains, k, style):
    """Any finite gain >= 0, spelled any plain way, parses to the same double and prints as one canonical string
    that parses back to an equal metric (and no string longer than repr needs)."""

    def spell(value: float) -> str:
        if style == "upper":
            return repr(value).upper()
        if style == "fixed":
            return f"{value:.17f}" if value < 1e16 else repr(value)
        return repr(value)

    text = "ndcg(gains=" + ";".join(f"{g}:{spell(v)}" for g, v in gains.items()) + ")" + (f"@{k}" if k else "")
    metric = parse_metric(text)
    assert parse_metric(str(metric)) == metric and str(parse_metric(str(metric))) == str(metric)
    parsed = gains_map(metric)
    assert parsed == {g: float(spell(v)) for g, v in gains.items()}
    assert all(
        len(part.split(":")[1]) <= len(repr(float(part.split(":")[1]))) for part in metric.param["gains"].split(";")
    )
