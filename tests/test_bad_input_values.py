"""Bad input, values checked at construction: metric names, conventions, hits, budgets, pipelines, pools and the
labelling page's scale, and the pool and labelling writers that refuse ids a TREC line cannot give back.

Every kind here is a row of docs/bad-input/values.md (section "Values checked at construction") or of
docs/bad-input/files.md ("Ids: collisions and round trips"); its last column names the test. Each refusal is an
InputError with the exact message, and the CLI turns it into one line ``rag-eval: error: ...`` and exit status 2.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rag_eval import Conventions, InputError, Metric, Pool, Qrels, Run, evaluate, parse_metric, pool
from rag_eval.adapters import functions
from rag_eval.cli import main
from rag_eval.errors import FailingStage
from rag_eval.ground_truth import Judgement, JudgementLog, PoolItem, write_qrels
from rag_eval.labelling import LabellingServer, LabellingSession, parse_scale
from rag_eval.labelling.session import check_scale
from rag_eval.metrics.grammar import MAX_CUTOFF
from rag_eval.stages import Budget, Hit, Pipeline

from .conftest import ROOT

EXAMPLES = ROOT / "rag_eval" / "examples"
QRELS_FILE, RUN_FILE = str(EXAMPLES / "qrels.txt"), str(EXAMPLES / "bm25.trec")


def error_of(call, *args, **kwargs) -> str:
    with pytest.raises(InputError) as info:
        call(*args, **kwargs)
    return str(info.value)


def cli_error(capsys, *argv: str) -> str:
    """Run the CLI; assert exit 2, nothing on stdout and exactly one stderr line; return that line's message."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert (code, out) == (2, ""), err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rag-eval: error: "), err
    return lines[0].removeprefix("rag-eval: error: ")


# ----- metric names: numbers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ("ndcg@1_0", "metric 'ndcg@1_0': cutoff '1_0' is not a plain decimal integer (ASCII digits 0-9 only)"),
        (
            "ndcg@\u0661\u0660",
            "metric 'ndcg@\u0661\u0660': cutoff '\u0661\u0660' is not a plain decimal integer (ASCII digits 0-9 only)",
        ),
        ("P@+5", "metric 'P@+5': cutoff '+5' is not a plain decimal integer (ASCII digits 0-9 only)"),
        (
            "P_1_0",
            "metric 'P_1_0': cutoff '1_0' is not a plain decimal integer (ASCII digits only; trec_eval's "
            "cutoff is the digits after the last '_', e.g. 'P_10')",
        ),
        (
            "ndcg_cut_1_0",
            "metric 'ndcg_cut_1_0': cutoff '1_0' is not a plain decimal integer (ASCII digits only; "
            "trec_eval's cutoff is the digits after the last '_', e.g. 'ndcg_cut_10')",
        ),
        ("P(rel=1_0)@5", "metric 'P(rel=1_0)@5': rel='1_0' is not an integer (plain ASCII digits 0-9)"),
        ("P(rel=\u0662)@5", "metric 'P(rel=\u0662)@5': rel='\u0662' is not an integer (plain ASCII digits 0-9)"),
        (
            "ndcg(gains=1:1_0)",
            "metric 'ndcg(gains=1:1_0)': gains entry '1:1_0' should read grade:gain, e.g. 2:9 "
            "(plain ASCII decimal numbers: no '_', hex, inf or nan)",
        ),
        (
            "ndcg(gains=1:0x10)",
            "metric 'ndcg(gains=1:0x10)': gains entry '1:0x10' should read grade:gain, e.g. 2:9 "
            "(plain ASCII decimal numbers: no '_', hex, inf or nan)",
        ),
        (
            "ndcg(gains=1_0:2)",
            "metric 'ndcg(gains=1_0:2)': gains entry '1_0:2' should read grade:gain, e.g. 2:9 "
            "(plain ASCII decimal numbers: no '_', hex, inf or nan)",
        ),
    ],
)
def test_metric_numbers_must_be_plain_ascii_decimals(text, message, capsys):
    assert error_of(parse_metric, text) == message
    assert cli_error(capsys, "evaluate", QRELS_FILE, RUN_FILE, "-m", text) == message
    # the plain spellings mean what they say: leading zeros are decimal, trec_eval's names keep working
    assert str(parse_metric("ndcg@010")) == "ndcg@10"
    assert [str(parse_metric(t)) for t in ("P_10", "P.10", "ndcg_cut_10")] == ["precision@10"] * 2 + ["ndcg@10"]


