"""The labelling server in-process on a free port, exercised over HTTP: each grade on disk at once, back and a new
grade, resuming, and what it refuses (other origins and hosts, a missing token, grades off the scale, unknown
items, paths that try to leave the package). Also ``rag-eval label`` itself, as a subprocess and with bad input."""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rag_eval import Qrels, Run
from rag_eval.cli import main
from rag_eval.ground_truth import JudgementLog, pool
from rag_eval.labelling import LabellingServer, LabellingSession, log_path_for, parse_scale

QUERIES = {"q1": "what does lru_cache do", "q2": "how to read a csv file"}
TEXTS = {
    "a": "memoizing decorator",
    "b": "least recently used",
    "c": "cache info",
    "d": "csv.reader",
    "e": "csv.DictReader",
    "f": "open()",
}


def make_pool(tmp_path: Path):
    first = Run.from_ranking({"q1": ["a", "b", "c"], "q2": ["d", "e"]}, name="bm25")
    second = Run.from_ranking({"q1": ["c", "a", "x"], "q2": ["f", "d"]}, name="dense")
    made = pool({"bm25": first, "dense": second}, depth=3, queries=QUERIES, texts=TEXTS)
    path = tmp_path / "pool.jsonl"
    made.save(path)
    return made, path


class Running:
    """A LabellingServer on 127.0.0.1:0 in a thread, with a small HTTP client."""

    def __init__(self, made, out: Path, *, assessor: str = "alice", timeout: float = 10.0) -> None:
        self.session = LabellingSession(made, out, assessor=assessor)
        self.server = LabellingServer(self.session, timeout=timeout)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def request(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        token: str | None = "",
        origin: str | None = None,
        host: str | None = None,
        content_type: str = "application/json",
        raw: bytes | None = None,
    ):
        headers = {"Host": host or f"127.0.0.1:{self.server.port}"}
        if token is not None:
            headers["X-Rag-Eval-Token"] = token or self.server.token
        if origin is not None:
            headers["Origin"] = origin
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        if data is not None:
            headers["Content-Type"] = content_type
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        try:
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            payload = response.read()
        finally:
            conn.close()
        kind = response.getheader("Content-Type", "")
        return response.status, (json.loads(payload) if kind.startswith("application/json") and payload else payload)

    def judge(self, index: int, grade: object, **kwargs):
        return self.request("POST", "/api/judge", {"index": index, "grade": grade}, **kwargs)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def setup(tmp_path):
    made, _ = make_pool(tmp_path)
    out = tmp_path / "out.qrels"
    running = Running(made, out)
    yield made, out, running
    running.stop()


def log_lines(out: Path) -> list[dict]:
    path = log_path_for(out)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_pool_is_what_the_tests_expect(setup):
    made, _, _ = setup
    assert [(i.query_id, i.doc_id) for i in made.items] == [
        ("q1", "a"),
        ("q1", "c"),
        ("q1", "b"),
        ("q1", "x"),
        ("q2", "d"),
        ("q2", "f"),
        ("q2", "e"),
    ]


def test_each_grade_is_in_the_log_and_in_out_when_the_response_arrives(setup):
    made, out, running = setup
    status, state = running.request("GET", "/api/state")
    assert status == 200
    assert (state["total"], state["judged"], state["next"], state["done"]) == (7, 0, 0, False)
    assert state["pool"] == {"id": made.id, "depth": 3, "strategy": "depth", "systems": ["bm25", "dense"]}
    assert not out.exists()  # nothing judged, nothing written

    status, result = running.judge(0, 3)
    assert status == 200 and result["state"]["judged"] == 1 and result["state"]["next"] == 1
    assert out.read_text() == "q1 0 a 3\n"
    [line] = log_lines(out)
    assert {k: line[k] for k in ("query_id", "doc_id", "grade", "assessor")} == {
        "query_id": "q1",
        "doc_id": "a",
        "grade": 3,
        "assessor": "alice",
    }
    assert line["pool"] == {"id": made.id, "depth": 3, "strategy": "depth", "systems": ["bm25", "dense"]}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"])

    status, result = running.request("POST", "/api/judge", {"query_id": "q2", "doc_id": "f", "grade": 0})
    assert status == 200 and result["index"] == 5
    assert Qrels.from_trec(out).to_dict() == {"q1": {"a": 3}, "q2": {"f": 0}}
    status, item = running.request("GET", "/api/item?i=1")
    assert status == 200
    assert (item["query_id"], item["doc_id"], item["query"], item["text"]) == ("q1", "c", QUERIES["q1"], "cache info")
    assert item["ranks"] == {"bm25": 3, "dense": 1} and item["grade"] is None
    assert [(c["doc_id"], c["grade"], c["by"]) for c in item["context"]] == [("a", 3, "you")]


