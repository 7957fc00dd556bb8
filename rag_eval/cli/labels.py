"""``rag-eval pool``, ``label``, ``merge``, ``judge`` and ``agreement``: the ground truth, from the pool of what
to label to people's and a model judge's grades and how far they agree (see docs/cli.md)."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import InputError
from ._common import DECIMAL, count, incomplete, option, say, shared, show
from ._inputs import named_runs, resolve_metrics, stem

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> None:
    """The parsers of pool, label, merge, judge and agreement."""
    for add in (_pool_parser, _label_parser, _merge_parser, _judge_parser, _agreement_parser):
        add(commands)


def _pool_parser(commands: Any) -> None:
    pool = commands.add_parser(
        "pool",
        help="pool the top depth of several runs, less what the qrels judge, for labelling",
        description="Write the union of the top DEPTH of every run, less the pairs QRELS already judges, as a pool "
        "(JSONL, or CSV when OUT ends in .csv) that `rag-eval label` serves. Texts come from a BEIR folder. A run "
        "is named as in evaluate (its file's stem).",
    )
    pool.add_argument("runs", nargs="+", metavar="run", help="run file(s) (TREC or JSONL)")
    shared(pool, "depth", required=True, help="how many of each run's top results to pool")
    shared(pool, "qrels")
    pool.add_argument(
        "--strategy",
        choices=["depth", "rrf"],
        default="depth",
        help="order of each query's items: best rank (depth) or reciprocal rank fusion (rrf)",
    )
    shared(pool, "beir")
    shared(pool, "split")
    shared(pool, "out", required=True, help="the pool file to write (.jsonl, or .csv)")


def _label_parser(commands: Any) -> None:
    label = commands.add_parser(
        "label",
        help="label a pool in a local web page, into a qrels file",
        description="Serve a page on 127.0.0.1 that shows one query and one pooled chunk at a time and takes grades "
        "by keyboard (0-3, s skip, b back) or mouse. Each grade goes at once to OUT.judgements.jsonl (append-only) "
        "and OUT (qrels: OUT's own judgements merged with the log, rewritten atomically in OUT's format, TREC or "
        "BEIR TSV with a header; a new OUT is TREC). Starting again "
        "resumes at the first item not judged. See docs/labelling.md.",
    )
    label.add_argument("pool", help="a pool JSONL file (Pool.save)")
    shared(
        label,
        "out",
        required=True,
        help="the qrels file to write, TREC or BEIR TSV (an existing one keeps its format and judgements); the "
        "log is OUT.judgements.jsonl",
    )
    label.add_argument("--assessor", help="your name in the log (default: the login name)")
    option(
        label,
        "--port",
        number=count(0, 65535),
        default="0",
        help="port on 127.0.0.1 (default 0: a free one, printed)",
    )
    shared(label, "scale")
    label.add_argument(
        "--order",
        choices=("pool", "impact"),
        default="pool",
        help="the order items are served in: the pool's own (default), or impact: first the items whose grade "
        "would most change the comparison of the pooled systems (their nDCG discounts differ most), across queries",
    )
    label.add_argument(
        "--judge-log",
        metavar="LOG",
        help="with --order impact: a judgement log holding a model judge's grades of the pool; each item's impact is "
        "weighted by the judge's doubt (1 - its confidence), so that what the judge is least sure of comes first",
    )


def _merge_parser(commands: Any) -> None:
    mrg = commands.add_parser(
        "merge",
        help="merge judgement logs into qrels; conflicts listed, Cohen's kappa reported",
        description="Merge judgement logs (rag-eval label's OUT.judgements.jsonl) into qrels. Each assessor's latest "
        "grade of a pair counts; a pair the base qrels judge keeps its grade; other disagreements are resolved by "
        "--resolve and every one is listed on stdout as CSV, never overwritten silently. See docs/labelling.md.",
    )
    mrg.add_argument("logs", nargs="+", metavar="log", help="judgement log(s) (JSONL)")
    shared(mrg, "qrels")
    mrg.add_argument(
        "--resolve",
        choices=["median", "max", "min"],
        default="median",
        help="grade for a pair assessors disagree on (default: the lower median)",
    )
    shared(mrg, "relevance_threshold")
    shared(mrg, "out", required=True, help="the merged TREC qrels file to write")


def _judge_parser(commands: Any) -> None:
    judge = commands.add_parser(
        "judge",
        help="grade a pool with a model judge into a judgement log (resumable)",
        description="Grade every item of a pool with a judge (MODULE:FUNCTION: a callable returning a judge, or a "
        "function (query, text) -> grade) into a judgement log, under the judge's name and fingerprint, each batch "
        "as it returns. Run again, it asks only what the log lacks (failed items included); a person's grade is "
        "never overwritten. See docs/judges.md.",
    )
    judge.add_argument("pool", help="a pool JSONL file (Pool.save) whose items carry query and chunk texts")
    shared(judge, "judge", required=True)
    shared(judge, "out", required=True, help="the judgement log to append to (JSON lines; created when missing)")
    shared(judge, "scale")
    option(
        judge,
        "--batch-size",
        number=count(),
        default="16",
        metavar="N",
        help="items per call of the judge (default 16)",
    )
    judge.add_argument(
        "--human",
        metavar="QRELS",
        help="people's grades (qrels or a judgement log): the items they graded are not asked (default: all are)",
    )


def _agreement_parser(commands: Any) -> None:
    agr = commands.add_parser(
        "agreement",
        help="a model judge's agreement with people: kappas, alpha, confusion matrix; and of the runs' rankings",
        description="How far a model judge's grades can stand in for people's (docs/agreement.md). On the items "
        "both graded: Cohen's kappa (unweighted and quadratic-weighted), Krippendorff's alpha (ordinal; the judges "
        "extra), the confusion matrix and each grade's precision and recall. With --runs: the runs' ranking under "
        "people's qrels and under the judge's (Kendall's tau with five runs or more, else each pair's order and "
        "significance). Warns when the weighted kappa is below --warn-below or the rankings differ.",
    )
    agr.add_argument(
        "inputs",
        nargs="+",
        metavar="LOG_OR_QRELS",
        help="a judgement log holding people's and the judge's grades, or two qrels files: people's, then the judge's",
    )
    agr.add_argument("--judge-name", metavar="NAME", help="the judge's name in the log (default: its only model judge)")
    agr.add_argument(
        "--people",
        nargs="+",
        metavar="NAME",
        help="the people in the log (default: every assessor that is not a model judge; several: their lower median)",
    )
    shared(agr, "scale")
    shared(agr, "relevance_threshold")
    option(
        agr,
        "--warn-below",
        number=DECIMAL,
        default="0.4",
        metavar="KAPPA",
        help="warn when the quadratic-weighted kappa is below KAPPA (default 0.4)",
    )
    agr.add_argument(
        "--runs",
        nargs="+",
        metavar="RUN",
        help="run files: also compare their ranking under people's and the judge's qrels (on the first -m metric)",
    )
    shared(agr, "metric")
    shared(agr, "test")
    shared(agr, "alpha")
    shared(agr, "format", choices=["table", "json"])


def run(args: argparse.Namespace) -> int:
    commands = {"pool": _pool, "label": _label, "merge": _merge, "judge": _judge, "agreement": _agreement}
    return commands[args.command](args)


def _pool(args: argparse.Namespace) -> int:
    from ..data import Collection, Qrels
    from ..ground_truth import pool

    named = named_runs(args.runs)
    qrels = Qrels.load(args.qrels) if args.qrels else None
    queries, texts = None, None
    if args.beir:
        collection = Collection.from_beir(args.beir, split=args.split)
        queries, texts = collection.queries, collection.corpus
    pooled = pool(named, depth=args.depth, qrels=qrels, strategy=args.strategy, queries=queries, texts=texts)
    if str(args.out).endswith(".csv"):
        pooled.to_csv(args.out)
    else:
        pooled.save(args.out)
    say(
        f"pool {pooled.id}: {len(pooled)} items over {len(pooled.query_ids)} queries from {len(named)} runs at depth "
        f"{args.depth} ({pooled.already_judged} already judged) -> {args.out}"
    )
    return 0 if len(pooled) else incomplete("nothing pooled (nothing to label)")


def _label(args: argparse.Namespace) -> int:
    from ..labelling import parse_scale, serve

    return serve(
        args.pool,
        args.out,
        assessor=args.assessor or _login_name(),
        port=args.port,
        scale=parse_scale(args.scale),
        order=args.order,
        judge_log=args.judge_log,
    )


def _login_name() -> str:
    import getpass

    try:
        return getpass.getuser() or "assessor"
    except (KeyError, OSError):  # no login name (some containers)
        return "assessor"


def _merge(args: argparse.Namespace) -> int:
    from .._escape import csv_text
    from ..data import Qrels
    from ..ground_truth import merge, write_qrels

    base = Qrels.load(args.qrels) if args.qrels else None
    merged = merge(base, *args.logs, resolve=args.resolve, threshold=1 if args.threshold is None else args.threshold)
    write_qrels(merged.qrels, args.out)
    conflicts = merged.conflicts
    if len(conflicts):
        show(csv_text(conflicts), data=True)
    kappa = merged.kappa
    if kappa.value is not None:
        agreement = (
            f"Cohen's kappa {kappa.value:.3f} on grades"
            + (f", {kappa.binary:.3f} at grade >= {kappa.threshold}" if kappa.binary is not None else "")
            + f" (n={kappa.n})"
        )
    elif kappa.pairwise and any(a.kappa is not None for a in kappa.pairwise):
        agreement = "Cohen's kappa " + ", ".join(
            f"{a.assessors[0]}/{a.assessors[1]} {a.kappa:.3f} (n={a.n})" for a in kappa.pairwise if a.kappa is not None
        )
    else:
        agreement = f"no kappa: {kappa.reason}"
    judged = sum(len(merged.qrels[q]) for q in merged.qrels.query_ids)
    say(
        f"merged {len(merged.assessors)} assessor(s) into {args.out} ({judged} judgements); "
        f"{len(conflicts)} conflict(s){' listed on stdout' if len(conflicts) else ''}; {agreement}"
    )
    return 0 if judged else incomplete("nothing merged (the logs hold no judgement)")


def _judge(args: argparse.Namespace) -> int:
    from .._escape import csv_text
    from ..ground_truth.judging import judge, load_judge
    from ..labelling import parse_scale

    scale = parse_scale(args.scale)
    grader = load_judge(args.judge)
    graded = judge(args.pool, grader, log=args.out, scale=scale, batch_size=args.batch_size, human=args.human)
    if len(graded.failures):
        show(csv_text(graded.failures), data=True)
    say(graded.summary())
    if graded.failed:  # the pool is not graded: what was is in the log, and a run again asks only the failed
        return incomplete(f"{graded.failed} of {graded.items} items not graded (listed on stdout)")
    return 0


def _agreement(args: argparse.Namespace) -> int:
    import json

    from ..data import Qrels
    from ..ground_truth import JudgementLog
    from ..ground_truth.agreement import grades_of, judge_agreement
    from ..labelling import parse_scale
    from ..reports import evaluate
    from ..statistics import ranking_agreement

    scale = parse_scale(args.scale)
    threshold = 1 if args.threshold is None else args.threshold
    warn_below = 0.4 if args.warn_below is None else float(args.warn_below)
    human: Qrels | dict[str, dict[str, int]]
    judged: Qrels | dict[str, dict[str, int]]
    if len(args.inputs) == 1:
        log = JudgementLog.load(args.inputs[0])
        judge = args.judge_name
        if judge is None:
            if len(log.judges) != 1:
                raise InputError(
                    f"the log holds {len(log.judges)} model judge(s) {sorted(log.judges)}: name one with --judge-name",
                    source=args.inputs[0],
                )
            judge = next(iter(log.judges))
        people = args.people or [a for a in log.people if a != judge]
        if not people:
            raise InputError(
                "no person graded in the log besides the judge: name them with --people", source=args.inputs[0]
            )
        human, judged = grades_of(log, people), grades_of(log, judge)
        names = (", ".join(people), judge)
    elif len(args.inputs) == 2:
        if args.judge_name is not None or args.people is not None:
            raise InputError("--judge-name and --people name assessors of a log: give one judgement log, not two qrels")
        human, judged = Qrels.load(args.inputs[0]), Qrels.load(args.inputs[1])
        names = (stem(args.inputs[0]), stem(args.inputs[1]))
    else:
        raise InputError(
            f"give a judgement log, or two qrels files (people's, the judge's); not {len(args.inputs)} files"
        )
    items = judge_agreement(human, judged, scale=scale, threshold=threshold, warn_below=warn_below, names=names)
    ranking = None
    if args.runs:
        metrics = resolve_metrics(args.metrics)
        named = named_runs(args.runs)
        human_report = evaluate(human, named, metrics[:1])
        judge_report = evaluate(judged, named, metrics[:1])
        ranking = ranking_agreement(human_report, judge_report, str(metrics[0]), test=args.test, alpha=args.alpha)
    if args.format == "json":
        payload = {"items": items.to_dict(), "ranking": None if ranking is None else ranking.to_dict()}
        show(json.dumps(payload, indent=2) + "\n", data=True)
    else:
        show(items.render() + "\n" + ("" if ranking is None else ranking.render() + "\n"))
    if not items.n:
        return incomplete("no item graded by both: the agreement is not measured")
    return 0
