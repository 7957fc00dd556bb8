"""Interrupted runs and the cache: SIGKILL at random points, two writers at once, damaged shards.

A child process runs a two-stage pipeline (a fast retriever and reranker, on 4 threads) into a cache written in
small shards (``shard_queries=SHARD_QUERIES``) and logs every call it makes. The test kills it at random points of
its progress (after a random number of new shards, plus a random few milliseconds), 20 times over, and checks after
each kill that the next run computes no query the cache already held, that the kill lost at most the shard in flight
(the queries called and not stored: at most ``SHARD_QUERIES`` pending, plus the calls in flight and the second of
work the runner had not yet put), and at the end that the resumed report equals an uninterrupted one.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

import rag_eval
from rag_eval.errors import DamagedShard
from rag_eval.stages import Pipeline, StageCache

from .conftest import ROOT

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")

N_QUERIES = 120
SHARD_QUERIES = 5
CONCURRENCY = 4
KILL_PAUSE = 0.8  # seconds per call in the killed children: the runner puts what finished every second or so
# what a stage may have called and not yet handed to the store: the calls in flight, and a second and a half of work
IN_FLIGHT = CONCURRENCY + int(1.5 * CONCURRENCY / KILL_PAUSE)
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
from rag_eval.stages import StageCache
cache = StageCache(sys.argv[1], shard_queries=SHARD_QUERIES)
pipeline().run(QUERIES, cache=cache, concurrency=CONCURRENCY, progress=False)
""".replace("SHARD_QUERIES", str(SHARD_QUERIES)).replace("CONCURRENCY", str(CONCURRENCY))


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


def _shards(cache: Path, stage: str = "*") -> list[Path]:
    return sorted(cache.glob(f"{stage}-*/shard-*.arrow"))


def _rows(path: Path) -> list[dict]:
    """The rows of one shard, read without touching the file (a shard in place is whole: renamed in when done)."""
    try:
        return ipc.open_file(pa.OSFile(str(path))).read_all().select(["query_id", "hits"]).to_pylist()
    except (OSError, pa.ArrowException):  # set aside meanwhile, or damaged (by a test)
        return []


def _stored(cache: Path) -> set[tuple[str, str]]:
    """(stage, query id) of every row in the cache's shards."""
    return {(path.parent.name.split("-")[0], row["query_id"]) for path in _shards(cache) for row in _rows(path)}


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
    env = dict(os.environ, PAUSE=str(KILL_PAUSE))
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
        target, deadline = len(_shards(cache)) + rng.randint(1, 2), time.time() + 60
        while child.poll() is None and len(_shards(cache)) < target and time.time() < deadline:
            time.sleep(0.002)  # kill once a random number of new shards is in: a random point of the run
        time.sleep(rng.uniform(0.0, 0.01))
        child.send_signal(signal.SIGKILL)
        _, err = child.communicate()
        assert b"Traceback" not in err, err.decode()
        called = set(_calls(log, str(attempt)))
        recomputed = before.intersection(called)
        assert not recomputed, f"kill {attempt}: computed again after being stored: {sorted(recomputed)[:5]}"
        after = _stored(cache)
        lost = called - after
        assert len(lost) <= SHARD_QUERIES + IN_FLIGHT, f"kill {attempt}: lost {len(lost)} computed queries"
        mid_run += len(after - before) > 0 and len(after) < 2 * N_QUERIES
    assert mid_run == 20, f"only {mid_run} of 20 kills landed while queries were being stored"

    before = _stored(cache)
    monkeypatch.setenv("ATTEMPT", "resume")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a line torn by a kill is reported; that is checked elsewhere
        resumed = stages.pipeline().run(stages.QUERIES, cache=cache, concurrency=CONCURRENCY, progress=False)
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
    for stage in ("retrieve", "rerank"):  # every shard whole; a query both computed is stored identically
        records: dict[str, dict] = {}
        for path in _shards(cache, stage):
            for record in _rows(path):
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


def test_two_processes_setting_aside_and_writing_lose_nothing(tmp_path, stages, monkeypatch):
    """Both writers open a store with damaged shards at once: each sets them aside (or finds them gone), and
    every whole shard is kept."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("ATTEMPT", "seed")
    items = list(stages.QUERIES.items())
    for part in (items[: N_QUERIES // 4], items[N_QUERIES // 4 : N_QUERIES // 2]):  # two runs: two shards at least
        stages.pipeline().run(dict(part), cache=StageCache(cache, shard_queries=SHARD_QUERIES), progress=False)
    for stage in ("retrieve", "rerank"):
        first, second = _shards(cache, stage)[:2]
        first.write_bytes(first.read_bytes()[:-17])  # cut short
        second.write_bytes(b"\x00\xffgarbage\n")
    env = dict(os.environ, PAUSE="0.002", ATTEMPT="both")
    children = [
        subprocess.Popen([sys.executable, str(tmp_path / "child.py"), str(cache)], env=env, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    errors = [child.communicate(timeout=120)[1].decode() for child in children]
    assert all(child.returncode == 0 for child in children), errors
    assert any("damaged shard(s) not read" in e for e in errors)  # the user is told
    monkeypatch.setenv("ATTEMPT", "third")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        third = stages.pipeline().run(stages.QUERIES, cache=cache, progress=False)
    assert _calls(tmp_path / "calls.log", "third") == []
    assert all(out.cache_hits == N_QUERIES for out in third.stages.values())


def test_garbage_a_flipped_byte_and_a_cut_shard_are_reported_and_recomputed(tmp_path, stages, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("ATTEMPT", "first")
    items = list(stages.QUERIES.items())
    for start in range(0, N_QUERIES, N_QUERIES // 4):  # four runs: four shards at least
        stages.pipeline().run(dict(items[start : start + N_QUERIES // 4]), cache=cache, progress=False)
    first = stages.pipeline().run(stages.QUERIES, cache=cache, progress=False)
    paths = _shards(cache, "retrieve")
    assert len(paths) >= 4
    damaged = [paths[0], paths[2], paths[-1]]
    lost = {row["query_id"] for path in damaged for row in _rows(path)}
    damaged[0].write_bytes(os.urandom(len(damaged[0].read_bytes())))  # garbage
    data = bytearray(damaged[1].read_bytes())
    data[len(data) // 3] ^= 0x10  # one bit
    damaged[1].write_bytes(bytes(data))
    damaged[2].write_bytes(damaged[2].read_bytes()[:-20])  # cut short
    monkeypatch.setenv("ATTEMPT", "second")
    with pytest.warns(DamagedShard, match=r"retrieve-.*: 3 damaged shard\(s\) not read"):
        second = Pipeline.run(stages.pipeline(), stages.QUERIES, cache=cache, progress=False)
    recomputed = _calls(tmp_path / "calls.log", "second")
    assert sorted(q for s, q in recomputed if s == "retrieve") == sorted(lost)
    assert [q for s, q in recomputed if s == "rerank"] == []  # given the same hits: from the cache
    assert second.runs["retrieve"] == first.runs["retrieve"]
    assert second.runs["rerank"] == first.runs["rerank"]
    assert all(path.with_name(path.name + ".damaged").exists() and not path.exists() for path in damaged)
