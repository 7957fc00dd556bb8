"""Who is at fault: the harness's own failures stop the run (never a stage fault, never scored, never retried);
every exception a stage raises is its query's; Ctrl-C and SystemExit stop the run keeping what is stored; a
timeout holds even for an async stage that blocks its event loop.

Faults are injected where they happen: ``os.write`` returning short or raising ENOSPC, a failing ``fsync``, an
``open`` refused (tests run as root, so chmod cannot make a directory read-only), the directory removed mid-run.
"""

from __future__ import annotations

import asyncio
import datetime
import errno
import os
import shutil
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

import rag_eval
from rag_eval.adapters import functions
from rag_eval.errors import HarnessError, InputError
from rag_eval.stages import Hit, Pipeline

QUERIES = {f"q{i}": f"text {i}" for i in range(8)}
QRELS = {q: {f"{q}-d0": 1} for q in QUERIES}


class Counting:
    """A perfect retriever that counts its calls per query."""

    def __init__(self):
        self.calls: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, query, k):
        q = "q" + query.split()[-1]
        with self.lock:
            self.calls[q] = self.calls.get(q, 0) + 1
        return [(f"{q}-d{i}", 1.0 / (i + 1)) for i in range(k)]


def _pipeline(fn) -> Pipeline:
    return Pipeline(functions.retriever(fn, name="perfect", version="1"), depth=3, budget=1)


def _is_cache_file(fd: int) -> bool:
    """A shard being written (its temporary file: a shard is renamed into place once whole)."""
    try:
        return ".shard-" in os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return False


def _lines(cache: Path) -> list[dict]:
    """The rows of every shard of the stage 'perfect' (each shard whole: Arrow reads it, or this fails)."""
    return [
        row
        for path in sorted(cache.glob("perfect-*/shard-*.arrow"))
        for row in ipc.open_file(pa.OSFile(str(path))).read_all().select(["query_id"]).to_pylist()
    ]


def _seed(fn, queries, cache) -> None:
    """Store the first ``queries`` of QUERIES, one run (and so one shard at least) each."""
    for q in list(QUERIES)[:queries]:
        _pipeline(fn).run({q: QUERIES[q]}, cache=cache)


def _no_temporary_files(cache: Path) -> None:
    assert [p.name for p in cache.rglob("*") if ".tmp" in p.name] == []


@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_full_disk_stops_the_run_keeps_what_is_stored_and_resumes(tmp_path, monkeypatch, concurrency):
    cache = tmp_path / "cache"
    real_write = os.write
    stored = []

    def write(fd, data):
        if _is_cache_file(fd):
            if len(stored) >= 3:
                raise OSError(errno.ENOSPC, "No space left on device")
            stored.append(1)
        return real_write(fd, data)

    fn = Counting()
    _seed(fn, 3, cache)
    stored.extend([1, 1, 1])  # the seed's three shards: the disk is full from now on
    monkeypatch.setattr(os, "write", write)
    with pytest.raises(
        HarnessError,
        match=r"cache .*perfect-\w+: cannot store results: No space left on device; free some space",
    ):
        _pipeline(fn).run(QUERIES, cache=cache, retries=2, concurrency=concurrency)
    assert set(fn.calls.values()) == {1}  # never retried as a stage fault
    kept = _lines(cache)
    assert len(kept) == 3  # what was stored before stays, whole
    _no_temporary_files(cache)

    monkeypatch.setattr(os, "write", real_write)  # space freed
    again = Counting()
    result = _pipeline(again).run(QUERIES, cache=cache, concurrency=concurrency)
    assert result.stages["perfect"].cache_hits == 3 and sum(again.calls.values()) == len(QUERIES) - 3
    report = rag_eval.evaluate(QRELS, result)
    assert report.values(report.runs[0], "recall@budget", stage="perfect").tolist() == [1.0] * len(QUERIES)  # not 0.52


