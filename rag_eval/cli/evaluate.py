"""``rag-eval evaluate``, ``compare`` and ``power``: measure runs, compare them with a baseline, and plan how many
queries a comparison needs (see docs/cli.md)."""

from __future__ import annotations

import argparse
from typing import Any

from ..renderers import FORMATS
from ._common import DECIMAL, SHARE, count, measuring, option, positional_inputs, shared, show, show_card, to_mlflow
from ._inputs import baseline, conventions, load_report, named_runs, resolve_metrics, run_names

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> None:
    """The parsers of evaluate, compare and power."""
    for add in (_evaluate_parser, _compare_parser, _power_parser):
        add(commands)


def _evaluate_parser(commands: Any) -> None:
    ev = commands.add_parser(
        "evaluate",
        help="measure run files against a qrels file",
        description="Measure one or more runs (TREC or JSONL) against qrels (TREC, BEIR TSV or JSONL). A run is "
        "named by its file's stem (by the path as given where two stems collide).",
    )
    positional_inputs(ev)
    measuring(ev)
    ev.add_argument("-q", "--per-query", action="store_true", help="one value per run, query and metric")
    shared(ev, "format", choices=[*FORMATS, "trec_eval"])
    shared(ev, "resamples")
    shared(ev, "seed")
    shared(ev, "no_card")
    shared(ev, "mlflow")


def _compare_parser(commands: Any) -> None:
    cmp = commands.add_parser(
        "compare",
        help="compare runs against a baseline: paired tests, intervals, corrections",
        description="Compare runs against a baseline per query: mean difference with a paired bootstrap interval, "
        "a paired test, effect size, wins/ties/losses, p-values corrected across every pair and metric. A run is "
        "named as in evaluate (its file's stem).",
    )
    positional_inputs(cmp)
    shared(cmp, "baseline")
    measuring(cmp)
    shared(cmp, "test")
    shared(cmp, "correction")
    shared(cmp, "alpha")
    option(cmp, "--permutations", number=count(), default="10000", metavar="N", help="randomization test permutations")
    option(
        cmp,
        "--margin",
        number=DECIMAL,
        metavar="D",
        help="the smallest difference that matters: a difference that is not significant is said to be ruled out "
        "(its interval within (-D, D)) or inconclusive",
    )
    shared(cmp, "format", choices=list(FORMATS))
    shared(cmp, "resamples")
    shared(cmp, "seed")
    shared(cmp, "no_card")


def _power_parser(commands: Any) -> None:
    pw = commands.add_parser(
        "power",
        help="how many queries a comparison needs, from a pilot report",
        description="From a saved report (a report.parquet, or a result folder) used as a pilot: for the paired test "
        "the comparison will use, the minimum detectable difference at the pilot's number of queries and, with "
        "--effect, the number of queries needed to detect that difference, at --alpha (Bonferroni over the "
        "comparisons) and --power. One analysis per metric and system compared with the baseline. See "
        "docs/power.md.",
    )
    pw.add_argument("report", help="a saved report (Report.save's Parquet file) or a result folder")
    shared(pw, "baseline")
    pw.add_argument("--system", metavar="NAME", help="the system compared with the baseline (default: every other)")
    shared(pw, "metric")
    shared(pw, "alpha")
    option(pw, "--power", number=SHARE, default="0.8", help="the power to reach, in (0, 1) (default 0.8)")
    option(pw, "--effect", number=DECIMAL, metavar="D", help="a difference to detect: print the queries needed for it")
    pw.add_argument(
        "--method",
        choices=["t", "resample"],
        default="t",
        help="t: the paired t-test, noncentral t (default); resample: simulate --test on the pilot's resampled "
        "per-query differences",
    )
    shared(pw, "test")
    option(
        pw,
        "--comparisons",
        number=count(),
        metavar="N",
        help="tests the correction spans (Bonferroni); default: every other system x every metric of the report",
    )
    option(
        pw,
        "--correlation",
        number=DECIMAL,
        metavar="RHO",
        help="a report of one system: the assumed correlation of its per-query values with the other system's",
    )
    option(
        pw,
        "--simulations",
        number=count(),
        default="1000",
        metavar="N",
        help="resample: query sets per point (default 1000)",
    )


