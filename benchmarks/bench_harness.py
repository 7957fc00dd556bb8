"""What the stage harness costs, and what its concurrency and cache buy. Not a test; run from the repository root:

    .venv/bin/python benchmarks/bench_harness.py [--queries 500] [--write]

Three measurements, each against the target of the stage-harness issue:
1. overhead: the harness's own time per query per stage, with instant stages (a retriever returning 100 hits
   and a reranker reversing them), without and with the on-disk cache (target < 1 ms);
2. concurrency: a stage with 20 ms of simulated I/O latency (time.sleep in threads, asyncio.sleep for an async
   stage) over 500 queries at concurrency 1, 8 and 32 (target speed-up >= 0.75 x N);
3. cache: the same I/O-bound pipeline rerun from a warm cache (median of 3 reruns), against its first run
   (target >= 50x faster).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rag_eval.stages import Hit, Pipeline, Reranker, Retriever

LATENCY = 0.020


class Instant(Retriever):
    def search(self, query, k):
        return [Hit(f"{query}-{i}", 1.0 / (i + 1)) for i in range(k)]


class Reverse(Reranker):
    def rerank(self, query, hits):
        return list(reversed(hits))


class Remote(Retriever):
    """20 ms of waiting per call, as an HTTP vector store would."""

    def search(self, query, k):
        time.sleep(LATENCY)
        return [Hit(f"{query}-{i}") for i in range(k)]


class AsyncRemote(Retriever):
    @property
    def has_async(self):
        return True

    def search(self, query, k):
        time.sleep(LATENCY)
        return [Hit(f"{query}-{i}") for i in range(k)]

    async def asearch(self, query, k):
        await asyncio.sleep(LATENCY)
        return [Hit(f"{query}-{i}") for i in range(k)]


def timed(fn) -> float:
    gc.collect()  # what came before is not this call's to pay for
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--write", action="store_true", help="append the tables to benchmarks/RESULTS.md")
    args = parser.parse_args()
    n = args.queries
    queries = {f"q{i}": f"query text {i}" for i in range(n)}
    lines = [
        f"## Stage harness ({datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"- {platform.processor() or platform.machine()}, Python {platform.python_version()}; "
        f"command: `.venv/bin/python benchmarks/bench_harness.py --queries {n}`",
        "",
    ]

    # 1. overhead per query per stage
    pipeline = Pipeline(Instant("instant"), Reverse("reverse"), depth=100, budget=5)
    pipeline.run(dict(list(queries.items())[:20]), progress=False)  # warm imports
    bare = timed(lambda: pipeline.run(queries, progress=False))
    with tempfile.TemporaryDirectory() as tmp:
        cached = timed(lambda: pipeline.run(queries, cache=tmp, progress=False))
    stage_calls = 2 * n
    lines += [
        "| overhead (instant stages, 100 hits each) | ms per query per stage | target |",
        "|---|---:|---:|",
        f"| no cache | {1000 * bare / stage_calls:.3f} | < 1 |",
        f"| writing the cache | {1000 * cached / stage_calls:.3f} | < 1 |",
        "",
    ]

    # 2. concurrency with 20 ms of latency per call
    lines += [f"| concurrency (20 ms per call, {n} queries) | seconds | speed-up | target |", "|---|---:|---:|---:|"]
    for label, stage in (("threads", Remote("remote")), ("asyncio", AsyncRemote("remote-async"))):
        serial = None
        for c in (1, 8, 32):
            seconds = timed(
                lambda stage=stage, c=c: Pipeline(stage, depth=10).run(queries, concurrency=c, progress=False)
            )
            serial = serial or seconds
            lines.append(f"| {label}, concurrency {c} | {seconds:.2f} | {serial / seconds:.1f}x | >= {0.75 * c:.1f}x |")
    lines.append("")

    # 3. a warm cache against the first run
    with tempfile.TemporaryDirectory() as tmp:
        io_pipeline = Pipeline(Remote("remote"), Reverse("reverse"), depth=10)
        first = timed(lambda: io_pipeline.run(queries, cache=tmp, concurrency=8, progress=False))
        warm = statistics.median(
            timed(lambda: io_pipeline.run(queries, cache=tmp, concurrency=8, progress=False)) for _ in range(3)
        )
    lines += [
        "| cache | seconds | ratio | target |",
        "|---|---:|---:|---:|",
        f"| first run (20 ms retriever + reranker, concurrency 8) | {first:.3f} | | |",
        f"| rerun from the warm cache (median of 3) | {warm:.3f} | {first / warm:.0f}x faster | >= 50x |",
        "",
    ]

    text = "\n".join(lines)
    print(text)
    if args.write:
        results = Path(__file__).resolve().parent / "RESULTS.md"
        with open(results, "a", encoding="utf-8") as out:
            out.write("\n" + text + "\n")
        print(f"appended to {results}")


if __name__ == "__main__":
    main()
