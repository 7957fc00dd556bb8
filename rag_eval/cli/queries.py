"""``rag-eval queries sample``: a stratified sample of a query log, written as a query set (see docs/cli.md)."""

from __future__ import annotations

import argparse
from typing import Any

from .._escape import visible
from ._common import SHARE, count, error, one_line, option, say, shared, show

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> None:
    queries = commands.add_parser(
        "queries",
        help="query sets from logs: `queries sample LOG` draws a stratified sample of a query log",
        description="Query sets from query logs (CSV, TSV, JSON lines, Parquet, OTLP JSON trace exports). See "
        "docs/querysets.md.",
    )
    actions = queries.add_subparsers(dest="queries_command", required=True, help="what to do with a log")
    sample = actions.add_parser(
        "sample",
        help="read a query log, merge duplicates and near-duplicates, draw a stratified sample",
        description="Read a query log, merge the queries equal after normalisation and (with the querysets extra) "
        "the near-duplicates, draw a seeded stratified sample of N queries and write it as a query set (JSON lines, "
        "with its card). The strata go to stdout, a summary to stderr.",
    )
    sample.add_argument("log", help="the query log: CSV (with a header), TSV, JSON lines, Parquet or OTLP JSON traces")
    option(
        sample, "-n", number=count(), dest="sample_size", required=True, metavar="N", help="how many queries to draw"
    )
    sample.add_argument(
        "--stratify",
        default="frequency",
        metavar="CRITERIA",
        help="comma-separated: frequency (head, torso, tail: 50%%, 30%%, 20%% of the traffic), cluster (k-means "
        "over all-MiniLM-L6-v2 embeddings: the querysets and models extras) and/or columns of the log "
        "(default frequency)",
    )
    option(
        sample,
        "--clusters",
        number=count(),
        metavar="K",
        help="how many clusters --stratify cluster makes (default min(10, max(2, round(sqrt(N/2)))) for N queries)",
    )
    sample.add_argument(
        "--allocation",
        choices=["proportional", "equal"],
        default="proportional",
        help="sample sizes proportional to the strata's sizes, or equal (default proportional)",
    )
    sample.add_argument("--text", metavar="COL", help="the column of query texts (default query; OTLP: input.value)")
    sample.add_argument("--timestamp", metavar="COL", help="the column of times (ISO 8601 or Unix seconds)")
    sample.add_argument("--count", metavar="COL", help="the column of how many times each line's query was asked")
    sample.add_argument(
        "--log-format",
        choices=["csv", "tsv", "jsonl", "parquet", "otlp"],
        help="the log's format (default: told from its content)",
    )
    sample.add_argument(
        "--mask-pii", action="store_true", help="mask e-mail addresses and phone numbers before anything is kept"
    )
    sample.add_argument(
        "--no-near-duplicates",
        action="store_true",
        help="merge only the queries equal after normalisation (near-duplicate merging needs the querysets extra)",
    )
    option(
        sample,
        "--near-threshold",
        number=SHARE,
        default="0.5",
        metavar="J",
        help="Jaccard similarity of character 4-grams at which two queries are near-duplicates (default 0.5)",
    )
    shared(sample, "seed")
    shared(sample, "out", required=True, help="the query set to write (JSON lines)")


def run(args: argparse.Namespace) -> int:
    """``rag-eval queries sample``: the strata table to stdout, a summary line to stderr."""
    from ..data import QuerySet
    from ..ground_truth import merge_near_duplicates, sample_queries

    queries = QuerySet.from_log(
        args.log,
        text=args.text,
        timestamp=args.timestamp,
        count=args.count,
        format=args.log_format,
        mask_pii=args.mask_pii,
    )
    distinct = len(queries)
    if not args.no_near_duplicates:
        try:
            queries = merge_near_duplicates(queries, threshold=args.near_threshold)
        except ImportError as exc:
            return error(f"{one_line(exc)} (or give --no-near-duplicates)")
    try:
        sample = sample_queries(
            queries,
            args.sample_size,
            stratify=args.stratify,
            allocation=args.allocation,
            seed=args.seed,
            clusters=args.clusters,
        )
    except ImportError as exc:
        return error(one_line(exc))
    sample.save(args.out)
    card = sample.card
    rows = [("stratum", "queries", "traffic", "share", "sampled", "probability")]
    for name, stratum in card.strata.items():
        rows.append(
            (
                visible(name),
                f"{stratum['queries']:,}",
                f"{stratum['traffic']:,}",
                f"{100 * stratum['traffic_share']:.1f}%",
                f"{stratum['sampled']:,}",
                f"{stratum['inclusion_probability']:.4g}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))]
        lines.append("  ".join(cells) + "\n")
    if card.clustering:
        c = card.clustering
        lines.append(
            f"clusters: k={c['k']} ({c['k_rule']}), k-means seed {c['seed']}, n_init {c['n_init']}, {c['model']}\n"
        )
    show("".join(lines), data=True)  # the strata's names made visible above
    merged = "" if args.no_near_duplicates else f", {distinct - len(queries):,} near-duplicates merged"
    say(
        f"{card.records:,} log records, {distinct:,} distinct queries{merged}; {len(sample):,} drawn "
        f"(seed {args.seed}) -> {args.out}"
    )
    return 0
