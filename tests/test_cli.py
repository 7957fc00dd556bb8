"""The rag-eval command: output formats, trec_eval's printout, and bad input as one line with exit 2."""

from __future__ import annotations

import csv
import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import rag_eval
from rag_eval.cli import main

from .conftest import CONFORMANCE, ROOT, need_shared

EXAMPLES = ROOT / "rag_eval" / "examples"
QRELS = EXAMPLES / "qrels.txt"
BM25 = EXAMPLES / "bm25.trec"
RERANK = EXAMPLES / "bm25_rerank.trec"


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_csv_per_query_is_exactly_the_tidy_table(capsys):
    code, out, err = run_cli(
        capsys, "evaluate", QRELS, BM25, RERANK, "-m", "ndcg@5", "-m", "P@5", "--per-query", "--format", "csv"
    )
    assert code == 0
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["run", "query_id", "metric", "value"]
    report = rag_eval.evaluate(
        rag_eval.Qrels.from_trec(QRELS),
        {"bm25": rag_eval.Run.from_trec(BM25), "bm25_rerank": rag_eval.Run.from_trec(RERANK)},  # named by stem
        ["ndcg@5", "P@5"],
    )
    expected = report.per_query
    assert len(rows) - 1 == len(expected) == 2 * 12 * 2  # runs x counted queries x metrics, no aggregate row
    for row, (_, exp) in zip(rows[1:], expected.iterrows()):
        assert row[:3] == [exp.run, exp.query_id, exp.metric]
        assert float(row[3]) == exp.value  # full precision: the float round-trips exactly
    assert "metric card" in err and "metric card" not in out


def test_csv_summary_columns(capsys):
    code, out, _ = run_cli(capsys, "evaluate", QRELS, BM25, "-m", "recall@20", "--format", "csv", "--no-card")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == ["run", "metric", "mean", "sum", "std", "median", "ci_low", "ci_high", "n", "n_nan"]
    assert rows[0]["metric"] == "recall@20" and rows[0]["n"] == "12" and rows[0]["n_nan"] == "0"
    values = rag_eval.evaluate(rag_eval.Qrels.from_trec(QRELS), rag_eval.Run.from_trec(BM25), ["recall@20"]).values(
        "bm25.trec", "recall@20"
    )
    assert float(rows[0]["mean"]) == pytest.approx(values.mean(), abs=1e-15)


def test_json_has_the_card_and_no_card_on_stderr(capsys):
    code, out, err = run_cli(capsys, "evaluate", QRELS, BM25, "-m", "mrr@5", "--format", "json", "-q")
    assert code == 0 and err == ""
    payload = json.loads(out)
    assert payload["card"]["metrics"] == ["mrr@5"]
    assert payload["card"]["queries"][0]["left_out"] == {"run_only": ["q99"]}
    assert {r["query_id"] for r in payload["per_query"]} == {f"q{i:02d}" for i in range(1, 13)}
    assert payload["summary"][0]["n"] == 12


def test_table_is_readable(capsys):
    code, out, _ = run_cli(capsys, "evaluate", QRELS, BM25, RERANK, "-m", "ndcg@5")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines()[1:]]
    assert names == ["bm25", "bm25_rerank"] and "ndcg@5" in out and "ci_low" in out  # runs named by their stems


TREC_EVAL_CASES = {
    "out.test": ("qrels.test", "results.test", []),
    "out.test.aq": ("qrels.test", "results.test", ["-q"]),
    "out.test.aqc": ("qrels.test", "results.trunc", ["-q", "-c"]),
    "out.test.aqcM": ("qrels.test", "results.trunc", ["-q", "-c", "-M", "100"]),
    "out.test.aql": ("qrels.rel_level", "results.test", ["-q", "-l", "2"]),
}
MEASURES = [
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "map",
    "Rprec",
    "bpref",
    "recip_rank",
    "P_5",
    "P_30",
    "recall_10",
    "ndcg",
    "ndcg_cut_10",
    "map_cut_100",
    "success_5",
]


