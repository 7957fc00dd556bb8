"""``rag-eval traces``: the stages recorded in a trace export (OpenInference spans), evaluated with qrels and
written as the result folder a pipeline run gives (see docs/traces.md and docs/cli.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import InputError
from ._common import say, shared

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> None:
    tr = commands.add_parser(
        "traces",
        help="evaluate the stages recorded in a trace export (OpenInference spans) and write a result folder",
        description="Read the RETRIEVER and RERANKER spans of a trace export (OTLP JSON or protobuf, or Phoenix's "
        "spans as Parquet), group them into one pipeline per trace and query, evaluate every stage with the qrels as "
        "a pipeline run is evaluated, and write the result folder; its card names the traces, their time window and "
        "span counts. --depth and --budget recompute from the recorded rankings, within what was recorded. See "
        "docs/traces.md.",
    )
    tr.add_argument("file", metavar="FILE", help="the trace export (.json/.jsonl, .pb, .parquet; .gz read as such)")
    shared(tr, "qrels", required=True, help="the judgements (TREC, BEIR TSV or JSONL qrels) the stages are measured by")
    shared(tr, "out", required=True, help="the result folder to write")
    tr.add_argument(
        "--queries",
        metavar="FILE",
        help="the query set (JSON lines with _id and text, BEIR's queries.jsonl): traced queries are matched to it "
        "by text (default: every traced query, its id the hash of its text)",
    )
    tr.add_argument(
        "--query-id-attribute", metavar="NAME", help="a span attribute holding the query id: match by id, not text"
    )
    tr.add_argument(
        "--stage-name",
        action="append",
        default=[],
        metavar="SPAN=NAME",
        help="name the stage of the spans named SPAN (repeatable; default: the span name)",
    )
    tr.add_argument(
        "--id-key", metavar="KEY", help="the document metadata key holding the doc id, where spans have none"
    )
    shared(tr, "depth", help="candidates of the first stage (default: the most recorded; fewer: a what-if)")
    shared(
        tr,
        "budget",
        help="chunks (e.g. 5) or tokens (e.g. 512tok) delivered (default: the most the last stage delivered; "
        "another: a what-if, within what was recorded)",
    )
    tr.set_defaults(budget=None)  # the budget recorded, not the pipelines' 5
    tr.add_argument(
        "--trace-format",
        choices=("otlp-json", "otlp-proto", "phoenix"),
        help="the export's format (default: told from its first bytes)",
    )
    shared(tr, "no_plots")


def _queries(path: str) -> dict[str, str]:
    from ..data.input_files import read_input

    file = read_input(path)
    out: dict[str, str] = {}
    for number, record in file.json_objects():
        qid, text = record.get("_id", record.get("id")), record.get("text")
        if not isinstance(qid, (str, int)) or isinstance(qid, bool) or not isinstance(text, str) or not text:
            raise file.error("a query needs an _id (or id) and a non-empty text", number)
        if str(qid) in out:
            raise file.error(f"query id {qid!r} twice", number)
        out[str(qid)] = text
    return out


def _names(pairs: list[str]) -> dict[str, str]:
    names = {}
    for pair in pairs:
        span, sep, name = pair.partition("=")
        if not sep or not span or not name:
            raise InputError(f"--stage-name takes SPAN=NAME (the span's name, the stage's), not {pair!r}")
        names[span] = name
    return names


def run(args: argparse.Namespace) -> int:
    from ..data import Qrels
    from ..reports import evaluate
    from ..stages.traced import from_traces

    qrels = Qrels.load(args.qrels)
    queries = _queries(args.queries) if args.queries else None
    budget: int | str | None = args.budget
    if isinstance(budget, str) and budget.strip().isdigit():
        budget = int(budget)
    result = from_traces(
        args.file,
        queries=queries,
        names=_names(args.stage_name),
        depth=args.depth,
        budget=budget,
        id_key=args.id_key,
        query_id_attribute=args.query_id_attribute,
        format=args.trace_format,
    )
    report = evaluate(qrels, result)
    source = result.pipeline.source or {}
    start, end = source.get("window") or (None, None)
    facts = {
        "source": f"traces: `{args.file}` ({source.get('format')})",
        "spans": f"{source.get('spans')} read, {source.get('spans_used')} stage spans used for "
        f"{source.get('queries')} queries",
        "window": f"{start} to {end}",
        "pipeline": f"`{result.pipeline}`",
    }
    path = report.save_folder(
        Path(args.out),
        qrels=qrels,
        runs=result,
        title="rag_eval: stages from traces",
        facts=facts,
        plots=not args.no_plots,
    )
    shown = report.summary
    columns = [c for c in ("stage", "metric", "mean", "ci_low", "ci_high", "n", "n_nan", "n_failed") if c in shown]
    print(shown[columns].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    say(f"{result.pipeline} from {source.get('spans_used')} spans of {args.file} -> {path}")
    return 0