def test_metric_cutoff_beyond_the_limit(capsys):
    huge = "recall@99999999999999999999999"
    message = f"metric {huge!r}: the cutoff must be at most 1000000000 (10^9), not 99999999999999999999999"
    assert error_of(parse_metric, huge) == message
    assert cli_error(capsys, "evaluate", QRELS_FILE, RUN_FILE, "-m", huge) == message
    assert error_of(parse_metric, "P_1000000001") == (
        "metric 'P_1000000001': the cutoff must be at most 1000000000 (10^9), not 1000000001"
    )
    thousands = "P@" + "9" * 5000  # int() itself refuses more than 4300 digits: still this clear error
    assert error_of(parse_metric, thousands).endswith(
        "the cutoff must be at most 1000000000 (10^9), not 99999999999999999999...(5000 characters)"
    )
    # the limit itself is a cutoff like any other: recall@10^9 of a short run is its recall
    at_limit = evaluate({"q": {"a": 1, "b": 1}}, Run.from_ranking({"q": ["a", "x"]}), [f"recall@{MAX_CUTOFF}"])
    assert at_limit.values("run", f"recall@{MAX_CUTOFF}").to_dict() == {"q": 0.5}


def test_metric_rel_or_gains_grade_beyond_the_grade_limit():
    assert error_of(parse_metric, "P(rel=536870912)@5") == (
        "metric 'P(rel=536870912)@5': rel must be below 536870912 (grades lie within +-536870912), not 536870912"
    )
    assert error_of(parse_metric, "P(rel=99999999999999999999999999999999999)@5").startswith(
        "metric 'P(rel=99999999999999999999999999999999999)@5': rel must be below 536870912"
    )
    assert error_of(parse_metric, "ndcg(gains=-536870912:1)") == (
        "metric 'ndcg(gains=-536870912:1)': gains entry '-536870912:1': grade -536870912 is out of range "
        "(grades lie within +-536870912)"
    )
    assert str(parse_metric("P(rel=536870911)@5")) == "precision(rel=536870911)@5"


@pytest.mark.parametrize(
    "gain, message",
    [
        (
            "inf",
            "gains entry '1:inf': a gain must be a finite number, not 'inf' (an infinite or NaN gain makes nDCG NaN)",
        ),
        (
            "-Infinity",
            "gains entry '1:-Infinity': a gain must be a finite number, not '-Infinity' (an infinite or NaN "
            "gain makes nDCG NaN)",
        ),
        (
            "nan",
            "gains entry '1:nan': a gain must be a finite number, not 'nan' (an infinite or NaN gain makes nDCG NaN)",
        ),
        (
            "1e400",
            "gains entry '1:1e400': the gain 1e400 is beyond the largest double (about 1.8e308), so it is "
            "infinite and nDCG would be NaN",
        ),
    ],
)
def test_infinite_or_nan_gain_is_refused_when_parsed(gain, message, capsys):
    text = f"ndcg(gains=1:{gain})@5"
    assert error_of(parse_metric, text) == f"metric {text!r}: {message}"
    assert cli_error(capsys, "evaluate", QRELS_FILE, RUN_FILE, "-m", text) == f"metric {text!r}: {message}"


def test_negative_gain_is_refused():
    """trec_eval takes a negative gain and can print a negative nDCG; here nDCG stays within [0, 1]."""
    assert error_of(parse_metric, "ndcg(gains=1:-2)") == (
        "metric 'ndcg(gains=1:-2)': gains entry '1:-2': a gain must be 0 or more (a negative gain takes nDCG below 0)"
    )
    assert str(parse_metric("ndcg(gains=1:-0;2:0.0)")) == "ndcg(gains=1:0;2:0)"  # -0 is 0, not refused
    # a negative grade may earn a gain >= 0 (the map overrides single grades, as trec_eval's ndcg.-1=...)
    assert str(parse_metric("ndcg(gains=-1:2)")) == "ndcg(gains=-1:2)"


