"""The benchmark script: run pipelines on a BEIR-layout collection and write a report folder.

    python benchmarks/run.py --dataset ../shared/datasets/scifact --pipeline bm25 --pipeline "bm25>>dense" \\
        --depth 100 --budget 5 --out bench-out/scifact

(also ``rag-eval bench ...``). ``--pipeline`` is a built-in name (``bm25``, ``dense``, ``bm25>>dense``,
``hybrid``; default: all four) or ``package.module:function`` returning a :class:`rag_eval.Pipeline`: how you plug
in your own. Needs the ``models`` extra for the built-in pipelines.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import sys
import time
from pathlib import Path

from .._version import __version__


def build_parser(prog: str = "benchmarks/run.py") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Run pipelines on a BEIR-layout collection and write a report folder."
    )
    add_arguments(parser)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset", required=True, help="a BEIR-layout folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv"
    )
    parser.add_argument(
        "--pipeline",
        action="append",
        dest="pipelines",
        metavar="NAME",
        help="bm25, dense, bm25>>dense, hybrid, or package.module:function (repeatable; default: the four built-ins)",
    )
    parser.add_argument("--depth", type=int, default=100, help="candidates asked of the first stage (default 100)")
    parser.add_argument("--budget", default="5", help="chunks (e.g. 5) or tokens (e.g. 512tok) the generator receives")
    parser.add_argument("--split", default="test", help="qrels split (default test)")
    parser.add_argument("--limit-queries", type=int, default=None, help="only the first N queries (default all)")
    parser.add_argument(
        "--cache", default=None, help="cache folder for embeddings and stage outputs (default OUT/cache)"
    )
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--out", default=None, help="report folder (default bench-out/<dataset name>)")
    parser.add_argument("--no-plots", action="store_true")


def parse_budget(text: str) -> int | str:
    return int(text) if text.strip().isdigit() else text


def main(argv: list[str] | None = None, *, prog: str = "benchmarks/run.py") -> int:
    args = build_parser(prog).parse_args(argv)
    return run(args, command=" ".join(shlex.quote(a) for a in [prog, *(argv if argv is not None else sys.argv[1:])]))


def run(args: argparse.Namespace, *, command: str) -> int:
    from ..data.collection import Collection
    from ..errors import InputError
    from ..reports import evaluate
    from .outputs import write_report_folder
    from .pipelines import BUILTIN, Parts, build, prefetch

    started = time.perf_counter()
    try:
        collection = Collection.from_beir(args.dataset, split=args.split).limit(args.limit_queries)
        budget = parse_budget(args.budget)
        out = Path(args.out or Path("bench-out") / Path(args.dataset).name)
        cache = Path(args.cache) if args.cache else out / "cache"
        names = args.pipelines or list(BUILTIN)
        parts = Parts(collection, cache)
        pipelines = {
            name: build(name, collection, depth=args.depth, budget=budget, cache_dir=cache, parts=parts)
            for name in names
        }
    except (InputError, ValueError, ImportError) as exc:
        print(f"rag-eval bench: error: {exc}", file=sys.stderr)
        return 2
    results = {}
    for name, pipeline in pipelines.items():
        print(f"{name}: {pipeline} on {collection.name} ({len(collection.queries)} queries)", file=sys.stderr)
        prefetch(pipeline, parts, list(collection.queries.values()))
        results[name] = pipeline.run(collection.queries, cache=cache / "stages", concurrency=args.concurrency)
    report = evaluate(collection.qrels, results)
    wall = time.perf_counter() - started
    facts = {
        "collection": f"{collection.name} ({len(collection.corpus)} chunks, {len(collection.queries)} queries, qrels {args.split})",
        "pipelines": ", ".join(f"`{p}`" for p in pipelines.values()),
        "command": f"`{command}`",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, rag_eval {__version__}",
        "date": f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        "wall time": f"{wall:.1f} s (including encoding and indexing; cached parts are read, not recomputed)",
    }
    path = write_report_folder(
        out,
        report,
        results,
        collection.qrels,
        title=f"rag_eval benchmark: {collection.name}",
        facts=facts,
        plots=not args.no_plots,
        collection=collection,
    )
    shown = report.summary
    columns = [
        c
        for c in ("run", "stage", "metric", "mean", "ci_low", "ci_high", "n", "n_nan", "n_failed")
        if c in shown.columns
    ]
    print(shown[columns].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"report: {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
