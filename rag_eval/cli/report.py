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
from ._inputs import drift_inputs

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> None:
    rep = commands.add_parser(
        "report",
        help="one self-contained HTML page of result folders (a diff view with two or more)",
        description="Write one self-contained HTML file (inline styles, script and SVG plots; nothing fetched, opens "
        "offline) of one result folder, or of several, each diffed against the first: the stage-aware summary with "
        "intervals, recall@k per stage, where relevant items were lost, latency and failures, the metric card and a "
        "per-query drill-down of each stage's ranked chunks. With two or more folders and --qrels, a Drift view: why "
        "relevant items were delivered by the first folder and not by another (or the reverse), with the paired "
        "change in recall@budget (docs/drift.md). See docs/html-report.md. Needs the html extra.",
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
    shared(
        rep,
        "qrels",
        help="the judgements (TREC, BEIR TSV or JSONL qrels) of the relevant items: with two or more folders, add "
        "the drift of each folder from the first (docs/drift.md)",
    )
    shared(rep, "corpus_before")
    shared(rep, "corpus_after")
    shared(rep, "chunks_before")
    shared(rep, "chunks_after")
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
    drifts = _drifts(args, [s.name for s in sides])
    path = write_html(
        args.out, sides, drill_depth=args.drill_depth, title=args.title, plots=not args.no_plots, drifts=drifts
    )
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


def _drifts(args: argparse.Namespace, names: list[str]) -> dict[str, Any] | None:
    """--qrels: the drift of each folder from the first (docs/drift.md), per pipeline both hold (or their only
    ones), under a heading naming what was compared; what is not compared is said here. None without --qrels."""
    given = [args.corpus_before, args.corpus_after, args.chunks_before, args.chunks_after]
    if args.qrels is None:
        if any(path is not None for path in given):
            raise InputError("--corpus-before/--corpus-after and --chunks-before/--chunks-after go with --qrels")
        return None
    if len(args.folders) < 2:
        raise InputError("--qrels gives the drift between folders: give two or more")
    from ..data import Qrels
    from ..renderers.result_folder import load_results
    from ..statistics.snapshot_drift import drift

    qrels = Qrels.load(args.qrels)
    inputs = drift_inputs(args)
    first = load_results(args.folders[0])
    out: dict[str, Any] = {}
    for folder, name in zip(args.folders[1:], names[1:], strict=True):
        other = load_results(folder)
        if len(first) == 1 and len(other) == 1:
            pairs = [(next(iter(first)), next(iter(other)))]
        else:
            pairs = [(run, run) for run in first if run in other]
            alone = [f"{run} ({names[0]} only)" for run in first if run not in other]
            alone += [f"{run} ({name} only)" for run in other if run not in first]
            if alone:
                say(
                    visible(
                        f"drift of {name} from {names[0]}: not compared (no pipeline of that name): {', '.join(alone)}"
                    )
                )
        for a, b in pairs:
            found = drift(first[a], other[b], qrels, **inputs)
            pipeline = a if a == b else f"{a} -> {b}"
            heading = f"{name} from {names[0]}" + (f", pipeline {pipeline}" if len(pairs) > 1 or a != b else "")
            out[heading] = found
            say(visible(f"drift of {heading}: {found.causes()}; {found.verdict()}"))
    return out
