"""Issue 27, class 6: every command's outputs on a real full disk (a 64 KiB tmpfs, filled first). Each command that
writes a file is run with that file (or folder) on the full disk, twice: where nothing was, and over the outputs of
an earlier run. Each must exit 2 with one line on stderr naming the file, print no traceback, and leave nothing
half-written: no new file where nothing was (no 0-byte file, no temporary), the earlier outputs byte for byte. The
commands that write only to stdout are run with stdout redirected into the full disk. The cases are enumerated from
the parser: a new command without a case fails here."""

from __future__ import annotations

import errno
import http.client
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rag_eval.cli import build_parser

from .test_exit_codes import BEIR as BEIR_FOLDER
from .test_exit_codes import (
    BM25,
    GRADES,
    PIPELINE,
    QRELS,
    RERANK,
    TUNE,
    _answers,
    _gate,
    _human_reports,
    _judgement_log,
    _log_csv,
    _pool_file,
    _report_file,
    _result_folder,
    _traced_folder,
    _traces,
)

BEIR = str(BEIR_FOLDER)

#: command -> (inputs folder, output folder on the disk) -> (the arguments, the output they write: a file or folder)
WRITERS: dict[str, Callable[[Path, Path], tuple[list[str], Path]]] = {
    "pool": lambda t, d: (["pool", BM25, "--depth", "3", "-o", str(d / "pool.jsonl")], d / "pool.jsonl"),
    "merge": lambda t, d: (["merge", _judgement_log(t), "-o", str(d / "merged.qrels")], d / "merged.qrels"),
    "judge": lambda t, d: (
        ["judge", _pool_file(t, texts=True), "--judge", GRADES, "-o", str(d / "judge.jsonl")],
        d / "judge.jsonl",
    ),
    "human-sample": lambda t, d: (["human-sample", _pool_file(t), "-n", "3", "-o", str(d / "s.json")], d / "s.json"),
    "queries": lambda t, d: (
        ["queries", "sample", _log_csv(t), "-n", "3", "--no-near-duplicates", "-o", str(d / "q.jsonl")],
        d / "q.jsonl",
    ),
    "report": lambda t, d: (["report", _result_folder(t), "-o", str(d / "r.html"), "--no-plots"], d / "r.html"),
    "tune": lambda t, d: (
        ["tune", "--beir", BEIR, *TUNE, "--cache", str(t / "cache"), "-o", str(d / "tuned")],
        d / "tuned",
    ),
    "bench": lambda t, d: (
        ["bench", "--beir", BEIR, "--pipeline", PIPELINE, "--cache", str(t / "cache"), "-o", str(d / "bench")],
        d / "bench",
    ),
    "demo": lambda t, d: (["demo", "-o", str(d / "demo"), "--no-plots"], d / "demo"),
    "traces": lambda t, d: (["traces", *_traces(t), "-o", str(d / "traced"), "--no-plots"], d / "traced"),
    "drift": lambda t, d: (
        ["drift", *[_traced_folder(t)] * 2, "--qrels", QRELS, "-o", str(d / "drift.html")],
        d / "drift.html",
    ),
    "answers": lambda t, d: (
        [*_answers(t, "short_answer")[:-1], str(d / "answers"), "--cache", str(t / "cache")],
        d / "answers",
    ),
}
#: gate writes three kinds of output: each its own case
GATE: dict[str, Callable[[Path, Path], tuple[list[str], Path]]] = {
    "junit": lambda t, d: (_gate(t, [5] * 30, [3] * 20 + [4] * 10, "--junit", str(d / "j.xml")), d / "j.xml"),
    "markdown": lambda t, d: (_gate(t, [5] * 30, [3] * 20 + [4] * 10, "--markdown", str(d / "s.md")), d / "s.md"),
    "candidate folder": lambda t, d: (_gate_pipeline(t, d / "cand"), d / "cand"),
}
#: a cache on the full disk (bench's default, OUT/cache): one line naming it, exit 2, as for an output
CACHE: dict[str, Callable[[Path, Path], tuple[list[str], Path]]] = {
    "bench cache": lambda t, d: (["bench", "--beir", BEIR, "--pipeline", PIPELINE, "-o", str(d / "b")], d / "b"),
}
#: commands that write no file: stdout is their output, redirected into the full disk
STDOUT_ONLY: dict[str, Callable[[Path], list[str]]] = {
    "evaluate": lambda t: ["evaluate", QRELS, BM25, "--no-card"],
    "compare": lambda t: ["compare", QRELS, BM25, RERANK, "--no-card", "--permutations", "200"],
    "power": lambda t: ["power", _report_file(t), "-m", "P@10"],
    "agreement": lambda t: ["agreement", QRELS, QRELS],
    "estimate": lambda t: ["estimate", *_human_reports(t)],
}
SLOW = {"demo"}  # refused at its write check before encoding; marked slow all the same (it imports the models)
OUTPUT_FLAGS = {"-o", "--out", "--junit", "--markdown"}