def test_huge_gain_prints_short_and_spellings_are_one_metric():
    spellings = [
        "ndcg(gains=1:1e308)@5",
        "ndcg(gains=1:1E308)@5",
        "ndcg(gains=1:1e+308)@5",
        "ndcg(gains=1:" + "1" + "0" * 308 + ")@5",
        "ndcg(gains=1:10e307)@5",
    ]
    metrics = {parse_metric(s) for s in spellings}
    assert len(metrics) == 1
    (metric,) = metrics
    assert str(metric) == "ndcg(gains=1:1e308)@5" and parse_metric(str(metric)) == metric
    assert (
        metric.trec_name == "ndcg(gains=1:1e308)@5" and parse_metric("ndcg(gains=1:1e308)").trec_name == "ndcg_1=1e308"
    )
    printed = {
        "ndcg(gains=1:0.00001)": "ndcg(gains=1:1e-5)",
        "ndcg(gains=2:123456789012345678)": "ndcg(gains=2:1.2345678901234568e17)",
        "ndcg(gains=1:2.50;2:1000)": "ndcg(gains=1:2.5;2:1000)",
        "ndcg(gains=1:.5)": "ndcg(gains=1:0.5)",
        "ndcg(gains=1:1e16)": "ndcg(gains=1:1e16)",
    }
    for text, canonical in printed.items():
        assert str(parse_metric(text)) == canonical and str(parse_metric(canonical)) == canonical


def test_metric_built_by_hand_is_checked():
    assert error_of(Metric, "ndcg", True) == "metric 'ndcg': the cutoff k=True is a bool, not an int"
    assert error_of(Metric, "ndcg", 2.0) == "metric 'ndcg': the cutoff k=2.0 is a float, not an int"
    assert error_of(Metric, "ndcg", 0) == "metric 'ndcg': the cutoff must be 1 or more, not 0"
    assert (
        error_of(Metric, "ndcg", 10**10)
        == "metric 'ndcg': the cutoff must be at most 1000000000 (10^9), not 10000000000"
    )
    assert error_of(Metric, "nDCG").startswith("unknown metric family 'nDCG'; known: 11pt_avg, ap, bing, bpref,")
    assert error_of(Metric, "ndcg", 5, (("gains", "1:inf"),)).startswith(
        "metric 'ndcg(gains=1:inf)': gains entry '1:inf'"
    )
    # parameters given by hand come out canonical, so equal metrics stay equal
    by_hand = Metric("ndcg", np.int64(5), (("gains", "1:1E308;0:0.0"),))
    assert by_hand == parse_metric("ndcg(gains=0:0;1:1e308)@5") and type(by_hand.k) is int
    assert Metric("precision", 5, {"rel": "02"}) == parse_metric("P(rel=2)@5")


# ----- conventions and the CLI flags that set them ------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value, problem",
    [
        ("max_depth", True, "expected an int, not bool True"),
        ("max_depth", 2.5, "expected an int, not float 2.5"),
        ("max_depth", 2.0, "expected an int, not float 2.0"),
        ("max_depth", "5", "expected an int, not str '5'"),
        ("relevance_threshold", False, "expected an int, not bool False"),
        ("relevance_threshold", 2.0, "expected an int, not float 2.0"),
    ],
)
def test_conventions_int_fields_refuse_bools_floats_and_strings(field, value, problem):
    assert error_of(Conventions, **{field: value}) == f"Conventions: {field}={value!r}: {problem}"
    assert error_of(Conventions().replace, **{field: value}) == f"Conventions: {field}={value!r}: {problem}"
    # a NumPy integer is an int: kept as a Python int, and gives the same values as the int itself
    numpy_one = Conventions(**{field: np.int64(1)})
    assert type(getattr(numpy_one, field)) is int and numpy_one == Conventions(**{field: 1})


