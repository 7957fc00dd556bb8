"""What the stage harness costs, and what its concurrency and cache buy. Not a test; run from the repository root:

    .venv/bin/python benchmarks/bench_harness.py [--queries 500] [--write]

Three measurements, each against the target of the stage-harness issue:
1. overhead: the harness's own time per query per stage, with instant stages (a retriever returning 100 hits
   and a reranker reversing them), without and with the on-disk cache (target < 1 ms);
2. concurrency: a stage with 20 ms of simulated I/O latency (time.sleep in threads, asyncio.sleep for an async
   stage) over 500 queries at concurrency 1, 8 and 32 (target speed-up >= 0.75 x N);
3. cache: the same I/O-bound pipeline rerun from a warm cache (median of 3 reruns), against its first run
   (target >= 50x faster).

With ``--scale 20000,100000[,1000000]`` it measures the harness at scale instead (the scale issue's table):

    .venv/bin/python benchmarks/bench_harness.py --scale 20000,100000 [--old /tmp/rag_eval_old] [--old-max 100000]
        [--new PATH] [--batch-size N] [--repeat R] [--profile first|rerun|evaluate|engine] [--write]

For each size N: N queries x depth 100 x the two instant stages above (Instant, Reverse), 200 N hits in all.
Every measurement runs in a fresh subprocess of this script (a hidden ``--child``), the code under test first on
``sys.path``; the child builds its inputs, then reads its baseline RSS (VmRSS), does the timed work, and reports
its peak RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) and ``(peak - baseline) / hits``:
  first     ``Pipeline.run(queries, cache=DIR)`` on an empty cache (the size of DIR afterwards is "cache on disk");
  rerun     the same call again (every query from the cache), then the stage-aware ``rag_eval.evaluate(qrels,
            result)``, each timed; qrels judge 4 docs per query (ranks 1, 4 and 61 of the retriever, and one doc
            neither stage returns; grades 1, 2, 1, 1);
  engine    the floor: the same two rankings as ``{query_id: [doc_id, ...]}`` dicts (built untimed), given to
            ``Run.from_ranking`` and evaluated together with recall@100, recall@5, precision@5, hit@5, ndcg@5
            and mrr@5 (timed: from_ranking x 2 + evaluate).
``--old PATH`` runs each measurement again on that tree (a checkout of the code before the scale issue:
``git worktree add /tmp/rag_eval_old 2e77700`` and ``setup.py build_ext --inplace`` in it), for sizes up to
``--old-max`` (the old path needs ~80 GB at 1M queries). ``--new PATH`` measures another tree than this one.
``--profile KIND`` runs one child of that kind under cProfile at the first size and prints the top functions.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import io
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# a --child measures the tree its parent names (the old code, or this one)
sys.path.insert(0, os.environ.get("BENCH_HARNESS_ROOT", str(ROOT)))

from rag_eval.stages import Hit, Pipeline, Reranker, Retriever  # noqa: E402  (after choosing the tree to measure)

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


# ---------------------------------------------------------------------------------------------- the harness at scale
DEPTH = 100
ENGINE_METRICS = ["recall@100", "recall@5", "precision@5", "hit@5", "ndcg@5", "mrr@5"]
JUDGED = ((0, 1), (3, 2), (60, 1))  # (rank - 1, grade) of the retriever's hits judged per query


def _scale_queries(n: int) -> dict[str, str]:
    """Short texts (the doc ids are "<text>-<rank - 1>", e.g. "q12-5"), as in the issue's measurement (its cache
    sizes match these ids)."""
    return {f"q{i}": f"q{i}" for i in range(n)}


def _scale_qrels(queries: dict[str, str]) -> dict[str, dict[str, int]]:
    """A few judged docs per query: three the retriever returns, one neither stage does."""
    return {
        qid: {**{f"{text}-{i}": grade for i, grade in JUDGED}, f"{text}-unretrieved": 1}
        for qid, text in queries.items()
    }


def _rss_now() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _child(kind: str, n: int, directory: Path, batch_size: int | None, profile: str | None) -> None:
    """One measurement in this fresh process; prints one JSON line."""
    import cProfile
    import pstats
    import warnings

    warnings.simplefilter("ignore")  # the qrels judge few docs (LowJudgedShare): said once here, not per child

    import rag_eval
    from rag_eval import Qrels, Run

    queries = _scale_queries(n)
    qrels = Qrels.from_dict(_scale_qrels(queries))
    options = {"batch_size": batch_size} if batch_size else {}
    pipeline = Pipeline(Instant("instant"), Reverse("reverse"), depth=DEPTH, budget=5)
    # warm the imports (pandas, the cache, the reports), not timed: the same calls on 20 queries
    few = dict(list(queries.items())[:20])
    with tempfile.TemporaryDirectory() as warm:
        rag_eval.evaluate(_scale_qrels(few), pipeline.run(few, cache=warm, progress=False, **options))
        rag_eval.evaluate(_scale_qrels(few), pipeline.run(few, cache=warm, progress=False, **options))
    rag_eval.evaluate(_scale_qrels(few), Run.from_ranking({q: [f"{t}-0"] for q, t in few.items()}), ENGINE_METRICS)
    out: dict[str, object] = {"rag_eval": rag_eval.__file__, "kind": kind, "queries": n}
    seconds: dict[str, float] = {}
    profiler = cProfile.Profile() if profile else None

    def timed_step(step: str, fn):
        if profiler is not None and profile == step:
            profiler.enable()
        start, cpu = time.perf_counter(), time.process_time()
        value = fn()
        seconds[step] = time.perf_counter() - start
        seconds[f"{step}_cpu"] = time.process_time() - cpu
        if profiler is not None and profile == step:
            profiler.disable()
        out[f"peak_after_{step}"] = _peak_rss()
        return value

    if kind == "engine":
        instant = {qid: [f"{text}-{i}" for i in range(DEPTH)] for qid, text in queries.items()}
        reverse = {qid: docs[::-1] for qid, docs in instant.items()}
        gc.collect()
        out["baseline"] = _rss_now()

        def build():
            return {
                "instant": Run.from_ranking(instant, name="instant"),
                "reverse": Run.from_ranking(reverse, name="reverse"),
            }

        runs = timed_step("engine", build)
        timed_step("evaluate", lambda: rag_eval.evaluate(qrels, runs, ENGINE_METRICS))
        seconds["engine_total"] = seconds["engine"] + seconds["evaluate"]
    else:
        cache = directory / "cache"
        gc.collect()
        out["baseline"] = _rss_now()
        result = timed_step(kind, lambda: pipeline.run(queries, cache=cache, progress=False, **options))
        if kind == "rerun":
            out["rss_after_rerun"] = _rss_now()
            timed_step("evaluate", lambda: rag_eval.evaluate(qrels, result))
    out["seconds"] = seconds
    out["peak"] = _peak_rss()
    out["hits"] = n * DEPTH * 2
    if profiler is not None:
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text).strip_dirs()
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(25)
        if os.environ.get("BENCH_CALLERS"):  # who calls the named functions (a regular expression)
            stats.print_callers(os.environ["BENCH_CALLERS"])
        out["profile"] = text.getvalue()
    print("BENCH-RESULT " + json.dumps(out))


def _measure(tree: str, kind: str, n: int, directory: Path, batch_size: int | None, profile: str | None = None):
    """Run one --child on ``tree``; its JSON result, with the load average before it."""
    env = {**os.environ, "BENCH_HARNESS_ROOT": tree, "PYTHONPATH": tree}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--queries", str(n), "--dir", str(directory)]
    if batch_size:
        cmd += ["--batch-size", str(batch_size)]
    if profile:
        cmd += ["--profile", profile]
    load = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tree)
    wall = time.perf_counter() - start
    lines = [line for line in done.stdout.splitlines() if line.startswith("BENCH-RESULT ")]
    if done.returncode != 0 or not lines:
        tail = "\n".join(done.stderr.splitlines()[-15:])
        print(f"  {kind} at {n} on {tree} failed (exit {done.returncode}):\n{tail}", file=sys.stderr)
        return None
    result = json.loads(lines[-1][len("BENCH-RESULT ") :])
    if not result["rag_eval"].startswith(str(Path(tree).resolve())):
        raise RuntimeError(f"the child measured {result['rag_eval']}, not the tree {tree}")
    result["load"] = load
    result["wall"] = wall
    return result


def _tree_label(tree: str) -> str:
    head = subprocess.run(["git", "-C", tree, "log", "-1", "--format=%h"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", tree, "status", "--porcelain", "-uno", "--", "rag_eval"], capture_output=True, text=True
    )
    return head.stdout.strip() + (" + uncommitted changes" if dirty.stdout.strip() else "")


def _disk(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())


def _gb(b: float) -> str:
    return f"{b / 1e9:.2f} GB"


def _scale(args) -> None:
    sizes = [int(x) for x in args.scale.split(",")]
    trees = ([("new", args.new)] if args.new != "none" else []) + ([("old", args.old)] if args.old else [])
    if args.profile:
        with tempfile.TemporaryDirectory(prefix="bench_harness_") as tmp:
            n = sizes[0]
            if args.profile in ("rerun", "evaluate"):
                _measure(args.new, "first", n, Path(tmp), args.batch_size)
            kind = {"evaluate": "rerun"}.get(args.profile, args.profile)
            result = _measure(args.new, kind, n, Path(tmp), args.batch_size, profile=args.profile)
            print(result["profile"] if result else "failed")
        return
    rows: dict[tuple[int, str], dict] = {}
    for n in sizes:
        for label, tree in trees:
            if label == "old" and n > args.old_max:
                continue
            batch = args.batch_size if label == "new" else None
            with tempfile.TemporaryDirectory(prefix="bench_harness_") as tmp:
                row: dict = {}
                repeats: dict[str, list] = {"rerun": [], "engine": []}
                kinds = ["first"] + ["rerun", "engine"] * args.repeat  # the rerun and the floor taken in turn
                for kind in kinds:
                    if kind == "engine" and args.engine_max is not None and n > args.engine_max:
                        row[kind], row["engine_skipped"] = None, True  # 1M rankings as dicts of strs: ~10 GB
                        continue
                    print(f"  {label} {kind} at {n:,} queries ...", file=sys.stderr, flush=True)
                    measured = _measure(tree, kind, n, Path(tmp), batch)
                    if kind == "first":
                        row[kind] = measured
                        row["disk"] = _disk(Path(tmp) / "cache") if (Path(tmp) / "cache").exists() else None
                    else:
                        repeats[kind].append(measured)
                for kind, results in repeats.items():
                    if results:
                        row[kind] = _median_of(results)
                rows[n, label] = row
                if args.json:
                    with open(args.json, "a", encoding="utf-8") as raw:
                        raw.write(json.dumps({"queries": n, "code": label, "tree": tree, **row}) + "\n")
                print(f"  {label} at {n:,}: {json.dumps(_brief(row))}", file=sys.stderr, flush=True)
    command = f".venv/bin/python benchmarks/bench_harness.py --scale {args.scale}"
    if args.old:
        command += f" --old {args.old} --old-max {args.old_max}"
    if args.batch_size:
        command += f" --batch-size {args.batch_size}"
    if args.repeat != 1:
        command += f" --repeat {args.repeat}"
    if args.engine_max is not None:
        command += f" --engine-max {args.engine_max}"
    text = _scale_table(rows, sizes, trees, command)
    print(text)
    if args.write:
        results = Path(__file__).resolve().parent / "RESULTS.md"
        with open(results, "a", encoding="utf-8") as out:
            out.write("\n" + text + "\n")
        print(f"appended to {results}")


def _median_of(results: list[dict | None]) -> dict | None:
    """One measurement from repeats of it: each step's median seconds, the highest peak RSS (None if one failed)."""
    if not results or any(r is None for r in results):
        return None
    out = dict(results[-1])
    out["seconds"] = {k: statistics.median(r["seconds"][k] for r in results) for k in results[0]["seconds"]}
    out["peak"] = max(r["peak"] for r in results)
    out["load"] = max(r["load"] for r in results)
    out["repeats"] = len(results)
    return out


