"""Does each C function of rag_eval._speedups earn its keep? End-to-end times with and without each one.

Run from the repository root:

    .venv/bin/python benchmarks/bench_speedups.py [--workloads dicts,trec] [--variants all] [--repeat 3]

The workloads are the metric benchmark's headline (benchmarks/bench_metrics.py, 10,000 queries x 1,000 results,
its data files in benchmarks/_data/, written by that script when absent):
  dicts  Qrels.from_dict + Run.from_scores + evaluate(trec_eval conventions, its five measures) + per_query;
  trec   Qrels.from_trec + Run.from_trec + the same evaluation.
Each variant runs in a fresh process (this script with --worker); the first call is untimed (imports, page cache),
then the median of --repeat calls is reported. Variants:
  c                  everything as built;
  pure               RAG_EVAL_PURE_PYTHON=1 (every pure-Python twin);
  -NAME              one C function replaced by its best alternative, the others kept:
    -score_columns, -judgement_columns   the Python path of Run.from_scores / Qrels (the reader then declines);
    -lookup            the per-query ``map(dict.get, ...)`` of rag_eval.metrics._grades (its Python twin);
    -lookup_packed     the packed ids unpacked to str objects (PackedIds.to_objects, by pyarrow), then looked up
                       as -lookup does (until 0.3.0 removed it, by the C ``lookup``: the measurement in RESULTS.md);
    -search_segments   the vectorised NumPy binary search of rag_eval.data.ranking.search_rows;
    -parse_columns     the line reader of rag_eval.data.columns (its Python twin);
    arrow              pyarrow's CSV reader (tab-separated, 2 threads) and compute kernels reading the same files
                       into the same columns (no grammar check, no bad-input errors: what it costs at best).
Each C function's "gain" is the end-to-end time without it over the time with it; the scale issue keeps a function
only where that gain is >= 1.5x on some workload.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from itertools import repeat
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

# the functions measured; since 0.3.0 the extension has only parse_columns and lookup_packed (the others were removed
# for gaining < 1.5x end to end: their variants now measure the build against itself)
FUNCTIONS = ("score_columns", "judgement_columns", "parse_columns", "lookup", "lookup_packed", "search_segments")
RELEVANT = {  # the functions each workload calls (measured: "inside C" of the c variant), and the arrow reader
    "dicts": ("-score_columns", "-judgement_columns", "-lookup", "-search_segments"),
    "trec": ("-parse_columns", "-lookup_packed", "-search_segments", "arrow"),
    "harness": ("-lookup_packed", "-judgement_columns", "-lookup", "-search_segments"),
}
METRICS = ["ap", "ndcg@10", "precision@10", "recall@100", "mrr"]


class _Without:
    """rag_eval._speedups with one function replaced by its alternative (see the module's docstring)."""

    def __init__(self, real: Any, name: str) -> None:
        self._real, self._name = real, name

    def __getattr__(self, attr: str) -> Any:
        if attr != self._name:
            return getattr(self._real, attr)
        if attr in ("score_columns", "judgement_columns", "parse_columns"):
            return lambda *args: None  # the reader declines: the caller's Python path runs
        if attr == "lookup":
            return lambda docs, hashes, offsets, rows, *judged: _lookup_python(docs, offsets, rows, *judged)
        if attr == "lookup_packed":

            def unpacked(blob: Any, starts: Any, offsets: Any, rows: Any, *judged: Any) -> Any:
                from rag_eval.data.packed import PackedIds

                return _lookup_python(PackedIds(blob, starts).to_objects(), offsets, rows, *judged)

            return unpacked
        if attr == "search_segments":
            return _search_numpy
        raise AttributeError(attr)


def _lookup_python(
    doc_ids: Any, offsets: Any, rows: Any, judged: Any, judged_offsets: Any, values: Any, missing: int
) -> Any:
    """The grade lookup as a ``map(dict.get, ...)`` per query over dicts made from the judged columns."""
    import numpy as np

    out = np.full(len(doc_ids), missing, np.int32)
    o, jo, docs, grades = offsets.tolist(), judged_offsets.tolist(), judged.tolist(), values.tolist()
    for i, row in enumerate(rows.tolist()):
        a, b = o[i], o[i + 1]
        if row >= 0 and b > a:
            table = dict(zip(docs[jo[row] : jo[row + 1]], grades[jo[row] : jo[row + 1]], strict=True))
            out[a:b] = np.fromiter(map(table.get, doc_ids[a:b], repeat(missing)), np.int32, b - a)
    return out


def _search_numpy(sorted_values: Any, starts: Any, ends: Any, needles: Any, right: bool) -> Any:
    import numpy as np

    lo, hi = starts.copy(), ends.copy()
    last = len(sorted_values) - 1
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) >> 1
        probe = sorted_values[np.minimum(mid, last)]
        go_right = probe <= needles if right else probe < needles
        go_right &= active
        np.copyto(lo, mid + 1, where=go_right)
        np.copyto(hi, mid, where=active & ~go_right)


