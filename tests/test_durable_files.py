"""The durable-I/O module (rag_eval/_files.py) under injected faults: a short os.write, ENOSPC, a failing fsync;
what each writer of rag_eval makes of them; and a scan that keeps os.replace, fsync and O_APPEND inside the module."""

from __future__ import annotations

import ast
import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag_eval import Qrels, Run
from rag_eval._files import TEMPORARY_SUFFIX, append, atomic_write, file_lock, remove_temporaries
from rag_eval.errors import HarnessError, InputError
from rag_eval.ground_truth import JudgementLog, merge

from .conftest import ROOT


def _path_of(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


def _faulty_write(monkeypatch, match: str, *, after: int = 0, short: int | None = None, error: int | None = None):
    """Make ``os.write`` on files whose path contains ``match`` fail after ``after`` good writes: take only ``short``
    bytes (then nothing: 0), or raise OSError ``error``."""
    real = os.write
    seen = []

    def write(fd, data):
        if match in _path_of(fd):
            seen.append(len(data))
            if len(seen) > after:
                if error is not None:
                    raise OSError(error, os.strerror(error))
                if short is not None and len(seen) == after + 1:
                    return real(fd, bytes(data)[:short])
                return 0
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    return seen


def _failing_fsync(monkeypatch, code: int = errno.EIO):
    def fsync(fd):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", fsync)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if TEMPORARY_SUFFIX in p.name or p.name.endswith(".tmp"))


# ----- atomic replace -----------------------------------------------------------------------------------------


def test_atomic_write_fsyncs_the_file_then_renames_then_fsyncs_the_folder(tmp_path, monkeypatch):
    target = tmp_path / "out.txt"
    target.write_bytes(b"old\n")
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", _path_of(fd))), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("replace", os.fspath(b))), real_replace(a, b))[1])
    assert atomic_write(target, [b"new ", b"content\n"]) == target
    assert target.read_bytes() == b"new content\n"
    assert [kind for kind, _ in events] == ["fsync", "replace", "fsync"]
    assert events[0][1].endswith(TEMPORARY_SUFFIX) and events[1][1] == str(target) and events[2][1] == str(tmp_path)
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("fault", ["short", "enospc", "fsync"])
def test_a_failed_atomic_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch, fault):
    target = tmp_path / "out.txt"
    target.write_bytes(b"old\n")
    if fault == "short":
        _faulty_write(monkeypatch, TEMPORARY_SUFFIX, short=3)  # 3 bytes go down, then nothing more
    elif fault == "enospc":
        _faulty_write(monkeypatch, TEMPORARY_SUFFIX, error=errno.ENOSPC)
    else:
        _failing_fsync(monkeypatch)
    with pytest.raises(OSError) as info:
        atomic_write(target, b"a much longer new content\n")
    assert info.value.errno == {"short": errno.ENOSPC, "enospc": errno.ENOSPC, "fsync": errno.EIO}[fault]
    assert target.read_bytes() == b"old\n"
    assert _leftovers(tmp_path) == []


def test_atomic_write_goes_through_a_symlink_and_keeps_the_permissions(tmp_path):
    real = tmp_path / "data" / "real.qrels"
    real.parent.mkdir()
    real.write_text("old\n")
    real.chmod(0o600)
    link = tmp_path / "link.qrels"
    link.symlink_to(real)
    assert atomic_write(link, b"new\n") == real
    assert link.is_symlink() and real.read_text() == "new\n" and (real.stat().st_mode & 0o777) == 0o600
    assert _leftovers(real.parent) == [] and _leftovers(tmp_path) == []


def test_temporaries_of_dead_processes_are_removed_and_live_ones_kept(tmp_path):
    target = tmp_path / "out.qrels"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = int(dead.stdout)
    names = [
        f".out.qrels.{gone}.7{TEMPORARY_SUFFIX}",
        f".out.qrels.{gone}.7.tmp",
        "out.qrels.partial",
        f".out.qrels.{os.getpid()}.7{TEMPORARY_SUFFIX}",
        f".other.{gone}.7{TEMPORARY_SUFFIX}",
        "out.qrels",
    ]
    for name in names:
        (tmp_path / name).write_text("x")
    removed = remove_temporaries(target)
    assert sorted(p.name for p in removed) == sorted(names[:3])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[3:])
    assert [p.name for p in remove_temporaries(tmp_path, every=True)] == [f".other.{gone}.7{TEMPORARY_SUFFIX}"]


# ----- append log ---------------------------------------------------------------------------------------------


