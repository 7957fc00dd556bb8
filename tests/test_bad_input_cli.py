"""Bad input to the command line as a family (docs/bad-input/reports.md, "The command line"): each is one line
``rag-eval: error: ...``, exit 2, nothing on stdout and nothing written."""

from __future__ import annotations

import shutil

import pytest

from rag_eval.cli import main

from .conftest import ROOT

EXAMPLES = ROOT / "rag_eval" / "examples"
QRELS = str(EXAMPLES / "qrels.txt")
BM25 = str(EXAMPLES / "bm25.trec")
RERANK = str(EXAMPLES / "bm25_rerank.trec")


def cli_error(capsys, *argv: str) -> str:
    """Run the CLI; assert exit 2, nothing on stdout and exactly one stderr line; return that line's message."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert (code, out) == (2, ""), err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rag-eval: error: "), err
    return lines[0].removeprefix("rag-eval: error: ")


@pytest.mark.parametrize("command", ["evaluate", "compare", "pool"])
def test_the_same_run_file_twice_is_refused(capsys, tmp_path, command):
    """One path twice was one run measured once and the other silently dropped (evaluate named both by the
    path): now refused, in every command that names runs."""
    out = tmp_path / "pool.jsonl"
    argv = ["pool", BM25, RERANK, BM25, "--depth", "3", "-o", str(out)] if command == "pool" else [command, QRELS]
    if command != "pool":
        argv += [BM25, RERANK, BM25, "-m", "P@5"]
    assert cli_error(capsys, *argv) == f"run file {BM25!r} is given twice (runs 1 and 3)"
    assert not out.exists()


def test_an_ambiguous_baseline_is_refused_naming_the_runs(capsys, tmp_path, monkeypatch):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copy(BM25, tmp_path / folder / "bm25.trec")
    monkeypatch.chdir(tmp_path)
    message = cli_error(capsys, "compare", QRELS, "a/bm25.trec", "b/bm25.trec", "-m", "P@5", "--baseline", "bm25.trec")
    assert message == (
        "--baseline 'bm25.trec' could be any of 2 runs: say which by its name; the runs are 'a/bm25.trec', "
        "'b/bm25.trec'"
    )


def test_an_unknown_baseline_is_refused_naming_the_runs(capsys):
    message = cli_error(capsys, "compare", QRELS, BM25, RERANK, "-m", "P@5", "--baseline", "minilm-rerank")
    # the TREC tag is not a name: the runs are named by their stems, listed with their paths
    assert message == (
        f"--baseline 'minilm-rerank' is neither a run name nor a run file: the runs are 'bm25' ({BM25}), "
        f"'bm25_rerank' ({RERANK})"
    )


@pytest.mark.parametrize(
    ("flag", "text", "message"),
    [
        ("--depth", "1_0", "--depth '1_0' is not a plain decimal integer (ASCII digits 0-9 only)"),
        ("--depth", "0", "--depth must be 1 or more, not 0"),
        (
            "--limit-queries",
            "\u0663",
            "--limit-queries '\u0663' is not a plain decimal integer (ASCII digits 0-9 only)",
        ),
        ("--concurrency", "0", "--concurrency must be 1 or more, not 0"),
    ],
)
def test_bench_numbers_are_plain_decimals(capsys, tmp_path, flag, text, message):
    """bench's counts were read by int(), which takes 1_0 and other scripts' digits: now as every other flag."""
    out = tmp_path / "out"
    assert cli_error(capsys, "bench", "--beir", str(tmp_path / "nope"), flag, text, "-o", str(out)) == message
    assert not out.exists()


def test_bench_budget_in_other_digits_is_refused(capsys, tmp_path):
    message = cli_error(capsys, "bench", "--beir", str(EXAMPLES), "--budget", "\u0665", "-o", str(tmp_path / "o"))
    assert "budget must be a number of chunks (e.g. 5) or of tokens (e.g. '512tok'), not '\u0665'" in message


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["label", "pool.jsonl", "-o", "a.qrels", "--qrels", "b.qrels"], "unrecognized arguments: --qrels b.qrels"),
        (["merge", "log.jsonl", "-l", "1", "--threshold", "2", "-o", "m"], "unrecognized arguments: --threshold 2"),
        (["bench", "--beir", "a", "--dataset", "b"], "unrecognized arguments: --dataset b"),
        (["label", "pool.jsonl", "--qrels", "b.qrels"], "the following arguments are required: -o/--out"),
        (["bench", "--dataset", "b"], "the following arguments are required: --beir"),
    ],
)
def test_an_option_and_its_old_spelling_together_or_neither_are_refused(capsys, tmp_path, monkeypatch, argv, message):
    """0.1's spellings (label --qrels, merge --threshold, bench --dataset) are gone: argparse refuses them, exit 2
    before anything is read or written."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(message)
    assert list(tmp_path.iterdir()) == []
