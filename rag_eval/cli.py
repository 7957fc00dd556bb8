"""The ``rag-eval`` command line (layer 5): evaluate run files against a qrels file.

    rag-eval evaluate QRELS RUN [RUN ...] -m METRIC [-m ...] [--per-query] [--format table|csv|json|trec_eval]
                      [--conventions default|trec_eval] [--dialect trec_eval|ir_measures|ranx] [-c] [-M N] [-l N] [-J]
    rag-eval label POOL --qrels OUT [--assessor NAME] [--port N] [--scale 0..3]

Bad input (a missing or malformed file, an unknown metric, ...) prints one line naming the file, the line and
the problem, and exits with status 2. The metric card goes to stderr (into the ``card`` key with --format json).

``-m`` takes rag_eval's metric names (``ndcg@10``, ``P(rel=2)@5``, trec_eval's printed ``P_10``) and trec_eval's own
``-m`` arguments: a nickname (``official``, ``set``, ``all_trec``), a measure at its default parameters (``P``: P_5
... P_1000) or with parameters (``P.5,7,3``, ``ndcg.1=3,2=9``, ``iprec_at_recall..10,.20``), merged as trec_eval
merges them (:mod:`rag_eval.metrics.trec_eval_measures`). Without ``--dialect``, nDCG's gain is the conventions'
(as for ``ndcg_cut_10`` in the grammar); ``--dialect trec_eval`` pins it linear, as trec_eval computes it (printed
names such as ``P_5`` are read as trec_eval prints them); ``--dialect ir_measures|ranx`` reads names as those
tools do. Without ``-m``, ``--conventions
trec_eval`` measures what trec_eval measures without ``-m`` (``official``); otherwise the default metrics.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from ._version import __version__
from .data._numbers import score_text
from .data.qrels import Qrels
from .data.run import Run
from .errors import InputError
from .metrics.conventions import PRESETS, resolve_conventions
from .metrics.grammar import DIALECTS, GRADE_LIMIT, MAX_CUTOFF, Metric, parse_metric, read_int
from .metrics.trec_eval_measures import is_trec_eval_measure, trec_eval_metrics
from .reports import DEFAULT_METRICS, evaluate
from .reports.report import Report
from .reports.trec_eval import format_trec_eval

EXIT_BAD_INPUT = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rag-eval", description="Stage-aware retrieval evaluation for RAG.")
    parser.add_argument("--version", action="version", version=f"rag-eval {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    ev = commands.add_parser(
        "evaluate",
        help="measure run files against a qrels file",
        description="Measure one or more runs (TREC or JSONL) against qrels (TREC, BEIR TSV or JSONL).",
    )
    ev.add_argument("qrels", help="qrels file (TREC 'qid iter docid grade', BEIR TSV with header, or JSONL)")
    ev.add_argument("runs", nargs="+", metavar="run", help="run file(s) (TREC 'qid Q0 docid rank score tag', or JSONL)")
    ev.add_argument(
        "-m",
        "--metric",
        dest="metrics",
        action="append",
        metavar="METRIC",
        help=f"metric, repeatable (e.g. ndcg@10, 'P(rel=2)@5', trec_eval's P_10, or trec_eval's -m syntax: all_trec, "
        f"P.5,7,3, ndcg.1=3,2=9); default: {' '.join(DEFAULT_METRICS)} (with --conventions trec_eval: official)",
    )
    ev.add_argument(
        "--dialect",
        choices=DIALECTS,
        help="read each -m with the meaning it has in that tool (pinned in the canonical name)",
    )
    ev.add_argument("-q", "--per-query", action="store_true", help="one value per run, query and metric")
    ev.add_argument("--format", choices=["table", "csv", "json", "trec_eval"], default="table")
    ev.add_argument("--conventions", choices=sorted(PRESETS), default="default", help="convention preset")
    ev.add_argument(
        "-c", dest="complete", action="store_true", help="count qrels queries missing from a run as 0 (trec_eval -c)"
    )
    ev.add_argument(
        "-M", dest="max_depth", type=str, metavar="N", help="evaluate only the top N of each ranking (trec_eval -M)"
    )
    ev.add_argument("-l", dest="threshold", type=str, metavar="N", help="lowest relevant grade (trec_eval -l)")
    ev.add_argument("-J", dest="judged_only", action="store_true", help="drop unjudged results first (trec_eval -J)")
    ev.add_argument("--resamples", default="1000", help="bootstrap resamples for the confidence interval")
    ev.add_argument("--seed", default="0", help="seed of the bootstrap")
    ev.add_argument(
        "--judged-threshold",
        default="0.9",
        metavar="SHARE",
        help="warn when a run's judged share at a cutoff is below SHARE (default 0.9; 0 never warns)",
    )
    ev.add_argument("--no-card", action="store_true", help="do not print the metric card to stderr")
    cmp = commands.add_parser(
        "compare",
        help="compare runs against a baseline: paired tests, intervals, corrections",
        description="Compare runs against a baseline per query: mean difference with a paired bootstrap interval, "
        "a paired test, effect size, wins/ties/losses, p-values corrected across every pair and metric.",
    )
    cmp.add_argument("qrels")
    cmp.add_argument("runs", nargs="+", metavar="run")
    cmp.add_argument(
        "--baseline", help="a run's name (its TREC tag, or file stem when tags clash) or path; default: the first"
    )
    cmp.add_argument("-m", "--metric", dest="metrics", action="append", metavar="METRIC")
    cmp.add_argument("--test", choices=["randomization", "t", "wilcoxon"], default="randomization")
    cmp.add_argument("--correction", choices=["holm", "bh", "none"], default="holm")
    cmp.add_argument("--alpha", default="0.05")
    cmp.add_argument("--permutations", default="10000")
    cmp.add_argument("--resamples", default="1000")
    cmp.add_argument("--seed", default="0")
    cmp.add_argument("--conventions", choices=sorted(PRESETS), default="default")
    cmp.add_argument("--format", choices=["table", "csv", "json"], default="table")
    from .bench.run import add_arguments

    bench = commands.add_parser(
        "bench",
        help="run pipelines on a BEIR-layout collection and write a report folder",
        description="Run pipelines on a BEIR-layout collection and write a report folder (needs the models extra).",
    )
    add_arguments(bench)
    pool = commands.add_parser(
        "pool",
        help="pool the top depth of several runs, less what the qrels judge, for labelling",
        description="Write the union of the top DEPTH of every run, less the pairs QRELS already judges, as a pool "
        "(JSONL, or CSV when OUT ends in .csv) that `rag-eval label` serves. Texts come from a BEIR folder.",
    )
    pool.add_argument("runs", nargs="+", metavar="run", help="run file(s) (TREC or JSONL)")
    pool.add_argument("--depth", type=str, required=True, help="how many of each run's top results to pool")
    pool.add_argument("--qrels", help="existing judgements: pairs they judge are left out")
    pool.add_argument(
        "--strategy",
        choices=["depth", "rrf"],
        default="depth",
        help="order of each query's items: best rank (depth) or reciprocal rank fusion (rrf)",
    )
    pool.add_argument(
        "--beir", metavar="FOLDER", help="a BEIR folder whose corpus.jsonl and queries.jsonl give the texts"
    )
    pool.add_argument("--split", default="test", help="the BEIR qrels split that names the queries (default test)")
    pool.add_argument("-o", "--out", required=True, help="the pool file to write (.jsonl, or .csv)")
    mrg = commands.add_parser(
        "merge",
        help="merge judgement logs into qrels; conflicts listed, Cohen's kappa reported",
        description="Merge judgement logs (rag-eval label's OUT.judgements.jsonl) into qrels. Each assessor's latest "
        "grade of a pair counts; a pair the base qrels judge keeps its grade; other disagreements are resolved by "
        "--resolve and every one is listed on stdout as CSV, never overwritten silently. See docs/labelling.md.",
    )
    mrg.add_argument("logs", nargs="+", metavar="log", help="judgement log(s) (JSONL)")
    mrg.add_argument("--qrels", help="base qrels: their grades are kept")
    mrg.add_argument(
        "--resolve",
        choices=["median", "max", "min"],
        default="median",
        help="grade for a pair assessors disagree on (default: the lower median)",
    )
    mrg.add_argument("--threshold", type=str, default="1", help="lowest relevant grade, for the binary kappa")
    mrg.add_argument("-o", "--out", required=True, help="the merged TREC qrels file to write")
    label = commands.add_parser(
        "label",
        help="label a pool in a local web page, into a qrels file",
        description="Serve a page on 127.0.0.1 that shows one query and one pooled chunk at a time and takes grades "
        "by keyboard (0-3, s skip, b back) or mouse. Each grade goes at once to OUT.judgements.jsonl (append-only) "
        "and OUT (TREC qrels: OUT's own judgements merged with the log, rewritten atomically). Starting again "
        "resumes at the first item not judged. See docs/labelling.md.",
    )
    label.add_argument("pool", help="a pool JSONL file (Pool.save)")
    label.add_argument(
        "--qrels",
        required=True,
        metavar="OUT",
        help="the TREC qrels file to write (its existing judgements are kept); the log is OUT.judgements.jsonl",
    )
    label.add_argument("--assessor", help="your name in the log (default: the login name)")
    label.add_argument("--port", default="0", help="port on 127.0.0.1 (default 0: a free one, printed)")
    label.add_argument("--scale", default="0..3", help="grades LOW..HIGH, one key each (default 0..3)")
    demo = commands.add_parser("demo", help="the whole flow offline on Python's own docs (needs the models extra)")
    demo.add_argument("--out", default="demo-report", help="report folder (default ./demo-report)")
    demo.add_argument("--no-plots", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        return _dispatch(args, argv)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as one line each, like errors: ``rag-eval: warning: ...`` (no source line of rag_eval's)."""
    print(f"rag-eval: warning: {' '.join(str(message).split())}", file=sys.stderr)