def test_append_writes_on_after_os_write_takes_part_of_a_line(tmp_path, monkeypatch):
    log = tmp_path / "log.jsonl"
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real(fd, bytes(data)[:5]))  # 5 bytes a call, never more
    assert append(log, b"0123456789abc\n") == 0
    assert append(log, b"second\n") == 14
    assert log.read_bytes() == b"0123456789abc\nsecond\n"


@pytest.mark.parametrize("fault", ["short", "enospc", "fsync"])
def test_a_failed_append_is_truncated_back_to_where_it_started(tmp_path, monkeypatch, fault):
    log = tmp_path / "log.jsonl"
    append(log, b"first line\n")
    if fault == "short":
        _faulty_write(monkeypatch, "log.jsonl", short=4)
    elif fault == "enospc":
        _faulty_write(monkeypatch, "log.jsonl", error=errno.ENOSPC)
    else:
        _failing_fsync(monkeypatch)
    with pytest.raises(OSError):
        append(log, b"second line, never whole\n")
    assert log.read_bytes() == b"first line\n"  # no fragment for the next append to be glued to
    monkeypatch.undo()
    append(log, b"third\n")
    assert log.read_bytes() == b"first line\nthird\n"


def test_a_torn_tail_is_cut_before_the_next_append_and_a_whole_one_gets_its_newline(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_bytes(b'{"a": 1}\n{"a": 2')  # killed mid-line
    assert append(log, b'{"a": 3}\n', whole=lambda tail: tail == b'{"a": 1}') == 9
    assert log.read_bytes() == b'{"a": 1}\n{"a": 3}\n'
    log.write_bytes(b'{"a": 1}\n{"a": 2}')  # whole, without its newline
    append(log, b'{"a": 3}\n', whole=lambda tail: json.loads(tail) == {"a": 2})
    assert log.read_bytes() == b'{"a": 1}\n{"a": 2}\n{"a": 3}\n'
    log.write_bytes(b"x" * 200_000)  # one torn line longer than the tail is read in
    append(log, b"ok\n")
    assert log.read_bytes() == b"ok\n"


def test_file_lock_without_blocking_refuses_at_once_while_another_holds_it(tmp_path):
    lock = tmp_path / "x.lock"
    with (
        file_lock(lock, exclusive=True),
        pytest.raises(BlockingIOError),
        file_lock(lock, exclusive=True, blocking=False),
    ):
        pass
    with file_lock(lock, exclusive=True, blocking=False):  # free again
        pass


# ----- the writers of rag_eval ----------------------------------------------------------------------------------


def test_the_judgement_log_on_a_full_disk_refuses_the_grade_and_stays_readable(tmp_path, monkeypatch):
    """The issue's case: a short os.write when the disk filled left a torn fragment that the next grades were
    appended to (``...jsonl:34: not valid JSON``). Now the grade is refused and the log stays whole."""
    path = tmp_path / "out.qrels.judgements.jsonl"
    log = JudgementLog.open(path)
    log.append("q1", "d1", 2, assessor="alice")
    _faulty_write(monkeypatch, "judgements.jsonl", short=17)
    with pytest.raises(
        HarnessError,
        match=r"judgement log .*out.qrels.judgements.jsonl: cannot store the judgement "
        r"of query 'q1', doc 'd2': no byte written \(is the disk full\?\); it is not in the log",
    ):
        log.append("q1", "d2", 3, assessor="alice")
    _failing_fsync(monkeypatch, errno.ENOSPC)
    with pytest.raises(HarnessError, match="doc 'd3'"):
        log.append("q1", "d3", 1, assessor="alice")
    monkeypatch.undo()  # space freed
    log.append("q1", "d4", 0, assessor="alice")
    assert [(j.doc_id, j.grade) for j in JudgementLog.load(path)] == [("d1", 2), ("d4", 0)]  # no warning: whole
    assert [(j.doc_id, j.grade) for j in log] == [("d1", 2), ("d4", 0)]
    assert merge(None, path).qrels.to_dict() == {"q1": {"d1": 2, "d4": 0}}


def test_a_torn_tail_left_by_another_process_is_cut_before_this_one_appends(tmp_path):
    path = tmp_path / "log.jsonl"
    log = JudgementLog.open(path)
    log.append("q1", "d1", 2, assessor="alice")
    with open(path, "ab") as other:  # another process killed mid-line, after this log was opened
        other.write(b'{"query_id": "q1", "doc_id": "TO')
    log.append("q1", "d2", 1, assessor="alice")
    assert [j.doc_id for j in JudgementLog.load(path)] == ["d1", "d2"]


@pytest.mark.parametrize("writer", ["qrels", "run", "pool"])
def test_user_output_files_are_replaced_whole_or_kept(tmp_path, monkeypatch, writer):
    from rag_eval.ground_truth import pool

    qrels = Qrels.from_dict({"q1": {"d1": 1, "d2": 0}})
    run = Run.from_ranking({"q1": ["d1", "d2"]}, name="bm25")
    write = {"qrels": qrels.to_trec, "run": run.to_trec, "pool": pool({"bm25": run}, depth=2).save}[writer]
    out = tmp_path / "out.txt"
    write(out)
    first = out.read_bytes()
    assert first.count(b"\n") == 2
    out.write_bytes(b"old content\n")
    _faulty_write(monkeypatch, TEMPORARY_SUFFIX, short=5)
    with pytest.raises(InputError) as info:
        write(out)
    assert str(info.value) == (
        f"{out}: cannot write the file: no byte written (is the disk full?) (nothing was "
        "changed: the file keeps its old content, if it had one)"
    )
    assert out.read_bytes() == b"old content\n" and _leftovers(tmp_path) == []
    monkeypatch.undo()
    write(out)
    assert out.read_bytes() == first and _leftovers(tmp_path) == []


def test_a_large_run_is_written_in_batches_not_one_call_per_line(tmp_path, monkeypatch):
    run = Run.from_ranking({f"q{i}": [f"d{j}" for j in range(100)] for i in range(300)}, name="big")
    calls = []
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: (calls.append(len(data)), real(fd, data))[1])
    run.to_trec(tmp_path / "big.run")
    assert len(calls) < 5 and sum(calls) == (tmp_path / "big.run").stat().st_size
    assert Run.from_trec(tmp_path / "big.run").to_dict() == run.to_dict()


