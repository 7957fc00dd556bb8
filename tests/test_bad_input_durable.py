"""Bad input for durable files and the labelling server (docs/bad-input/ground-truth.md, "Durable files and the
labelling server"): a body nested too deep, a body that never arrives, a symlinked --qrels, an output file that cannot
be written, a grade that cannot be stored. Each against the real server on 127.0.0.1 or the real writer."""

from __future__ import annotations

import errno
import json
import os
import select
import socket
import time

import pytest

from rag_eval import Qrels
from rag_eval._files import TEMPORARY_SUFFIX, file_lock
from rag_eval.cli import main
from rag_eval.ground_truth import JudgementLog

from .test_labelling_server import Running, log_path_for, make_pool


def _raw(running: Running, head: bytes, body: bytes = b"", *, wait: float = 10.0) -> tuple[float, bytes]:
    """Send ``head`` (and ``body``) on a fresh socket; return the seconds until the server closed it and all it sent."""
    sock = socket.create_connection(("127.0.0.1", running.server.port), timeout=wait)
    started = time.monotonic()
    try:
        sock.sendall(head + body)
        received = b""
        while True:
            piece = sock.recv(65536)
            if not piece:
                return time.monotonic() - started, received
            received += piece
    finally:
        sock.close()


def _head(running: Running, length: int) -> bytes:
    return (
        f"POST /api/judge HTTP/1.1\r\nHost: 127.0.0.1:{running.server.port}\r\n"
        f"X-Rag-Eval-Token: {running.server.token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def test_a_json_body_nested_too_deep_is_answered_400(tmp_path):
    made, _ = make_pool(tmp_path)
    running = Running(made, tmp_path / "out.qrels")
    try:
        for raw in (b"[" * 2000, b'{"index": ' + b"[" * 1500 + b"]" * 1500 + b', "grade": 1}'):
            status, payload = running.request("POST", "/api/judge", raw=raw)
            assert (status, payload) == (400, {"error": "the body is nested too deeply to be a judgement"})
        assert running.judge(0, 2)[0] == 200  # the thread and the server are fine
    finally:
        running.stop()


def test_a_body_that_never_arrives_is_answered_408_within_the_timeout(tmp_path):
    made, _ = make_pool(tmp_path)
    running = Running(made, tmp_path / "out.qrels", timeout=0.5)
    try:
        took, answer = _raw(running, _head(running, 40))  # the headers promise 40 bytes; none come
        assert 0.4 < took < 3.0
        assert answer.startswith(b"HTTP/1.0 408 ") and b"Connection: close" in answer
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1]) == {
            "error": "the body did not arrive within 0.5 s (0 of 40 bytes)"
        }

        sock = socket.create_connection(("127.0.0.1", running.server.port), timeout=10)
        started = time.monotonic()
        try:  # a trickle: one byte each 0.2 s never completes within the timeout, however long each wait
            sock.sendall(_head(running, 40))
            for _ in range(40):
                try:
                    sock.sendall(b" ")
                except OSError:
                    break
                time.sleep(0.2)
                if time.monotonic() - started > 3:
                    break
            sock.settimeout(5)
            answer = sock.recv(65536)
        finally:
            sock.close()
        assert answer.startswith(b"HTTP/1.0 408 ") and time.monotonic() - started < 3.5

        sock = socket.create_connection(("127.0.0.1", running.server.port), timeout=10)
        started = time.monotonic()
        answer = b""
        try:  # headers that trickle in, one line each 0.2 s, forever: answered 408 (or cut off) at the deadline
            sock.sendall(f"GET /api/state HTTP/1.1\r\nHost: 127.0.0.1:{running.server.port}\r\n".encode())
            while time.monotonic() - started < 4 and not answer:
                sock.sendall(b"X-Slow: 1\r\n")
                ready, _, _ = select.select([sock], [], [], 0.2)
                if ready:
                    answer = sock.recv(65536) or b"(closed)"
        except OSError:  # reset: the server closed with the trickle unread
            answer = b"(reset)"
        finally:
            sock.close()
        assert time.monotonic() - started < 2.0
        assert answer.startswith(b"HTTP/1.0 408 ") or answer in (b"(closed)", b"(reset)"), answer

        took, answer = _raw(running, b"")  # a connection that never says anything is closed too
        assert answer == b"" and took < 3.0
        assert running.judge(0, 1)[0] == 200
        assert [j.grade for j in JudgementLog.load(log_path_for(running.session.out))] == [1]
    finally:
        running.stop()