def test_conventions_int_fields_have_limits():
    assert error_of(Conventions, max_depth=10**9 + 1) == (
        "Conventions: max_depth=1000000001: Input should be less than or equal to 1000000000"
    )
    assert error_of(Conventions, max_depth=0) == "Conventions: max_depth=0: Input should be greater than or equal to 1"
    assert error_of(Conventions, relevance_threshold=2**29) == (
        "Conventions: relevance_threshold=536870912: Input should be less than 536870912"
    )
    assert error_of(Conventions, foo=1).startswith(
        "Conventions: unknown field 'foo' (fields: ties, relevance_threshold,"
    )
    assert Conventions(max_depth=10**9).max_depth == 10**9


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("-M", "99999999999999999999", "-M (max_depth) must be at most 1000000000, not 99999999999999999999"),
        ("-M", "1_0", "-M (max_depth) '1_0' is not a plain decimal integer (ASCII digits 0-9 only)"),
        ("-M", "\u0661\u0660", "-M (max_depth) '\u0661\u0660' is not a plain decimal integer (ASCII digits 0-9 only)"),
        ("-M", "abc", "-M (max_depth) 'abc' is not a plain decimal integer (ASCII digits 0-9 only)"),
        ("-M", "0", "-M (max_depth) must be 1 or more, not 0"),
        ("-l", "1_0", "-l (relevance_threshold) '1_0' is not a plain decimal integer (ASCII digits 0-9 only)"),
        ("-l", "99999999999999999999", "-l (relevance_threshold) must be at most 536870911, not 99999999999999999999"),
    ],
)
def test_cli_depth_and_threshold_flags_take_plain_integers(flag, value, message, capsys):
    assert cli_error(capsys, "evaluate", QRELS_FILE, RUN_FILE, flag, value, "-m", "P@10") == message


@pytest.mark.parametrize(
    "args, message",
    [
        (["--seed", "1_0"], "--seed '1_0' is not a plain decimal integer (ASCII digits 0-9 only)"),
        (
            ["--resamples", "\u0661\u0660"],
            "--resamples '\u0661\u0660' is not a plain decimal integer (ASCII digits 0-9 only)",
        ),
        (["--resamples", "0"], "--resamples must be 1 or more, not 0"),
        (["--judged-threshold", "0_9"], "--judged-threshold '0_9' is not a plain decimal number in [0, 1]"),
        (["--judged-threshold", "2"], "--judged-threshold '2' is not a plain decimal number in [0, 1]"),
    ],
)
def test_cli_numeric_flags_take_plain_numbers(args, message, capsys):
    assert cli_error(capsys, "evaluate", QRELS_FILE, RUN_FILE, "-m", "P@10", *args) == message


def test_cli_compare_flags_take_plain_numbers(capsys):
    assert cli_error(capsys, "compare", QRELS_FILE, RUN_FILE, RUN_FILE, "--permutations", "1_000") == (
        "--permutations '1_000' is not a plain decimal integer (ASCII digits 0-9 only)"
    )
    assert cli_error(capsys, "compare", QRELS_FILE, RUN_FILE, RUN_FILE, "--alpha", "0,05") == (
        "--alpha '0,05' is not a plain decimal number in [0, 1]"
    )


# ----- hits, budgets, pipelines ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"doc_id": ""}, "a hit's doc_id must be a non-empty str, not ''"),
        ({"doc_id": 5}, "a hit's doc_id must be a str, not int (5)"),
        ({"score": True}, "hit 'd': score must be a real number or None, not bool True"),
        ({"score": "0.5"}, "hit 'd': score must be a real number or None, not str '0.5'"),
        ({"score": math.nan}, "hit 'd': score is NaN"),
        ({"score": np.float32("nan")}, "hit 'd': score is NaN"),
        (
            {"tokens": -100},
            "hit 'd': tokens must be 0 or more, not -100 (a negative count would let a token budget "
            "deliver everything)",
        ),
        ({"tokens": math.nan}, "hit 'd': tokens is nan: a token count is an int >= 0 or None"),
        ({"tokens": math.inf}, "hit 'd': tokens is inf: a token count is an int >= 0 or None"),
        ({"tokens": True}, "hit 'd': tokens must be an int >= 0 or None, not bool True"),
        ({"tokens": 2.0}, "hit 'd': tokens must be an int >= 0 or None, not float 2.0"),
        ({"text": 5}, "hit 'd': text must be a str or None, not int"),
        ({"metadata": [("a", 1)]}, "hit 'd': metadata must be a mapping, not list"),
    ],
)
def test_hit_fields_are_checked_when_made(kwargs, message):
    fields = {"doc_id": "d"} | kwargs
    assert error_of(Hit, **fields) == message
    assert error_of(Hit.from_json, fields) == message


