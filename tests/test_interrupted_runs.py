"""Interrupted runs and the cache: SIGKILL at random points, two writers at once, damaged files.

A child process runs a two-stage pipeline (a fast retriever and reranker, on 4 threads) into a cache and logs
every call it makes. The test kills it at random points of its progress (after a random number of new records,
plus a random few milliseconds), 20 times over, and checks after each kill that the next
run computes no query the cache already held, and at the end that the resumed report equals an uninterrupted one.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

import rag_eval
from rag_eval.stages import Pipeline

from .conftest import ROOT

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")

N_QUERIES = 120
STAGES = """
import os, random, time, zlib
from rag_eval.adapters import functions

DOCS = [f"d{i}" for i in range(30)]

def _log(stage, query):
    fd = os.open(os.environ["CALL_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, f"{os.environ.get('ATTEMPT', '-')} {stage} {query}\\n".encode())
    os.close(fd)

def search(query, k):
    _log("retrieve", query)
    time.sleep(float(os.environ.get("PAUSE", "0.01")))
    rng = random.Random(query)
    return [(d, rng.random()) for d in rng.sample(DOCS, k)]

def rerank(query, hits):
    _log("rerank", query)
    time.sleep(float(os.environ.get("PAUSE", "0.01")))
    return sorted((h.doc_id for h in hits), key=lambda d: (zlib.crc32((query + d).encode()) % 97, d))

def pipeline():
    from rag_eval.stages import Pipeline
    return Pipeline(functions.retriever(search, name="retrieve", version="1"),
                    functions.reranker(rerank, name="rerank", version="1"), depth=10, budget=3)

QUERIES = {f"q{i}": f"q{i}-question" for i in range(N_QUERIES)}  # the text names its query id, for the call log
""".replace("N_QUERIES", str(N_QUERIES))
CHILD = """
import sys
sys.path[:0] = [{root!r}, {here!r}]
from faultstages import pipeline, QUERIES
pipeline().run(QUERIES, cache=sys.argv[1], concurrency=4, progress=False)
"""


@pytest.fixture
def stages(tmp_path, monkeypatch):
    (tmp_path / "faultstages.py").write_text(STAGES)
    (tmp_path / "child.py").write_text(CHILD.format(root=str(ROOT), here=str(tmp_path)))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("CALL_LOG", str(tmp_path / "calls.log"))
    sys.modules.pop("faultstages", None)
    import faultstages

    yield faultstages
    sys.modules.pop("faultstages", None)


def _stored(cache: Path) -> set[tuple[str, str]]:
    """(stage, query id) of every whole record in the cache, read without touching the files."""
    out = set()
    for path in cache.glob("*.jsonl"):
        stage = path.name.split("-")[0]
        for line in path.read_bytes().split(b"\n"):
            try:
                out.add((stage, json.loads(line)["query_id"]))
            except (ValueError, KeyError, TypeError):
                continue
    return out


def _calls(log: Path, attempt: str) -> list[tuple[str, str]]:
    if not log.exists():
        return []
    rows = [line.split() for line in log.read_text().splitlines()]
    return [(stage, text.split("-")[0]) for a, stage, text in rows if a == attempt]


def _qrels(faultstages) -> dict[str, dict[str, int]]:
    rng = random.Random(7)
    return {q: {d: rng.randint(0, 3) for d in rng.sample(faultstages.DOCS, 8)} for q in faultstages.QUERIES}


@pytest.mark.sigkill
def test_twenty_random_sigkills_resume_to_the_uninterrupted_report(tmp_path, stages, monkeypatch):
    cache, log = tmp_path / "cache", tmp_path / "calls.log"
    rng = random.Random(2026)
    env = dict(os.environ)
    mid_run = 0
    for attempt in range(20):
        before = _stored(cache)
        env["ATTEMPT"] = str(attempt)
        child = subprocess.Popen(
            [sys.executable, str(tmp_path / "child.py"), str(cache)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        target, deadline = len(before) + rng.randint(1, 6), time.time() + 60
        while child.poll() is None and len(_stored(cache)) < target and time.time() < deadline:
            time.sleep(0.002)  # kill once a random number of new records is in: a random point of the run
        time.sleep(rng.uniform(0.0, 0.01))
        child.send_signal(signal.SIGKILL)
        _, err = child.communicate()
        assert b"Traceback" not in err, err.decode()
        recomputed = before.intersection(_calls(log, str(attempt)))
        assert not recomputed, f"kill {attempt}: computed again after being stored: {sorted(recomputed)[:5]}"
        after = _stored(cache)
        mid_run += len(after - before) > 0 and len(after) < 2 * N_QUERIES
    assert mid_run == 20, f"only {mid_run} of 20 kills landed while queries were being stored"

    before = _stored(cache)
    monkeypatch.setenv("ATTEMPT", "resume")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a line torn by a kill is reported; that is checked elsewhere
        resumed = stages.pipeline().run(stages.QUERIES, cache=cache, concurrency=4, progress=False)
    assert not before.intersection(_calls(log, "resume"))
    assert len(_calls(log, "resume")) == 2 * N_QUERIES - len(before)

    monkeypatch.setenv("ATTEMPT", "fresh")
    fresh = stages.pipeline().run(stages.QUERIES, cache=tmp_path / "fresh-cache", progress=False)
    qrels = _qrels(stages)
    a, b = rag_eval.evaluate(qrels, resumed), rag_eval.evaluate(qrels, fresh)
    assert a.per_query.equals(b.per_query) and a.summary.equals(b.summary)
    assert a.loss_items.equals(b.loss_items)
    for stage in resumed.stages:
        assert resumed.runs[stage] == fresh.runs[stage]


def test_two_processes_into_one_cache_at_once(tmp_path, stages, monkeypatch):
    cache = tmp_path / "cache"
    env = dict(os.environ, PAUSE="0.002", ATTEMPT="both")
    children = [
        subprocess.Popen([sys.executable, str(tmp_path / "child.py"), str(cache)], env=env, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err.decode()
    for path in cache.glob("*.jsonl"):  # every line whole; a query both computed is stored identically
        records: dict[str, dict] = {}
        for line in path.read_bytes().splitlines():
            record = json.loads(line)
            if record["query_id"] in records:
                assert record["hits"] == records[record["query_id"]]["hits"]
            records[record["query_id"]] = record
        assert set(records) == set(stages.QUERIES)
    monkeypatch.setenv("ATTEMPT", "third")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing damaged to report
        third = stages.pipeline().run(stages.QUERIES, cache=cache, progress=False)
    assert _calls(tmp_path / "calls.log", "third") == []
    assert all(out.cache_hits == N_QUERIES for out in third.stages.values())
    fresh = stages.pipeline().run(stages.QUERIES, progress=False)
    assert all(third.runs[s] == fresh.runs[s] for s in fresh.stages)


def test_two_processes_repairing_and_appending_lose_nothing(tmp_path, stages, monkeypatch):
    """Both writers open a damaged file at once: the repair (under an exclusive lock) keeps every whole line."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("ATTEMPT", "seed")
    half = dict(list(stages.QUERIES.items())[: N_QUERIES // 2])
    stages.pipeline().run(half, cache=cache, progress=False)
    for path in cache.glob("*.jsonl"):
        data = path.read_bytes()
        lines = data.splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:5]) + b"\x00\xffgarbage\n" + b"".join(lines[5:]) + lines[0][:17])
    env = dict(os.environ, PAUSE="0.002", ATTEMPT="both")
    children = [
        subprocess.Popen([sys.executable, str(tmp_path / "child.py"), str(cache)], env=env, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    errors = [child.communicate(timeout=120)[1].decode() for child in children]
    assert all(child.returncode == 0 for child in children), errors
    assert any("damaged line(s) dropped" in e for e in errors)  # the user is told
    monkeypatch.setenv("ATTEMPT", "third")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        third = stages.pipeline().run(stages.QUERIES, cache=cache, progress=False)
    assert _calls(tmp_path / "calls.log", "third") == []
    assert all(out.cache_hits == N_QUERIES for out in third.stages.values())


def test_garbage_bytes_and_a_torn_line_are_reported_and_recomputed(tmp_path, stages, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("ATTEMPT", "first")
    first = stages.pipeline().run(stages.QUERIES, cache=cache, progress=False)
    (path,) = cache.glob("retrieve-*.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    lost = {json.loads(lines[i])["query_id"] for i in (3, 10, len(lines) - 1)}
    lines[3] = os.urandom(64).replace(b"\n", b"") + b"\n"
    lines[10] = b'{"query_id": "q1", "hits": [1, 2]}\n'  # valid JSON, not a record
    lines[-1] = lines[-1][:-20]  # torn by a kill
    path.write_bytes(b"".join(lines))
    monkeypatch.setenv("ATTEMPT", "second")
    with pytest.warns(UserWarning, match=r"retrieve-.*: 3 damaged line\(s\) dropped"):
        second = Pipeline.run(stages.pipeline(), stages.QUERIES, cache=cache, progress=False)
    recomputed = _calls(tmp_path / "calls.log", "second")
    assert sorted(q for s, q in recomputed if s == "retrieve") == sorted(lost)
    assert second.runs["retrieve"] == first.runs["retrieve"]
    assert all(json.loads(line) for line in path.read_bytes().splitlines())  # repaired on disk
