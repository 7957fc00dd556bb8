"""Time ``-m all_trec`` against the five headline measures, against the code from before issue 13, and against
pytrec_eval's every measure, on the same TREC files.

Run from the repository root:  .venv/bin/python benchmarks/bench_all_trec.py [--size 10000x1000] [--repeat 3]
    [--rounds 1] [--base /tmp/base] [--profile] [--seed 0] [--timeout 900] [--write benchmarks/RESULTS.md]

The data are bench_metrics.py's (the same generator, the same files in benchmarks/_data/, or in the folder
$RAG_EVAL_BENCH_DATA names): ids "q<n>" and "D<n>",
scores rounded to 4 decimals, ~5% of the ranked documents judged plus ~20 unretrieved ones, grades 0..3.

What each row times (all from the TREC files, each in a fresh subprocess; the tool imported first, not timed; then
the FIRST call timed, then --repeat warm calls, median):
  five (API)       Qrels.from_trec + Run.from_trec + evaluate(conventions="trec_eval") of AP, nDCG@10, P@10,
                   recall@100, RR + the per-query frame: bench_metrics.py's "trec" row for rag_eval;
  five (CLI)       ``rag-eval evaluate QRELS RUN --format trec_eval --conventions trec_eval --no-card -m map
                   -m ndcg_cut_10 -m P_10 -m recall_100 -m recip_rank``, in-process (rag_eval.cli.main, stdout
                   captured): reading, evaluating and printing the all lines;
  all_trec (CLI)   the same command with ``-m all_trec`` (no -q): every measure of trec_eval's all_trec;
  pytrec_eval five / all   parse_qrel + parse_run + RelevanceEvaluator(qrels, measures).evaluate(run), with the
                   five measures, and with ``pytrec_eval.supported_measures`` (every measure it has: its
                   all_trec-equivalent).
With --base PATH (a checkout of the code before issue 13, e.g. ``git worktree add /tmp/base fc55a4e`` with the
built _speedups .so copied into it), the five-measure rows run again with that tree first on PYTHONPATH, in the
same invocation, so old and new are timed on the same machine state. Peak extra memory as bench_metrics.py.

With --profile, one more worker reads the files once and times evaluate() for each family of all_trec on its own
(its metrics as the CLI expands ``-m all_trec``), to name the slow kernel.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_metrics as bm  # noqa: E402  (the data generator and the memory probe are bench_metrics.py's)

FIVE = ["map", "ndcg_cut_10", "P_10", "recall_100", "recip_rank"]
PYTREC_FIVE = {"map", "ndcg_cut.10", "P.10", "recall.100", "recip_rank"}
ROWS = ("five (API)", "five (CLI)", "all_trec (CLI)", "pytrec_eval five", "pytrec_eval all")


def make_call(row: str, qrels_path: str, run_path: str):
    """Import what the row needs; return call() doing the timed work."""
    if row == "five (API)":
        import rag_eval

        def call():
            qrels, run = rag_eval.Qrels.from_trec(qrels_path), rag_eval.Run.from_trec(run_path, name="run")
            report = rag_eval.evaluate(qrels, run, bm.RAG_METRICS, conventions="trec_eval")
            report.per_query  # noqa: B018
            return report

        return call
    if row in ("five (CLI)", "all_trec (CLI)"):
        from rag_eval import cli

        metrics = FIVE if row == "five (CLI)" else ["all_trec"]
        argv = ["evaluate", qrels_path, run_path, "--format", "trec_eval", "--conventions", "trec_eval", "--no-card"]
        for m in metrics:
            argv += ["-m", m]

        def call():
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = cli.main(argv)
            if code != 0:
                raise RuntimeError(f"rag-eval exit {code}: {err.getvalue().strip()[-300:]}")
            return out.getvalue()

        return call
    if row.startswith("pytrec_eval"):
        import pytrec_eval

        measures = PYTREC_FIVE if row == "pytrec_eval five" else set(pytrec_eval.supported_measures)

        def call():
            with open(qrels_path) as fq, open(run_path) as fr:
                qrels, run = pytrec_eval.parse_qrel(fq), pytrec_eval.parse_run(fr)
            return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)

        return call
    raise ValueError(f"unknown row {row!r}")


def worker(spec: dict) -> dict:
    import gc

    if spec["row"] == "profile":
        return profile(spec)
    call = make_call(spec["row"], spec["qrels"], spec["run"])
    t0 = time.perf_counter()
    result = call()
    first = time.perf_counter() - t0
    lines = result.count("\n") if isinstance(result, str) else None
    warm, cpu = [], []
    for _ in range(spec["repeat"]):
        del result
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        result = call()
        warm.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    del result
    gc.collect()
    peak_mb = None
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        base = bm._kb("VmRSS")
        _result = call()  # held until the peak is read
        peak = bm._kb("VmHWM")
        if base is not None and peak is not None:
            peak_mb = (peak - base) / 1024
    except (OSError, AttributeError):
        pass
    import rag_eval

    return {
        "ok": True,
        "first": first,
        "warm": statistics.median(warm),
        "cpu": statistics.median(cpu),
        "peak_mb": peak_mb,
        "lines": lines,
        "rag_eval": str(Path(rag_eval.__file__).parent.parent),
    }


def profile(spec: dict) -> dict:
    """Seconds of evaluate() per family of all_trec, the files read once (not timed)."""
    import warnings

    import rag_eval
    from rag_eval.metrics.trec_eval_measures import trec_eval_metrics

    qrels, run = rag_eval.Qrels.from_trec(spec["qrels"]), rag_eval.Run.from_trec(spec["run"], name="run")
    metrics = trec_eval_metrics(["all_trec"])
    families: dict[str, list] = {}
    for m in metrics:
        families.setdefault(m.family, []).append(m)
    times = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rag_eval.evaluate(qrels, run, metrics[:1], conventions="trec_eval")  # warm the imports
        t0 = time.perf_counter()
        rag_eval.evaluate(qrels, run, metrics, conventions="trec_eval")
        together = time.perf_counter() - t0
        for family, ms in families.items():
            runs = []
            for _ in range(max(1, spec["repeat"])):
                t0 = time.perf_counter()
                rag_eval.evaluate(qrels, run, ms, conventions="trec_eval")
                runs.append(time.perf_counter() - t0)
            times[family] = [len(ms), statistics.median(runs)]
    return {"ok": True, "together": together, "families": times}


def run_worker(row: str, qrels: Path, run: Path, repeat: int, timeout: float, base: str | None) -> dict:
    spec = {"row": row, "qrels": str(qrels), "run": str(run), "repeat": repeat}
    env = dict(os.environ)
    if base:
        env["PYTHONPATH"] = base + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return bm.run_script_worker(Path(__file__), spec, timeout, env)


def commit_of(tree: str) -> str:
    done = subprocess.run(["git", "-C", tree, "log", "-1", "--format=%h"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", tree, "status", "--porcelain", "--untracked-files=no", "--", "rag_eval"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return (done.stdout.strip() or "?") + (" + uncommitted changes in rag_eval/" if dirty else "")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="10000x1000", help="QUERIESxDEPTH (default %(default)s)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--base", help="a checkout of the code before issue 13, timed for the five-measure rows")
    p.add_argument("--rows", default=",".join(ROWS), help="comma-separated, from: " + ", ".join(ROWS))
    p.add_argument("--rounds", type=int, default=1, help="run every row this many times, report the least times")
    p.add_argument("--profile", action="store_true", help="also time evaluate() per family of all_trec")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--write", metavar="PATH", help="append the section to this markdown file")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        real_stdout, sys.stdout = sys.stdout, sys.stderr
        real_stdout.write("@@RESULT " + json.dumps(worker(json.loads(args.worker))) + "\n")
        return
    queries, depth = (int(x) for x in args.size.lower().split("x"))
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    if any(r not in ROWS for r in rows):
        p.error(f"--rows: pick from {', '.join(ROWS)}")
    if os.environ.get("RAG_EVAL_BENCH_DATA"):  # another folder for the generated files (the smoke test's)
        bm.DATA_DIR = Path(os.environ["RAG_EVAL_BENCH_DATA"])
    qrels, run = bm.ensure_data(queries, depth, args.seed)
    plan = []
    for row in rows:  # before and now side by side, so that both see the same load on a shared machine
        if args.base and row.startswith("five"):
            plan.append((row, args.base))
        plan.append((row, None))
    results: dict = {}
    for round_ in range(args.rounds):
        for row, base in plan:
            label = f"{row} [{'before: ' + args.base if base else 'now'}]" + (
                f" round {round_ + 1}" if args.rounds > 1 else ""
            )
            print(f"{label:58}", end=" ", file=sys.stderr, flush=True)
            r = run_worker(row, qrels, run, args.repeat, args.timeout, base)
            print(
                f"first {bm.fmt_s(r['first'])} s, warm {bm.fmt_s(r['warm'])} s, CPU {bm.fmt_s(r['cpu'])} s"
                if r["ok"]
                else r["error"],
                file=sys.stderr,
                flush=True,
            )
            kept = results.get((row, base))
            if kept is None or not kept.get("ok"):
                results[(row, base)] = r
            elif r.get("ok"):  # over rounds, the least of each time (the run the load disturbed least)
                for key in ("first", "warm", "cpu"):
                    kept[key] = min(kept[key], r[key])
    now_tree = str(HERE.parent)
    table = [
        "| what | code | first (s) | warm (s) | warm CPU (s) | peak extra MB | lines printed |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for (row, base), r in results.items():
        code = f"before ({commit_of(base)})" if base else f"now ({commit_of(now_tree)})"
        if not r.get("ok"):
            table.append(f"| {row} | {code} | {r['error']} | | | | |")
            continue
        table.append(
            f"| {row} | {code} | {bm.fmt_s(r['first'])} | {bm.fmt_s(r['warm'])} | {bm.fmt_s(r['cpu'])} "
            f"| {bm.fmt_mb(r['peak_mb'])} "
            f"| {r['lines'] if r['lines'] is not None else ''} |"
        )

    def warm(row: str, base: str | None = None, key: str = "warm") -> float | None:
        r = results.get((row, base), {})
        return r.get(key) if r.get("ok") else None

    def cpu(row: str, base: str | None = None) -> float | None:
        return warm(row, base, "cpu")

    ratios = ["| ratio | warm (wall) | warm CPU |", "|---|---:|---:|"]
    for name, a, b in [
        ("all_trec (CLI) / five (CLI), now", "all_trec (CLI)", "five (CLI)"),
        ("all_trec (CLI) / five (API), now", "all_trec (CLI)", "five (API)"),
        ("pytrec_eval all / rag_eval all_trec (CLI)", "pytrec_eval all", "all_trec (CLI)"),
        ("pytrec_eval five / rag_eval five (API)", "pytrec_eval five", "five (API)"),
        ("pytrec_eval all / pytrec_eval five", "pytrec_eval all", "pytrec_eval five"),
        ("five (API): now / before", "five (API)", ("five (API)", args.base)),
        ("five (CLI): now / before", "five (CLI)", ("five (CLI)", args.base)),
    ]:
        a_key, b_key = (a, None) if isinstance(a, str) else a, (b, None) if isinstance(b, str) else b
        cells = []
        for get in (warm, cpu):
            x, y = get(*a_key), get(*b_key)
            cells.append(f"{x / y:.2f}×" if x is not None and y else "–")
        if cells != ["–", "–"]:
            ratios.append(f"| {name} | {cells[0]} | {cells[1]} |")
    text = "\n".join(table) + "\n\n" + "\n".join(ratios) + "\n"
    if args.profile:
        prof = run_worker("profile", qrels, run, args.repeat, args.timeout, None)
        if prof.get("ok"):
            fam = sorted(prof["families"].items(), key=lambda kv: -kv[1][1])
            floor = prof["families"].get("num_ret", [1, 0.0])[1]
            text += (
                f"\nevaluate() per family of all_trec (files read once; all of them together "
                f"{prof['together']:.2f} s; each family alone, median of {args.repeat}; 'over num_ret': its "
                f"time less num_ret's alone, {floor:.3f} s, which is mostly the shared grade matrix):\n\n"
                "| family | metrics | seconds | over num_ret |\n|---|---:|---:|---:|\n"
                + "".join(f"| {f} | {n} | {s:.3f} | {s - floor:.3f} |\n" for f, (n, s) in fam)
            )
        else:
            text += f"\nprofile: {prof['error']}\n"
    print(text)
    if args.write:
        exe = os.path.relpath(sys.executable)
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        head = [
            f"## all_trec, the five headline measures before and after issue 13, and pytrec_eval ({stamp})",
            "",
            *bm.machine(),
            f"- Command: `{shlex.join([exe, *sys.argv])}`",
            f"- {queries:,} queries × {depth:,} results (bench_metrics.py's data, seed {args.seed}); warm = "
            f"median of {args.repeat} calls in one process, the least over {args.rounds} round(s) of fresh "
            f"processes (before and now interleaved). Platform {platform.machine()}.",
            "",
        ]
        with open(args.write, "a") as f:
            f.write("\n" + "\n".join(head) + "\n" + text)
        print(f"appended to {args.write}", file=sys.stderr)


if __name__ == "__main__":
    main()