def test_hit_keeps_numbers_as_python_numbers():
    hit = Hit("d", np.float32(0.5), "t", np.int64(4), {"source": "doc"})
    assert (type(hit.score), hit.score, type(hit.tokens), hit.tokens) == (float, 0.5, int, 4)
    assert Hit("d", -math.inf).score == -math.inf  # infinite scores are kept, as the run readers keep them
    assert Hit("d", 3).score == 3.0 and type(Hit("d", 3).score) is float


def test_negative_token_count_cannot_open_a_token_budget():
    """A stage that returns a negative token count fails on that query (a recorded fault), instead of letting
    a token budget deliver everything; a tokenizer that counts -5 is an error naming the hit."""
    search = functions.retriever(lambda q, k: [{"doc_id": "a", "tokens": -100}, {"doc_id": "b", "tokens": 3}], name="r")
    with pytest.warns(FailingStage):  # 1 of 1 query: said once
        result = Pipeline(search, depth=2, budget="2tok").run({"q": "text"})
    failures = {(f.stage, f.query_id): f.error for f in result.failures.itertuples()}
    assert failures == {
        ("r", "q"): "InputError: stage 'r': hit 'a': tokens must be 0 or more, not -100 (a negative "
        "count would let a token budget deliver everything)"
    }
    hits = [Hit("a", text="one two"), Hit("b", text="three")]
    assert Budget.parse("2tok").cut(hits, lambda text: len(text.split())) == 1
    assert error_of(Budget.parse("2tok").cut, hits, lambda text: -5) == (
        "the tokenizer's count for hit 'a' must be 0 or more, not -5"
    )
    assert error_of(Budget.parse("2tok").cut, hits, lambda text: 1.5) == (
        "the tokenizer's count for hit 'a' must be an int, not float 1.5"
    )


def test_cached_hits_are_checked_column_by_column():
    hits = (Hit("a", 1.5, "x", 3, {"k": 1}), Hit("b"), Hit("c", -math.inf, None, 0))
    columns = json.loads(json.dumps(Hit.to_columns(hits)))  # as the cache reads them back
    assert Hit.from_columns(columns) == hits
    for column, index, value, message in [
        (
            "tokens",
            0,
            -100,
            "cached hit 1: hit 'a': tokens must be 0 or more, not -100 (a negative count would "
            "let a token budget deliver everything)",
        ),
        ("tokens", 2, True, "cached hit 3: hit 'c': tokens must be an int >= 0 or None, not bool True"),
        ("score", 1, math.nan, "cached hit 2: hit 'b': score is NaN"),
        ("score", 0, "1.5", "cached hit 1: hit 'a': score must be a real number or None, not str '1.5'"),
        ("score", 0, 2, "cached hit 1: hit 'a': score must be a float or null, not int"),
        ("doc_id", 1, "", "cached hit 2: a hit's doc_id must be a non-empty str, not ''"),
        ("text", 2, 7, "cached hit 3: hit 'c': text must be a str or None, not int"),
        ("metadata", 1, [1], "cached hit 2: hit 'b': metadata must be a mapping, not list"),
    ]:
        bad = {name: list(values) for name, values in columns.items()}
        bad[column][index] = value
        assert error_of(Hit.from_columns, bad) == message, (column, value)
    short = {name: list(values) for name, values in columns.items()} | {"tokens": [3]}
    assert error_of(Hit.from_columns, short) == "cached hits: the columns differ in length"


@pytest.mark.parametrize(
    "value, message",
    [
        (True, "budget must be a number of chunks or 'Ntok', not True"),
        (0, "a budget of chunks must be 1 or more, not 0"),
        (10**10, "a budget of chunks must be at most 1000000000, not 10000000000"),
        (
            "\u0661\u0660tok",
            "budget must be a number of chunks (e.g. 5) or of tokens (e.g. '512tok'), not '\u0661\u0660tok'",
        ),
        ("1_0tok", "budget must be a number of chunks (e.g. 5) or of tokens (e.g. '512tok'), not '1_0tok'"),
        ("99999999999999999999tok", "a budget of tokens must be at most 1000000000, not 99999999999999999999"),
        (2.5, "budget must be a number of chunks (e.g. 5) or of tokens (e.g. '512tok'), not 2.5"),
    ],
)
def test_budget_is_checked_when_made(value, message):
    assert error_of(Budget.parse, value) == message
    assert error_of(Pipeline, functions.retriever(lambda q, k: ["a"], name="r"), budget=value) == message


