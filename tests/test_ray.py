"""RayExecutor: the same report as the local runner, on a Ray started in the test and on a `ray start --head`
cluster reached by address, a worker killed mid-run (the run completes, nothing finished is computed again), and
its settings checked before anything runs.

The tests marked ``ray`` need a network namespace that has loopback only (Ray otherwise listens on, and sends to,
the machine's external address): ``make test-ray`` runs this file inside one (``unshare -n``, as root), and
``make test`` runs ``make test-ray``. Outside one they skip with the reason; under CI=true they fail.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

import rag_eval
from rag_eval.stages import Hit, Pipeline, Reranker, Retriever
from rag_eval.stages._ray import RayExecutor

from .conftest import _skip_or_fail

# one token for every Ray this test process starts or joins (Ray 2.60 authenticates clients by token; the cluster
# started below is given the same one), set before ray is imported: no ~/.ray/auth_token is read or written
TOKEN = os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
os.environ.setdefault("RAY_AUTH_MODE", "token")  # a client of a `ray start` cluster sends the token only in this mode

N_QUERIES = 120
QUERIES = {f"q{i:03d}": f"query number {i}" for i in range(N_QUERIES)}
QRELS = {q: {f"d{(i * 7 + j) % 50}": 1 + j % 2 for j in range(3)} for i, q in enumerate(QUERIES)}
METRICS = ["recall@20", "ndcg@5", "mrr@5", "precision@5"]


def _log_call(log: str | None, query: str, event: str = "start") -> None:
    if log is not None:
        with open(log, "a") as f:  # one short append per line: whole lines from every process
            f.write(f"{event}\t{query}\t{os.getpid()}\t{time.time()!r}\n")


class Scored(Retriever):
    """A deterministic retriever: 30 of 50 docs, scores from the query's number (ties included); each call's start
    and end appended to ``log``, after ``delay`` seconds of waiting; the process killed (SIGKILL) on the call for
    ``kill_on`` while ``kill_flag`` is absent."""

    def __init__(
        self,
        name: str = "scored",
        *,
        log: str | None = None,
        delay: float = 0.0,
        kill_on: str = "",
        kill_flag: str = "",
    ):
        super().__init__(name, version="1")
        self.log, self.delay, self.kill_on, self.kill_flag = log, delay, kill_on, kill_flag

    def search(self, query: str, k: int) -> list[Hit]:
        _log_call(self.log, query)
        if query == self.kill_on and self.kill_flag and not os.path.exists(self.kill_flag):
            Path(self.kill_flag).touch()
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(self.delay)
        i = int(query.rsplit(" ", 1)[1])
        if i % 17 == 5:
            _log_call(self.log, query, "end")
            raise RuntimeError(f"no answer for {query}")  # a per-query fault, recorded as locally
        docs = [(i * 3 + j * 11) % 50 for j in range(30)]
        _log_call(self.log, query, "end")
        return [Hit(f"d{d}", float((d * (i + 1)) % 13)) for d in dict.fromkeys(docs)][:k]


class Flip(Reranker):
    """Reverses the hits and rescores them (1/rank); fails on a query whose number ends in 3."""

    def __init__(self, name: str = "flip", *, log: str | None = None) -> None:
        super().__init__(name, version="1")
        self.log = log

    def rerank(self, query: str, hits):
        _log_call(self.log, query)
        if query.endswith("3"):
            raise ValueError("flip refuses")
        return [Hit(h.doc_id, 1.0 / (r + 1)) for r, h in enumerate(reversed(hits))]


def _pipeline(**kw) -> Pipeline:
    return Pipeline(Scored(**kw), Flip(), depth=20, budget=5)


def _report(result):
    return rag_eval.evaluate(QRELS, result, metrics=METRICS)


def _assert_same_report(ours, local) -> None:
    a, b = _report(ours), _report(local)
    keys = ["stage", "query_id", "metric"]
    pa_, pb = a.per_query.sort_values(keys).reset_index(drop=True), b.per_query.sort_values(keys).reset_index(drop=True)
    assert list(pa_[keys].itertuples(index=False)) == list(pb[keys].itertuples(index=False))
    np.testing.assert_allclose(pa_["value"].to_numpy(float), pb["value"].to_numpy(float), rtol=0, atol=1e-12)
    sa, sb = a.summary, b.summary
    assert list(sa.columns) == list(sb.columns) and len(sa) == len(sb)
    for column in sa.columns:
        if sa[column].dtype.kind == "f":
            np.testing.assert_allclose(sa[column].to_numpy(), sb[column].to_numpy(), rtol=0, atol=1e-12)
        else:
            assert sa[column].tolist() == sb[column].tolist(), column
    assert len(a.per_query) == len(b.per_query) > 0


def _by_value() -> None:
    """Ray's workers get this module's stages by value (they cannot import the tests package: it is not installed)."""
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _in_loopback_netns() -> None:
    names = sorted(name for _, name in socket.if_nameindex())
    if names != ["lo"]:
        _skip_or_fail(
            f"the Ray tests run inside a network namespace with loopback only (this one has {names}): run them "
            "with `make test-ray` (unshare -n, as root)"
        )
    if shutil.which("ray", path=str(Path(sys.executable).parent)) is None:
        _skip_or_fail("the ray command is not installed beside this Python (the ray extra: make installs it)")
    _by_value()


@pytest.fixture(scope="module")
def _ray_of_this_module():
    """Stops at the end of the module the Ray that :func:`local_ray` started (one Ray for its tests: each start
    costs seconds)."""
    yield
    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        sys.modules["ray"].shutdown()


@pytest.fixture
def local_ray(_ray_of_this_module):
    """A Ray started in this process with 2 CPUs (the user's own ray.init, which the executor attaches to)."""
    _in_loopback_netns()
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    return ray


# -- on Ray ---------------------------------------------------------------------------------------------------------


@pytest.mark.ray
def test_a_local_ray_gives_the_local_report_and_writes_the_same_cache(local_ray, tmp_path):
    local = _pipeline().run(QUERIES, progress=False)
    # the reranker built in each actor by a factory (checked there against the pipeline's flip), the retriever as tasks
    executor = RayExecutor(batch_size=16, factory={"flip": Flip}, actors=2)
    ours = _pipeline().run(QUERIES, executor=executor, cache=tmp_path / "cache", progress=False)
    _assert_same_report(ours, local)
    assert ours.stages["scored"].failures == local.stages["scored"].failures
    # every query the workers computed is in the cache: a local rerun reads them all back, computing nothing
    log = tmp_path / "calls.log"
    again = _pipeline(log=str(log)).run(QUERIES, cache=tmp_path / "cache", progress=False)
    computed = log.read_text().splitlines() if log.exists() else []
    failed = {q for q, text in QUERIES.items() if int(text.rsplit(" ", 1)[1]) % 17 == 5}
    asked = sorted(line.split("\t")[1] for line in computed if line.startswith("start\t"))
    assert asked == sorted(QUERIES[q] for q in failed)  # the failures only (a failure is never stored)
    _assert_same_report(again, local)


@pytest.mark.ray
def test_a_killed_actor_is_replaced_and_nothing_stored_is_computed_again(local_ray, tmp_path):
    """A worker SIGKILLed mid-batch: Ray restarts the actor and retries the batch, which reads back from the cache
    what the dead worker had stored; computed again are only the queries it finished in the last PUT_SECONDS +
    flush_seconds (0 here) before it died (the bound the executor states) and the call it died in."""
    from rag_eval.stages._batch import PUT_SECONDS

    log, flag = tmp_path / "calls.log", tmp_path / "killed"
    victim = QUERIES["q085"]  # the 26th query of the Ray batch q060-q089: about 3.75 s into it
    stage = Scored(log=str(log), delay=0.15, kill_on=victim, kill_flag=str(flag))
    executor = RayExecutor(batch_size=30, actors=2, stateful={"scored"}, flush_seconds=0)
    ours = Pipeline(stage, depth=20, budget=5).run(QUERIES, executor=executor, cache=tmp_path / "cache", progress=False)
    assert flag.exists(), "the worker was never killed"
    _assert_same_report(ours, Pipeline(Scored(), depth=20, budget=5).run(QUERIES, progress=False))
    starts: dict[str, list[tuple[int, float]]] = {}
    ends: dict[str, list[float]] = {}
    for line in log.read_text().splitlines():
        event, query, pid, when = line.split("\t")
        if event == "start":
            starts.setdefault(query, []).append((int(pid), float(when)))
        else:
            ends.setdefault(query, []).append(float(when))
    assert set(starts) == set(QUERIES.values())  # the run completed: every query asked
    dead, killed_at = starts[victim][0]
    again = {q for q, calls in starts.items() if len(calls) > 1}
    assert victim in again and starts[victim][1][0] != dead  # asked again, in another process
    assert all(len(starts[q]) == 2 and starts[q][0][0] == dead for q in again)  # once more, and only the dead's
    failed = {QUERIES[q] for q in QUERIES if int(q[1:]) % 17 == 5}  # a failure is never stored: asked again anyway
    lost = {q: killed_at - ends[q][0] for q in again - {victim} - failed}
    assert all(age <= PUT_SECONDS + 0.15 + 0.5 for age in lost.values()), lost  # finished just before the death
    batch = [QUERIES[f"q{i:03d}"] for i in range(60, 90)]
    read_back = [q for q in batch[:25] if q not in again and q not in failed]
    assert len(read_back) >= 10, (read_back, sorted(again))  # most of what it finished was not computed again


@pytest.mark.ray
def test_a_head_started_apart_is_reached_by_address(tmp_path):
    _in_loopback_netns()
    import ray

    if ray.is_initialized():  # the Ray of the tests above (a driver connects to one Ray at a time)
        ray.shutdown()
    ray_command = str(Path(sys.executable).parent / "ray")
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="rg-ray-", dir="/tmp")  # short: Ray's unix socket paths must fit in 107 bytes
    env = {**os.environ, "RAY_AUTH_TOKEN": TOKEN, "RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0"}
    started = subprocess.run(
        [ray_command, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=2"]
        + ["--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 0, started.stderr[-3000:]
    try:
        local = _pipeline().run(QUERIES, progress=False)
        with RayExecutor(f"127.0.0.1:{port}", batch_size=32) as executor:
            ours = _pipeline().run(QUERIES, executor=executor, progress=False)
            assert ray.is_initialized() and ray.get_runtime_context().gcs_address == f"127.0.0.1:{port}"
        assert not ray.is_initialized()  # the executor started this connection, so it ended it
        _assert_same_report(ours, local)
    finally:
        subprocess.run([ray_command, "stop", "--force"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_ray_tests_are_kept_out_of_the_main_run_and_run_by_make_test():
    """`make test` runs the main suite with -m "not ray and not browser" (the browser tests apart) and then this
    file in its own namespace."""
    makefile = (Path(__file__).resolve().parent.parent / "Makefile").read_text()
    assert '-m "not ray and not browser"' in makefile and "$(MAKE) --no-print-directory test-ray" in makefile
    assert (
        "unshare -n sh -c 'ip link set lo up && exec $(BIN)/python -m pytest -q -m ray tests/test_ray.py'" in makefile
    )