def test_back_and_a_new_grade_supersede_the_old_one(setup):
    _, out, running = setup
    running.judge(0, 3)
    running.judge(1, 2)
    status, result = running.judge(0, 1)  # back to item 0, graded again
    assert status == 200 and result["state"]["judged"] == 2
    assert result["state"]["next"] == 2  # the first unjudged item after the one regraded
    assert [line["grade"] for line in log_lines(out)] == [3, 2, 1]  # append-only
    assert Qrels.from_trec(out).to_dict() == {"q1": {"a": 1, "c": 2}}
    assert running.request("GET", "/api/item?i=0")[1]["grade"] == 1


def test_after_wraps_round_to_skipped_items_and_done_when_all_are_judged(setup):
    _, _, running = setup
    for i in (1, 2, 3, 4, 5, 6):
        running.judge(i, 1)
    assert running.request("GET", "/api/state?after=3")[1]["next"] == 0  # item 0 was skipped: it comes back
    assert running.request("GET", "/api/state")[1]["next"] == 0
    status, result = running.judge(0, 2)
    assert status == 200
    assert result["state"]["done"] is True and result["state"]["next"] is None
    assert result["state"]["judged"] == result["state"]["total"] == 7


def test_a_restart_resumes_at_the_first_unjudged_item(tmp_path):
    made, _ = make_pool(tmp_path)
    out = tmp_path / "out.qrels"
    running = Running(made, out)
    for i in (0, 1, 3):  # item 2 skipped
        running.judge(i, 2)
    running.judge(1, 0)
    running.stop()

    again = Running(made, out)
    try:
        status, state = again.request("GET", "/api/state")
        assert status == 200
        assert (state["judged"], state["next"]) == (3, 2)
        assert again.request("GET", "/api/item?i=1")[1]["grade"] == 0  # the later grade, after the restart too
        again.judge(2, 3)
        assert Qrels.from_trec(out).to_dict() == {"q1": {"a": 2, "c": 0, "x": 2, "b": 3}}
        assert again.request("GET", "/api/state")[1]["next"] == 4
    finally:
        again.stop()


def test_out_s_own_judgements_are_kept_shown_and_not_changed(tmp_path):
    made, _ = make_pool(tmp_path)
    out = tmp_path / "out.qrels"
    out.write_text("q1 0 c 1\nq1 0 z 2\nq3 0 w 0\n")  # c is pooled; z and w are not
    running = Running(made, out)
    try:
        status, state = running.request("GET", "/api/state")
        assert (state["judged"], state["next"]) == (1, 0)  # c counts as judged
        item = running.request("GET", "/api/item?i=0")[1]
        assert sorted((c["doc_id"], c["grade"], c["by"]) for c in item["context"]) == [
            ("c", 1, "qrels"),
            ("z", 2, "qrels"),
        ]
        status, error = running.judge(1, 3)  # c
        assert status == 409 and "does not change" in error["error"]
        running.judge(0, 2)
        assert Qrels.from_trec(out).to_dict() == {"q1": {"c": 1, "z": 2, "a": 2}, "q3": {"w": 0}}
    finally:
        running.stop()
    # restarted: OUT now holds a's grade too, but a regrade still wins (a is the log's, not the qrels')
    again = Running(made, out)
    try:
        assert again.judge(0, 0)[0] == 200
        assert Qrels.from_trec(out).to_dict() == {"q1": {"c": 1, "z": 2, "a": 0}, "q3": {"w": 0}}
    finally:
        again.stop()


def test_a_kill_between_the_log_and_out_is_caught_up_at_the_next_start(tmp_path):
    made, _ = make_pool(tmp_path)
    out = tmp_path / "out.qrels"
    JudgementLog.open(log_path_for(out)).append("q2", "e", 3, assessor="alice", pool=made.provenance)
    session = LabellingSession(made, out, assessor="alice")  # OUT never written for that judgement
    assert Qrels.from_trec(out).to_dict() == {"q2": {"e": 3}}
    assert session.state()["judged"] == 1


