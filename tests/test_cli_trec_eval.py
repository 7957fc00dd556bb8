"""The CLI's -m with trec_eval's syntax (nicknames, MEASURE, MEASURE.PARAMS) in every --format, --dialect, and the
metrics measured without -m."""

from __future__ import annotations

import csv
import io
import json
import warnings

import pytest

from rag_eval.cli import main, resolve_metrics
from rag_eval.errors import TrecEvalParametersIgnored, TrecEvalParameterTruncated
from rag_eval.metrics.trec_eval_measures import trec_eval_metrics
from rag_eval.reports import DEFAULT_METRICS

from .conftest import CONFORMANCE, ROOT, need_shared

EXAMPLES = ROOT / "rag_eval" / "examples"
QRELS = EXAMPLES / "qrels.txt"
BM25 = EXAMPLES / "bm25.trec"


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _strings(texts, **kw):
    return [str(m) for m in resolve_metrics(texts, **kw)]


def test_without_m_trec_eval_conventions_measure_what_trec_eval_measures_without_m():
    assert resolve_metrics(None, conventions="trec_eval") == trec_eval_metrics(["official"])
    assert _strings(None, conventions="trec_eval")[:6] == ["runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "ap"]
    assert _strings(None) == list(DEFAULT_METRICS) == _strings([], conventions="default")
    assert _strings(None, dialect="ir_measures", conventions="trec_eval") == list(DEFAULT_METRICS)


def test_grammar_names_and_trec_eval_arguments_mix_in_argument_order():
    # a name in the grammar's own syntax keeps its place; trec_eval's -m arguments (a measure's name, alone or with
    # .PARAMS, or a nickname) merge into one group, in trec_eval's order, where the first of them stands; repeats
    # are dropped
    assert _strings(["ndcg@10", "P.5,3", "map", "recall.20", "success.5,1", "P@3", "P_10"]) == [
        "ndcg@10",
        "ap",
        "precision@3",
        "precision@5",
        "recall@20",
        "hit@1",
        "hit@5",
        "precision@10",
    ]
    # merged as trec_eval merges them: all_trec's relstring takes relstring.20's length, once
    relstrings = [m for m in _strings(["all_trec", "relstring.20"]) if m.startswith("relstring")]
    assert relstrings == ["relstring@20"]
    assert _strings(["P"]) == [f"precision@{k}" for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000)]
    assert _strings(["iprec_at_recall"])[0] == "iprec_at_recall(level=0)"
    assert len(_strings(["all_trec"])) == 100


def test_gain_is_the_conventions_unless_the_dialect_pins_it():
    # without a dialect, trec_eval's names follow the conventions, as ndcg_cut_10 always has
    assert _strings(["ndcg_cut.10,20", "ndcg_cut_5", "ndcg"]) == ["ndcg", "ndcg@10", "ndcg@20", "ndcg@5"]
    # with dialect="trec_eval": printed names (ndcg_cut_5, P_5) in place, -m arguments merged in trec_eval's order
    pinned = _strings(["ndcg_cut.10,20", "ndcg_cut_5", "ndcg", "P_5"], dialect="trec_eval")
    assert pinned == [
        "ndcg(gain=linear)",
        "ndcg(gain=linear)@10",
        "ndcg(gain=linear)@20",
        "ndcg(gain=linear)@5",
        "precision@5",
    ]


def test_nicknames_and_parameters_in_every_format(capsys):
    args = ["evaluate", QRELS, BM25, "-m", "P.5,3", "-m", "Rprec_mult.0.5", "-m", "ndcg@5", "--no-card"]
    code, out, _ = run_cli(capsys, *args, "--format", "json")
    assert code == 0
    payload = json.loads(out)
    assert payload["card"]["metrics"] == ["precision@3", "precision@5", "rprec_mult(mult=0.5)", "ndcg@5"]
    assert [row["metric"] for row in payload["summary"]] == payload["card"]["metrics"]
    code, out, _ = run_cli(capsys, *args, "--format", "csv")
    assert code == 0
    assert [row["metric"] for row in csv.DictReader(io.StringIO(out))] == payload["card"]["metrics"]
    code, out, _ = run_cli(capsys, *args, "--format", "table")
    assert code == 0 and "rprec_mult(mult=0.5)" in out and "precision@3" in out
    code, out, _ = run_cli(capsys, *args, "--format", "trec_eval")
    assert code == 0
    # no runid or num_q line: not asked for
    assert [line.split("\t")[0].strip() for line in out.splitlines()][:3] == ["P_3", "P_5", "Rprec_mult_0.50"]


def test_dialect_in_the_cli(capsys):
    args = ["evaluate", QRELS, BM25, "-m", "ndcg_cut.5", "--format", "json", "--conventions", "default"]
    _, out, _ = run_cli(capsys, *args)
    assert json.loads(out)["card"]["metrics"] == ["ndcg@5"]
    code, out, _ = run_cli(capsys, *args, "--dialect", "trec_eval")
    assert code == 0
    summary = json.loads(out)["summary"]
    assert [r["metric"] for r in summary] == ["ndcg(gain=linear)@5"]
    _, out, _ = run_cli(capsys, "evaluate", QRELS, BM25, "-m", "ndcg(gain=linear)@5", "--format", "json")
    assert json.loads(out)["summary"][0]["mean"] == summary[0]["mean"]  # the same metric, the same number


