"""``rag-eval drift``: why relevant items were delivered in one snapshot of a pipeline and not in the other (two
result folders or two trace exports of the same query set), with the paired change in recall@budget (see
docs/drift.md and docs/cli.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..errors import InputError
from ._common import count, option, say, shared, show

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
    dr.add_argument(
        "--chunks-before",
        metavar="FILE",
        help="where each chunk came from, as it was: JSON lines with chunk_id, doc_id and optional start, end "
        "(character offsets in the document): tells a re-chunked item from a removed one",
    )
    dr.add_argument("--chunks-after", metavar="FILE", help="where each chunk comes from now (as --chunks-before)")
    shared(dr, "test")
    shared(dr, "seed")
    option(dr, "--top", number=count(), default="10", metavar="N", help="queries most affected shown (default 10)")
    shared(dr, "format", choices=FORMATS)
    shared(dr, "out", help="also write the drift as one self-contained HTML page to OUT (needs the html extra)")


def _corpus(path: str | None) -> dict[str, str] | None:
    """``{doc_id: content}`` of a BEIR corpus (title and text joined as the collections index them)."""
    if path is None:
        return None
    from ..data.collection import Chunk
    from ..data.input_files import read_input

    where = Path(path)
    file = read_input(where / "corpus.jsonl" if where.is_dir() else where)
    out: dict[str, str] = {}
    for number, record in file.json_objects():
        doc, text = record.get("_id", record.get("id")), record.get("text")
        if not isinstance(doc, (str, int)) or isinstance(doc, bool) or not isinstance(text, str):
            raise file.error("a document needs an _id (or id) and a text", number)
        if str(doc) in out:
            raise file.error(f"document id {doc!r} twice", number)
        out[str(doc)] = Chunk(str(record.get("title") or ""), text).content
    return out


def _chunks(path: str | None) -> dict[str, Any] | None:
    """``{chunk_id: ChunkRef}`` from JSON lines ``{"chunk_id", "doc_id", "start", "end"}`` (offsets optional)."""
    if path is None:
        return None
    from ..data.input_files import read_input
    from ..data.spans import ChunkRef

    file = read_input(path)
    out: dict[str, Any] = {}
    for number, record in file.json_objects():
        chunk, doc = record.get("chunk_id"), record.get("doc_id")
        start, end = record.get("start"), record.get("end")
        if not isinstance(chunk, str) or not chunk or not isinstance(doc, str) or not doc:
            raise file.error("a chunk needs a chunk_id and a doc_id (non-empty strings)", number)
        if any(v is not None and (isinstance(v, bool) or not isinstance(v, int)) for v in (start, end)):
            raise file.error("start and end are whole numbers (character offsets) or absent", number)
        if chunk in out:
            raise file.error(f"chunk id {chunk!r} twice", number)
        try:
            out[chunk] = ChunkRef(doc, start, end)
        except InputError as exc:
            raise file.error(exc.problem, number) from None
    return out


def _snapshot(path: str, run_name: str | None, several: str = "name one with --run") -> Any:
    """The PipelineResult of a result folder (its pipeline ``run_name``, or its only one: else ``several`` says what
    to do) or of a trace export."""
    where = Path(path)
    if not where.exists():
        raise InputError("no such folder or file", source=path)
    if where.is_file():
        from ..stages.traced import from_traces

        return from_traces(where)
    from ..renderers.result_folder import load_results

    results = load_results(where)
    if run_name is None and len(results) > 1:
        raise InputError(f"it holds {len(results)} pipelines ({', '.join(results)}): {several}", source=path)
    if run_name is not None and run_name not in results:
        raise InputError(f"no pipeline {run_name!r} in it (it holds {', '.join(results)})", source=path)
    return results[run_name or next(iter(results))]


def run(args: argparse.Namespace) -> int:
    from ..data import Qrels
    from ..statistics.snapshot_drift import drift

    qrels = Qrels.load(args.qrels)
    before, after = _snapshot(args.before, args.run), _snapshot(args.after, args.run)
    found = drift(
        before,
        after,
        qrels,
        corpus_before=_corpus(args.corpus_before),
        corpus_after=_corpus(args.corpus_after),
        chunks_before=_chunks(args.chunks_before),
        chunks_after=_chunks(args.chunks_after),
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
            "n": found.n,
            "left_out": found.left_out,
            "method": found.method,
            "inputs": list(found.inputs),
            "by_cause": found.by_cause().to_dict("records"),
            "by_stage": found.by_stage().to_dict("records"),
            "queries": found.queries(args.top).to_dict("records"),
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