def test_budget_made_by_hand_is_checked():
    assert (
        error_of(Budget)
        == "a budget is a number of chunks or of tokens, exactly one of them: not chunks=None, tokens=None"
    )
    assert error_of(Budget, chunks=2, tokens=5).startswith("a budget is a number of chunks or of tokens, exactly one")
    assert error_of(Budget, chunks=True) == "a budget of chunks must be an int, not bool True"
    assert error_of(Budget, tokens=-5) == "a budget of tokens must be 1 or more, not -5"
    assert Budget.parse(np.int64(3)) == Budget(chunks=3) and str(Budget(tokens=np.int64(7))) == "budget(7tok)"


def test_pipeline_settings_are_checked_before_anything_runs():
    calls = []

    def search(query, k):
        calls.append(query)
        return ["a"]

    first = functions.retriever(search, name="r")
    assert error_of(Pipeline, first, depth=True) == (
        "depth (how many candidates to ask the first stage for) must be an int, not bool True"
    )
    assert error_of(Pipeline, first, depth=10**10) == (
        "depth (how many candidates to ask the first stage for) must be at most 1000000000, not 10000000000"
    )
    assert error_of(Pipeline, first, corpus="abc") == "corpus must be a collection of doc ids (str), not str"
    assert error_of(Pipeline, first, corpus={"a", 7}) == "corpus: doc id 7 is not a non-empty str"
    pipe = Pipeline(first, depth=np.int64(3))
    assert pipe.depth == 3 and type(pipe.depth) is int
    for kwargs, message in [
        ({"timeout": math.nan}, "timeout must be a finite number of seconds, not nan"),
        ({"timeout": 0}, "timeout must be more than 0 seconds, not 0"),
        ({"backoff": math.inf}, "backoff must be a finite number of seconds, not inf"),
        ({"retries": 1.5}, "retries must be an int, not float 1.5"),
        ({"concurrency": 0}, "concurrency must be 1 or more, not 0"),
        ({"verify": 2.0}, "verify must be True, False or a number of queries (0 or more), not 2.0"),
        ({"progress": "yes"}, "progress must be True, False or None, not 'yes'"),
    ]:
        assert error_of(pipe.run, {"q": "text"}, **kwargs) == message, kwargs
    assert calls == []


def test_pool_values_are_checked_when_made(tmp_path):
    item = PoolItem("q", "d", {"bm25": 1}, 1 / 61)
    assert error_of(Pool, (item,), True, "depth", ("bm25",)) == "pool depth must be an int, not bool True"
    assert error_of(Pool, (item,), 5, "borda", ("bm25",)) == "pool strategy must be 'depth' or 'rrf', not 'borda'"
    assert error_of(Pool, (item,), 5, "depth", ("bm25",), already_judged=-1) == (
        "pool already_judged must be 0 or more, not -1"
    )
    assert error_of(PoolItem, "q", "d", {"bm25": 0}, 0.1) == (
        "pool item (query 'q', doc 'd'): the rank by 'bm25' must be 1 or more, not 0"
    )
    assert error_of(PoolItem, "q", "d", {"bm25": True}, 0.1) == (
        "pool item (query 'q', doc 'd'): the rank by 'bm25' must be an int, not bool True"
    )
    assert error_of(PoolItem, "q", "d", {"bm25": 1}, math.nan) == (
        "pool item (query 'q', doc 'd'): rrf must be a finite number >= 0, not nan"
    )
    assert (
        error_of(PoolItem, "q", "d", {}, 0.1)
        == "pool item (query 'q', doc 'd'): ranks must map each system that returned it to a rank"
    )
    # a pool file whose provenance says depth true: the file and line are named
    path = tmp_path / "pool.jsonl"
    record = {
        "query_id": "q",
        "doc_id": "d",
        "ranks": {"bm25": 1},
        "pool": {"id": "x", "depth": True, "strategy": "depth", "systems": ["bm25"]},
    }
    path.write_text(json.dumps(record) + "\n")
    assert error_of(Pool.load, path) == f"{path}:1: field 'pool': pool depth must be an int, not bool True"


