"""``rag-eval human-sample`` and ``estimate``: judge-assisted (prediction-powered) means, from the queries people
grade in full and a model judge's grades of every query (see docs/cli.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import InputError
from ._common import count, option, say, shared, show
from ._inputs import load_report

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> None:
    hs = commands.add_parser(
        "human-sample",
        help="draw the queries people grade in full, for judge-assisted estimates",
        description="Draw a uniform random sample of -n queries without replacement (seeded; the seed and the "
        "population are recorded) from the queries of a pool, a saved report or a result folder, and write it as "
        "JSON. People grade every pooled item of these queries; judge-assisted estimates (rag-eval estimate) use "
        "them and only them. See docs/ppi.md.",
    )
    hs.add_argument("source", help="the query set: a pool (rag-eval pool's JSONL), a saved report or a result folder")
    option(hs, "-n", number=count(), dest="sample_size", required=True, metavar="N", help="queries to draw (2 or more)")
    shared(hs, "seed")
    shared(hs, "out", required=True, help="the sample's JSON file")

    est = commands.add_parser(
        "estimate",
        help="judge-assisted means: prediction-powered intervals from a judge's and people's reports",
        description="Per system and metric, the mean under people's grades over every query, with a "
        "prediction-powered interval (PPI++, Angelopoulos et al. 2023) that uses the judge's values on every query "
        "and people's on the human-graded sample; beside it the human-only and the naive judge-only intervals, "
        "and every system's paired difference with the baseline. See docs/ppi.md.",
    )
    est.add_argument(
        "--judge-report", required=True, metavar="REPORT", help="evaluated with the judge's qrels, every query"
    )
    est.add_argument(
        "--human-report", required=True, metavar="REPORT", help="evaluated with people's qrels, the sample only"
    )
    est.add_argument(
        "--sample",
        metavar="SAMPLE",
        help="the sample (rag-eval human-sample's JSON): checks the queries, weights by its inclusion probabilities; "
        "without it the human report's queries are taken to be a uniform random sample of the judge report's",
    )
    est.add_argument(
        "--pool", metavar="POOL", help="with --human-qrels: refuse sampled queries with a pooled item not graded"
    )
    est.add_argument("--human-qrels", metavar="QRELS", help="people's qrels, checked against --pool")
    shared(est, "metric")
    shared(est, "baseline")
    shared(est, "alpha")
    est.add_argument("--plain", action="store_true", help="plain PPI (lam = 1) instead of PPI++ (lam tuned)")
    shared(est, "format", choices=["table", "csv", "json", "markdown"])


def run(args: argparse.Namespace) -> int:
    return _human_sample(args) if args.command == "human-sample" else _estimate(args)


def _human_sample(args: argparse.Namespace) -> int:
    from ..ground_truth import Pool
    from ..ground_truth.human_sample import draw_human_sample

    where = Path(args.source)
    if not where.exists():
        raise InputError("no such pool, report file or result folder", source=args.source)
    if where.is_file() and where.suffix in (".jsonl", ".json"):
        ids = Pool.load(where).query_ids
    else:
        ids = sorted(set(load_report(args.source, "source").per_query["query_id"]))
    sample = draw_human_sample(ids, args.sample_size, seed=args.seed)
    sample.save(args.out)
    say(f"human sample of {len(sample)} of {len(sample.population)} queries (uniform, seed {args.seed}) -> {args.out}")
    return 0


def _estimate(args: argparse.Namespace) -> int:
    from ..data import Qrels
    from ..ground_truth import Pool
    from ..ground_truth.human_sample import HumanSample, check_complete
    from ..statistics.prediction_powered import judge_assisted

    if (args.pool is None) != (args.human_qrels is None):
        raise InputError("give --pool and --human-qrels together (the check that the sample is fully graded)")
    judge_report = load_report(args.judge_report, "--judge-report")
    human_report = load_report(args.human_report, "--human-report")
    sample = HumanSample.load(args.sample) if args.sample else None
    if args.pool is not None:
        if sample is None:
            raise InputError("--pool and --human-qrels check the sample's queries: give --sample too")
        check_complete(sample, Pool.load(args.pool), Qrels.load(args.human_qrels))
    result = judge_assisted(
        judge_report, human_report, sample=sample, metrics=args.metrics or None, alpha=args.alpha, tuned=not args.plain
    )
    differences = result.compare(args.baseline) if len(result.systems) > 1 else None
    show(_FORMATS[args.format](result, differences), data=args.format != "table")
    return 0


def _json(result: Any, differences: Any) -> str:
    import json

    def records(frame: Any) -> Any:
        return json.loads(frame.to_json(orient="records", double_precision=15))

    out = {
        "settings": result.settings,
        "estimates": records(result.table),
        "differences": [] if differences is None else records(differences),
        "difference_notes": [] if differences is None else list(differences.attrs.get("notes", ())),
    }
    return json.dumps(out, indent=1) + "\n"


def _csv(result: Any, differences: Any) -> str:
    from .._escape import csv_text

    return csv_text(result.table) + ("" if differences is None else "\n" + csv_text(differences))


def _markdown(result: Any, differences: Any) -> str:
    from .._markdown import markdown_cell, markdown_table

    text = result._repr_markdown_() + "\n"
    if differences is not None:
        text += "\n" + markdown_table(differences) + "\n"
        text += "".join(f"\n{markdown_cell(note)}\n" for note in differences.attrs.get("notes", ()))
    return text


def _table(result: Any, differences: Any) -> str:
    text = result.render() + "\n"
    if differences is None:
        return text
    columns = ["system", "baseline", "metric", "n_human", "n_nan", "n_unpaired", "diff", "ci_low", "ci_high"]
    shown = differences[columns].copy()
    shown["p"] = [f"{p:.4g}" for p in differences["p_value"]]
    for column, prefix in (("human only", "human"), ("judge only (naive)", "judge")):
        shown[column] = [
            f"{d:+.4f} [{lo:+.4f}, {hi:+.4f}]"
            for d, lo, hi in zip(
                differences[f"{prefix}_diff"],
                differences[f"{prefix}_ci_low"],
                differences[f"{prefix}_ci_high"],
                strict=True,
            )
        ]
    return (
        text
        + f"\npaired differences ({result.settings['method']}):\n"
        + shown.to_string(index=False, float_format=lambda v: f"{v:+.4f}")
        + "\n"
        + "".join(f"{note}\n" for note in differences.attrs.get("notes", ()))
    )


_FORMATS = {"json": _json, "csv": _csv, "markdown": _markdown, "table": _table}