def _brief(row: dict) -> dict:
    return {k: (v["seconds"] if isinstance(v, dict) else v) for k, v in row.items() if v is not None}


def _per_hit(m: dict | None) -> str:
    return "" if m is None else f"{(m['peak'] - m['baseline']) / m['hits']:.0f}"


def _secs(m: dict | None, step: str) -> str:
    """``wall s (cpu)``: the wall time of a step and its CPU time (user + system) in the child; on a shared machine
    the CPU time is the steadier of the two."""
    if m is None:
        return "failed"
    return f"{m['seconds'][step]:.1f} s ({m['seconds'][step + '_cpu']:.1f})"


def _ratio(top: list[tuple[dict | None, str]], bottom: list[tuple[dict | None, str]]) -> str:
    """``wall ratio (cpu ratio)`` of the summed steps."""
    if any(m is None for m, _ in top + bottom):
        return ""
    wall = sum(m["seconds"][s] for m, s in top) / sum(m["seconds"][s] for m, s in bottom)
    cpu = sum(m["seconds"][s + "_cpu"] for m, s in top) / sum(m["seconds"][s + "_cpu"] for m, s in bottom)
    return f"{wall:.1f}x ({cpu:.1f}x)"


def _scale_table(rows: dict, sizes: list[int], trees: list, command: str) -> str:
    now = datetime.datetime.now(datetime.UTC)
    loads = [m["load"] for row in rows.values() for m in row.values() if isinstance(m, dict) and "load" in m]
    lines = [
        f"## Stage harness at scale ({now:%Y-%m-%d %H:%M} UTC)",
        "",
        f"- {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()};"
        f" command: `{command}`",
        "- " + "; ".join(f"{label}: {tree} at {_tree_label(tree)}" for label, tree in trees),
        f"- load average (1 min) before each measurement: {min(loads):.1f} to {max(loads):.1f}" if loads else "",
        "- each measurement in its own subprocess (with --repeat R, the rerun and the floor R times each, in turn:"
        " their medians); times are wall seconds (CPU seconds of the child in brackets);"
        " peak RSS from getrusage in the child; bytes/hit = (peak RSS - the child's RSS before the timed call) /"
        " (queries x 100 x 2)",
        "",
        "| queries x depth x stages | code | first run | rerun from the cache | stage-aware evaluate | peak RSS first"
        " / rerun+evaluate | bytes/hit first / rerun+evaluate | cache on disk | engine: from_ranking x 2 | engine:"
        " evaluate | (rerun + evaluate) / engine |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        for label, _ in trees:
            row = rows.get((n, label))
            if row is None:
                continue
            first, rerun, engine = row["first"], row["rerun"], row["engine"]
            cells = [f"{n:,} x {DEPTH} x 2 ({n * DEPTH * 2 / 1e6:g}M hits)", label]
            cells += [_secs(first, "first"), _secs(rerun, "rerun"), _secs(rerun, "evaluate")]
            cells.append(f"{_gb(first['peak']) if first else '-'} / {_gb(rerun['peak']) if rerun else '-'}")
            cells.append(f"{_per_hit(first)} / {_per_hit(rerun)}")
            cells.append(f"{row['disk'] / 1e6:.0f} MB" if row.get("disk") is not None else "-")
            if row.get("engine_skipped"):
                cells += ["not run", "not run"]
            else:
                cells += [_secs(engine, "engine"), _secs(engine, "evaluate")]
            cells.append(_ratio([(rerun, "rerun"), (rerun, "evaluate")], [(engine, "engine"), (engine, "evaluate")]))
            lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for n in sizes:
        new, old = rows.get((n, "new")), rows.get((n, "old"))
        if new and old:
            first = _ratio([(old["first"], "first")], [(new["first"], "first")])
            again = _ratio(
                [(old["rerun"], "rerun"), (old["rerun"], "evaluate")],
                [(new["rerun"], "rerun"), (new["rerun"], "evaluate")],
            )
            lines.append(f"- at {n:,} queries, old / new: first run {first}; rerun + evaluate {again}")
    lines += [
        "- targets: 1M x 100 x 2 completes with peak RSS < 10 GB; <= 50 bytes/hit at 100k and 1M; (rerun + evaluate) /"
        " engine <= 3x at 100k; first run old / new >= 4x at 100k",
        "",
    ]
    return "\n".join(lines)


def _rows_from(paths: list[str]) -> tuple[dict, list[int], list]:
    """The measurements appended by --json, the latest of each (size, code)."""
    rows: dict = {}
    trees: dict[str, str] = {}
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row["queries"], row["code"]] = row
                trees[row["code"]] = row["tree"]
    sizes = sorted({n for n, _ in rows})
    return rows, sizes, sorted(trees.items(), key=lambda t: t[0] != "new")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--write", action="store_true", help="append the tables to benchmarks/RESULTS.md")
    parser.add_argument("--scale", help="comma-separated query counts: the harness at scale (see the docstring)")
    parser.add_argument("--old", help="a tree of the code before the scale issue, measured side by side")
    parser.add_argument("--old-max", type=int, default=100_000, help="the largest size run on --old")
    parser.add_argument("--new", default=str(ROOT), help="the tree measured as the new code (default: this one; none)")
    parser.add_argument("--json", help="also append each size's raw measurements to this JSON-lines file")
    parser.add_argument("--engine-max", type=int, default=None, help="the largest size the engine floor runs at")
    parser.add_argument("--batch-size", type=int, default=None, help="Pipeline.run(batch_size=) for the new code")
    parser.add_argument("--repeat", type=int, default=1, help="at scale: the rerun and the floor, each this many times"
                        " in turn (medians)")  # fmt: skip
    parser.add_argument("--profile", choices=("first", "rerun", "evaluate", "engine"))
    parser.add_argument(
        "--table", help="print the table of measurements appended by --json to these files (comma-separated)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.queries, Path(args.dir), args.batch_size, args.profile)
        return
    if args.table:
        rows, sizes, trees = _rows_from(args.table.split(","))
        print(_scale_table(rows, sizes, trees, f"(measured with --json; table from {args.table})"))
        return
    if args.scale:
        _scale(args)
        return
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