def run(args: argparse.Namespace) -> int:
    return {"evaluate": _evaluate, "compare": _compare, "power": _power}[args.command](args)


def _measured(args: argparse.Namespace) -> tuple[Any, Any, dict[str, Any], list[Any], str | None]:
    """What evaluate and compare measure: the report, the qrels, the runs by name, the metrics and (compare) the
    baseline's name."""
    from ..data import Qrels
    from ..reports import evaluate

    measured_by = conventions(args)
    metrics = resolve_metrics(args.metrics, dialect=args.dialect, conventions=args.conventions)
    qrels = Qrels.load(args.qrels)
    names = run_names(args.runs)
    against = baseline(args.baseline, names, list(args.runs)) if args.command == "compare" else None
    named = named_runs(args.runs)
    report = evaluate(qrels, named, metrics, conventions=measured_by, judged_threshold=args.judged_threshold)
    return report, qrels, named, metrics, against


def _evaluate(args: argparse.Namespace) -> int:
    from ..renderers import format_report, format_trec_eval
    from ..renderers.formats import format_summary_table

    report, qrels, named, metrics, _ = _measured(args)
    if args.format == "trec_eval":
        text = format_trec_eval(report, qrels=qrels, runs=named, per_query=args.per_query, metrics=metrics)
    elif args.format == "table" and not args.per_query:  # the same text as format_report's, without pandas
        text = format_summary_table(report, resamples=args.resamples, seed=args.seed)
    else:
        text = format_report(report, args.format, per_query=args.per_query, resamples=args.resamples, seed=args.seed)
    show(text, data=args.format in ("csv", "json"))
    show_card(report.render_card, args)  # without the card's pydantic model (start-up, issue 28)
    if args.mlflow is not None:  # the summary's numbers as printed: the same resamples and seed
        to_mlflow(args, report.log_to_mlflow, resamples=args.resamples, seed=args.seed)
    return 0


def _compare(args: argparse.Namespace) -> int:
    from ..renderers import format_comparison
    from ..statistics import compare

    report, _, _, _, against = _measured(args)
    result = compare(
        report,
        baseline=against,
        test=args.test,
        correction=args.correction,
        alpha=args.alpha,
        resamples=args.resamples,
        permutations=args.permutations,
        seed=args.seed,
        margin=args.margin,
    )
    show(format_comparison(result, args.format), data=args.format in ("csv", "json"))
    show_card(result.card.render, args)
    return 0


def _power(args: argparse.Namespace) -> int:
    from ..statistics import power
    from ..statistics.systems import resolve_system, with_systems

    report = load_report(args.report)
    measured = set(report.per_query["metric"])  # a stage-aware name (recall@budget) is taken as the report has it
    metrics: list[str] = []
    for name in args.metrics or [None]:
        if name is not None and name in measured:
            metrics.append(name)
        else:
            metrics.extend(str(m) for m in resolve_metrics(None if name is None else [name]))
    metrics = list(dict.fromkeys(metrics))
    systems = list(dict.fromkeys(with_systems(report.per_query)["system"]))  # runs, or run/stage: as compare
    if args.correlation is not None or len(systems) < 2:
        pairs = [(args.system, args.baseline)]  # power() takes these as they are (and says what is wrong)
    else:
        base = resolve_system(args.baseline, systems) if args.baseline is not None else systems[0]
        others = [args.system] if args.system is not None else [s for s in systems if s != base]
        pairs = [(system, base) for system in others]
    analyses = [
        power(
            report,
            baseline=against,
            system=system,
            metric=metric,
            alpha=args.alpha,
            power=args.power,
            effect=args.effect,
            method=args.method,
            comparisons=args.comparisons,
            correlation=args.correlation,
            test=args.test,
            simulations=args.simulations,
        )
        for metric in metrics
        for system, against in pairs
    ]
    show("\n\n".join(a.to_text() for a in analyses) + "\n")
    return 0