def test_another_assessor_labels_the_same_pool_and_sees_the_first_one_s_grade(tmp_path):
    made, _ = make_pool(tmp_path)
    out = tmp_path / "out.qrels"
    JudgementLog.open(log_path_for(out)).append("q1", "a", 3, assessor="alice", pool=made.provenance)
    running = Running(made, out, assessor="bob")
    try:
        assert running.request("GET", "/api/state")[1]["judged"] == 0  # bob has judged nothing yet
        assert running.request("GET", "/api/item?i=0")[1]["others"] == {"alice": 3}
        running.judge(0, 1)
        assert Qrels.from_trec(out).to_dict() == {"q1": {"a": 1}}  # the lower of 1 and 3
    finally:
        running.stop()


# ----- what it refuses ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("origin", ["http://evil.example", "http://127.0.0.1:1", "null", "https://127.0.0.1"])
def test_requests_from_other_origins_are_refused(setup, origin):
    _, out, running = setup
    status, error = running.judge(0, 2, origin=origin)
    assert status == 403 and "origin" in error["error"]
    assert running.request("GET", "/api/state", origin=origin)[0] == 403
    assert running.request("GET", "/", origin=origin, token=None)[0] == 403
    assert not log_path_for(out).exists() or not log_lines(out)


def test_own_origins_and_hosts_are_accepted_and_other_hosts_refused(setup):
    _, _, running = setup
    port = running.server.port
    assert running.judge(0, 2, origin=f"http://127.0.0.1:{port}")[0] == 200
    assert running.judge(1, 2, origin=f"http://localhost:{port}", host=f"localhost:{port}")[0] == 200
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1", f"127.0.0.2:{port}"):
        assert running.request("GET", "/", host=host, token=None)[0] == 403  # DNS rebinding
        assert running.request("GET", "/api/state", host=host)[0] == 403


@pytest.mark.parametrize("token", [None, "wrong", "x" * 43])
def test_a_missing_or_wrong_token_is_refused(setup, token):
    _, out, running = setup
    status, error = running.judge(0, 2, token=token)
    assert status == 403 and "X-Rag-Eval-Token" in error["error"]
    assert running.request("GET", "/api/item?i=0", token=token)[0] == 403
    assert not out.exists() and not log_lines(out)


def test_cross_site_fetches_and_other_content_types_are_refused(setup):
    _, out, running = setup
    raw = json.dumps({"index": 0, "grade": 1}).encode()
    assert running.request("POST", "/api/judge", raw=raw, content_type="text/plain")[0] == 415
    assert running.request("POST", "/api/judge", raw=raw, content_type="application/x-www-form-urlencoded")[0] == 415
    assert running.request("POST", "/api/judge", raw=b"{not json", content_type="application/json")[0] == 400
    assert running.request("POST", "/api/judge", raw=b" " * 5000)[0] == 413
    assert running.request("GET", "/api/judge")[0] == 405
    assert not out.exists()


@pytest.mark.parametrize("grade", [4, -1, 1.5, "x", "2", None, True, [1]])
def test_grades_off_the_scale_are_refused(setup, grade):
    _, out, running = setup
    status, error = running.judge(0, grade)
    assert status == 400 and "grade" in error["error"]
    assert not out.exists() and not log_lines(out)


def test_a_narrower_scale_refuses_what_it_lacks(tmp_path):
    made, _ = make_pool(tmp_path)
    session = LabellingSession(made, tmp_path / "out.qrels", assessor="alice", scale=(0, 1))
    server = LabellingServer(session)
    assert session.state()["scale"] == [0, 1]
    with pytest.raises(Exception, match=r"outside the scale 0\.\.1"):
        session.judge({"index": 0, "grade": 2})
    server.server_close()
    assert parse_scale("1..5") == (1, 5)
    for bad in ("0-3", "3..1", "0..10", "a..b", "-1..2"):
        with pytest.raises(ValueError):
            parse_scale(bad)


def test_unknown_items_and_pairs_are_refused(setup):
    _made, out, running = setup
    assert running.request("GET", "/api/item?i=7")[0] == 404
    assert running.request("GET", "/api/item?i=-1")[0] == 404
    assert running.request("GET", "/api/item?i=abc")[0] == 400
    assert running.request("GET", "/api/item")[0] == 400
    assert running.request("GET", "/api/state?after=99")[0] == 400
    assert running.judge(7, 1)[0] == 400
    assert running.judge("0", 1)[0] == 400
    status, error = running.request("POST", "/api/judge", {"query_id": "q1", "doc_id": "nope", "grade": 1})
    assert status == 400 and "not in pool" in error["error"]
    status, error = running.request("POST", "/api/judge", {"query_id": "q9", "doc_id": "a", "grade": 1})
    assert status == 400
    status, error = running.request("POST", "/api/judge", {"index": 1, "query_id": "q1", "doc_id": "a", "grade": 1})
    assert status == 400  # the index and the pair disagree
    assert running.request("POST", "/api/judge", [0, 1])[0] == 400
    assert not out.exists()