def test_a_symlinked_qrels_path_is_one_output_with_its_target(tmp_path, capsys):
    made, pool_path = make_pool(tmp_path)
    real = tmp_path / "data" / "real.qrels"
    real.parent.mkdir()
    real.write_text("q1 0 zz 1\n")
    link = tmp_path / "link.qrels"
    link.symlink_to(real)
    with file_lock(log_path_for(real), exclusive=True):  # what a server on the real file holds
        assert main(["label", str(pool_path), "-o", str(link)]) == 2
    assert capsys.readouterr().err == (
        f"rag-eval: error: {log_path_for(real)}: another 'rag-eval label' is writing to this log; stop it first\n"
    )
    running = Running(made, link)
    try:
        assert running.judge(0, 2)[0] == 200
    finally:
        running.stop()
    assert link.is_symlink() and os.readlink(link) == str(real)  # written through, not replaced
    assert Qrels.from_trec(real).to_dict() == {"q1": {"zz": 1, made.items[0].doc_id: 2}}
    assert not log_path_for(link).exists() and [j.grade for j in JudgementLog.load(log_path_for(real))] == [2]
    again = Running(made, real)  # the same output by its own name: resumes where the link left off
    try:
        assert again.request("GET", "/api/state")[1]["judged"] == 1
    finally:
        again.stop()


def test_an_output_file_that_cannot_be_written_is_an_input_error_naming_it(tmp_path, monkeypatch, capsys):
    log = tmp_path / "out.qrels.judgements.jsonl"
    JudgementLog.open(log).append("q1", "d1", 2, assessor="alice")
    out = tmp_path / "merged.qrels"
    out.write_text("q0 0 old 1\n")
    real_write = os.write

    def full(fd, data):
        if TEMPORARY_SUFFIX in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full)
    assert main(["merge", str(log), "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"rag-eval: error: {out}: cannot write the file: No space left on device "
        "(nothing was changed: the file keeps its old content, if it had one)\n"
    )
    assert out.read_text() == "q0 0 old 1\n" and [p.name for p in tmp_path.iterdir() if "tmp" in p.name] == []
    monkeypatch.undo()
    assert main(["merge", str(log), "-o", str(out)]) == 0
    assert out.read_text() == "q1 0 d1 2\n"


def test_a_grade_that_cannot_be_stored_is_answered_507_and_nothing_acknowledged_is_lost(tmp_path, monkeypatch):
    made, _ = make_pool(tmp_path)
    out = tmp_path / "out.qrels"
    running = Running(made, out)
    real_write, real_fsync = os.write, os.fsync
    try:
        assert running.judge(0, 2)[0] == 200

        def full(fd, data):  # the disk fills in the middle of the line
            if os.readlink(f"/proc/self/fd/{fd}").endswith(".judgements.jsonl"):
                real_write(fd, bytes(data)[:9])
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_write(fd, data)

        monkeypatch.setattr(os, "write", full)
        status, payload = running.judge(1, 3)
        assert status == 507
        assert payload["error"].startswith(
            f"not saved: judgement log {log_path_for(out)}: cannot store the judgement "
            f"of query 'q1', doc '{made.items[1].doc_id}': No space left on device"
        )
        monkeypatch.setattr(os, "write", real_write)

        def failing(fd):  # another cause: 500, with the cause named
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "fsync", failing)
        status, payload = running.judge(1, 3)
        assert status == 500 and "Input/output error" in payload["error"]
        assert running.request("GET", "/api/state")[1]["judged"] == 1  # item 1 stays unjudged
        monkeypatch.setattr(os, "fsync", real_fsync)  # space freed

        def out_full(fd, data):  # the log takes the grade, OUT's rewrite does not
            if TEMPORARY_SUFFIX in os.readlink(f"/proc/self/fd/{fd}"):
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_write(fd, data)

        monkeypatch.setattr(os, "write", out_full)
        status, payload = running.judge(2, 1)
        assert status == 507 and payload["error"].startswith(
            f"the grade is saved in {log_path_for(out)}, but {out} could not be rewritten"
        )
        monkeypatch.setattr(os, "write", real_write)
        assert running.judge(1, 3)[0] == 200
    finally:
        monkeypatch.undo()
        running.stop()
    items = made.items
    logged = [(j.doc_id, j.grade) for j in JudgementLog.load(log_path_for(out))]  # whole: no warning
    assert logged == [(items[0].doc_id, 2), (items[2].doc_id, 1), (items[1].doc_id, 3)]
    assert Qrels.from_trec(out).to_dict() == {"q1": {items[0].doc_id: 2, items[1].doc_id: 3, items[2].doc_id: 1}}
    assert [p.name for p in tmp_path.iterdir() if "tmp" in p.name] == []


