"""Issue 27, class 5: a command's exit status is its outcome. docs/cli.md's table ("Exit status") lists every code of
every command; each row is run here into its outcome, with stdout working and with stdout's reader gone (a broken
pipe), so that the table and the behaviour cannot drift apart."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

import rag_eval
from rag_eval import Qrels, Run
from rag_eval.cli import build_parser, main
from rag_eval.examples import BEIR_FOLDER as BEIR
from rag_eval.examples import FOLDER

from .conftest import ROOT

TABLE = ROOT / "docs" / "cli.md"
_ROW = re.compile(r"^\| `(?P<command>[a-z-]+)` \| (?P<code>\d+) \| (?P<when>.+) \|$")


def table_rows() -> list[tuple[str, int, str]]:
    """(command, exit status, when) of each row of docs/cli.md's table under "## Exit status"."""
    text = TABLE.read_text(encoding="utf-8")
    section = text.split("## Exit status", 1)[1].split("\n## ", 1)[0]
    rows = [(m["command"], int(m["code"]), m["when"]) for m in map(_ROW.match, section.splitlines()) if m]
    assert rows, f"no table found in {TABLE}"
    return rows


ROWS = table_rows()


# ----- the inputs ---------------------------------------------------------------------------------------------------

EXAMPLES = Path(FOLDER)
QRELS = str(EXAMPLES / "qrels.txt")
BM25 = str(EXAMPLES / "bm25.trec")
RERANK = str(EXAMPLES / "bm25_rerank.trec")


def _gate_report(hits: list[int]):
    """A report of P@10 where query q's value is hits[q] / 10 (as tests/test_gate.py makes them)."""
    ids = [f"q{i:02d}" for i in range(len(hits))]
    qrels = {q: {f"{q}-r{i}": 1 for i in range(10)} for q in ids}
    ranking = {q: [f"{q}-r{i}" for i in range(j)] + [f"{q}-n{i}" for i in range(10 - j)] for q, j in zip(ids, hits)}
    return rag_eval.evaluate(Qrels.from_dict(qrels), {"sys": Run.from_ranking(ranking)}, ["P@10"], judged_threshold=0)


def _gate(tmp: Path, base: list[int], cand: list[int], *extra: str) -> list[str]:
    _gate_report(base).save(tmp / "base.parquet")
    _gate_report(cand).save(tmp / "cand.parquet")
    return ["gate", str(tmp / "base.parquet"), str(tmp / "cand.parquet"), "-m", "P@10", "--max-drop", "0.05", *extra]


def _report_file(tmp: Path) -> str:
    qrels = Qrels.load(QRELS)
    report = rag_eval.evaluate(qrels, {"bm25": Run.load(BM25), "rerank": Run.load(RERANK)}, ["P@10", "ndcg@10"])
    report.save(tmp / "report.parquet")
    return str(tmp / "report.parquet")


def _pool_file(tmp: Path, *, texts: bool = False) -> str:
    from rag_eval.data import Collection
    from rag_eval.ground_truth import pool

    if texts:
        collection = Collection.from_beir(str(BEIR))
        ranking = {q: sorted(collection.qrels[q])[:2] for q in collection.qrels.query_ids}
        made = pool({"r": Run.from_ranking(ranking)}, depth=2, queries=collection.queries, texts=collection.corpus)
    else:
        made = pool({"bm25": Run.load(BM25)}, depth=3)
    made.save(tmp / "pool.jsonl")
    return str(tmp / "pool.jsonl")


