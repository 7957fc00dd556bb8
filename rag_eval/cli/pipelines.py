"""``rag-eval bench`` and ``demo``: run pipelines on a BEIR-layout collection (or the bundled demo on Python's own
docs) and write a result folder (see docs/cli.md)."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import count, option, shared

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> None:
    bench = commands.add_parser(
        "bench",
        help="run pipelines on a BEIR-layout collection and write a report folder",
        description="Run pipelines on a BEIR-layout collection and write a report folder (needs the models extra "
        "for the built-in pipelines). With --generate, also answer each query from the context the pipeline "
        "delivered and grade the answers against the folder's answers.jsonl.",
    )
    shared(bench, "beir", required=True)
    shared(bench, "pipeline")  # default: the four built-ins
    shared(bench, "depth", help="candidates asked of the first stage (default 100)")
    shared(bench, "budget")
    shared(bench, "split")
    option(bench, "--limit-queries", number=count(), metavar="N", help="only the first N queries (default all)")
    shared(bench, "cache")
    option(
        bench, "--concurrency", number=count(1, 1024), default="1", metavar="N", help="queries run at once (default 1)"
    )
    shared(bench, "out", help="the report folder to write (default bench-out/<the folder's name>)")
    shared(bench, "no_plots")
    bench.add_argument(
        "--generate",
        action="store_true",
        help="after retrieval, answer each query from its delivered context with --generator and grade the answers "
        "against the folder's answers.jsonl (SQuAD's): one --pipeline; the answers go into the result folder "
        "(docs/answers.md)",
    )
    shared(bench, "generator")

    demo = commands.add_parser(
        "demo",
        help="the whole flow offline on Python's own docs (needs the models extra)",
        description="Run bm25>>dense on the docstrings of this Python's standard library, print the stage-aware "
        "summary and write its report folder (needs the models extra).",
    )
    shared(demo, "out", help="the report folder to write (default ./demo-report)")
    shared(demo, "no_plots")


def run(args: argparse.Namespace) -> int:
    if args.command == "bench":
        from ..builtin.run import run as bench

        return bench(args, command=" ".join(["rag-eval", *args.argv]))
    from ..builtin.demo import main as demo

    return demo([*(["--out", args.out] if args.out is not None else []), *(["--no-plots"] if args.no_plots else [])])
