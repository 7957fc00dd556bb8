"""``rag-eval gate``: a regression gate for CI (exit 0 pass, 1 regression, 2 bad input or not comparable, 3
inconclusive), of two saved results or of a candidate pipeline run at the baseline's settings (see docs/cli.md and
docs/gate.md)."""

from __future__ import annotations

import argparse
import functools
from typing import Any

from ..errors import InputError
from ._common import DECIMAL, option, say, shared, show, to_mlflow
from ._inputs import drift_inputs, load_report, snapshot

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> None:
    gate = commands.add_parser(
        "gate",
        help="a regression gate for CI: fail a candidate whose retrieval got worse than the baseline's",
        description="Compare a candidate with a baseline (result folders or saved reports; or run a candidate "
        "pipeline, --pipeline NAME --beir FOLDER, at the baseline's depth and budget), rule by rule: pass when "
        "the interval of (candidate - baseline) at the corrected level lies above -MAXDROP, regression when it lies "
        "below, inconclusive otherwise (with the minimum detectable difference and the queries needed; and below "
        "the test's minimum n: t 2, randomization 6, bootstrap and wilcoxon 10). Where lower is better (loss.*, "
        "unjudged) a rise is the regression. Refuses reports computed on different qrels, queries, corpus, "
        "conventions or budget, or a side lacking queries the other measured, unless --allow-different. "
        "Exit status: 0 pass, 1 regression, 2 bad input or not comparable, 3 inconclusive (unless --inconclusive "
        "pass). See docs/gate.md.",
    )
    gate.add_argument("baseline_path", metavar="BASELINE", help="the baseline: a result folder or a saved report")
    gate.add_argument(
        "candidate_path",
        metavar="CANDIDATE",
        nargs="?",
        help="the candidate: a result folder or a saved report (or none, with --pipeline: the pipeline to run)",
    )
    shared(gate, "pipeline")
    shared(gate, "beir")
    shared(gate, "split")
    shared(gate, "cache")
    shared(gate, "out", help="with --pipeline: the candidate's result folder to write (default gate-candidate)")
    shared(gate, "metric")
    option(
        gate, "--max-drop", number=DECIMAL, metavar="D", help="the largest drop of each --metric that does not matter"
    )
    gate.add_argument("--stage", metavar="NAME", help="the stage (or run/stage) each --metric is read from")
    gate.add_argument(
        "--rule",
        action="append",
        metavar="METRIC[:STAGE]:MAXDROP",
        help="a rule of its own, repeatable (e.g. recall@depth:bm25:0.02), or a floor on the candidate's mean, "
        "METRIC[:STAGE] >= FLOOR (e.g. 'answer.f1 >= 0.30')",
    )
    shared(gate, "test", choices=["randomization", "t", "wilcoxon", "bootstrap"])
    shared(gate, "correction")
    shared(gate, "alpha")
    gate.add_argument(
        "--inconclusive",
        choices=["fail", "pass"],
        default="fail",
        help="what an inconclusive rule does: fail (exit 3, default) or pass (exit 0; skipped in JUnit)",
    )
    gate.add_argument("--junit", metavar="PATH", help="write JUnit XML: one testcase per rule")
    gate.add_argument(
        "--markdown", metavar="PATH", help="append a Markdown summary (e.g. $GITHUB_STEP_SUMMARY) to PATH"
    )
    gate.add_argument(
        "--allow-different",
        nargs="+",
        action="extend",
        default=[],
        choices=["qrels", "queries", "corpus", "conventions", "budget", "hashes", "unpaired"],
        metavar="WHAT",
        help="compare all the same reports whose WHAT differs (qrels, queries, corpus, conventions, budget; hashes: "
        "a report without them; unpaired: queries measured on one side only, left out and counted); each override "
        "is printed",
    )
    gate.add_argument(
        "--drift",
        metavar="QRELS",
        help="name the drift between BASELINE and CANDIDATE (result folders of one pipeline each) in the reason of "
        "a rule that does not pass: the relevant items (judged by QRELS) lost and gained, by cause (docs/drift.md)",
    )
    shared(gate, "corpus_before")
    shared(gate, "corpus_after")
    shared(gate, "chunks_before")
    shared(gate, "chunks_after")
    shared(gate, "seed")
    shared(gate, "mlflow")