def _dispatch(args: argparse.Namespace, argv: list[str]) -> int:
    if args.command == "bench":
        from .bench.run import run

        return run(args, command="rag-eval " + " ".join(argv))
    if args.command == "demo":
        from .bench.demo import main as demo

        return demo(argv[1:])
    try:
        _read_numbers(args)
        if args.command == "label":
            return _label(args)
        if args.command == "pool":
            return _pool(args)
        if args.command == "merge":
            return _merge(args)
        return _compare(args) if args.command == "compare" else _evaluate(args)
    except (InputError, ValueError) as exc:
        print(f"rag-eval: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
        return 0


# The numeric flags, read as plain ASCII decimals (argparse's int() and float() read "1_0" as 10 and other scripts'
# digits as digits), each within its range; a bad one is one line and exit 2 like any other bad input.
_INT_FLAGS = {
    "resamples": ("--resamples", 1, MAX_CUTOFF),
    "seed": ("--seed", 0, 2**63 - 1),
    "permutations": ("--permutations", 1, MAX_CUTOFF),
    "port": ("--port", 0, 65535),
}
_SHARE_FLAGS = {"judged_threshold": "--judged-threshold", "alpha": "--alpha"}


def _read_numbers(args: argparse.Namespace) -> None:
    for attr, (flag, low, high) in _INT_FLAGS.items():
        if isinstance(getattr(args, attr, None), str):
            setattr(args, attr, read_int(getattr(args, attr), flag, low=low, high=high))
    for attr, flag in _SHARE_FLAGS.items():
        text = getattr(args, attr, None)
        if isinstance(text, str):
            value = score_text(text.strip())
            if value is None or not 0.0 <= value <= 1.0:
                raise InputError(f"{flag} {text!r} is not a plain decimal number in [0, 1]")
            setattr(args, attr, value)


def _one_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        return f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}"
    return " ".join(str(exc).split())