def _gate_pipeline(tmp: Path, out: Path) -> list[str]:
    rule = ["-m", "recall@budget", "--max-drop", "0.5"]
    return ["gate", _bench_folder(tmp), "--pipeline", PIPELINE, "--beir", BEIR, "--cache", str(tmp / "cache"), *rule,
            "-o", str(out)]  # fmt: skip


def _bench_folder(tmp: Path) -> str:
    from .test_exit_codes import _main

    assert _main(["bench", "--beir", BEIR, "--pipeline", PIPELINE, "--cache", str(tmp / "cache"), "-o",
                 str(tmp / "base")]) == 0  # fmt: skip
    return str(tmp / "base")


def _flags(parser) -> dict[str, set[str]]:
    """Every command (``queries sample`` as ``queries``) and its option strings."""
    (commands,) = [a for a in parser._actions if a.dest == "command"]
    flags = {}
    for name, sub in commands.choices.items():
        options = {s for a in sub._actions for s in a.option_strings}
        for action in sub._actions:
            if action.dest == "queries_command":
                options |= {s for child in action.choices.values() for a in child._actions for s in a.option_strings}
        flags[name] = options
    return flags


def test_every_command_has_a_full_disk_case():
    flags = _flags(build_parser())
    assert set(flags) == set(WRITERS) | {"gate", "label"} | set(STDOUT_ONLY)
    assert not set(WRITERS) & set(STDOUT_ONLY)
    for command in STDOUT_ONLY:
        assert not flags[command] & OUTPUT_FLAGS, f"{command} writes a file now: give it a case in WRITERS"
    for command in (*WRITERS, "gate", "label"):
        assert flags[command] & OUTPUT_FLAGS


# ----- the disk ----------------------------------------------------------------------------------------------------


