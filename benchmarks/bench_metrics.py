"""Time rag_eval against pytrec_eval, ir_measures and ranx on the same synthetic qrels and runs.

Run from the repository root:  .venv/bin/python benchmarks/bench_metrics.py [--sizes 1000x100,10000x1000]
    [--tools rag_eval,pytrec_eval,ir_measures,ranx] [--sources dicts,trec] [--repeat 3] [--timeout 900]
    [--seed 0] [--write benchmarks/RESULTS.md]

What is measured. Every tool computes the same five measures, per query, trec_eval-style: AP, nDCG@10, P@10,
recall@100 and RR (rag_eval with conventions="trec_eval"). Two input sources are reported apart:
  dicts  {qid: {doc: grade}} and {qid: {doc: score}} already built in memory; timed = everything the tool does
         from those dicts to per-query values (rag_eval: Qrels.from_dict + Run.from_scores + evaluate + the
         per_query frame; pytrec_eval: RelevanceEvaluator + evaluate; ir_measures: iter_calc, consumed;
         ranx: Qrels(dict) + Run(dict) + evaluate, which keeps per-query values in run.scores).
  trec   the same data as TREC files, read with each tool's own readers, then evaluated as above.
Data (per size "queries x depth", seeded numpy default_rng): ids "q<n>" and "D<n>" from a 1,000,000-doc corpus;
each query ranks `depth` distinct docs with scores rounded to 4 decimals (so a few ties, as in real runs); its
qrels judge ~5% of those docs plus ~20 unretrieved docs, grades 0..3 (about half 0). The files are written once
to benchmarks/_data/ and reused while their sidecar .json matches the parameters.

Each (tool, size, source) runs in a fresh subprocess (this script with a hidden --worker argument): the tool is
imported first (not timed), then the FIRST call is timed (any JIT or lazy set-up included: ranx compiles with
numba, cached in benchmarks/_data/numba_cache unless NUMBA_CACHE_DIR is set, so its first call depends on that
cache: the notes say which; delete the folder for a cold start), then --repeat WARM
calls (median). Peak extra memory: after the timed calls, the peak RSS is reset (/proc/self/clear_refs), the
current RSS taken as baseline, one more warm call made, and VmHWM - baseline reported in MB (Linux only).

The summary table sets rag_eval beside pytrec_eval at every size and source, with the speed-up targets of issue 28
(from dicts >= 4x at 10,000 x 1,000 and 100,000 x 100, >= 2x at 1,000,000 x 10; from TREC files >= 5x and >= 3x)
and whether rag_eval's peak memory is at most pytrec_eval's. The machine's load (os.getloadavg) is recorded before
and after the run and as each worker starts: other processes on the machine slow every tool alike, so compare
ratios within one run.

How to read the ratios: "warm vs rag_eval" = tool warm time / rag_eval warm time and "memory vs rag_eval" =
tool peak MB / rag_eval peak MB, within the same size and source: > 1 means rag_eval is faster / leaner.
The notes compare each tool's mean of every measure with pytrec_eval's (differences come from conventions,
e.g. how a tool breaks score ties). ranx uses numba threads (all cores); the others run on one core.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "_data"
NUMBA_CACHE = DATA_DIR / "numba_cache"  # ranx's compiled functions, kept here rather than in site-packages
TOOLS = ("rag_eval", "pytrec_eval", "ir_measures", "ranx")
SOURCES = ("dicts", "trec")
DEFAULT_SIZES = "10000x1000,100000x100,1000000x10"  # the headline sizes and a million queries (issue 28)
TARGETS = {  # issue 28: rag_eval at least this many times faster than pytrec_eval (warm), per size and source
    (10_000, 1000, "dicts"): 4.0,
    (100_000, 100, "dicts"): 4.0,
    (1_000_000, 10, "dicts"): 2.0,
    (10_000, 1000, "trec"): 5.0,
    (100_000, 100, "trec"): 5.0,
    (1_000_000, 10, "trec"): 3.0,
}
CORPUS = 1_000_000
DATA_VERSION = 2  # bump when the generator changes, so stale files are rewritten
LABELS = ["AP", "nDCG@10", "P@10", "R@100", "RR"]
RAG_METRICS = ["ap", "ndcg@10", "precision@10", "recall@100", "mrr"]
PYTREC_MEASURES = ["map", "ndcg_cut_10", "P_10", "recall_100", "recip_rank"]  # keys of pytrec_eval's results
RANX_METRICS = ["map", "ndcg@10", "precision@10", "recall@100", "mrr"]


# ----- data -------------------------------------------------------------------------------------------------
def ensure_data(queries: int, depth: int, seed: int) -> tuple[Path, Path]:
    """Write (or reuse) the qrels and run files of one size; return their paths."""
    stem = DATA_DIR / f"q{queries}_d{depth}_s{seed}"
    qrels_path, run_path, meta_path = Path(f"{stem}.qrels"), Path(f"{stem}.run"), Path(f"{stem}.json")
    params = {"queries": queries, "depth": depth, "seed": seed, "corpus": CORPUS, "version": DATA_VERSION}
    if (
        qrels_path.exists()
        and run_path.exists()
        and meta_path.exists()
        and {k: v for k, v in json.loads(meta_path.read_text()).items() if k in params} == params
    ):
        return qrels_path, run_path
    import numpy as np

    t0 = time.perf_counter()
    print(f"generating {queries}x{depth} into {DATA_DIR} ...", file=sys.stderr, flush=True)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    # depth distinct docs per query: sorted draws from [0, CORPUS - depth] plus 0..depth-1 are strictly increasing
    docs = np.sort(rng.integers(0, CORPUS - depth + 1, size=(queries, depth)), axis=1) + np.arange(depth)
    scores = np.round(rng.normal(50.0, 10.0, size=(queries, depth)), 4)
    judged = rng.random((queries, depth)) < 0.05
    extra = 1 + rng.poisson(19, size=queries)  # >= 1: every query is in the qrels too
    grade_of = lambda n: rng.choice(4, size=n, p=[0.5, 0.25, 0.15, 0.10])  # noqa: E731
    qrels_lines = run_lines = 0
    with open(f"{qrels_path}.tmp", "w") as fq, open(f"{run_path}.tmp", "w") as fr:
        for i in range(queries):
            q, row = f"q{i}", docs[i]
            cand = rng.integers(0, CORPUS, size=2 * extra[i] + 5)
            cand = cand[~np.isin(cand, row)]
            _, first = np.unique(cand, return_index=True)
            unretrieved = cand[np.sort(first)][: extra[i]]
            jdocs = np.concatenate([row[judged[i]], unretrieved])
            fq.write("".join(f"{q}\t0\tD{d}\t{g}\n" for d, g in zip(jdocs.tolist(), grade_of(len(jdocs)).tolist())))
            qrels_lines += len(jdocs)
            # rank by score desc, ties by doc id desc as strings (trec_eval's order; the rank column is informative)
            ranked = sorted(zip(scores[i].tolist(), (f"D{d}" for d in row.tolist())), reverse=True)
            fr.write("".join(f"{q}\tQ0\t{d}\t{r}\t{s:.4f}\tbench\n" for r, (s, d) in enumerate(ranked, 1)))
            run_lines += depth
    os.replace(f"{qrels_path}.tmp", qrels_path)
    os.replace(f"{run_path}.tmp", run_path)
    meta_path.write_text(json.dumps({**params, "qrels_lines": qrels_lines, "run_lines": run_lines}) + "\n")
    print(f"  {qrels_lines} judgements, {run_lines} run lines in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return qrels_path, run_path


def read_dicts(qrels_path: Path, run_path: Path) -> tuple[dict, dict]:
    """Plain-Python reading of the files into the dicts every tool gets (not timed)."""
    qrels: dict[str, dict[str, int]] = {}
    with open(qrels_path) as f:
        for line in f:
            q, _, d, g = line.split()
            qrels.setdefault(q, {})[d] = int(g)
    run: dict[str, dict[str, float]] = {}
    with open(run_path) as f:
        for line in f:
            q, _, d, _, s, _ = line.split()
            run.setdefault(q, {})[d] = float(s)
    return qrels, run


# ----- worker: one tool, one size, one source, in its own process -------------------------------------------
def make_call(tool: str, source: str, qrels_path: Path, run_path: Path):
    """Import the tool; return (call, means): call() does the timed work, means(result) the mean per measure."""
    qp, rp = str(qrels_path), str(run_path)
    if source == "dicts":
        qrels_d, run_d = read_dicts(qrels_path, run_path)
    if tool == "rag_eval":
        import rag_eval

        _ = rag_eval.Qrels, rag_eval.Run, rag_eval.evaluate  # its public names load on first use: load them here

        def call():
            if source == "dicts":
                qrels, run = rag_eval.Qrels.from_dict(qrels_d), rag_eval.Run.from_scores(run_d, name="run")
            else:
                qrels, run = rag_eval.Qrels.from_trec(qp), rag_eval.Run.from_trec(rp, name="run")
            report = rag_eval.evaluate(qrels, run, RAG_METRICS, conventions="trec_eval")
            report.per_query  # noqa: B018  (the per-query frame is built lazily: include it)
            return report

        return call, lambda rep: [rep.mean("run", m) for m in rep.metrics]
    if tool == "pytrec_eval":
        import pytrec_eval

        measures = {"map", "ndcg_cut.10", "P.10", "recall.100", "recip_rank"}

        def call():
            if source == "dicts":
                qrels, run = qrels_d, run_d
            else:
                with open(qp) as fq, open(rp) as fr:
                    qrels, run = pytrec_eval.parse_qrel(fq), pytrec_eval.parse_run(fr)
            return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)

        return call, lambda res: [statistics.fmean(v[k] for v in res.values()) for k in PYTREC_MEASURES]
    if tool == "ir_measures":
        import ir_measures
        from ir_measures import AP, RR, P, R, nDCG

        measures = [AP, nDCG @ 10, P @ 10, R @ 100, RR]

        def call():
            if source == "dicts":
                return list(ir_measures.iter_calc(measures, qrels_d, run_d))
            return list(ir_measures.iter_calc(measures, ir_measures.read_trec_qrels(qp), ir_measures.read_trec_run(rp)))

        def means(res):
            by = {str(m): [] for m in measures}
            for r in res:
                by[str(r.measure)].append(r.value)
            return [statistics.fmean(by[str(m)]) for m in measures]

        return call, means
    if tool == "ranx":
        import ranx

        def call():
            if source == "dicts":
                qrels, run = ranx.Qrels(qrels_d), ranx.Run(run_d)
            else:
                qrels, run = ranx.Qrels.from_file(qp, kind="trec"), ranx.Run.from_file(rp, kind="trec")
            return ranx.evaluate(qrels, run, RANX_METRICS)  # per-query values land in run.scores

        return call, lambda res: [float(res[m]) for m in RANX_METRICS]
    raise ValueError(f"unknown tool {tool!r}")


def _kb(field: str, path: str = "/proc/self/status") -> int | None:
    """A ``Field:  N kB`` line of a /proc file, in kB (None where there is none)."""
    try:
        with open(path) as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))
    except (OSError, StopIteration):
        return None


def worker(spec: dict) -> dict:
    import gc

    note = None
    if spec["tool"] == "ranx":  # did this process find numba's on-disk cache of ranx's functions already filled?
        cached = any(Path(os.environ.get("NUMBA_CACHE_DIR", "/nonexistent")).rglob("*.nbi"))
        note = "numba cache " + ("warm" if cached else "cold: first call includes JIT compiling")
    call, means = make_call(spec["tool"], spec["source"], Path(spec["qrels"]), Path(spec["run"]))
    t0 = time.perf_counter()
    result = call()
    first = time.perf_counter() - t0
    values = means(result)
    warm = []
    for _ in range(spec["repeat"]):
        del result
        gc.collect()
        t0 = time.perf_counter()
        result = call()
        warm.append(time.perf_counter() - t0)
    del result
    gc.collect()
    try:  # hand freed heap back to the OS so the measured call cannot hide in memory kept from earlier calls
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    peak_mb = None
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
        base = _kb("VmRSS")
        _result = call()  # held until the peak is read
        peak = _kb("VmHWM")
        if base is not None and peak is not None:
            peak_mb = (peak - base) / 1024
    except OSError:
        pass
    return {
        "ok": True,
        "first": first,
        "warm": statistics.median(warm) if warm else None,
        "peak_mb": peak_mb,
        "means": values,
        "note": note,
    }


def run_worker(tool: str, source: str, qrels: Path, run: Path, repeat: int, timeout: float) -> dict:
    spec = {"tool": tool, "source": source, "qrels": str(qrels), "run": str(run), "repeat": repeat}
    env = {**os.environ, "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", str(NUMBA_CACHE))}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None  # the machine's load as the worker starts
    result = run_script_worker(Path(__file__), spec, timeout, env)
    result["load"] = load
    return result


def run_script_worker(script: Path, spec: dict, timeout: float, env: dict[str, str]) -> dict:
    """``script --worker SPEC`` in a fresh process: its last ``@@RESULT {json}`` line, or why there is none."""
    cmd = [sys.executable, str(Path(script).resolve()), "--worker", json.dumps(spec)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timeout (> {timeout:g} s)"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@RESULT ")]
    if proc.returncode == 0 and lines:
        return json.loads(lines[-1][len("@@RESULT ") :])
    err = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return {"ok": False, "error": f"failed (exit {proc.returncode}): {err[-1].strip()[:160] if err else 'no output'}"}


# ----- report -----------------------------------------------------------------------------------------------
def fmt_mb(mb: float | None) -> str:
    return "–" if mb is None else f"{mb:.0f}" if abs(mb) >= 10 else f"{mb:.1f}"


def fmt_s(t: float | None) -> str:
    if t is None:
        return "–"
    return f"{t:.0f}" if t >= 100 else f"{t:.1f}" if t >= 10 else f"{t:.2f}" if t >= 1 else f"{t:.3f}"


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}×" if a is not None and b not in (None, 0) else "–"


def tables(results: dict, sizes: list, tools: list, sources: list) -> tuple[str, list[str]]:
    rows = [
        "| size | source | tool | first (s) | warm (s) | peak extra MB | warm vs rag_eval | memory vs rag_eval "
        "| load |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    notes, warm_cache = [], 0
    for q, d in sizes:
        for src in sources:
            ref = results.get((q, d, src, "rag_eval"), {})
            pt = results.get((q, d, src, "pytrec_eval"), {})
            for tool in tools:
                r = results[(q, d, src, tool)]
                size = f"{q:,} × {d:,}"
                load = "–" if r.get("load") is None else f"{r['load']:.1f}"
                if not r.get("ok"):
                    rows.append(f"| {size} | {src} | {tool} | {r['error']} | | | | | {load} |")
                    continue
                warm_r = ratio(r["warm"], ref.get("warm")) if ref.get("ok") else "–"
                mem_r = ratio(r["peak_mb"], ref.get("peak_mb")) if ref.get("ok") else "–"
                rows.append(
                    f"| {size} | {src} | {tool} | {fmt_s(r['first'])} | {fmt_s(r['warm'])} | {fmt_mb(r['peak_mb'])} "
                    f"| {warm_r} | {mem_r} | {load} |"
                )
                if r.get("note"):
                    notes.append(f"{tool} at {q}x{d} ({src}): {r['note']}.")
                    warm_cache += r["note"] == "numba cache warm"
                if pt.get("ok") and tool != "pytrec_eval":
                    diffs = [abs(a - b) for a, b in zip(r["means"], pt["means"])]
                    j = max(range(len(diffs)), key=diffs.__getitem__)
                    if diffs[j] > 1e-9:
                        notes.append(
                            f"{tool} at {q}x{d} ({src}): mean {LABELS[j]} differs from pytrec_eval's by "
                            f"{diffs[j]:.2e} (largest of the five)."
                        )
    if warm_cache:  # one line for all the ranx workers that found the cache filled
        notes = [n for n in notes if not n.endswith("numba cache warm.")] + [
            f"ranx: {warm_cache} worker(s) found numba's on-disk cache filled: their first call is loading it "
            "(and compiling what numba does not cache), not a cold JIT compile."
        ]
    return "\n".join(rows), notes


def headline(results: dict, sizes: list, sources: list) -> str:
    """rag_eval against pytrec_eval at every size and source measured: the speed-up, its target (issue 28) and the
    peak memory of each."""
    done = [
        (*s, src)
        for s in sizes
        for src in sources
        if all(results.get((*s, src, t), {}).get("ok") for t in ("rag_eval", "pytrec_eval"))
    ]
    if not done:
        return "(the summary needs rag_eval and pytrec_eval results)"
    rows = [
        "**rag_eval against pytrec_eval**",
        "",
        "| size | source | rag_eval warm (s) | pytrec_eval warm (s) | speed-up | target | rag_eval MB | pytrec_eval MB "
        "| memory at most pytrec_eval's |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for q, d, src in done:
        a, b = results[(q, d, src, "rag_eval")], results[(q, d, src, "pytrec_eval")]
        target = TARGETS.get((q, d, src))
        met = "" if target is None else (" (met)" if b["warm"] / a["warm"] >= target else " (not met)")
        lean = (
            "–" if a["peak_mb"] is None or b["peak_mb"] is None else ("yes" if a["peak_mb"] <= b["peak_mb"] else "no")
        )
        rows.append(
            f"| {q:,} × {d:,} | {src} | {fmt_s(a['warm'])} | {fmt_s(b['warm'])} | {ratio(b['warm'], a['warm'])} "
            f"| {'–' if target is None else f'{target:g}×'}{met} | {fmt_mb(a['peak_mb'])} | {fmt_mb(b['peak_mb'])} "
            f"| {lean} |"
        )
    return "\n".join(rows)


def machine() -> list[str]:
    from importlib import metadata

    cpu = (
        next(
            (
                ln.split(":", 1)[1].strip()
                for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")
            ),
            "?",
        )
        if os.path.exists("/proc/cpuinfo")
        else platform.processor()
    )
    ram = (_kb("MemTotal", "/proc/meminfo") or 0) / 1024**2
    versions = []
    for dist in ("rag-eval-stages", "pytrec-eval-terrier", "ir-measures", "ranx", "numba", "numpy", "pandas"):
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist} (not installed)")
    return [
        f"- CPU: {cpu}, {os.cpu_count()} cores, {ram:.1f} GiB RAM",
        f"- Python {platform.python_version()} ({platform.system()} {platform.release()})",
        f"- Packages: {', '.join(versions)}",
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=DEFAULT_SIZES, help="comma-separated QUERIESxDEPTH (default %(default)s)")
    p.add_argument("--tools", default=",".join(TOOLS), help="comma-separated, from %(default)s")
    p.add_argument("--sources", default=",".join(SOURCES), help="comma-separated, from %(default)s")
    p.add_argument("--repeat", type=int, default=3, help="warm repetitions, median reported (default 3)")
    p.add_argument("--timeout", type=float, default=900, help="seconds per worker (default 900)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--write", metavar="PATH", help="also write the tables and the machine to this markdown file")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        real_stdout, sys.stdout = sys.stdout, sys.stderr  # whatever the tools print goes to stderr
        real_stdout.write("@@RESULT " + json.dumps(worker(json.loads(args.worker))) + "\n")
        return
    sizes = [tuple(int(x) for x in s.lower().split("x")) for s in args.sizes.split(",") if s.strip()]
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    bad = [t for t in tools if t not in TOOLS] + [s for s in sources if s not in SOURCES]
    if bad or any(len(s) != 2 or min(s) <= 0 for s in sizes) or args.repeat < 1:
        p.error(f"bad --tools/--sources/--sizes/--repeat ({', '.join(bad) or args.sizes})")
    results = {}
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    for q, d in sizes:
        qrels, run = ensure_data(q, d, args.seed)
        for src in sources:
            for tool in tools:
                print(f"{q}x{d} {src:5} {tool:12}", end=" ", file=sys.stderr, flush=True)
                r = results[(q, d, src, tool)] = run_worker(tool, src, qrels, run, args.repeat, args.timeout)
                print(
                    f"first {fmt_s(r['first'])} s, warm {fmt_s(r['warm'])} s" if r["ok"] else r["error"],
                    file=sys.stderr,
                    flush=True,
                )
    table, notes = tables(results, sizes, tools, sources)
    load_after = os.getloadavg() if hasattr(os, "getloadavg") else None
    loads = (
        f"Machine load (os.getloadavg: 1, 5, 15 min): {', '.join(f'{x:.1f}' for x in load_before)} before the run, "
        f"{', '.join(f'{x:.1f}' for x in load_after)} after; each row's load column is the 1-minute load as its "
        "worker started (other processes share the cores: compare ratios within one run)."
        if load_before and load_after
        else "Machine load: not available here."
    )
    text = f"{table}\n\n{headline(results, sizes, sources)}\n\n{loads}\n"
    if notes:
        text += "\nNotes:\n" + "".join(f"- {n}\n" for n in notes)
    print(text)
    if args.write:
        exe = (
            os.path.relpath(sys.executable) if not os.path.relpath(sys.executable).startswith("..") else sys.executable
        )
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        head = [
            f"# rag_eval metric benchmark ({now})",
            "",
            *machine(),
            f"- Command: `{shlex.join([exe, *sys.argv])}`",
            f"- Warm = median of {args.repeat}; ratios are tool / rag_eval (> 1: rag_eval faster or leaner).",
            "",
        ]
        Path(args.write).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write).write_text("\n".join(head) + "\n" + text)
        print(f"written to {args.write}", file=sys.stderr)


if __name__ == "__main__":
    main()