# ----- one module owns them ---------------------------------------------------------------------------------------

FORBIDDEN = {"replace", "rename", "renames", "fsync", "fdatasync", "O_APPEND"}


def _forbidden_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in FORBIDDEN
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            found.append(f"{name}:{node.lineno}: os.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            found.extend(f"{name}:{node.lineno}: from os import {a.name}" for a in node.names if a.name in FORBIDDEN)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("replace", "rename")
            and len(node.args) == 1
            and not node.keywords
        ):
            # Path.replace(target) and Path.rename(target): os.replace in disguise (str.replace takes two)
            found.append(f"{name}:{node.lineno}: .{node.func.attr}(target)")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "open"
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and "a" in str(node.args[1].value)
        ):
            found.append(f"{name}:{node.lineno}: open(..., {node.args[1].value!r})")
    return sorted(found, key=lambda use: int(use.split(":")[1]))


def test_replace_fsync_and_append_live_only_in_the_durable_io_module():
    files = sorted((ROOT / "rag_eval").rglob("*.py")) + sorted((ROOT / "adapters").rglob("*.py"))
    assert len(files) > 30
    durable = ROOT / "rag_eval" / "_files.py"
    assert _forbidden_uses(durable)  # the scan sees them where they are
    offenders = [use for path in files if path != durable for use in _forbidden_uses(path)]
    assert offenders == []


def test_the_scan_catches_each_spelling(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\nfrom os import fsync\nos.replace('a', 'b')\nos.open('x', os.O_APPEND)\n"
        "open('x', 'ab')\nos.fdatasync(1)\nopen('x', 'rb')\n'x'.replace('a', 'b')\npartial.replace(path)\n"
        "frame.rename(columns={'a': 'b'})\n"
    )
    assert _forbidden_uses(sample) == [
        "sample.py:2: from os import fsync",
        "sample.py:3: os.replace",
        "sample.py:4: os.O_APPEND",
        "sample.py:5: open(..., 'ab')",
        "sample.py:6: os.fdatasync",
        "sample.py:9: .replace(target)",
    ]


# every file written goes through the module: no plain open for writing, write_text, savefig(path), to_csv(path),
# json.dump(..., file), np.save(path), pyarrow's write_table(..., path), shutil.copy outside it
_WRITE_MODE = set("wax+")
_SINKS = {"buffer", "sink", "stream", "file"}  # in-memory buffers, or the file _files.atomic_write hands a callback
_DESTINATION = {"to_csv": 0, "to_parquet": 0, "to_json": 0, "to_feather": 0, "to_excel": 0, "to_pickle": 0}
_DESTINATION |= {"savefig": 0, "tofile": 0, "write_table": 1, "savetxt": 0, "savez": 0, "savez_compressed": 0}
_MODULE_DESTINATION = {("np", "save"): 0, ("numpy", "save"): 0, ("json", "dump"): 1, ("pickle", "dump"): 1}
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"}
#: rag_eval's own writers that share a pandas name (each writes through the module)
_OWN_WRITERS = {"pooled.to_csv"}  # Pool.to_csv