def _fill(disk: Path) -> None:
    """Fill the file system of ``disk`` to the last byte."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (4096, 1):
            while True:
                try:
                    os.write(fd, b"\0" * size)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)


def _remount(disk: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(disk)], check=True, capture_output=True)


def _snapshot(disk: Path) -> dict[str, bytes | None]:
    """Every file and folder under ``disk``: its bytes (None for a folder); but the filler, and a judgement log's
    lock file (``LOG.lock``, empty by design: the lock lives as long as the log, docs/cli.md)."""
    return {
        str(p.relative_to(disk)): (None if p.is_dir() else p.read_bytes())
        for p in sorted(disk.rglob("*"))
        if p.name != "filler" and not (p.name.endswith(".jsonl.lock") and p.stat().st_size == 0)
    }


def _run(argv: list[str], cwd: Path, *, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rag_eval", *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        timeout=1800,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )


def _refused(done: subprocess.CompletedProcess, output: Path) -> None:
    """Exit 2, one line naming the output (the file or one in the folder), no traceback."""
    errors = [line for line in done.stderr.splitlines() if line.startswith("rag-eval: error: ")]
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert len(errors) == 1, done.stderr
    assert str(output) in errors[0] and ("No space left on device" in errors[0]), errors[0]


def _cases():
    for command in sorted(WRITERS):
        for before in ("nothing", "earlier outputs"):
            marks = [pytest.mark.slow] if command in SLOW else []
            yield pytest.param(command, before, id=f"{command}-over-{before.replace(' ', '-')}", marks=marks)
    for output in sorted(GATE):
        for before in ("nothing", "earlier outputs"):
            yield pytest.param(f"gate {output}", before, id=f"gate-{output.replace(' ', '-')}-over-{before}")
    yield pytest.param("bench cache", "nothing", id="bench-with-its-cache-on-the-disk")


APPENDED = {"judge", "gate markdown"}  # their output is appended to, never replaced


@pytest.mark.parametrize(("command", "before"), list(_cases()))
def test_a_full_disk_is_one_line_exit_2_and_nothing_half_written(command, before, tmpfs, tmp_path):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    case = GATE[command.removeprefix("gate ")] if command.startswith("gate ") else {**WRITERS, **CACHE}[command]
    argv, output = case(inputs, tmpfs)
    if before == "earlier outputs":
        _remount(tmpfs, "size=16m")
        earlier = argv if command != "judge" else [*argv, "--human", _half_graded(argv[1], inputs)]
        done = _run(earlier, inputs)
        assert done.returncode in ((0, 1) if command.startswith("gate") else (0,)), done.stderr
        assert output.exists()
        if command == "gate markdown":  # its last page filled (tmpfs gives a file whole pages): no byte fits
            size = output.stat().st_size
            output.write_bytes(output.read_bytes() + b"x" * ((-size - 1) % PAGE) + b"\n")
        elif command not in APPENDED:  # marked: a file replaced, even by the same bytes, loses the mark
            for path in [output] if output.is_file() else sorted(output.rglob("*")):
                if path.is_file():
                    path.write_bytes(path.read_bytes() + b"\n")
        disk = os.statvfs(tmpfs)
        _remount(tmpfs, f"size={(disk.f_blocks - disk.f_bfree) * disk.f_frsize + 64 * 1024}")  # 64 KiB free
    _fill(tmpfs)
    kept = _snapshot(tmpfs)
    done = _run(argv, inputs)
    _refused(done, output)
    after = _snapshot(tmpfs)
    if command == "judge" and before == "earlier outputs":  # a resumable log: batches that fitted are kept whole
        old, new = kept.pop(output.name), after.pop(output.name)
        assert new.startswith(old) and new.endswith(b"\n")
        assert all(json.loads(line)["query_id"] for line in new.splitlines())
    if command == "bench cache":  # the cache's folders are made before its first shard: empty, they are left
        after = {n: data for n, data in after.items() if data is not None or _holds_a_file(tmpfs / n)}
    assert after == kept  # nothing new, nothing changed, no temporary


PAGE = 4096


def _holds_a_file(folder: Path) -> bool:
    return any(p.is_file() for p in folder.rglob("*"))


def _half_graded(pool: str, inputs: Path) -> str:
    """Qrels grading every other item of ``pool``: judge --human leaves those out, so that a run without it has
    items to append."""
    from rag_eval.ground_truth import Pool

    items = Pool.load(pool).items[::2]
    (inputs / "people.qrels").write_text("".join(f"{i.query_id} 0 {i.doc_id} 1\n" for i in items), encoding="utf-8")
    return str(inputs / "people.qrels")


def test_stdout_into_a_full_disk_is_one_line_and_exit_2(tmpfs, tmp_path):
    """The commands whose output is stdout: redirected into a full disk, each says so and exits 2."""
    _fill(tmpfs)
    for command, make in STDOUT_ONLY.items():
        with open(tmpfs / f"{command}.out", "wb") as stdout:
            done = _run(make(tmp_path), tmp_path, stdout=stdout)
        errors = [line for line in done.stderr.splitlines() if line.startswith("rag-eval: error: ")]
        assert done.returncode == 2 and "Traceback" not in done.stderr, (command, done.stderr)
        assert errors == [
            f"rag-eval: error: stdout ({tmpfs / f'{command}.out'}): cannot write the output: No space left on device"
        ], command


@pytest.mark.parametrize("before", ["nothing", "earlier outputs"])
def test_label_on_a_full_disk_answers_507_and_exits_2(before, tmpfs, tmp_path):
    """rag-eval label writes per grade: on a full disk the page is answered 507 (the grade not acknowledged), and
    when it is stopped the command says which file could not be written and exits 2, leaving nothing half-written."""
    out = tmpfs / "labels.qrels"
    pool = _pool_file(tmp_path)
    if before == "earlier outputs":
        line = "q01 0 {} 0\n"  # one judgement whose doc id fills the file's page: not a byte more fits
        out.write_text(line.format("p" * (PAGE - len(line.format("")))), encoding="utf-8")
        assert out.stat().st_size == PAGE
    _fill(tmpfs)
    kept = _snapshot(tmpfs)
    child = subprocess.Popen(
        [sys.executable, "-m", "rag_eval", "label", pool, "-o", str(out), "--assessor", "alice", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        # Ctrl-C as a terminal sends it: a suite started in the background (`cmd &`, nohup) ignores SIGINT, and a
        # child inherits that, so the Ctrl-C below would not stop it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        line = child.stdout.readline()
        assert "labelling" in line, line + child.stderr.read()
        url = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        connection = http.client.HTTPConnection("127.0.0.1", int(url[1]), timeout=30)
        connection.request("GET", "/", headers={"Host": f"127.0.0.1:{url[1]}"})
        page = connection.getresponse().read().decode()
        token = re.search(r'name="rag-eval-token" content="([^"]+)"', page)[1]
        headers = {"Host": f"127.0.0.1:{url[1]}", "X-Rag-Eval-Token": token, "Content-Type": "application/json"}
        connection.request("POST", "/api/judge", body=json.dumps({"index": 0, "grade": 2}), headers=headers)
        answer = connection.getresponse()
        assert answer.status == 507, answer.read()
        assert "No space left on device" in json.loads(answer.read())["error"]
        connection.close()
        child.send_signal(signal.SIGINT)
        status = child.wait(timeout=60)
        err = child.stderr.read()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()
    errors = [line for line in err.splitlines() if line.startswith("rag-eval: error: ")]
    assert status == 2 and "Traceback" not in err, err
    assert len(errors) == 1 and f"{out}.judgements.jsonl: 1 grade(s) not saved" in errors[0], err
    assert "No space left on device" in errors[0]
    assert _snapshot(tmpfs) == kept