def _evaluate(args: argparse.Namespace) -> int:
    changes: dict[str, object] = {}
    if args.complete:
        changes["missing_run"] = "zero"
    if args.max_depth is not None:
        changes["max_depth"] = read_int(args.max_depth, "-M (max_depth)", low=1, high=MAX_CUTOFF)
    if args.threshold is not None:
        changes["relevance_threshold"] = read_int(
            args.threshold, "-l (relevance_threshold)", low=1, high=GRADE_LIMIT - 1
        )
    if args.judged_only:
        changes["unjudged"] = "remove"
    conventions = resolve_conventions(args.conventions).replace(**changes)
    metrics = resolve_metrics(args.metrics, dialect=args.dialect, conventions=args.conventions)
    qrels = Qrels.load(args.qrels)
    runs = [Run.load(path) for path in args.runs]
    names = [r.name for r in runs]
    named = {(path if names.count(r.name) > 1 else r.name): r for path, r in zip(args.runs, runs)}
    report = evaluate(qrels, named, metrics, conventions=conventions, judged_threshold=args.judged_threshold)

    def summary():  # the bootstrap runs only for the formats that print it
        return report.summarize(resamples=args.resamples, seed=args.seed)

    out = io.StringIO()
    if args.format == "json":
        payload: dict[str, object] = {"card": json.loads(report.card.model_dump_json())}
        payload["summary"] = _records(summary())
        if args.per_query:
            payload["per_query"] = _records(report.per_query)
            if report.text_metrics:
                payload["per_query_text"] = _records(report.per_query_text)
        json.dump(payload, out, indent=2, allow_nan=False, default=_json_default)
        out.write("\n")
    elif args.format == "csv":
        frame = report.per_query if args.per_query else summary()
        frame.to_csv(out, index=False, float_format=None)
    elif args.format == "trec_eval":
        out.write(format_trec_eval(report, qrels=qrels, runs=named, per_query=args.per_query, metrics=metrics))
    else:
        _write_table(out, report, summary(), per_query=args.per_query)
    sys.stdout.write(out.getvalue())
    sys.stdout.flush()
    if args.format != "json" and not args.no_card:
        print(report.card.render(), file=sys.stderr)
    return 0