@pytest.mark.parametrize("reference", sorted(TREC_EVAL_CASES))
def test_trec_eval_format_prints_what_trec_eval_prints(capsys, reference):
    need_shared(CONFORMANCE)
    qrels, run, flags = TREC_EVAL_CASES[reference]
    lines = (CONFORMANCE / reference).read_text().splitlines()
    printed = {line.split("\t")[0].strip() for line in lines}
    measures = [m for m in MEASURES if m in printed]  # plain trec_eval prints a shorter list than -m all_trec
    args = [
        "evaluate",
        CONFORMANCE / qrels,
        CONFORMANCE / run,
        "--conventions",
        "trec_eval",
        "--format",
        "trec_eval",
        *flags,
    ]
    for m in measures:
        args += ["-m", m]
    code, out, _ = run_cli(capsys, *args)
    assert code == 0
    assert len(measures) >= 9
    wanted = set(measures)  # as trec_eval: runid and num_q only when asked (-m runid, or a nickname)
    expected = [line for line in lines if line.split("\t")[0].strip() in wanted]
    assert out.splitlines() == expected  # the same lines in the same order: diff finds nothing
    assert len(expected) >= len(measures)


def _write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


BAD_INPUTS = {
    "missing run file": (None, "nope.trec", "no such file"),
    "five fields": (
        "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.4 t\nq1 Q0 d3 3 0.3\n",
        "run.trec",
        ":3: expected at least 6 fields",
    ),
    "score not a number": ("q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 high t\n", "run.trec", ":2: field 5 is 'high', not a number"),
    "empty run": ("", "run.trec", "empty file"),
    "not utf-8": (b"q1 Q0 d1 1 0.5 t\nq1 Q0 d\xff 2 0.4 t\n", "run.trec", ":2: not valid UTF-8"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_run_file_is_one_line_and_exit_2(capsys, tmp_path, case):
    content, name, message = BAD_INPUTS[case]
    run = tmp_path / name
    if content is not None:
        _write(run, content)
    code, out, err = run_cli(capsys, "evaluate", QRELS, run, "-m", "P@5")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert str(run) in err and message in err


def test_bad_qrels_grade_names_file_and_line(capsys, tmp_path):
    qrels = _write(tmp_path / "qrels.txt", "q1 0 d1 1\nq1 0 d2 yes\n")
    code, _, err = run_cli(capsys, "evaluate", qrels, BM25)
    assert code == 2 and f"{qrels}:2:" in err and "'yes'" in err


def test_unknown_metric_suggests(capsys):
    code, _, err = run_cli(capsys, "evaluate", QRELS, BM25, "-m", "ndgc@10")
    assert code == 2 and "did you mean 'ndcg'" in err and err.count("\n") == 1


def test_cutoff_zero_and_bad_depth_exit_2(capsys):
    assert run_cli(capsys, "evaluate", QRELS, BM25, "-m", "P@0")[0] == 2
    code, _, err = run_cli(capsys, "evaluate", QRELS, BM25, "-M", "0")
    assert code == 2 and "max_depth" in err and "Traceback" not in err


def test_gzipped_inputs(capsys, tmp_path):
    gz = tmp_path / "bm25.trec.gz"
    gz.write_bytes(gzip.compress(BM25.read_bytes()))
    plain = run_cli(capsys, "evaluate", QRELS, BM25, "-m", "ap", "--format", "csv", "-q", "--no-card")[1]
    zipped = run_cli(capsys, "evaluate", QRELS, gz, "-m", "ap", "--format", "csv", "-q", "--no-card")[1]
    assert zipped == plain.replace("bm25.trec,", "bm25.trec,")  # the .gz suffix is not part of the run name


def test_console_script_runs_as_a_process():
    script = Path(sys.executable).with_name("rag-eval")
    done = subprocess.run([str(script), "evaluate", str(QRELS), "/no/such/run"], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip() == "rag-eval: error: /no/such/run: no such file"
    done = subprocess.run(
        [str(script), "evaluate", str(QRELS), str(BM25), "-m", "ndcg@5", "--no-card"], capture_output=True, text=True
    )
    assert done.returncode == 0 and "ndcg@5" in done.stdout
    # the bundled example judges few of bm25's results, and says so in one line
    assert done.stderr == (
        "rag-eval: warning: run 'bm25': judged@5 is 0.182, below 0.9: its scores are lower "
        "bounds (pool its results with rag_eval.pool, label them, and evaluate again)\n"
    )