def test_the_measure_parameters_golden_file_is_reproduced(capsys):
    need_shared(CONFORMANCE)
    args = [
        "-miprec_at_recall..10,.20,.25,.75,.50",
        "-m",
        "P.5,7,3",
        "-m",
        "recall.20,2000",
        "-m",
        "Rprec_mult.5.0,0.2,0.35",
        "-mutility.2,-1,0,0",
        "-m",
        "11pt_avg..25,.5,.75",
        "-mndcg.1=3,2=9,4=4.5",
        "-mndcg_cut.10,20,23.4",
        "-msuccess.2,5,20",
    ]
    with warnings.catch_warnings():  # the CLI prints a warning as one line on stderr
        warnings.simplefilter("always", TrecEvalParameterTruncated)
        code, out, err = run_cli(
            capsys,
            "evaluate",
            CONFORMANCE / "qrels.test",
            CONFORMANCE / "results.test",
            "-q",
            "--format",
            "trec_eval",
            "--conventions",
            "trec_eval",
            "--no-card",
            "--judged-threshold",
            "0",
            *args,
        )
    assert code == 0
    assert out == (CONFORMANCE / "out.test.meas_params").read_text()
    assert err == (
        "rag-eval: warning: trec_eval measure 'ndcg_cut.10,20,23.4': cutoff '23.4' read as trec_eval reads "
        "it (atol): 23\n"
    )


@pytest.mark.parametrize(
    "metric, message",
    [
        (
            "all_prefs",
            "trec_eval measure 'all_prefs': the nickname 'all_prefs' needs preference files (trec_eval -R "
            "prefs), which rag_eval does not read (out of scope)",
        ),
        ("P.5,5", "trec_eval measure 'P.5,5': the cutoff 5 is given twice (trec_eval: duplicate cutoffs detected)"),
        ("foo.5", "unknown metric 'foo.5'"),
    ],
)
def test_bad_trec_eval_arguments_are_one_line_and_exit_2(capsys, metric, message):
    code, out, err = run_cli(capsys, "evaluate", QRELS, BM25, "-m", metric)
    assert code == 2 and out == ""
    assert err.startswith(f"rag-eval: error: {message}")
    assert len(err.strip().splitlines()) == 1


# -m arguments whose printed names (and their order) trec_eval itself decides: each list is given to the binary
# and to trec_eval_metrics, and the names must be the same, in the same order
BINARY_CASES = [
    ["official"],
    ["set"],
    ["all_trec"],
    ["map", "P.20,5", "official"],
    ["P.5", "P"],
    ["P", "P.100,1"],
    ["all_trec", "relstring.20"],
    ["ndcg.0=1,1=2", "ndcg_rel.2=5", "Rndcg", "G.1=0.5"],
    ["rbp.p=0.5", "rbp_resid.p=0.95", "set_F.0.25", "utility.1,-2,0.5,0"],
    ["iprec_at_recall.1,0,.5", "Rprec_mult.3,.25", "11pt_avg.0,.5,1"],
    ["unj.1,2,3", "relative_P.7", "map_cut.2", "success.3", "recall.4,44"],
    ["ndcg_cut.23.4,10", "relstring.5"],
]


@pytest.mark.parametrize("args", BINARY_CASES, ids=[" ".join(a) for a in BINARY_CASES])
def test_the_names_of_m_arguments_are_trec_eval_s(trec_eval_binary, args):
    import subprocess

    need_shared(CONFORMANCE)
    command = [str(trec_eval_binary), "-q"] + [f"-m{a}" for a in args]
    command += [str(CONFORMANCE / "qrels.test"), str(CONFORMANCE / "results.test")]
    printed = subprocess.run(command, capture_output=True, text=True, check=True).stdout.splitlines()
    per_query = [line.split("\t")[0].strip() for line in printed if line.split("\t")[1].strip() == "301"]
    summary = [line.split("\t")[0].strip() for line in printed if line.split("\t")[1].strip() == "all"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TrecEvalParameterTruncated)
        warnings.simplefilter("ignore", TrecEvalParametersIgnored)
        names = [m.trec_name for m in trec_eval_metrics(args)]
    # trec_eval prints runid and num_q in the summary only, relstring per query only, gm_map and gm_bpref in the
    # summary only: together, every name once, in order
    assert list(dict.fromkeys(per_query + summary)) != []
    assert [n for n in names if n in set(per_query) | set(summary)] == names
    order = {name: i for i, name in enumerate(names)}
    assert sorted(dict.fromkeys(per_query), key=order.__getitem__) == list(dict.fromkeys(per_query))
    assert sorted(dict.fromkeys(summary), key=order.__getitem__) == list(dict.fromkeys(summary))