@pytest.mark.parametrize(
    "path",
    [
        "/../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/static/..%2f..%2f..%2fetc%2fpasswd",
        "/..%2fserver.py",
        "/page.html",
        "/server.py",
        "/api/../../../etc/passwd",
        "/api/item/../../etc/passwd",
        "//etc/passwd",
        "/api/state/..%2f..%2fpool.jsonl",
        "/%2e%2e%2fpool.jsonl",
    ],
)
def test_paths_that_try_to_leave_the_package_read_nothing(setup, path):
    _, _, running = setup
    status, body = running.request("GET", path)
    assert status == 404
    text = json.dumps(body) if isinstance(body, dict) else body.decode(errors="replace")
    assert "root:" not in text and "import" not in text and "q1" not in text


def test_the_page_carries_the_token_and_a_strict_policy_and_needs_nothing_from_outside(setup):
    _, _, running = setup
    conn = http.client.HTTPConnection("127.0.0.1", running.server.port, timeout=10)
    conn.request("GET", "/")
    response = conn.getresponse()
    page = response.read().decode()
    conn.close()
    assert response.status == 200
    assert f'content="{running.server.token}"' in page
    policy = response.getheader("Content-Security-Policy")
    assert "default-src 'none'" in policy and f"'nonce-{running.server.nonce}'" in policy
    assert "frame-ancestors 'none'" in policy and response.getheader("X-Frame-Options") == "DENY"
    assert not re.search(r"""(src|href)\s*=|https?://|@import|url\(""", page)  # no external asset
    assert page.count(f'nonce="{running.server.nonce}"') == 2  # the one style, the one script


# ----- the command --------------------------------------------------------------------------------------------