def grade_by_length(query: str, text: str) -> int:
    """A judge for the tests: longer chunks get higher grades."""
    return min(3, len(text) // 120)


def grade_fails(query: str, text: str) -> int:
    """A judge whose model is down."""
    raise RuntimeError("the model is down")


def _retriever(order: int):
    from rag_eval.adapters import functions
    from rag_eval.data import Collection

    ids = sorted(Collection.from_beir(str(BEIR)).corpus)

    def search(query: str, k: int):
        words = set(query.lower().split())
        scored = sorted(ids, key=lambda d: (-order * sum(w in d for w in words), d))
        return [(d, float(len(ids) - i)) for i, d in enumerate(scored[:k])]

    return functions.retriever(search, name=f"ids{order}", version="1")


def first(collection):
    return _retriever(1)


def second(collection):
    return _retriever(-1)


def pipeline(collection, depth, budget):
    return rag_eval.Pipeline(_retriever(1), depth=depth, budget=budget)


def down(collection, depth, budget):
    """A pipeline whose index is down: every query fails."""
    from rag_eval.adapters import functions

    def search(query: str, k: int):
        raise RuntimeError("the index is down")

    return rag_eval.Pipeline(functions.retriever(search, name="down", version="1"), depth=depth, budget=budget)


def short_answer(prompt: str) -> str:
    """A generator function for ``rag-eval answers``: the first chunk's first three words."""
    return " ".join(prompt.split("[1] ", 1)[1].split()[:3])


def no_answer(prompt: str) -> str:
    raise RuntimeError("the model is down")


def _answers(tmp: Path, generator: str) -> list[str]:
    main(
        ["bench", "--beir", str(BEIR), "--pipeline", PIPELINE, "--depth", "30", "-o", str(tmp / "bench"), "--no-plots"]
    )
    refs = tmp / "refs.jsonl"
    refs.write_text("".join(json.dumps({"query_id": f"q{i}", "answers": ["chain"]}) + "\n" for i in range(1, 12)))
    out = ["answers", str(tmp / "bench"), "--beir", str(BEIR), "--references", str(refs)]
    return [*out, "--generator", f"{__name__}:{generator}", "-o", str(tmp / "answers")]


def _judgement_log(tmp: Path, *, empty: bool = False) -> str:
    from rag_eval.ground_truth import JudgementLog

    path = tmp / "grades.judgements.jsonl"
    if empty:
        path.write_bytes(b"")
    else:
        log = JudgementLog.open(path)
        log.append("q1", "d1", 2, assessor="alice")
        log.append("q1", "d2", 0, assessor="alice")
    return str(path)


def _human_reports(tmp: Path) -> list[str]:
    qrels = Qrels.load(QRELS)
    runs = {"bm25": Run.load(BM25), "rerank": Run.load(RERANK)}
    rag_eval.evaluate(qrels, runs, ["P@10"]).save(tmp / "judge.parquet")
    sample = {q: qrels[q] for q in sorted(qrels.query_ids)[:10]}  # the normal interval's minimum n
    rag_eval.evaluate(Qrels.from_dict(sample), runs, ["P@10"]).save(tmp / "human.parquet")
    return ["--judge-report", str(tmp / "judge.parquet"), "--human-report", str(tmp / "human.parquet")]


def _log_csv(tmp: Path) -> str:
    lines = ["query"] + [f"how do I fix question {i % 7}" for i in range(30)]
    (tmp / "log.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(tmp / "log.csv")


def _traces(tmp: Path) -> list[str]:
    """An OTLP JSON export of a retriever and a reranker for each of the example's queries, and its query set:
    the arguments ``traces`` reads them from."""
    judged: dict[str, list[str]] = {}
    for line in Path(QRELS).read_text(encoding="utf-8").splitlines():
        q, _, doc, _ = line.split()
        judged.setdefault(q, []).append(doc)
    spans = []
    for i, (q, docs) in enumerate(judged.items()):
        for j, (name, kind, ranked) in enumerate((("bm25", "RETRIEVER", docs), ("rerank", "RERANKER", docs[::-1][:3]))):
            prefix = "retrieval.documents" if kind == "RETRIEVER" else "reranker.output_documents"
            attributes = {"openinference.span.kind": kind, "input.value": f"question {q}"}
            attributes |= {f"{prefix}.{n}.document.id": d for n, d in enumerate(ranked)}
            start = 1_700_000_000_000_000_000 + i * 10**9 + j * 10**6
            spans.append({
                "traceId": f"{i + 1:032x}", "spanId": f"{2 * i + j + 1:016x}", "name": name,
                "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 500_000),
                "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
            })  # fmt: skip
    request = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}
    (tmp / "spans.jsonl").write_text(json.dumps(request) + "\n", encoding="utf-8")
    queries = "".join(json.dumps({"_id": q, "text": f"question {q}"}) + "\n" for q in judged)
    (tmp / "queries.jsonl").write_text(queries, encoding="utf-8")
    return [str(tmp / "spans.jsonl"), "--qrels", QRELS, "--queries", str(tmp / "queries.jsonl")]


def _traced_folder(tmp: Path) -> str:
    """A result folder of the stages recorded by :func:`_traces`: a snapshot ``drift`` reads."""
    assert _main(["traces", *_traces(tmp), "-o", str(tmp / "traced"), "--no-plots"]) == 0
    return str(tmp / "traced")


def _disjoint_qrels(tmp: Path) -> str:
    (tmp / "judge.qrels").write_text("q01 0 never-pooled#c1 1\nq77 0 api-guide#c06 2\n", encoding="utf-8")
    return str(tmp / "judge.qrels")


def _qs(tmp: Path) -> str:
    return str(tmp / "queries.jsonl")


def _result_folder(tmp: Path) -> str:
    qrels = Qrels.load(QRELS)
    report = rag_eval.evaluate(qrels, {"bm25": Run.load(BM25)}, ["P@10"])
    report.save_folder(tmp / "folder", qrels=qrels, runs={"bm25": Run.load(BM25)}, plots=False)
    return str(tmp / "folder")


def _everything_judged(tmp: Path) -> list[str]:
    (tmp / "run.trec").write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 1.0 x\n", encoding="utf-8")
    (tmp / "qrels.txt").write_text("q1 0 d1 1\nq1 0 d2 0\n", encoding="utf-8")
    return [str(tmp / "run.trec"), "--depth", "5", "--qrels", str(tmp / "qrels.txt")]


TUNE = ["--retriever", f"{__name__}:first", "--retriever", f"{__name__}:second", "--space", "alpha=0,1"]
TUNE += ["--resamples", "200"]
GRADES, FAILS, PIPELINE = f"{__name__}:grade_by_length", f"{__name__}:grade_fails", f"{__name__}:pipeline"

#: (command, exit status) -> the arguments that lead there, given a fresh folder
SCENARIOS: dict[tuple[str, int], Callable[[Path], list[str]]] = {
    ("evaluate", 0): lambda t: ["evaluate", QRELS, BM25, "--no-card"],
    ("evaluate", 2): lambda t: ["evaluate", str(t / "missing.txt"), BM25],
    ("compare", 0): lambda t: ["compare", QRELS, BM25, RERANK, "--no-card", "--permutations", "200"],
    ("compare", 2): lambda t: ["compare", QRELS, BM25, RERANK, "-m", "nosuch@10"],
    ("power", 0): lambda t: ["power", _report_file(t), "-m", "P@10"],
    ("power", 2): lambda t: ["power", str(t / "missing.parquet")],
    ("pool", 0): lambda t: ["pool", BM25, "--depth", "3", "-o", str(t / "pool.jsonl")],
    ("pool", 2): lambda t: ["pool", BM25, "--depth", "0", "-o", str(t / "pool.jsonl")],
    ("pool", 4): lambda t: ["pool", *_everything_judged(t), "-o", str(t / "pool.jsonl")],
    ("merge", 0): lambda t: ["merge", _judgement_log(t), "-o", str(t / "merged.qrels")],
    ("merge", 2): lambda t: ["merge", str(t / "missing.jsonl"), "-o", str(t / "merged.qrels")],
    ("merge", 4): lambda t: ["merge", _judgement_log(t, empty=True), "-o", str(t / "merged.qrels")],
    ("label", 0): lambda t: ["label", _pool_file(t), "-o", str(t / "labels.qrels"), "--assessor", "alice"],
    ("label", 2): lambda t: ["label", str(t / "missing.jsonl"), "-o", str(t / "labels.qrels")],
    ("judge", 0): lambda t: ["judge", _pool_file(t, texts=True), "--judge", GRADES, "-o", str(t / "judge.jsonl")],
    ("judge", 2): lambda t: ["judge", str(t / "missing.jsonl"), "--judge", GRADES, "-o", str(t / "judge.jsonl")],
    ("judge", 4): lambda t: ["judge", _pool_file(t, texts=True), "--judge", FAILS, "-o", str(t / "judge.jsonl")],
    ("agreement", 0): lambda t: ["agreement", QRELS, QRELS],
    ("agreement", 2): lambda t: ["agreement", QRELS, QRELS, QRELS],
    ("agreement", 4): lambda t: ["agreement", QRELS, _disjoint_qrels(t)],
    ("human-sample", 0): lambda t: ["human-sample", _pool_file(t), "-n", "3", "-o", str(t / "sample.json")],
    ("human-sample", 2): lambda t: ["human-sample", _pool_file(t), "-n", "1", "-o", str(t / "sample.json")],
    ("estimate", 0): lambda t: ["estimate", *_human_reports(t)],
    ("estimate", 2): lambda t: ["estimate", "--judge-report", str(t / "no"), "--human-report", str(t / "no")],
    ("queries", 0): lambda t: ["queries", "sample", _log_csv(t), "-n", "3", "--no-near-duplicates", "-o", _qs(t)],
    ("queries", 2): lambda t: ["queries", "sample", str(t / "missing.csv"), "-n", "3", "-o", str(t / "q.jsonl")],
    ("report", 0): lambda t: ["report", _result_folder(t), "-o", str(t / "report.html"), "--no-plots"],
    ("report", 2): lambda t: ["report", str(t / "missing"), "-o", str(t / "report.html")],
    ("gate", 0): lambda t: _gate(t, [5] * 30, [6] * 20 + [5] * 10, "--test", "t"),
    ("gate", 1): lambda t: _gate(t, [5] * 30, [3] * 20 + [4] * 10, "--test", "t", "--junit", str(t / "junit.xml")),
    ("gate", 2): lambda t: ["gate", str(t / "missing"), str(t / "missing2"), "-m", "P@10", "--max-drop", "0.05"],
    ("gate", 3): lambda t: _gate(t, [5] * 6, [2, 6, 3, 5, 4, 6], "--test", "t"),
    ("tune", 0): lambda t: ["tune", "--beir", str(BEIR), *TUNE, "--no-plots", "-o", str(t / "tuned")],
    ("tune", 2): lambda t: ["tune", "--beir", str(t / "missing"), *TUNE],
    ("bench", 0): lambda t: ["bench", "--beir", str(BEIR), "--pipeline", PIPELINE, "-o", str(t / "bench")],
    ("bench", 2): lambda t: ["bench", "--beir", str(t / "missing")],
    ("bench", 4): lambda t: ["bench", "--beir", str(BEIR), "--pipeline", f"{__name__}:down", "-o", str(t / "b")],
    ("answers", 0): lambda t: _answers(t, "short_answer"),
    ("answers", 2): lambda t: ["answers", str(t / "missing"), "--beir", str(BEIR), "--references", str(t / "r.jsonl")],
    ("answers", 4): lambda t: _answers(t, "no_answer"),
    ("traces", 0): lambda t: ["traces", *_traces(t), "-o", str(t / "traced"), "--no-plots"],
    ("traces", 2): lambda t: ["traces", *_traces(t), "--budget", "4", "-o", str(t / "traced")],
    ("drift", 0): lambda t: ["drift", *[_traced_folder(t)] * 2, "--qrels", QRELS],
    ("drift", 2): lambda t: ["drift", str(t / "missing"), str(t / "missing2"), "--qrels", QRELS],
    ("demo", 0): lambda t: ["demo", "-o", str(t / "demo"), "--no-plots"],
    ("demo", 2): lambda t: ["demo", "-o", _a_file(t)],
}
SLOW = {("demo", 0), ("demo", 2)}  # the demo encodes 1,500 docstring chunks with MiniLM


def _a_file(tmp: Path) -> str:
    (tmp / "a-file").write_text("not a folder\n", encoding="utf-8")
    return str(tmp / "a-file" / "demo")


def test_the_table_lists_every_command_and_every_case_is_run():
    parser = build_parser()
    (commands,) = [a for a in parser._actions if a.dest == "command"]
    listed = {command for command, _, _ in ROWS}
    assert listed == set(commands.choices), "every command of the parser has its rows in docs/cli.md, no other"
    assert {(command, code) for command, code, _ in ROWS} == set(SCENARIOS)
    assert len(ROWS) == len(SCENARIOS)  # no row twice
    for command in listed:
        assert (command, 0) in SCENARIOS and (command, 2) in SCENARIOS  # done, and bad input, for every command


class _Gone:
    """A stdout whose reader has gone: every write and flush is a broken pipe."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        raise OSError("no descriptor")

    def isatty(self) -> bool:
        return False


def _cases():
    for command, code, _ in ROWS:
        for stdout in ("stdout", "stdout gone"):
            marks = [pytest.mark.slow] if (command, code) in SLOW else []
            yield pytest.param(command, code, stdout, id=f"{command}-{code}-{stdout.replace(' ', '-')}", marks=marks)


@pytest.mark.parametrize(("command", "code", "stdout"), list(_cases()))
def test_each_exit_status_of_the_table(command, code, stdout, tmp_path, monkeypatch, capsys):
    argv = SCENARIOS[(command, code)](tmp_path)
    monkeypatch.chdir(tmp_path)
    if command == "label" and code == 0:
        status, err = _label_until_ctrl_c(argv, tmp_path, gone=stdout == "stdout gone")
    else:
        if stdout == "stdout gone":
            monkeypatch.setattr(sys, "stdout", _Gone())
        status = _main(argv)
        err = capsys.readouterr().err
    assert status == code, err
    assert "Traceback" not in err
    if code == 2:
        assert len([line for line in err.splitlines() if line.startswith("rag-eval: error: ")]) == 1, err
    if code == 4:
        assert "exit 4" in err
    if (command, code) == ("gate", 1):  # the JUnit file says what the status says
        failures = ET.parse(tmp_path / "junit.xml").getroot().findall(".//failure")
        assert [f.get("type") for f in failures] == ["regression"]
    if (command, code) == ("judge", 4):
        assert "20 failed" in err or re.search(r"\b(\d+) failed", err)
    if (command, code) == ("pool", 4):  # the empty pool is written: the file says what is true
        assert (tmp_path / "pool.jsonl").exists()


def _main(argv: list[str]) -> int:
    """``rag-eval ARGV`` in this process, its warnings printed as a user sees them (not raised, as in the tests)."""
    with pytest.MonkeyPatch.context() as warned:
        warned.setattr("warnings.filters", [("default", None, Warning, None, 0)])
        return main(argv)


def _label_until_ctrl_c(argv: list[str], tmp: Path, *, gone: bool) -> tuple[int, str]:
    """rag-eval label in a process of its own, stopped by Ctrl-C (SIGINT) once it serves; with ``gone``, its stdout
    is closed before it prints its last line."""
    child = subprocess.Popen(
        [sys.executable, "-m", "rag_eval", *argv, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp,
        # Ctrl-C as a terminal sends it: a suite started in the background (`cmd &`, nohup) ignores SIGINT, and a
        # child inherits that, so the Ctrl-C below would not stop it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        line = child.stdout.readline()
        assert "labelling" in line, line + child.stderr.read()
        url = re.search(r"http://127\.0\.0\.1:\d+/?", line)[0]
        with urllib.request.urlopen(url, timeout=30) as page:  # it serves: Ctrl-C now stops the server
            assert page.status == 200
        if gone:
            child.stdout.close()
        child.send_signal(signal.SIGINT)
        status = child.wait(timeout=60)
        return status, child.stderr.read()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()


def test_a_regressing_gate_whose_reader_has_gone_still_exits_1(tmp_path):
    """The case found: `rag-eval gate ... | head -0` in a real pipe; the status and the JUnit file agree."""
    argv = _gate(tmp_path, [5] * 30, [3] * 20 + [4] * 10, "--test", "t", "--junit", str(tmp_path / "junit.xml"))
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before the gate writes a byte
    try:
        done = subprocess.run(
            [sys.executable, "-m", "rag_eval", *argv], stdout=writer, stderr=subprocess.PIPE, text=True, timeout=120
        )
    finally:
        os.close(writer)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
    assert ET.parse(tmp_path / "junit.xml").getroot().find(".//failure").get("type") == "regression"


def test_a_judge_that_fails_on_every_item_exits_4_and_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pool = _pool_file(tmp_path, texts=True)
    from rag_eval.ground_truth import Pool

    items = len(Pool.load(pool))
    assert items == 20
    status = _main(["judge", pool, "--judge", FAILS, "-o", str(tmp_path / "log.jsonl")])
    captured = capsys.readouterr()
    assert status == 4
    assert f"0 graded now, 0 from the log, {items} failed" in captured.err
    assert f"rag-eval: {items} of {items} items not graded (listed on stdout): exit 4" in captured.err
    assert len(captured.out.strip().splitlines()) == items + 1  # the CSV of the failures, with its header
    # run again with a judge that works: only the failed are asked, and the pool is graded
    assert _main(["judge", pool, "--judge", GRADES, "-o", str(tmp_path / "log.jsonl")]) == 0
    assert f"{items} graded now" in capsys.readouterr().err


def test_stdout_gone_drops_the_output_but_not_the_written_files(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", _Gone())
    assert main(["pool", BM25, "--depth", "2", "-o", str(tmp_path / "pool.jsonl")]) == 0
    lines = (tmp_path / "pool.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])  # the pool is written whole
    assert "Traceback" not in capsys.readouterr().err