def _plain_writes(path: Path) -> list[str]:
    """Each call in ``path`` that writes a file by itself rather than through rag_eval/_files.py."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f, where = node.func, f"{name}:{node.lineno}"
        module = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
        mode = next((k.value for k in node.keywords if k.arg == "mode"), None)
        if (isinstance(f, ast.Name) and f.id == "open") or (isinstance(f, ast.Attribute) and f.attr == "fdopen"):
            mode = mode or (node.args[1] if len(node.args) > 1 else None)
            if mode is not None and (not isinstance(mode, ast.Constant) or set(str(mode.value)) & _WRITE_MODE):
                found.append(f"{where}: open for writing")
        elif isinstance(f, ast.Attribute) and f.attr == "open" and module == "os":
            flags = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)} & _WRITE_FLAGS
            devnull = bool(node.args) and isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "devnull"
            if flags and not devnull:
                found.append(f"{where}: os.open for writing")
        elif isinstance(f, ast.Attribute) and f.attr == "open":  # Path.open(mode)
            mode = mode or (node.args[0] if node.args and isinstance(node.args[0], ast.Constant) else None)
            if mode is not None and (not isinstance(mode, ast.Constant) or set(str(mode.value)) & _WRITE_MODE):
                found.append(f"{where}: open for writing")
        elif isinstance(f, ast.Attribute) and f.attr in ("write_text", "write_bytes"):
            found.append(f"{where}: .{f.attr}")
        elif module == "shutil" and f.attr.startswith(("copy", "move")) and f.attr != "copyfileobj":
            found.append(f"{where}: shutil.{f.attr}")
        elif isinstance(f, ast.Attribute) and ast.unparse(f) not in _OWN_WRITERS:
            position = _MODULE_DESTINATION.get((module, f.attr), _DESTINATION.get(f.attr))
            if position is None:
                continue
            given = node.args[position] if len(node.args) > position else None
            keyword = {"path", "path_or_buf", "fname", "file", "where", "fp", "buf"}
            given = given or next((k.value for k in node.keywords if k.arg in keyword), None)
            if given is not None and not (isinstance(given, ast.Name) and given.id in _SINKS):
                found.append(f"{where}: .{f.attr}({ast.unparse(given)})")
    return found


def test_every_file_is_written_through_the_durable_io_module():
    """Issue 27, class 6: a file written in place is half-written on a full disk; through _files it is whole or
    absent (tests/test_full_disk.py runs every command's outputs on a full disk)."""
    files = sorted((ROOT / "rag_eval").rglob("*.py")) + sorted((ROOT / "adapters").rglob("*.py"))
    assert len(files) > 30
    offenders = [use for path in files if path.name != "_files.py" for use in _plain_writes(path)]
    assert offenders == []


def test_the_write_scan_catches_each_spelling(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "open(p, 'w')\nopen(p, 'a' if x else 'w')\nopen(p)\nopen(p, 'rb')\nPath(p).open('w')\nlog.open(path)\n"
        "p.write_text('x')\np.write_bytes(b'x')\nframe.to_csv(p)\nframe.to_csv(buffer)\nframe.to_csv()\n"
        "fig.savefig(path)\nfig.savefig(file, format='svg')\njson.dump(obj, f)\njson.dumps(obj)\nnp.save(p, a)\n"
        "pq.write_table(t, path)\npq.write_table(t, sink)\nshutil.copy(a, b)\nos.open(p, os.O_WRONLY | os.O_CREAT)\n"
        "os.open(p, os.O_RDONLY)\nos.open(os.devnull, os.O_WRONLY)\nos.fdopen(fd, 'wb')\npooled.to_csv(out)\n"
    )
    assert _plain_writes(sample) == [
        "sample.py:1: open for writing",
        "sample.py:2: open for writing",
        "sample.py:5: open for writing",
        "sample.py:7: .write_text",
        "sample.py:8: .write_bytes",
        "sample.py:9: .to_csv(p)",
        "sample.py:12: .savefig(path)",
        "sample.py:14: .dump(f)",
        "sample.py:16: .save(p)",
        "sample.py:17: .write_table(path)",
        "sample.py:19: shutil.copy",
        "sample.py:20: os.open for writing",
        "sample.py:23: open for writing",
    ]