def test_a_short_write_is_truncated_away_and_stops_the_run(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    real_write = os.write
    count = []

    def write(fd, data):
        if _is_cache_file(fd):
            count.append(1)
            if len(count) == 3:  # the disk fills mid-line: a few bytes go down, then nothing more
                real_write(fd, bytes(data)[:7])
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    _seed(Counting(), 2, cache)
    count.extend([1, 1])  # the seed's two shards
    monkeypatch.setattr(os, "write", write)
    with pytest.raises(HarnessError, match="No space left on device"):
        _pipeline(Counting()).run(QUERIES, cache=cache)
    assert [r["query_id"] for r in _lines(cache)] == ["q0", "q1"]  # no torn fragment left behind
    _no_temporary_files(cache)

    def short(fd, data):  # a write that takes only part of the line, and then nothing
        if _is_cache_file(fd):
            return 0 if len(data) < 20 else real_write(fd, bytes(data)[:10])
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", short)
    with pytest.raises(HarnessError, match="no byte written"):
        _pipeline(Counting()).run(QUERIES, cache=cache)
    assert [r["query_id"] for r in _lines(cache)] == ["q0", "q1"]
    _no_temporary_files(cache)


def test_resuming_with_a_failing_fsync_gives_the_clear_error_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    _seed(Counting(), 4, cache)
    *_, path = sorted(cache.glob("perfect-*/shard-*.arrow"))
    good = {p.name: p.read_bytes() for p in cache.glob("perfect-*/shard-*.arrow") if p != path}
    path.write_bytes(path.read_bytes()[:-9])  # the last shard cut short: set aside (renamed) on the next open

    def fsync(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", fsync)
    with (
        pytest.warns(rag_eval.errors.DamagedShard, match=r"1 damaged shard\(s\) not read"),
        pytest.raises(HarnessError, match=r"cannot store results: No space left on device; free"),
    ):
        _pipeline(Counting()).run(QUERIES, cache=cache)
    _no_temporary_files(cache)
    assert {p.name: p.read_bytes() for p in cache.glob("perfect-*/shard-*.arrow")} == good  # nothing half-written
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once: the damaged shard was set aside
        result = _pipeline(Counting()).run(QUERIES, cache=cache)
    assert result.stages["perfect"].cache_hits == 3


def test_a_read_only_cache_directory_is_a_harness_error(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    real_open = os.open

    def refusing(path, flags, *args, **kwargs):  # as root, chmod cannot refuse: the open does
        if ".shard-" in str(path) and flags & (os.O_WRONLY | os.O_RDWR):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing)
    fn = Counting()
    with pytest.raises(HarnessError, match=r"Permission denied; make the directory writable, or pass another cache="):
        _pipeline(fn).run(QUERIES, cache=cache, retries=3)
    assert set(fn.calls.values()) == {1}  # the results could not be stored: the run stopped, nothing retried


def test_a_cache_directory_removed_mid_run_is_a_harness_error(tmp_path):
    cache = tmp_path / "cache"
    fn = Counting()

    def removing(query, k):
        if query == "text 3":
            shutil.rmtree(cache)
        return fn(query, k)

    with pytest.raises(HarnessError, match=r"the cache directory was removed during the run.*stays in place"):
        _pipeline(removing).run(QUERIES, cache=cache)
    assert set(fn.calls.values()) == {1}  # found when the shard is written: the run stops, nothing retried


def test_metadata_is_stored_by_the_stated_rule_or_refused_naming_the_key(tmp_path):
    when = datetime.datetime(2026, 12, 1, 10, 30)

    def search(query, k):
        return [
            Hit(
                "d1", 1.0, metadata={"n": np.int64(3), "x": np.float32(0.5), "at": when, "v": np.arange(2), "t": (1, 2)}
            )
        ]

    stage = functions.retriever(search, name="meta", version="1")
    first = Pipeline(stage, depth=1).run({"q1": "a"}, cache=tmp_path)
    again = Pipeline(stage, depth=1).run({"q1": "a"}, cache=tmp_path)
    expected = {"n": 3, "x": 0.5, "at": "2026-12-01T10:30:00", "v": [0, 1], "t": [1, 2]}
    for result in (first, again):  # the same with and without the cache
        metadata = dict(result.stages["meta"].outcomes["q1"].hits[0].metadata)
        assert metadata == expected and type(metadata["n"]) is int and type(metadata["x"]) is float
    assert again.stages["meta"].cache_hits == 1

    bad = functions.retriever(lambda q, k: [Hit("d7", metadata={"obj": object()})], name="bad", version="1")
    with pytest.raises(
        InputError,
        match=r"stage 'bad', query 'q1', hit 'd7', metadata key 'obj': the value is a "
        r"builtins.object, which the cache cannot store as JSON",
    ):
        Pipeline(bad, depth=1).run({"q1": "a"}, cache=tmp_path / "other")


# -- every exception a stage raises is its query's; Ctrl-C and SystemExit stop the run -----------------------------


class OwnBaseException(BaseException):
    pass


RECORDED = {
    "GeneratorExit": (GeneratorExit("closed"), "GeneratorExit: closed"),
    "CancelledError": (asyncio.CancelledError(), "the stage raised CancelledError itself"),
    "a BaseException of its own": (OwnBaseException("odd"), "OwnBaseException: odd"),
}


def _faulty(exc: BaseException, is_async: bool):
    def search(query, k):
        if query == "text 2":
            raise exc
        return Counting()(query, k)

    if not is_async:
        return functions.retriever(search, name="perfect", version="1")

    async def asearch(query, k):
        await asyncio.sleep(0)
        return search(query, k)

    return functions.retriever(asearch, name="perfect", version="1")


MODES = [
    pytest.param(False, 1, id="sync"),
    pytest.param(False, 3, id="threads"),
    pytest.param(True, 1, id="async"),
    pytest.param(True, 3, id="async-concurrent"),
]


@pytest.mark.parametrize("kind", list(RECORDED))
@pytest.mark.parametrize("is_async,concurrency", MODES)
def test_a_base_exception_of_a_stage_is_recorded_for_its_query(kind, is_async, concurrency):
    exc, message = RECORDED[kind]
    pipe = Pipeline(_faulty(exc, is_async), depth=3, budget=1)
    result = pipe.run(QUERIES, concurrency=concurrency, timeout=5)
    assert result.failures.to_dict("records") == [{"stage": "perfect", "query_id": "q2", "error": message}]
    assert all(not o.failed for q, o in result.stages["perfect"].outcomes.items() if q != "q2")


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("is_async,concurrency", MODES)
def test_ctrl_c_and_system_exit_stop_the_run_keeping_what_is_stored(tmp_path, exc, is_async, concurrency):
    def search(query, k):
        if query == "text 5":
            time.sleep(0.05)  # let the others land first
            raise exc()
        return Counting()(query, k)

    if is_async:

        async def stage_fn(query, k):
            return search(query, k)
    else:
        stage_fn = search
    with pytest.raises(exc):
        Pipeline(functions.retriever(stage_fn, name="perfect", version="1"), depth=3).run(
            QUERIES, cache=tmp_path, concurrency=concurrency
        )
    stored = {r["query_id"] for r in _lines(tmp_path)}
    assert "q5" not in stored and {"q0", "q1", "q2", "q3", "q4"} <= stored
    fn = Counting()
    result = _pipeline(fn).run(QUERIES, cache=tmp_path)
    assert result.stages["perfect"].cache_hits == len(stored) and "q5" in fn.calls


# -- a timeout holds whatever an async stage does ----------------------------------------------------------------


@pytest.mark.parametrize("n_queries,expected", [(2, 1.0), (4, 2.0)])
def test_an_async_stage_blocking_its_event_loop_still_times_out(n_queries, expected):
    async def blocking(query, k):
        time.sleep(4.0)  # blocks the event loop it runs on
        return ["d1"]

    queries = {f"q{i}": f"text {i}" for i in range(n_queries)}
    pipe = Pipeline(functions.retriever(blocking, name="blocking", version="1"), depth=1)
    start = time.perf_counter()
    with pytest.warns(rag_eval.errors.FailingStage, match=f"failed on {n_queries} of {n_queries} queries"):
        result = pipe.run(queries, concurrency=2, timeout=1.0)  # said once, with the count
    elapsed = time.perf_counter() - start
    # about timeout x ceil(queries / concurrency); before, the queries ran one after another and none timed out
    assert elapsed < 3 * expected, elapsed
    assert result.failures["error"].tolist() == ["timed out"] * n_queries


def test_an_async_stage_keeps_its_event_loop_from_call_to_call():
    loops = set()

    async def search(query, k):
        loops.add(id(asyncio.get_running_loop()))
        await asyncio.sleep(0.001)
        return ["d1"]

    Pipeline(functions.retriever(search, name="a", version="1"), depth=1).run(QUERIES, concurrency=2)
    assert 1 <= len(loops) <= 2  # one loop per worker thread, reused


# -- a real small file system, as root: filled mid-run, then space freed; made read-only -------------------------


def _remount(mount: Path, options: str) -> None:
    import subprocess

    subprocess.run(["mount", "-o", f"remount,{options}", str(mount)], check=True, capture_output=True)


def _wordy(query, k):  # about 2 KB a record: the 64 KiB file system fills after some thirty queries
    q = "q" + query.split()[-1]
    return [Hit(f"{q}-d{i}", 1.0 / (i + 1), "lorem ipsum " * 60) for i in range(k)]


def test_a_real_full_file_system_stops_the_run_and_the_run_resumes_once_space_is_freed(tmpfs):
    queries = {f"q{i}": f"text {i}" for i in range(80)}
    qrels = {q: {f"{q}-d0": 1} for q in queries}
    cache = tmpfs / "cache"
    calls = []

    def search(query, k):
        calls.append(query)
        return _wordy(query, k)

    pipe = Pipeline(functions.retriever(search, name="perfect", version="1"), depth=3, budget=1)
    pipe.run(dict(list(queries.items())[:10]), cache=cache)  # fits
    with pytest.raises(HarnessError, match=r"No space left on device; free some space"):
        pipe.run(queries, cache=cache, retries=2)
    stored = _lines(cache)
    assert len(stored) == 10 and sorted(calls) == sorted(queries.values())  # each called once; the unstored, lost
    _no_temporary_files(cache)
    _remount(tmpfs, "size=2m")  # space freed
    calls.clear()
    result = pipe.run(queries, cache=cache)
    assert result.stages["perfect"].cache_hits == len(stored) and len(calls) == 80 - len(stored)
    report = rag_eval.evaluate(qrels, result)
    assert report.values(report.runs[0], "recall@budget", stage="perfect").tolist() == [1.0] * 80


def test_a_real_read_only_file_system_reads_what_is_stored_and_refuses_to_write(tmpfs):
    cache = tmpfs / "cache"
    pipe = Pipeline(functions.retriever(_wordy, name="perfect", version="1"), depth=3, budget=1)
    pipe.run({"q0": "text 0", "q1": "text 1"}, cache=cache)
    _remount(tmpfs, "ro")
    again = pipe.run({"q0": "text 0", "q1": "text 1"}, cache=cache)  # all stored: nothing to write
    assert again.stages["perfect"].cache_hits == 2
    with pytest.raises(HarnessError, match=r"Read-only file system; the file system is read-only: pass another cache="):
        pipe.run({"q0": "text 0", "q2": "text 2"}, cache=cache)


def test_an_abandoned_event_loop_is_closed_by_its_driver_alone():
    # CI once failed on a race: the run's end closed an abandoned loop while its driver thread was closing it too
    from rag_eval.stages._batch import StageJob, _Caller

    release, seen = threading.Event(), []

    async def search(query, k):
        seen.append(asyncio.get_running_loop())
        release.wait(5.0)  # blocks its event loop past the timeout
        return ["d1"]

    caller = _Caller(functions.retriever(search, name="slow", version="1"), StageJob("first", 1, timeout=0.05))
    with pytest.raises(TimeoutError):
        caller.one("text", None)
    abandoned = seen[0]
    assert abandoned not in caller.loops and not abandoned.is_closed()  # left to its driver, not to close()
    caller.close()
    release.set()
    deadline = time.monotonic() + 5.0
    while not abandoned.is_closed() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert abandoned.is_closed()