def run(args: argparse.Namespace) -> int:
    """The gate's verdict as its exit status: 0 pass, 1 regression, 3 inconclusive (unless --inconclusive pass);
    bad input or reports that are not comparable raise (status 2)."""
    from ..drivers.gating import Rule, gate

    rules: list[Rule] = []
    if args.metrics:
        if args.max_drop is None:
            raise InputError("--metric needs --max-drop (the largest drop that does not matter)")
        rules += [Rule(m, args.max_drop, args.stage) for m in args.metrics]
    elif args.max_drop is not None or args.stage is not None:
        raise InputError("--max-drop and --stage go with --metric")
    rules += [Rule.parse(text) for text in args.rule or []]
    if not rules:
        raise InputError(
            "no rule: give --metric METRIC --max-drop D, or --rule METRIC[:STAGE]:MAXDROP (or 'METRIC >= FLOOR')"
        )
    candidate = args.candidate_path
    if args.pipelines:
        if candidate is not None:
            raise InputError("give a CANDIDATE to compare, or --pipeline to run one, not both")
        candidate = _run_candidate(args)
    elif candidate is None:
        raise InputError("no candidate: give a CANDIDATE folder or report, or --pipeline NAME --beir FOLDER to run one")
    elif args.beir is not None or args.out is not None or args.cache is not None:
        raise InputError("--beir, -o and --cache go with --pipeline (the candidate to run)")
    given = [args.corpus_before, args.corpus_after, args.chunks_before, args.chunks_after]
    if args.drift is None and any(path is not None for path in given):
        raise InputError("--corpus-before/--corpus-after and --chunks-before/--chunks-after go with --drift QRELS")
    found = None if args.drift is None else _drift(args, candidate)
    result = gate(
        args.baseline_path,
        candidate,
        rules,
        test=args.test,
        correction=args.correction,
        alpha=args.alpha,
        inconclusive=args.inconclusive,
        allow=set(args.allow_different),
        seed=args.seed,
        drift=found,
    )
    if args.junit:
        result.write_junit(args.junit)
    if args.markdown:
        result.write_markdown(args.markdown)
    show(result.to_text() + "\n")
    if args.mlflow is not None:
        from ..drivers.gate_mlflow import log_gate

        to_mlflow(args, functools.partial(log_gate, result), run_name=f"gate {result.candidate}")
    return result.exit_code


def _drift(args: argparse.Namespace, candidate: str) -> Any:
    """--drift QRELS: the drift between the baseline's and the candidate's result folders (docs/drift.md), said once
    here; the gate names its causes in each rule that does not pass."""
    from pathlib import Path

    from ..data import Qrels
    from ..statistics.snapshot_drift import drift

    for path, what in ((args.baseline_path, "BASELINE"), (candidate, "CANDIDATE")):
        if not Path(path).is_dir():
            raise InputError(f"--drift compares result folders: {what} is not one", source=str(path))
    several = "--drift compares one pipeline per folder"
    found = drift(
        snapshot(args.baseline_path, None, several),
        snapshot(candidate, None, several),
        Qrels.load(args.drift),
        **drift_inputs(args),
        test=args.test,
        seed=args.seed,
    )
    say(f"drift between the folders: {found.causes()}; {found.verdict()}")
    return found


def _run_candidate(args: argparse.Namespace) -> str:
    """rag-eval gate BASELINE --pipeline NAME --beir FOLDER: run the pipeline on the collection at the baseline's
    depth and budget (read from its card), as rag-eval bench does, into -o (default gate-candidate); its folder."""
    from ..builtin.run import run as bench

    if len(args.pipelines) != 1:
        raise InputError(f"gate runs one candidate pipeline, not {len(args.pipelines)}: give --pipeline once")
    if args.beir is None:
        raise InputError("--pipeline runs on a collection: give --beir FOLDER (the baseline's collection)")
    baseline = load_report(args.baseline_path, "BASELINE")
    spec = baseline.card.pipeline
    if not spec:
        raise InputError(
            "the baseline is not a pipeline's report (its card has no depth and budget to run the candidate at)",
            source=args.baseline_path,
        )
    budget = str(spec["budget"]).removeprefix("budget(").removesuffix(")")
    out = args.out or "gate-candidate"
    bench_args = argparse.Namespace(
        beir=args.beir,
        split=args.split,
        pipelines=args.pipelines,
        depth=int(spec["depth"]),
        budget=budget,
        limit_queries=None,
        cache=args.cache,
        concurrency=1,
        out=out,
        no_plots=True,
    )
    say(
        f"running the candidate {args.pipelines[0]} at the baseline's depth {spec['depth']} and {spec['budget']} "
        f"into {out}"
    )
    if bench(bench_args, command="rag-eval gate --pipeline " + args.pipelines[0]) != 0:
        raise InputError(f"the candidate pipeline {args.pipelines[0]!r} could not be run (said above)")
    return out