@pytest.mark.parametrize("timeout", [0, -1, True, float("nan"), "10"])
def test_the_server_timeout_is_checked(tmp_path, timeout):
    from rag_eval.errors import InputError
    from rag_eval.labelling import LabellingServer, LabellingSession

    made, _ = make_pool(tmp_path)
    with pytest.raises(InputError, match="timeout"):
        LabellingServer(LabellingSession(made, tmp_path / "out.qrels", assessor="a"), timeout=timeout)


def _damage_shard(path, how: str) -> None:
    """Damage one cache shard: cut, one bit flipped, or rewritten whole (a correct checksum) holding a value a Hit
    refuses."""
    import zlib

    import pyarrow as pa
    import pyarrow.ipc as ipc

    data = path.read_bytes()
    if how == "cut short":
        path.write_bytes(data[: len(data) // 2])
        return
    if how == "a bit flipped":
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x20
        path.write_bytes(bytes(flipped))
        return
    table = ipc.open_file(pa.py_buffer(data)).read_all()
    hits = table.column("hits").combine_chunks()
    flat = hits.values
    columns = {f.name: flat.field(f.name) for f in flat.type}
    if how == "a NaN score":
        columns["score"] = pa.array([float("nan")] * len(flat))
    else:  # a negative token count
        columns["tokens"] = pa.array([-100] * len(flat), pa.int64())
    struct = pa.StructArray.from_arrays(list(columns.values()), names=list(columns))
    table = table.set_column(2, "hits", pa.LargeListArray.from_arrays(hits.offsets, struct))
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    new = sink.getvalue().to_pybytes()
    path.unlink()
    stem = path.name.rsplit("-", 1)[0]
    (path.parent / f"{stem}-{zlib.crc32(new):08x}.arrow").write_bytes(new)


@pytest.mark.parametrize("how", ["cut short", "a bit flipped", "a NaN score", "a negative token count"])
def test_a_damaged_cache_shard_is_set_aside_and_its_queries_recomputed(tmp_path, how):
    from rag_eval.errors import DamagedShard
    from rag_eval.stages import Hit, Pipeline, Retriever

    class Counted(Retriever):
        def __init__(self):
            super().__init__("bm25", version="1")
            self.calls = []

        def search(self, query, k):
            self.calls.append(query)
            return [Hit(f"{query}-d{i}", 1.0 / (i + 1), tokens=3) for i in range(k)]

    queries = {f"q{i}": f"text{i}" for i in range(4)}
    stage = Counted()
    for q, text in queries.items():  # a shard each
        Pipeline(stage, depth=3).run({q: text}, cache=tmp_path)
    fresh = Pipeline(stage, depth=3).run(queries)
    shards = sorted(tmp_path.glob("bm25-*/shard-*.arrow"))
    _damage_shard(shards[1], how)  # q1's
    stage.calls.clear()
    why = {"a NaN score": "a NaN score", "a negative token count": "a negative token count"}.get(how, "checksum")
    with pytest.warns(DamagedShard, match=rf"bm25-\w+: 1 damaged shard\(s\) not read .*recomputed: shard-.*{why}"):
        again = Pipeline(stage, depth=3).run(queries, cache=tmp_path)
    assert stage.calls == ["text1"] and again.stages["bm25"].cache_hits == 3
    assert again.runs["bm25"] == fresh.runs["bm25"]
    assert [h.tokens for h in again.stages["bm25"].outcomes["q1"].hits] == [3, 3, 3]
    assert len(list(tmp_path.glob("bm25-*/*.damaged"))) == 1
