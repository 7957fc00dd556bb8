"""Ray on the local cluster: an I/O-bound stage (20 ms a call) over 3,200 queries, 2 actors x 16 concurrent calls,
against the same stage called serially. Target (issue 15): at least 0.75 x 32 = 24x faster than serial.

The Ray time is timed after the actors have started, as the target says: from the moment every actor has made its
first call to the last call's end, the calls made in that window at the serial rate over its length (each call
records its start and end: the workers are processes on this machine, one clock); the first call to the last is
printed too. The whole
``run_stage`` (actors starting, the dataset planned, the rows gathered) is printed beside it. Each worker writes
its results to a sharded cache (a temporary directory), as in a real run.

Run it inside a network namespace that has loopback only (Ray otherwise binds to the machine's external address):

    unshare -n sh -c 'ip link set lo up && exec .venv/bin/python benchmarks/bench_ray.py'
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from rag_eval.stages import Hit, Retriever, StageCache
from rag_eval.stages._batch import StageJob
from rag_eval.stages._ray import RayExecutor

SLEEP = 0.020


class Sleepy(Retriever):
    """Waits 20 ms a call (a remote API), returns 10 hits; each call's start and end appended to ``log``."""

    def __init__(self, log: str | None = None) -> None:
        super().__init__("sleepy", version="1")
        self.log = log

    def search(self, query: str, k: int) -> list[Hit]:
        start = time.time()
        time.sleep(SLEEP)
        hits = [Hit(f"{query}-d{j}", 1.0 / (j + 1)) for j in range(10)]
        if self.log is not None:
            with open(self.log, "a") as f:
                f.write(f"{start!r}\t{time.time()!r}\t{os.getpid()}\n")
        return hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=3200)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--batch-rows", type=int, default=160, help="rows of a Ray batch")
    parser.add_argument("--no-cache", action="store_true", help="run without a cache (no shard is written)")
    parser.add_argument("--serial-queries", type=int, default=None, help="time serially on these many (scaled)")
    args = parser.parse_args()
    ids = [f"q{i}" for i in range(args.queries)]
    texts = [f"query {i}" for i in range(args.queries)]

    stage = Sleepy()
    start = time.perf_counter()
    some = texts[: args.serial_queries or args.queries]
    for text in some:
        stage.search(text, 10)
    serial = (time.perf_counter() - start) * args.queries / len(some)

    import ray

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray.init(num_cpus=args.actors, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "calls.log"
        store = StageCache(Path(folder) / "cache").store("sleepy", "bench")
        todo = pa.table({"query_id": ids, "text": texts, "query_hash": [f"h{i}" for i in range(args.queries)]})
        job = StageJob(role="first", depth=10, concurrency=args.concurrency)
        executor = RayExecutor(batch_size=args.batch_rows, actors=args.actors, stateful={"sleepy"})
        start = time.perf_counter()
        out = executor.run_stage(Sleepy(str(log)), job, todo, None if args.no_cache else store.spec())
        whole = time.perf_counter() - start
        spans = [(float(a), float(b), int(p)) for a, b, p in (x.split("\t") for x in log.read_text().splitlines())]
        assert out.num_rows == args.queries and out.column("error").null_count == args.queries, "calls failed"
        assert len(spans) == args.queries, f"{len(spans)} calls for {args.queries} queries"
        t0 = min(s for s, _, _ in spans)
        timed = max(e for _, e, _ in spans) - t0
        # from the moment every actor has started: the calls made in that window, at the serial rate, over it
        ready = max(min(s for s, _, p in spans if p == pid) for pid in {p for _, _, p in spans})
        window = max(e for _, e, _ in spans) - ready
        inside = sum(1 for s, _, _ in spans if s >= ready)
        for pid in sorted({p for _, _, p in spans}):
            mine = sorted((s, e) for s, e, p in spans if p == pid)
            print(f"actor {pid}: {len(mine)} calls from {mine[0][0] - t0:.2f} to {mine[-1][1] - t0:.2f} s")
        cached = len(
            StageCache(Path(folder) / "cache").store("sleepy", "bench").lookup(ids, todo["query_hash"].to_pylist())
        )
    ray.shutdown()
    target = 0.75 * args.actors * args.concurrency
    print(f"queries {args.queries}, {SLEEP * 1000:.0f} ms a call, {args.actors} actors x {args.concurrency} calls")
    print(f"serial: {serial:.2f} s ({serial / args.queries * 1000:.2f} ms a query)")
    rate = inside * serial / args.queries / window
    print(f"ray, from the first call to the last: {timed:.2f} s -> {serial / timed:.1f}x")
    print(
        f"ray, after every actor started: {inside} calls in {window:.2f} s -> {rate:.1f}x the serial rate "
        f"(target >= {target:.0f}x)"
    )
    print(f"ray, the whole run_stage (actors starting included): {whole:.2f} s -> {serial / whole:.1f}x")
    print(f"in the cache after the run: {cached} of {args.queries} queries{' (no cache)' * args.no_cache}")
    sys.exit(0 if rate >= target else 1)


if __name__ == "__main__":
    main()