def test_rag_eval_label_with_a_bad_pool_file_exits_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "pool.jsonl"
    bad.write_text('{"query_id": "q1", "doc_id": "a"}\nnot json\n')
    assert main(["label", str(bad), "-o", str(tmp_path / "out.qrels")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rag-eval: error: ") and f"{bad}:1:" in err
    assert main(["label", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err
    _, good = make_pool(tmp_path)
    assert main(["label", str(good), "-o", str(tmp_path / "out.qrels"), "--scale", "0..12"]) == 2
    assert "--scale" in capsys.readouterr().err
    assert main(["label", str(good), "-o", str(tmp_path / "no" / "such" / "out.qrels")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    (tmp_path / "bad.qrels").write_text("q1 0 a\n")
    assert main(["label", str(good), "-o", str(tmp_path / "bad.qrels")]) == 2
    assert "bad.qrels:1" in capsys.readouterr().err


def test_a_second_server_on_the_same_qrels_file_is_refused(tmp_path, capsys):
    import fcntl

    _, good = make_pool(tmp_path)
    out = tmp_path / "out.qrels"
    fd = os.open(log_path_for(out), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # what a running server holds
    try:
        assert main(["label", str(good), "-o", str(out)]) == 2
        assert "another 'rag-eval label'" in capsys.readouterr().err
    finally:
        os.close(fd)


def _read_line(stream, deadline: float) -> str:
    while time.monotonic() < deadline:
        ready, _, _ = select.select([stream], [], [], 0.1)
        if ready:
            return stream.readline()
    raise AssertionError("rag-eval label printed nothing")


@pytest.mark.sigkill
def test_the_command_prints_its_address_serves_and_loses_nothing_to_a_kill(tmp_path):
    made, good = make_pool(tmp_path)
    out = tmp_path / "out.qrels"
    command = [sys.executable, "-m", "rag_eval.cli", "label", str(good), "-o", str(out), "--assessor", "carol"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = _read_line(proc.stdout, time.monotonic() + 20)
        found = re.fullmatch(
            rf"rag-eval: labelling 7 items of pool {made.id} at http://127\.0\.0\.1:(\d+)/ "
            r"\(Ctrl-C to stop\)\n",
            line,
        )
        assert found, line
        port = int(found.group(1))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/")
        token = re.search(r'name="rag-eval-token" content="([^"]+)"', conn.getresponse().read().decode()).group(1)
        conn.request(
            "POST",
            "/api/judge",
            body=json.dumps({"index": 4, "grade": 2}),
            headers={"X-Rag-Eval-Token": token, "Content-Type": "application/json"},
        )
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()
    assert out.read_text() == "q2 0 d 2\n"
    assert [(j.assessor, j.doc_id, j.grade) for j in JudgementLog.load(log_path_for(out))] == [("carol", "d", 2)]


def test_importing_the_labelling_packages_loads_no_http_server():
    code = (
        "import json, sys, rag_eval, rag_eval.ground_truth, rag_eval.labelling;"
        "print(json.dumps([m for m in ('http.server', 'socketserver', 'pandas') if m in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []


# ----- loose ends: a failing request, temporaries after a kill, a real full disk ----------------------------------


def test_a_request_that_fails_unexpectedly_is_answered_500_and_the_server_goes_on(setup, monkeypatch):
    _made, _out, running = setup

    def broken(after=None):
        raise RuntimeError("boom")

    monkeypatch.setattr(running.session, "state", broken)
    assert running.request("GET", "/api/state") == (
        500,
        {"error": "the server failed on this request (RuntimeError: boom); nothing was saved"},
    )
    monkeypatch.undo()
    assert running.request("GET", "/api/state")[1]["judged"] == 0


def test_temporaries_left_by_a_killed_server_are_removed_at_start(tmp_path):
    made, _ = make_pool(tmp_path)
    out = tmp_path / "out.qrels"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = [f".out.qrels.{int(dead.stdout)}.1.rag_eval.tmp", f".out.qrels.{int(dead.stdout)}.1.tmp"]
    for name in left:
        (tmp_path / name).write_text("q1 0 a 1\n")  # a kill between writing the temporary and the rename
    (tmp_path / "keep.tmp").write_text("someone else's")
    running = Running(made, out)
    try:
        assert [p.name for p in tmp_path.iterdir() if p.name in left] == []
        assert running.judge(0, 1)[0] == 200
        assert sorted(p.name for p in tmp_path.iterdir() if "tmp" in p.name) == ["keep.tmp"]
    finally:
        running.stop()


def _fill(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            try:
                if os.write(fd, b"x" * 4096) <= 0:
                    break
            except OSError:
                break
    finally:
        os.close(fd)


def test_a_real_full_disk_mid_labelling_loses_nothing_acknowledged_and_labelling_resumes(tmp_path, tmpfs, capsys):
    runs = {
        name: Run.from_ranking({f"q{q}": [f"{name}-{q}-{d}" for d in range(20)] for q in range(3)}, name=name)
        for name in ("bm25", "dense")
    }
    made = pool(runs, depth=20)
    out = tmpfs / "out.qrels"
    log = log_path_for(out)
    acknowledged: dict[int, int] = {}  # item -> grade, for every grade the server said it kept
    refused = []
    running = Running(made, out)
    try:
        for i in range(5):
            assert running.judge(i, i % 4)[0] == 200
            acknowledged[i] = i % 4
        _fill(tmpfs / "filler")  # the disk fills mid-labelling
        i = 5
        while not refused and i < 60:
            status, payload = running.judge(i, i % 4)
            assert status in (200, 507), payload
            if status == 200 or payload["error"].startswith(f"the grade is saved in {log}"):
                acknowledged[i] = i % 4  # in the log; OUT catches up later
            else:
                assert (
                    payload["error"].startswith(f"not saved: judgement log {log}: cannot store")
                    and "No space left on device" in payload["error"]
                )
                refused.append(i)
            i += 1
        assert refused, "the disk never filled"
        stored = JudgementLog.load(log)  # readable while full: no torn line (a warning would fail the test)
        where = {(item.query_id, item.doc_id): n for n, item in enumerate(made.items)}
        assert {where[(j.query_id, j.doc_id)]: j.grade for j in stored} == acknowledged
        (tmpfs / "filler").unlink()  # space freed
        for n in [*refused, *range(i, i + 5)]:
            assert running.judge(n, n % 4)[0] == 200
            acknowledged[n] = n % 4
    finally:
        running.stop()
    again = Running(made, out)  # rag-eval label resumes on that log
    try:
        state = again.request("GET", "/api/state")[1]
        assert state["judged"] == len(acknowledged) and state["next"] == min(set(range(len(made))) - set(acknowledged))
    finally:
        again.stop()
    merged = tmp_path / "merged.qrels"
    assert main(["merge", str(log), "-o", str(merged)]) == 0
    capsys.readouterr()
    expected = {}
    for i, grade in acknowledged.items():
        expected.setdefault(made.items[i].query_id, {})[made.items[i].doc_id] = grade
    assert Qrels.from_trec(merged).to_dict() == expected
    assert Qrels.from_trec(out).to_dict() == expected  # OUT caught up
    assert [p.name for p in tmpfs.iterdir() if "tmp" in p.name] == []