def resolve_metrics(
    texts: Sequence[str] | None, *, dialect: str | None = None, conventions: str = "default"
) -> list[Metric]:
    """The metrics of the ``-m`` arguments ``texts``: trec_eval's ``-m`` syntax (a nickname, or a trec_eval
    measure's name alone or with ``.PARAMS``) expanded and merged as trec_eval merges them, in trec_eval's order,
    where the first such argument stands (nDCG's gain pinned linear with ``dialect="trec_eval"``, else the
    conventions'); every other name parsed with ``dialect`` (``P_5``, ``ndcg@10``). Repeats are dropped (the first
    kept). Without ``texts``: trec_eval's ``official`` under ``conventions="trec_eval"``, else the default metrics."""
    if not texts:
        if conventions == "trec_eval" and dialect in (None, "trec_eval"):
            return trec_eval_metrics(["official"])
        return [parse_metric(m) for m in DEFAULT_METRICS]
    slots: list[Metric | None] = []  # None: where trec_eval's group goes
    group: list[str] = []
    for text in texts:
        name = text.strip().partition(".")[0]
        if dialect not in (None, "trec_eval") or not is_trec_eval_measure(name):
            slots.append(parse_metric(text, dialect=dialect))
            continue
        # trec_eval's -m syntax (P, P.5,7,3, ndcg.1=3,2=9, all_trec; all_prefs to refuse it), merged as trec_eval
        # merges it: -m all_trec -m relstring.20 is relstring_20 alone
        if not group:
            slots.append(None)
        group.append(text)
    expanded = trec_eval_metrics(group, pin_gain=dialect == "trec_eval") if group else []
    out: list[Metric] = []
    for slot in slots:
        out.extend(expanded if slot is None else [slot])
    return list(dict.fromkeys(out))


def _pool(args: argparse.Namespace) -> int:
    from .data.collection import Collection
    from .ground_truth import pool

    args.depth = read_int(args.depth, "--depth", low=1, high=MAX_CUTOFF)  # plain digits: int() reads 1_0 as 10
    runs = [Run.load(path) for path in args.runs]
    names = _run_names(args.runs, runs)
    qrels = Qrels.load(args.qrels) if args.qrels else None
    queries, texts = None, None
    if args.beir:
        collection = Collection.from_beir(args.beir, split=args.split)
        queries, texts = collection.queries, collection.corpus
    pooled = pool(
        dict(zip(names, runs)), depth=args.depth, qrels=qrels, strategy=args.strategy, queries=queries, texts=texts
    )
    if str(args.out).endswith(".csv"):
        pooled.to_csv(args.out)
    else:
        pooled.save(args.out)
    print(
        f"rag-eval: pool {pooled.id}: {len(pooled)} items over {len(pooled.query_ids)} queries from "
        f"{len(names)} runs at depth {args.depth} ({pooled.already_judged} already judged) -> {args.out}",
        file=sys.stderr,
    )
    return 0