def test_judgement_is_checked_when_made():
    when = "2026-11-05T09:12:33.481Z"
    for args, message in [
        (("q", "d", True, "alice", when), "grade True is not an integer"),
        (("q", "d", 2.0, "alice", when), "grade 2.0 is not an integer"),
        (("q", "d", 5, "alice", when), "grade 5 is outside the scale 0..3"),
        (
            ("q", "d", 1, "alice", when, (0, True)),
            "scale must be two ints (lowest, highest grade), lowest < highest, not (0, True)",
        ),
        (("q", "d", 1, "alice", "yesterday"), "time 'yesterday' is not an ISO 8601 time"),
        (("q", "", 1, "alice", when), "doc_id must be a non-empty string, not ''"),
        (
            ("q", "d", 1, "grade", when),
            "assessor 'grade' is not a usable name (no surrounding spaces; not one of "
            "['doc_id', 'grade', 'qrels', 'query_id'])",
        ),
    ]:
        assert error_of(Judgement, *args) == message, args
    assert Judgement("q", "d", 3, "alice", when, [0, 3]).scale == (0, 3)


def test_labelling_scale_is_checked(tmp_path, capsys):
    assert parse_scale("0..3") == (0, 3) and parse_scale(" 1 .. 5 ") == (1, 5)
    for text in ("0..1_0", "0..\u0663", "0..10", "0..+3"):
        assert error_of(parse_scale, text) == f"--scale {text!r}: expected LOW..HIGH, e.g. 0..3 (one ASCII digit each)"
    assert (
        error_of(parse_scale, "3..1")
        == "--scale '3..1': expected LOW..HIGH with 0 <= LOW < HIGH <= 9 (one key per grade)"
    )
    items = pool([Run.from_ranking({"q": ["d1", "d2"]}, name="r")], depth=2)
    for scale in ((0, True), (0, 10), (2, 2), (0, 3.0), "0..3"):
        assert error_of(LabellingSession, items, tmp_path / "out.qrels", assessor="a", scale=scale) == (
            f"scale {scale!r}: expected two ints (low, high) with 0 <= low < high <= 9 (one key per grade)"
        )
    assert check_scale([1, 4]) == (1, 4)
    session = LabellingSession(items, tmp_path / "out.qrels", assessor="a")
    for port in (True, -1, 65536, 80.0):
        assert (
            error_of(LabellingServer, session, port=port)
            == f"port {port!r}: expected an int from 0 (a free port) to 65535"
        )
    assert list(tmp_path.iterdir()) == []  # nothing written
    pool_file = tmp_path / "pool.jsonl"
    items.save(pool_file)
    assert cli_error(capsys, "label", str(pool_file), "-o", str(tmp_path / "out.qrels"), "--scale", "0..1_0") == (
        "--scale '0..1_0': expected LOW..HIGH, e.g. 0..3 (one ASCII digit each)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pool.jsonl"]


