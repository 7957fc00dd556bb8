"""``rag-eval report``: one self-contained HTML page of result folders, a diff view with two or more (see
docs/cli.md and docs/html-report.md)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from .._escape import visible
from ..errors import InputError
from ._common import count, option, say, shared, to_mlflow

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> None:
    rep = commands.add_parser(
        "report",
        help="one self-contained HTML page of result folders (a diff view with two or more)",
        description="Write one self-contained HTML file (inline styles, script and SVG plots; nothing fetched, opens "
        "offline) of one result folder, or of several, each diffed against the first: the stage-aware summary with "
        "intervals, recall@k per stage, where relevant items were lost, latency and failures, the metric card and a "
        "per-query drill-down of each stage's ranked chunks. See docs/html-report.md. Needs the html extra.",
    )
    rep.add_argument("folders", nargs="+", metavar="FOLDER", help="result folders (Report.save_folder, rag-eval bench)")
    shared(rep, "out", required=True, help="the HTML file to write")
    option(
        rep,
        "--drill-depth",
        number=count(),
        metavar="N",
        help="hits kept per stage and query in the drill-down (default: the budget plus 10)",
    )
    shared(rep, "beir")  # its corpus.jsonl and queries.jsonl give the texts the drill-down shows
    shared(rep, "split")
    shared(rep, "no_plots")
    rep.add_argument("--title", metavar="TEXT", help="the page's title (default: the folders' names)")
    shared(rep, "mlflow")


def run(args: argparse.Namespace) -> int:
    from ..renderers.html_report import folder_names, side_from_folder, write_html
    from ..renderers.stage_pairs import pair_blocks
    from ..reports import Report

    for folder in args.folders:
        if not Path(folder).exists():
            raise InputError("no such result folder", source=folder)
    collection = None
    if args.beir is not None:
        from ..data.collection import Collection

        collection = Collection.from_beir(args.beir, split=args.split)
    sides = [
        side_from_folder(Report.load_folder(folder), folder, collection=collection, name=name)
        for folder, name in zip(args.folders, folder_names(args.folders), strict=True)
    ]
    path = write_html(args.out, sides, drill_depth=args.drill_depth, title=args.title, plots=not args.no_plots)
    say(f"report of {len(args.folders)} folder(s) -> {path} ({path.stat().st_size:,} bytes)")
    for side in sides[1:]:  # the diff's pairings where names differ, and what has no counterpart: said here too
        for line in pair_blocks(sides[0].report, side.report, names=(sides[0].name, side.name)).notes:
            say(visible(f"diff of {side.name} against {sides[0].name}: {line}"))
    if args.mlflow is not None:  # each folder's report in a run of its own, the page beside it
        if len(sides) > 1 and os.environ.get("MLFLOW_RUN_ID"):
            raise InputError("MLFLOW_RUN_ID names one run: log one folder there, or unset it (a run per folder)")
        for side in sides:
            to_mlflow(args, side.report.log_to_mlflow, run_name=side.name, html=path)
    return 0