def _merge(args: argparse.Namespace) -> int:
    from .ground_truth import merge, write_qrels

    base = Qrels.load(args.qrels) if args.qrels else None
    merged = merge(base, *args.logs, resolve=args.resolve, threshold=read_int(args.threshold, "--threshold"))
    write_qrels(merged.qrels, args.out)
    conflicts = merged.conflicts
    if len(conflicts):
        sys.stdout.write(conflicts.to_csv(index=False))
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
    print(
        f"rag-eval: merged {len(merged.assessors)} assessor(s) into {args.out} ({judged} judgements); "
        f"{len(conflicts)} conflict(s){' listed on stdout' if len(conflicts) else ''}; {agreement}",
        file=sys.stderr,
    )
    return 0


def _label(args: argparse.Namespace) -> int:
    from .labelling.server import parse_scale, serve

    if not 0 <= args.port <= 65535:
        raise InputError(f"--port {args.port}: expected 0 (a free port) to 65535")
    scale = parse_scale(args.scale)
    return serve(args.pool, args.qrels, assessor=args.assessor or _login_name(), port=args.port, scale=scale)


def _login_name() -> str:
    import getpass

    try:
        return getpass.getuser() or "assessor"
    except (KeyError, OSError):  # no login name (some containers)
        return "assessor"


def _run_names(paths: list[str], runs: list[Run]) -> list[str]:
    """Each run's TREC tag, or its file stem where tags clash (or are missing), or its path where stems clash."""
    tags = [r.tag or "" for r in runs]
    if all(tags) and len(set(tags)) == len(tags):
        return tags
    stems = [Path(p).name.removesuffix(".gz").rsplit(".", 1)[0] for p in paths]
    return stems if len(set(stems)) == len(stems) else list(paths)


def _compare(args: argparse.Namespace) -> int:
    from .reports.compare import compare

    qrels = Qrels.load(args.qrels)
    runs = [Run.load(path) for path in args.runs]
    names = _run_names(args.runs, runs)
    baseline = None
    if args.baseline is not None:
        if args.baseline in names:
            baseline = args.baseline
        elif args.baseline in args.runs:
            baseline = names[args.runs.index(args.baseline)]
        else:
            raise InputError(
                f"--baseline {args.baseline!r} is neither a run name ({', '.join(names)}) nor one of the run paths"
            )
    metrics = resolve_metrics(args.metrics or ["ndcg@10", "recall@10", "mrr@10"])
    report = evaluate(qrels, dict(zip(names, runs)), metrics, conventions=resolve_conventions(args.conventions))
    result = compare(
        report,
        baseline=baseline or names[0],
        test=args.test,
        correction=args.correction,
        alpha=args.alpha,
        resamples=args.resamples,
        permutations=args.permutations,
        seed=args.seed,
    )
    if args.format == "csv":
        sys.stdout.write(result.table.to_csv(index=False))
    elif args.format == "json":
        payload = {
            "card": json.loads(result.card.model_dump_json()),
            "comparison": _records(result.table),
            "systems": _records(result.systems),
        }
        sys.stdout.write(json.dumps(payload, indent=2, allow_nan=False, default=_json_default) + "\n")
    else:
        sys.stdout.write(str(result) + "\n")
    if args.format != "json":
        print(result.card.render(), file=sys.stderr)
    return 0


def _records(frame) -> list[dict[str, object]]:
    records = frame.to_dict(orient="records")
    for record in records:
        for key, value in record.items():
            if isinstance(value, float) and not math.isfinite(value):
                record[key] = None
    return records


def _json_default(value: object) -> object:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(type(value).__name__)


def _write_table(out: io.StringIO, report: Report, summary, *, per_query: bool) -> None:
    if per_query:
        table = report.per_query.pivot_table(index=["run", "query_id"], columns="metric", values="value", sort=False)
        table = table[[m for m in report.metrics if m not in report.text_metrics]]
        if report.text_metrics:  # relstring, runid: one str per query, beside the numbers
            texts = report.per_query_text.pivot(index=["run", "query_id"], columns="metric", values="text")
            table = table.join(texts[report.text_metrics]) if len(table.columns) else texts[report.text_metrics]
        out.write(table.to_string(float_format=lambda v: f"{v:.4f}") + "\n\n")
    shown = summary[["run", "metric", "mean", "std", "ci_low", "ci_high", "n", "n_nan"]]  # n + n_nan: counted
    out.write(shown.to_string(index=False, float_format=lambda v: f"{v:.4f}") + "\n")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