def _arrow_columns(path: str, kind: str) -> tuple[Any, Any, Any, Any]:
    """(query ids, query codes, doc ids, values) of a tab-separated TREC file by pyarrow's CSV reader."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as csv

    names = ["q", "x", "d", "rank", "score", "tag"] if kind == "run" else ["q", "x", "d", "grade"]
    types = {"q": pa.string(), "d": pa.string()} | ({"score": pa.float64()} if kind == "run" else {"grade": pa.int64()})
    table = csv.read_csv(
        path,
        read_options=csv.ReadOptions(column_names=names, use_threads=True),
        parse_options=csv.ParseOptions(delimiter="\t"),
        convert_options=csv.ConvertOptions(
            column_types=types, include_columns=["q", "d", names[-2 if kind == "run" else -1]]
        ),
    )
    codes = pc.dictionary_encode(table["q"]).combine_chunks()
    values = table.column(2).to_numpy()
    return codes.dictionary.to_pylist(), codes.indices.to_numpy().astype(np.int64), table["d"], values


def workload(name: str, variant: str, qrels_path: str, run_path: str):
    """The timed call of one workload under one variant."""
    from bench_metrics import read_dicts

    import rag_eval

    if variant == "arrow":
        import numpy as np

        def arrow_call() -> Any:
            qids, qcodes, qdocs, grades = _arrow_columns(qrels_path, "qrels")
            rids, rcodes, rdocs, scores = _arrow_columns(run_path, "run")
            # the engine's inputs from these columns: the qrels as dicts (the lookup reads dicts), the run as CSR
            qd = qdocs.to_pylist()
            bounds = np.flatnonzero(np.diff(qcodes)) + 1
            judgements = {}
            for q, a, b in zip(qids, np.r_[0, bounds].tolist(), np.r_[bounds, len(qcodes)].tolist(), strict=True):
                judgements[q] = dict(zip(qd[a:b], grades[a:b].tolist(), strict=True))
            qrels = rag_eval.Qrels(judgements)
            lengths = np.bincount(rcodes, minlength=len(rids))
            offsets = np.r_[0, np.cumsum(lengths)]
            run = rag_eval.Run._from_csr("run", rids, offsets, np.array(rdocs.to_pylist(), dtype=object), scores)
            report = rag_eval.evaluate(qrels, run, METRICS, conventions="trec_eval")
            report.per_query  # noqa: B018
            return report

        return arrow_call
    if name == "harness":
        return _harness_call(int(os.environ.get("BENCH_SPEEDUPS_QUERIES", "20000")))
    if name == "dicts":
        qrels_d, run_d = read_dicts(Path(qrels_path), Path(run_path))

    def call() -> Any:
        if name == "dicts":
            qrels, run = rag_eval.Qrels.from_dict(qrels_d), rag_eval.Run.from_scores(run_d, name="run")
        else:
            qrels, run = rag_eval.Qrels.from_trec(qrels_path), rag_eval.Run.from_trec(run_path, name="run")
        report = rag_eval.evaluate(qrels, run, METRICS, conventions="trec_eval")
        report.per_query  # noqa: B018  (built lazily: include it)
        return report

    return call


def _harness_call(n: int):
    """bench_harness.py's scale measurement at ``n`` queries: the two instant stages run once into a cache (not
    timed); the timed call reruns them from the cache and evaluates the result stage by stage."""
    import tempfile

    from bench_harness import DEPTH, Instant, Pipeline, Reverse, _scale_qrels, _scale_queries

    import rag_eval

    queries = _scale_queries(n)
    qrels = rag_eval.Qrels.from_dict(_scale_qrels(queries))
    pipeline = Pipeline(Instant("instant"), Reverse("reverse"), depth=DEPTH, budget=5)
    cache = tempfile.mkdtemp(prefix="bench_speedups_")
    pipeline.run(queries, cache=cache, progress=False)

    def call() -> Any:
        report = rag_eval.evaluate(qrels, pipeline.run(queries, cache=cache, progress=False))
        report.per_query  # noqa: B018

        class Means:  # the worker reads report.mean("run", metric)
            def mean(self, run: str, metric: str) -> float:
                frame = report.summary
                return float(frame["mean"].iloc[METRICS.index(metric) % len(frame)])

        return Means()

    return call


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    import gc

    from rag_eval import _accel

    variant = spec["variant"]
    if variant.startswith("-"):
        _accel.speedups = _Without(_accel.speedups, variant[1:])
    timed: dict[str, float] = {}
    if _accel.speedups is not None and variant != "pure":  # time spent inside each C function
        real = _accel.speedups

        class Timed:
            def __getattr__(self, attr: str) -> Any:
                fn = getattr(real, attr)

                def wrapped(*args: Any) -> Any:
                    t = time.perf_counter()
                    try:
                        return fn(*args)
                    finally:
                        timed[attr] = timed.get(attr, 0.0) + time.perf_counter() - t

                return wrapped

        _accel.speedups = Timed()
    call = workload(spec["workload"], variant, spec["qrels"], spec["run"])
    first = call()
    means = [float(first.mean("run", m)) for m in METRICS]
    del first
    times, cpus, inside = [], [], []
    for _ in range(spec["repeat"]):
        gc.collect()
        timed.clear()
        t, cpu = time.perf_counter(), time.process_time()
        call()
        cpus.append(time.process_time() - cpu)
        times.append(time.perf_counter() - t)
        inside.append(dict(timed))
    k = cpus.index(statistics.median(cpus)) if len(cpus) % 2 else 0
    return {"ok": True, "time": statistics.median(times), "cpu": cpus[k], "inside": inside[k], "means": means}


def statistics_memory(what: str, n: str) -> None:
    """The bounded-memory measurement of RESULTS.md ("Summaries and comparisons in bounded memory")."""
    import resource

    import numpy as np

    from rag_eval.reports import summary
    from rag_eval.statistics import paired as stats

    rng = np.random.default_rng(0)
    start = time.perf_counter()
    if what == "summary":
        out = summary.summarize_values(rng.random((int(n), 6)), resamples=1000, confidence=0.95, seed=0)
        print("ci", out["ci_low"][:2], out["ci_high"][:2])
    else:
        diff = rng.normal(0.0005, 0.1, int(n))
        ci = stats.paired_bootstrap_ci(diff, resamples=1000, confidence=0.95, seed=0)
        print("ci", ci, "p", stats.randomization_test(diff, permutations=10000, seed=0))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    print(f"{what} n={n}: {time.perf_counter() - start:.1f} s, peak RSS {peak:.2f} GB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="dicts,trec")
    parser.add_argument("--variants", default="all")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument(
        "--statistics",
        metavar="WHAT:N",
        help="summary:N or compare:N: time and peak RSS of the "
        "summary's bootstrap (N queries x 6 metrics) or compare's statistics (N differences), alone",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.statistics:
        statistics_memory(*args.statistics.split(":"))
        return
    if args.worker:
        print("@@RESULT " + json.dumps(worker(json.loads(args.worker))), flush=True)
        return
    from bench_metrics import HEADLINE, ensure_data

    qrels_path, run_path = ensure_data(*HEADLINE, 0)
    variants = (
        ["c", "pure", *(f"-{f}" for f in FUNCTIONS), "arrow"] if args.variants == "all" else args.variants.split(",")
    )
    print("| workload | variant | end to end, wall (s) | CPU (s) | CPU vs c | inside C (s) | means agree |")
    print("|---|---|---:|---:|---:|---|---|")
    for wl in args.workloads.split(","):
        base: dict[str, Any] | None = None
        for variant in variants:
            if variant != "c" and variant != "pure" and variant not in RELEVANT[wl]:
                continue  # a function this workload never calls
            spec = {"workload": wl, "variant": variant, "qrels": str(qrels_path), "run": str(run_path)}
            spec["repeat"] = args.repeat
            env = {**os.environ}
            if variant == "pure":
                env["RAG_EVAL_PURE_PYTHON"] = "1"
            cmd = [sys.executable, __file__, "--worker", json.dumps(spec)]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
                lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@RESULT ")]
                r = json.loads(lines[-1][9:]) if lines else {"ok": False, "error": proc.stderr.strip()[-300:]}
            except subprocess.TimeoutExpired:
                r = {"ok": False, "error": "timeout"}
            if not r["ok"]:
                print(f"| {wl} | {variant} | failed: {r['error']!r} | | | | |", flush=True)
                continue
            if variant == "c":
                base = r
            ratio = f"{r['cpu'] / base['cpu']:.2f}x" if base else "-"
            agree = "-" if base is None else str(all(abs(a - b) < 1e-12 for a, b in zip(r["means"], base["means"])))
            inside = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r["inside"].items()))
            print(f"| {wl} | {variant} | {r['time']:.2f} | {r['cpu']:.2f} | {ratio} | {inside} | {agree} |", flush=True)


if __name__ == "__main__":
    main()
