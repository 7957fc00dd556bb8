"""The rag-eval commands are one family: an option two commands share is spelled, defaulted and explained the same
way in each; every command has help; a run has one name in every command (its file's stem); --baseline takes the
name, the file name or the path as given; compare has --no-card like evaluate."""

from __future__ import annotations

import argparse
import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

import rag_eval
from rag_eval.cli import SHARED_OPTIONS, build_parser, main, run_names

from .conftest import ROOT

EXAMPLES = ROOT / "rag_eval" / "examples"
QRELS = EXAMPLES / "qrels.txt"
BM25 = EXAMPLES / "bm25.trec"  # its TREC tag is bm25
RERANK = EXAMPLES / "bm25_rerank.trec"  # its TREC tag is minilm-rerank: not its name
COMMANDS = {
    "answers",
    "evaluate",
    "compare",
    "power",
    "bench",
    "pool",
    "merge",
    "label",
    "demo",
    "queries",
    "judge",
    "agreement",
    "estimate",
    "human-sample",
    "gate",
    "report",
    "tune",
    "traces",
    "drift",
}
# what a command may set itself (SHARED_OPTIONS' comment): which formats (tests) apply, what -o writes, --depth cuts
OWN = {
    "--format": {"choices"},
    "--test": {"choices"},
    "-o": {"help"},
    "--out": {"help"},
    "--depth": {"help"},
    # traces, drift and report: what their qrels are for (not pool); traces: its budget defaults to the one recorded
    "--qrels": {"help"},
    "--budget": {"default", "help"},
    "--judge": {"help"},  # answers: a judge of answers, not of (query, chunk) pairs
}


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _options(command: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The command's documented options by each of their flags (hidden 0.1 spellings, help=SUPPRESS, left out)."""
    return {
        flag: action
        for action in command._actions
        if action.option_strings and action.help is not argparse.SUPPRESS and action.dest != "help"
        for flag in action.option_strings
    }


def test_every_command_is_there_and_has_help_text():
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(sub.choices) == COMMANDS
    helps = {choice.dest: choice.help for choice in sub._choices_actions}
    for name, command in sub.choices.items():
        assert helps[name], name
        assert command.description, name
        for action in command._actions:
            if action.dest != "help" and action.help is not argparse.SUPPRESS:
                assert action.help, f"{name} {action.option_strings or action.dest}"


def test_a_command_imports_its_own_group_only():
    """The command table the lazy parser reads equals what each group adds, and a command's own parser is the same
    as in the whole family's (its options, defaults and help)."""
    from rag_eval import cli

    whole = _commands()
    assert {c for owned in cli._GROUPS.values() for c in owned} == set(whole)
    for group, owned in cli._GROUPS.items():
        for command in owned:
            (sub,) = [a for a in build_parser(command)._actions if isinstance(a, argparse._SubParsersAction)]
            assert set(sub.choices) == set(owned), (group, command)
            assert sub.choices[command].format_help() == whole[command].format_help()


def test_an_option_shared_by_two_commands_is_the_same_in_each():
    by_flag: dict[str, list[tuple[str, argparse.Action]]] = defaultdict(list)
    for name, command in _commands().items():
        for flag, action in _options(command).items():
            by_flag[flag].append((name, action))
    shared = {flag: uses for flag, uses in by_flag.items() if len(uses) > 1}
    # the options the family shares today, each in the commands named (a new sharing must keep to the rule too)
    assert {flag: sorted(n for n, _ in uses) for flag, uses in shared.items()} == {
        "-m": ["agreement", "compare", "estimate", "evaluate", "gate", "power", "tune"],
        "--metric": ["agreement", "compare", "estimate", "evaluate", "gate", "power", "tune"],
        "--baseline": ["compare", "estimate", "power"],
        "--alpha": ["agreement", "compare", "estimate", "gate", "power"],
        "--test": ["agreement", "compare", "drift", "gate", "power"],
        "--correction": ["compare", "gate"],
        "--dialect": ["compare", "evaluate"],
        "--conventions": ["compare", "evaluate"],
        "-c": ["compare", "evaluate"],
        "-M": ["compare", "evaluate"],
        "-l": ["agreement", "compare", "evaluate", "merge"],
        "--relevance-threshold": ["agreement", "compare", "evaluate", "merge"],
        "-J": ["compare", "evaluate"],
        "--judged-threshold": ["compare", "evaluate"],
        "--format": ["agreement", "compare", "drift", "estimate", "evaluate"],
        "--resamples": ["compare", "evaluate", "tune"],
        "--seed": ["answers", "compare", "drift", "evaluate", "gate", "human-sample", "tune"],
        "--no-card": ["compare", "evaluate"],
        "--beir": ["answers", "bench", "gate", "pool", "report", "tune"],
        "--split": ["answers", "bench", "gate", "pool", "report", "tune"],
        "--depth": ["bench", "pool", "traces", "tune"],
        "--budget": ["bench", "traces", "tune"],
        "--cache": ["answers", "bench", "gate", "tune"],
        "--pipeline": ["bench", "gate"],
        "--mlflow": ["evaluate", "gate", "report"],
        "-o": [
            "answers",
            "bench",
            "demo",
            "drift",
            "gate",
            "human-sample",
            "judge",
            "label",
            "merge",
            "pool",
            "report",
            "traces",
            "tune",
        ],
        "--out": [
            "answers",
            "bench",
            "demo",
            "drift",
            "gate",
            "human-sample",
            "judge",
            "label",
            "merge",
            "pool",
            "report",
            "traces",
            "tune",
        ],
        "--scale": ["agreement", "judge", "label"],
        "--judge": ["answers", "judge"],
        "--qrels": ["drift", "merge", "pool", "report", "traces"],
        "--run": ["answers", "drift"],
        "--corpus-before": ["drift", "gate", "report"],
        "--corpus-after": ["drift", "gate", "report"],
        "--chunks-before": ["drift", "gate", "report"],
        "--chunks-after": ["drift", "gate", "report"],
        "--no-plots": ["bench", "demo", "report", "traces", "tune"],
        "--generator": ["answers", "bench"],
    }
    for flag, uses in shared.items():
        first_name, first = uses[0]
        for name, action in uses[1:]:
            for field in ("dest", "default", "choices", "help", "metavar", "nargs", "type", "const"):
                if field in OWN.get(flag, ()):
                    continue
                mine, theirs = getattr(action, field), getattr(first, field)
                assert mine == theirs, f"{flag}: {field} is {theirs!r} in {first_name}, {mine!r} in {name}"
            assert action.option_strings == first.option_strings, flag  # -m with --metric everywhere, ...


def test_every_shared_option_is_declared_once():
    declared = {flag for flags, _ in SHARED_OPTIONS.values() for flag in flags}
    by_flag: dict[str, set[str]] = defaultdict(set)
    for name, command in _commands().items():
        for flag in _options(command):
            by_flag[flag].add(name)
    assert {flag for flag, names in by_flag.items() if len(names) > 1} <= declared


def test_a_run_is_named_by_its_stem_in_every_command(tmp_path, capsys):
    """evaluate, compare and pool name bm25_rerank.trec 'bm25_rerank', never by its TREC tag 'minilm-rerank',
    which the card keeps as the run's tag."""
    args = [str(QRELS), str(BM25), str(RERANK), "-m", "ndcg@5", "--judged-threshold", "0"]
    assert main(["evaluate", *args, "--format", "json"]) == 0
    card = json.loads(capsys.readouterr().out)["card"]
    runs = {i["name"]: i for i in card["inputs"] if i["role"] == "run"}
    assert list(runs) == ["bm25", "bm25_rerank"]
    assert runs["bm25_rerank"]["tag"] == "minilm-rerank" and runs["bm25"]["tag"] == "bm25"
    assert main(["evaluate", *args]) == 0
    assert "run 'bm25_rerank': " in capsys.readouterr().err and "TREC tag 'minilm-rerank'" in str(
        rag_eval.MetricCard.model_validate(card).render()
    )
    assert main(["compare", *args, "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert [r["system"] for r in payload["comparison"]] == ["bm25_rerank"]
    assert payload["comparison"][0]["baseline"] == "bm25"
    out = tmp_path / "pool.jsonl"
    assert main(["pool", str(BM25), str(RERANK), "--depth", "3", "-o", str(out)]) == 0
    capsys.readouterr()
    systems = {s for item in rag_eval.Pool.load(out) for s in item.systems}
    assert systems == {"bm25", "bm25_rerank"}


def test_stems_that_collide_name_the_runs_by_their_paths(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert run_names(["a/bm25.trec", "b/bm25.trec", "x/dense.trec"]) == ["a/bm25.trec", "b/bm25.trec", "dense"]
    assert run_names(["bm25.trec.gz", "runs/dense.jsonl", "plain"]) == ["bm25", "dense", "plain"]
    assert run_names(["bm25.trec", "bm25"]) == ["bm25.trec", "bm25"]  # one stem, so the paths


@pytest.mark.parametrize("spelling", ["bm25", "bm25.trec", "PATH", "./PATH"])
def test_baseline_takes_the_name_the_file_name_or_the_path(tmp_path, capsys, spelling):
    folder = tmp_path / "x"
    folder.mkdir()
    shutil.copy(BM25, folder / "bm25.trec")
    shutil.copy(RERANK, folder / "bm25_rerank.trec")
    path = str((folder / "bm25.trec").relative_to(tmp_path))
    baseline = spelling.replace("PATH", path)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        argv = ["compare", str(QRELS), path, "x/bm25_rerank.trec", "-m", "ndcg@5", "--judged-threshold", "0"]
        assert main([*argv, "--baseline", baseline, "--format", "csv", "--no-card"]) == 0
    out, err = capsys.readouterr()
    assert err == ""  # --no-card: no card on stderr
    row = out.splitlines()[1].split(",")
    assert row[:3] == ["bm25_rerank", "bm25", "ndcg@5"]


def test_compare_prints_the_card_unless_no_card(capsys):
    argv = ["compare", str(QRELS), str(BM25), str(RERANK), "-m", "ndcg@5", "--judged-threshold", "0"]
    assert main(argv) == 0
    assert "metric card" in capsys.readouterr().err
    assert main([*argv, "--no-card"]) == 0
    assert capsys.readouterr().err == ""


def test_compare_measures_as_evaluate_does(capsys):
    """compare takes evaluate's measuring options: -M 3 changes ndcg@5 exactly as evaluate's -M 3 does."""
    argv = [str(QRELS), str(BM25), str(RERANK), "-m", "ndcg@5", "--judged-threshold", "0", "-M", "3", "-l", "2"]
    assert main(["evaluate", *argv, "--format", "json"]) == 0
    summary = {r["run"]: r["mean"] for r in json.loads(capsys.readouterr().out)["summary"]}
    assert main(["compare", *argv, "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    row = payload["comparison"][0]
    assert row["mean"] == summary["bm25_rerank"] and row["baseline_mean"] == summary["bm25"]
    assert payload["card"]["conventions"]["max_depth"] == 3
    assert payload["card"]["conventions"]["relevance_threshold"] == 2


def test_markdown_format_of_evaluate_and_compare(capsys):
    argv = [str(QRELS), str(BM25), str(RERANK), "-m", "ndcg@5", "--judged-threshold", "0", "--no-card"]
    assert main(["evaluate", *argv, "--format", "markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == "| run | metric | mean | std | ci_low | ci_high | n | n_nan |"
    report = rag_eval.evaluate(
        rag_eval.Qrels.from_trec(QRELS), {"bm25": rag_eval.Run.from_trec(BM25)}, ["ndcg@5"], judged_threshold=0
    )
    assert lines[4].startswith(f"| bm25 | ndcg@5 | {report.mean('bm25', 'ndcg@5'):.4f} |")
    assert main(["compare", *argv, "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| system | metric |") and "| bm25_rerank | ndcg@5 |" in out


def test_formats_are_reports_functions():
    """The CLI's renderings are rag_eval.reports' functions of a Report or a Comparison, usable from a script."""
    from rag_eval.renderers import FORMATS, format_comparison, format_report

    report = rag_eval.evaluate(
        rag_eval.Qrels.from_trec(QRELS),
        {"bm25": rag_eval.Run.from_trec(BM25), "rerank": rag_eval.Run.from_trec(RERANK)},
        ["ndcg@5", "P@5"],
        judged_threshold=0,
    )
    assert FORMATS == ("table", "csv", "json", "markdown")
    payload = json.loads(format_report(report, "json", per_query=True))
    assert payload["summary"][0]["mean"] == report.mean("bm25", "ndcg@5")
    assert len(payload["per_query"]) == 2 * 12 * 2
    csv = format_report(report, "csv", per_query=True).splitlines()
    assert csv[0] == "run,query_id,metric,value" and len(csv) == 1 + 2 * 12 * 2
    comparison = rag_eval.compare(report, baseline="bm25")
    assert format_comparison(comparison, "table") == str(comparison) + "\n"
    assert json.loads(format_comparison(comparison, "json"))["comparison"][0]["system"] == "rerank"
    with pytest.raises(ValueError, match="unknown format 'html'"):
        format_report(report, "html")


def test_the_benchmark_script_is_the_bench_command():
    text = (ROOT / "benchmarks" / "run.py").read_text()
    assert 'main(["bench", *sys.argv[1:]])' in text
    assert Path(ROOT / "rag_eval" / "builtin" / "run.py").read_text().count("add_argument") == 0


def test_docs_naming_lists_every_shared_option_in_the_commands_that_have_it():
    rows = {}
    for line in (ROOT / "docs" / "naming.md").read_text("utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| option |"):
            header = cells
        elif line.startswith("| `-") and len(cells) == len(header):
            rows[cells[0]] = {header[i] for i in range(2, len(header)) if cells[i]}
    commands = _commands()
    expected = {}
    for flags, _ in SHARED_OPTIONS.values():
        label = ", ".join(f"`{f}`" for f in flags)
        expected[label] = {name for name, command in commands.items() if flags[0] in _options(command)}
    assert rows == expected


def test_python_m_rag_eval_is_the_command():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "rag_eval", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == f"rag-eval {rag_eval.__version__}"
