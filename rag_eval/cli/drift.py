"""``rag-eval drift``: why relevant items were delivered in one snapshot of a pipeline and not in the other (two
result folders or two trace exports of the same query set), with the paired change in recall@budget (see
docs/drift.md and docs/cli.md)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._common import count, option, say, shared, show
from ._inputs import drift_inputs, snapshot

__all__ = ["add_parser", "run"]

FORMATS = ("table", "markdown", "csv", "json")


def add_parser(commands: Any) -> None:
    dr = commands.add_parser(
        "drift",
        help="name why relevant items were delivered before and not after (or the reverse) between two snapshots",
        description="Compare two snapshots of one pipeline on one query set (result folders written by bench or "
        "traces, or trace exports) against the qrels: every relevant item delivered within the budget on one side "
        "only, with its cause (crowded out by new documents, content changed, removed, a stage changed, chunking "
        "changed, or undetermined with the reason), counts per cause and stage, the queries most affected, and the "
        "paired change in recall@budget. Give the corpora to decide presence and content. See docs/drift.md.",
    )
    dr.add_argument("before", metavar="BEFORE", help="the earlier snapshot: a result folder or a trace export")
    dr.add_argument("after", metavar="AFTER", help="the later snapshot: a result folder or a trace export")
    shared(dr, "qrels", required=True, help="the judgements (TREC, BEIR TSV or JSONL qrels) of the relevant items")
    shared(dr, "run")
    shared(dr, "corpus_before")
    shared(dr, "corpus_after")
    shared(dr, "chunks_before")
    shared(dr, "chunks_after")
    shared(dr, "test")
    shared(dr, "seed")
    option(dr, "--top", number=count(), default="10", metavar="N", help="queries most affected shown (default 10)")
    shared(dr, "format", choices=FORMATS)
    shared(dr, "out", help="also write the drift as one self-contained HTML page to OUT (needs the html extra)")


def run(args: argparse.Namespace) -> int:
    from ..data import Qrels
    from ..statistics.snapshot_drift import drift

    qrels = Qrels.load(args.qrels)
    before, after = snapshot(args.before, args.run), snapshot(args.after, args.run)
    found = drift(
        before,
        after,
        qrels,
        **drift_inputs(args),
        test=args.test,
        seed=args.seed,
    )
    if args.out is not None:  # before stdout: a page that cannot be written stops the command (exit 2)
        from ..renderers.drift_html import write_drift_html

        page = write_drift_html(args.out, found, title=f"drift: {args.before} -> {args.after}", top=args.top)
        say(f"drift page -> {page} ({page.stat().st_size:,} bytes)")
    if args.format == "json":
        document = {
            "recall_before": found.recall_before,
            "recall_after": found.recall_after,
            "diff": found.diff,
            "ci": list(found.ci),
            "p": found.p,
            **found.tables(args.top),
            "items": found.to_frame().to_dict("records"),
        }
        show(json.dumps(document, indent=2, default=_plain, allow_nan=True) + "\n", data=True)
    elif args.format == "csv":
        from .._escape import csv_text

        show(csv_text(found.to_frame()), data=True)
    elif args.format == "markdown":
        show(found.to_markdown(args.top) + "\n")
    else:
        show(found.to_text(args.top) + "\n")
    lost = int((found.items["direction"] == "lost").sum())
    say(f"{lost} relevant item(s) lost, {len(found.items) - lost} gained: {found.verdict()}")
    return 0


def _plain(value: Any) -> Any:
    """NumPy scalars in the JSON as numbers."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")