def test_cli_pool_and_merge_counts_take_plain_integers(tmp_path, capsys):
    out = tmp_path / "pool.jsonl"
    assert cli_error(capsys, "pool", RUN_FILE, "--depth", "1_0", "-o", str(out)) == (
        "--depth '1_0' is not a plain decimal integer (ASCII digits 0-9 only)"
    )
    assert cli_error(capsys, "pool", RUN_FILE, "--depth", "99999999999", "-o", str(out)) == (
        "--depth must be at most 1000000000, not 99999999999"
    )
    log = JudgementLog.open(tmp_path / "a.jsonl")
    log.append("q", "d", 1, assessor="a")
    assert cli_error(capsys, "merge", str(log.path), "-l", "\u0662", "-o", str(tmp_path / "m.qrels")) == (
        "-l (relevance_threshold) '\u0662' is not a plain decimal integer (ASCII digits 0-9 only)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "a.jsonl.lock"]  # no pool, no m.qrels


# ----- ids that cannot round-trip: pools and the labelling output --------------------------------------------


@pytest.mark.parametrize(
    "run, message",
    [
        (
            {"#q": {"d1": 1.0}},
            "pool: system 'r': query id '#q' starts with '#', so the line would be read back as a "
            "comment: it cannot be written to a trec file and read back",
        ),
        (
            {"q": {"d 1": 1.0}},
            "pool: system 'r': query 'q': doc id 'd 1' holds whitespace, which separates the fields "
            "of a TREC line: it cannot be written to a trec file and read back",
        ),
        (
            {"q": {"": 1.0}},
            "pool: system 'r': query 'q': doc id '' is empty: it cannot be written to a trec file and read back",
        ),
        (
            {"q\t1": {"d": 1.0}},
            "pool: system 'r': query id 'q\\t1' holds whitespace, which separates the fields of a "
            "TREC line: it cannot be written to a trec file and read back",
        ),
    ],
)
def test_pool_refuses_ids_that_cannot_round_trip(run, message, tmp_path):
    assert error_of(pool, {"r": Run.from_scores(run)}, depth=5) == message
    assert list(tmp_path.iterdir()) == []
    # a doc id may start with '#' (only a line's first field makes it a comment)
    assert [i.doc_id for i in pool({"r": Run.from_scores({"q": {"#d": 1.0}})}, depth=5)] == ["#d"]


def test_pool_made_by_hand_refuses_ids_that_cannot_round_trip():
    """So that no pool export and no labelling page ever holds one."""
    for query, doc, message in [
        ("#q", "d", "pool: query id '#q' starts with '#', so the line would be read back as a comment"),
        ("q", "d 1", "pool: query 'q': doc id 'd 1' holds whitespace, which separates the fields of a TREC line"),
    ]:
        item = PoolItem(query, doc, {"r": 1}, 1 / 61)
        assert (
            error_of(Pool, (item,), 5, "depth", ("r",))
            == f"{message}: it cannot be written to a trec file and read back"
        )
    assert error_of(PoolItem, "", "d", {"r": 1}, 0.1) == "pool item: query_id must be a non-empty str, not ''"


def test_cli_pool_refuses_a_comment_like_query_id(tmp_path, capsys):
    run = tmp_path / "run.jsonl"
    run.write_text(
        '{"query_id": "#q", "doc_id": "d1", "score": 1.0}\n{"query_id": "q2", "doc_id": "d2", "score": 1.0}\n'
    )
    out = tmp_path / "pool.jsonl"
    assert cli_error(capsys, "pool", str(run), "--depth", "5", "-o", str(out)) == (
        "pool: system 'run': query id '#q' starts with '#', so the line would be read back as a comment: it cannot "
        "be written to a trec file and read back"
    )
    assert not out.exists()


def test_pool_file_with_an_id_that_cannot_be_labelled(tmp_path):
    path = tmp_path / "pool.jsonl"
    good = {
        "query_id": "q1",
        "doc_id": "d",
        "ranks": {"r": 1},
        "pool": {"id": "x", "depth": 5, "strategy": "depth", "systems": ["r"]},
    }
    path.write_text(json.dumps(good) + "\n" + json.dumps(good | {"query_id": "#q2"}) + "\n")
    assert error_of(Pool.load, path) == (
        f"{path}:2: query id '#q2' starts with '#', so the line would be read back as a comment: it cannot be "
        "labelled into TREC qrels"
    )


def test_labelling_output_refuses_ids_that_cannot_round_trip(tmp_path, capsys):
    """write_qrels (the labelling page's OUT, rag-eval merge's -o) refuses before writing: the old file stays."""
    out = tmp_path / "out.qrels"
    out.write_text("q0 0 old 1\n")
    for judged, message in [
        ({"#q": {"d": 1}}, "query id '#q' starts with '#', so the line would be read back as a comment"),
        ({"q": {"#d": 1, "e": 0}}, None),  # a doc id may start with '#': only a line's first field makes a comment
        ({"q": {"d\r1": 1}}, "query 'q': doc id 'd\\r1' holds whitespace"),
    ]:
        qrels = Qrels.from_dict(judged)
        if message is None:
            write_qrels(qrels, out)
            assert Qrels.from_trec(out) == qrels
            out.write_text("q0 0 old 1\n")
            continue
        assert error_of(write_qrels, qrels, out).startswith(f"{out}: {message}")
        assert out.read_text() == "q0 0 old 1\n"
    log = JudgementLog.open(tmp_path / "a.jsonl")
    log.append("#q", "d", 1, assessor="a")  # a JSON line holds it; the TREC qrels cannot
    merged = tmp_path / "merged.qrels"
    assert cli_error(capsys, "merge", str(log.path), "-o", str(merged)) == (
        f"{merged}: query id '#q' starts with '#', so the line would be read back as a comment: it cannot be "
        "written to a trec file and read back"
    )
    assert not merged.exists()
