"""The ``rag-eval`` command line (layer 5): argument parsing and the commands; the output formats are reports'.

    rag-eval evaluate QRELS RUN [RUN ...] [-m METRIC ...] [--format table|csv|json|markdown|trec_eval] [-q]
    rag-eval compare QRELS RUN RUN [...] [--baseline RUN] [-m METRIC ...] [--test ...] [--correction ...]
    rag-eval power REPORT [--baseline RUN] [-m METRIC ...] [--effect D] [--method t|resample] [--alpha] [--power]
    rag-eval gate BASELINE CANDIDATE --metric METRIC --max-drop D [--stage NAME] [--rule METRIC[:STAGE]:D ...]
        [--test ...] [--correction ...] [--inconclusive fail|pass] [--junit PATH] [--markdown PATH]
        [--allow-different WHAT ...]   (exit 0 pass, 1 regression, 2 bad input or not comparable, 3 inconclusive)
    rag-eval pool RUN [...] --depth N -o POOL [--qrels QRELS] [--beir FOLDER]
    rag-eval human-sample POOL|REPORT -n N [--seed N] -o SAMPLE
    rag-eval estimate --judge-report R --human-report R [--sample S] [--pool POOL --human-qrels QRELS] [-m METRIC ...]
    rag-eval label POOL -o QRELS [--assessor NAME] [--port N] [--scale 0..3] [--order pool|impact [--judge-log LOG]]
    rag-eval merge LOG [...] -o QRELS [--qrels QRELS] [-l N]
    rag-eval judge POOL --judge MODULE:FUNCTION -o LOG [--scale 0..3] [--batch-size N] [--human QRELS]
    rag-eval agreement LOG [--judge-name NAME] [--people NAME ...] | HUMAN_QRELS JUDGE_QRELS [--runs RUN ... -m METRIC]
    rag-eval bench --beir FOLDER [--pipeline NAME ...] [-o FOLDER]
    rag-eval tune --beir FOLDER [--retriever NAME ...] [--reranker NAME] [--space NAME=VALUES ...] [-m METRIC]
        [--tune-share 0.5 | --split-from JSON] [--groups FILE] [--search grid|random [--trials N]] [--depth N]
        [--budget B] [--seed N] [-o FOLDER]
    rag-eval demo [-o FOLDER]
    rag-eval report FOLDER [FOLDER ...] -o REPORT.html [--drill-depth N] [--beir FOLDER] [--no-plots]
    rag-eval queries sample LOG -n N [--stratify frequency[,cluster][,COLUMN]] [--clusters K] [--text COL]
        [--timestamp COL] [--count COL] [--allocation proportional|equal] [--seed N] [--mask-pii]
        [--no-near-duplicates] -o QUERIES

The commands are one family: an option that two commands share (``-m/--metric``, ``--conventions``, ``-c``,
``-M``, ``-l``, ``-J``, ``--dialect``, ``--judged-threshold``, ``--resamples``, ``--seed``, ``--format``,
``--no-card``, ``--baseline``, ``--alpha``, ``--test``, ``--correction``, ``--qrels``, ``--beir``, ``--split``,
``-o/--out``, ``--depth``, ``--budget``, ``--cache``,
``--no-plots``) is declared once, in
:data:`SHARED_OPTIONS`, with one spelling, default and help (docs/naming.md has the table). A run is named by its
file's stem everywhere (``bm25`` for ``runs/bm25.trec``), by the path as given where two stems collide; a TREC
file's tag is kept on the metric card as the run's tag, never as its name (:func:`run_names`).

Bad input (a missing or malformed file, an unknown metric, ...) prints one line naming the file, the line and
the problem, and exits with status 2. The metric card goes to stderr (into the ``card`` key with --format json).

``-m`` takes rag_eval's metric names (``ndcg@10``, ``P(rel=2)@5``, trec_eval's printed ``P_10``) and trec_eval's own
``-m`` arguments: a nickname (``official``, ``set``, ``all_trec``), a measure at its default parameters (``P``: P_5
... P_1000) or with parameters (``P.5,7,3``, ``ndcg.1=3,2=9``, ``iprec_at_recall..10,.20``), merged as trec_eval
merges them (:mod:`rag_eval.metrics.trec_eval_measures`). Without ``--dialect``, nDCG's gain is the conventions'
(as for ``ndcg_cut_10`` in the grammar); ``--dialect trec_eval`` pins it linear, as trec_eval computes it (printed
names such as ``P_5`` are read as trec_eval prints them); ``--dialect ir_measures|ranx`` reads names as those
tools do. Without ``-m``, ``--conventions trec_eval`` measures what trec_eval measures without ``-m``
(``official``); otherwise the default metrics.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from ._escape import csv_text, visible
from ._files import all_or_none, write_output
from ._version import __version__
from .data import Qrels, Run
from .data.numeric import score_text
from .errors import HarnessError, InputError
from .metrics import Conventions
from .metrics.conventions import PRESETS, resolve_conventions
from .metrics.grammar import DIALECTS, GRADE_LIMIT, MAX_CUTOFF, Metric, parse_metric, read_int
from .metrics.trec_eval_measures import is_trec_eval_measure, trec_eval_metrics
from .renderers import FORMATS, format_comparison, format_report, format_trec_eval
from .reports import DEFAULT_METRICS, evaluate
from .statistics.systems import resolve_system, with_systems

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INCOMPLETE",
    "SHARED_OPTIONS",
    "build_parser",
    "main",
    "resolve_metrics",
    "run_names",
]

EXIT_BAD_INPUT = 2
#: a command that ran but made nothing, or only part, of what it was asked for (docs/cli.md, "Exit status")
EXIT_INCOMPLETE = 4

# Every option that two or more commands have, declared once: flags, then argparse's keywords. A command may set
# only ``required`` and, for ``--format`` and ``--test``, ``choices`` (which formats, which tests apply: gate adds
# bootstrap), and, for ``-o/--out`` and
# ``--depth``, ``help`` (what it writes, what it cuts): tests/test_cli_family.py checks every other keyword is
# the same in every command that has the option.
SHARED_OPTIONS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "metric": (
        ("-m", "--metric"),
        {
            "dest": "metrics",
            "action": "append",
            "metavar": "METRIC",
            "help": "metric, repeatable (e.g. ndcg@10, 'P(rel=2)@5', trec_eval's P_10, or trec_eval's -m syntax: "
            f"all_trec, P.5,7,3, ndcg.1=3,2=9); default: {' '.join(DEFAULT_METRICS)} (with --conventions "
            "trec_eval: official)",
        },
    ),
    "dialect": (
        ("--dialect",),
        {
            "choices": DIALECTS,
            "help": "read each -m with the meaning it has in that tool (pinned in the canonical name)",
        },
    ),
    "conventions": (
        ("--conventions",),
        {"choices": sorted(PRESETS), "default": "default", "help": "convention preset (default: default)"},
    ),
    "complete": (
        ("-c",),
        {
            "dest": "complete",
            "action": "store_true",
            "help": "count qrels queries missing from a run as 0 (trec_eval -c)",
        },
    ),
    "max_depth": (
        ("-M",),
        {"dest": "max_depth", "metavar": "N", "help": "evaluate only the top N of each ranking (trec_eval -M)"},
    ),
    "relevance_threshold": (
        ("-l", "--relevance-threshold"),
        {"dest": "threshold", "metavar": "N", "help": "lowest relevant grade (default 1; trec_eval -l)"},
    ),
    "judged_only": (
        ("-J",),
        {"dest": "judged_only", "action": "store_true", "help": "drop unjudged results first (trec_eval -J)"},
    ),
    "judged_threshold": (
        ("--judged-threshold",),
        {
            "default": "0.9",
            "metavar": "SHARE",
            "help": "warn when a run's judged share at a cutoff is below SHARE (default 0.9; 0 never warns)",
        },
    ),
    "resamples": (
        ("--resamples",),
        {"default": "1000", "metavar": "N", "help": "bootstrap resamples of the confidence intervals (default 1000)"},
    ),
    "seed": (
        ("--seed",),
        {
            "default": "0",
            "metavar": "N",
            "help": "random seed of the bootstrap (and of compare's randomization test, of queries sample's draw, of "
            "tune's split and random search; default 0)",
        },
    ),
    "format": (("--format",), {"default": "table", "help": "output format (default table)"}),
    "baseline": (
        ("--baseline",),
        {
            "metavar": "RUN",
            "help": "the baseline run: its name (the file's stem; in a saved report, a run or run/stage), its file "
            "name or its path as given; default: the first",
        },
    ),
    "alpha": (("--alpha",), {"default": "0.05", "help": "significance level, in (0, 1) (default 0.05)"}),
    "test": (
        ("--test",),
        {
            "choices": ["randomization", "t", "wilcoxon"],
            "default": "randomization",
            "help": "the paired test (default randomization)",
        },
    ),
    "correction": (
        ("--correction",),
        {
            "choices": ["holm", "bh", "none"],
            "default": "holm",
            "help": "multiple-comparison correction: across every pair and metric (compare), across the rules "
            "(gate) (default holm)",
        },
    ),
    "no_card": (("--no-card",), {"action": "store_true", "help": "do not print the metric card to stderr"}),
    "qrels": (
        ("--qrels",),
        {
            "metavar": "QRELS",
            "help": "existing judgements (TREC, BEIR TSV or JSONL qrels): the pairs they judge keep their grade "
            "and are not pooled again",
        },
    ),
    "pipeline": (
        ("--pipeline",),
        {
            "action": "append",
            "dest": "pipelines",
            "metavar": "NAME",
            "help": "bm25, dense, bm25>>dense, hybrid, or package.module:function (repeatable where several are run)",
        },
    ),
    "beir": (
        ("--beir",),
        {"metavar": "FOLDER", "help": "a BEIR-layout folder: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv"},
    ),
    "split": (("--split",), {"default": "test", "help": "the BEIR qrels split that names the queries (default test)"}),
    "out": (("-o", "--out"), {"metavar": "OUT"}),
    "depth": (("--depth",), {"metavar": "N"}),
    "budget": (
        ("--budget",),
        {"default": "5", "help": "chunks (e.g. 5) or tokens (e.g. 512tok) the generator receives"},
    ),
    "cache": (("--cache",), {"help": "cache folder for embeddings and stage outputs (default OUT/cache)"}),
    "no_plots": (("--no-plots",), {"action": "store_true", "help": "write no plots (matplotlib is not needed)"}),
    "scale": (
        ("--scale",),
        {"default": "0..3", "help": "the pool's grades LOW..HIGH, one digit each (default 0..3; label: one key each)"},
    ),
}
_PER_COMMAND = {"required", "choices", "help"}  # what a command may set (see SHARED_OPTIONS' comment)


def _shared(parser: argparse.ArgumentParser, key: str, **own: Any) -> None:
    flags, keywords = SHARED_OPTIONS[key]
    if set(own) - _PER_COMMAND:
        raise TypeError(f"{key}: a command may set only {sorted(_PER_COMMAND)} of a shared option")
    parser.add_argument(*flags, **{**keywords, **own})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rag-eval", description="Stage-aware retrieval evaluation for RAG.")
    parser.add_argument("--version", action="version", version=f"rag-eval {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    ev = commands.add_parser(
        "evaluate",
        help="measure run files against a qrels file",
        description="Measure one or more runs (TREC or JSONL) against qrels (TREC, BEIR TSV or JSONL). A run is "
        "named by its file's stem (by the path as given where two stems collide).",
    )
    _positional_inputs(ev)
    _measuring(ev)
    ev.add_argument("-q", "--per-query", action="store_true", help="one value per run, query and metric")
    _shared(ev, "format", choices=[*FORMATS, "trec_eval"])
    _shared(ev, "resamples")
    _shared(ev, "seed")
    _shared(ev, "no_card")

    cmp = commands.add_parser(
        "compare",
        help="compare runs against a baseline: paired tests, intervals, corrections",
        description="Compare runs against a baseline per query: mean difference with a paired bootstrap interval, "
        "a paired test, effect size, wins/ties/losses, p-values corrected across every pair and metric. A run is "
        "named as in evaluate (its file's stem).",
    )
    _positional_inputs(cmp)
    _shared(cmp, "baseline")
    _measuring(cmp)
    _shared(cmp, "test")
    _shared(cmp, "correction")
    _shared(cmp, "alpha")
    cmp.add_argument("--permutations", default="10000", metavar="N", help="randomization test permutations")
    cmp.add_argument(
        "--margin",
        metavar="D",
        help="the smallest difference that matters: a difference that is not significant is said to be ruled out "
        "(its interval within (-D, D)) or inconclusive",
    )
    _shared(cmp, "format", choices=list(FORMATS))
    _shared(cmp, "resamples")
    _shared(cmp, "seed")
    _shared(cmp, "no_card")

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
    _shared(pw, "baseline")
    pw.add_argument("--system", metavar="NAME", help="the system compared with the baseline (default: every other)")
    _shared(pw, "metric")
    _shared(pw, "alpha")
    pw.add_argument("--power", default="0.8", help="the power to reach, in (0, 1) (default 0.8)")
    pw.add_argument("--effect", metavar="D", help="a difference to detect: print the queries needed for it")
    pw.add_argument(
        "--method",
        choices=["t", "resample"],
        default="t",
        help="t: the paired t-test, noncentral t (default); resample: simulate --test on the pilot's resampled "
        "per-query differences",
    )
    _shared(pw, "test")
    pw.add_argument(
        "--comparisons",
        metavar="N",
        help="tests the correction spans (Bonferroni); default: every other system x every metric of the report",
    )
    pw.add_argument(
        "--correlation",
        metavar="RHO",
        help="a report of one system: the assumed correlation of its per-query values with the other system's",
    )
    pw.add_argument("--simulations", default="1000", metavar="N", help="resample: query sets per point (default 1000)")

    bench = commands.add_parser(
        "bench",
        help="run pipelines on a BEIR-layout collection and write a report folder",
        description="Run pipelines on a BEIR-layout collection and write a report folder (needs the models extra).",
    )
    _shared(bench, "beir")
    bench.add_argument("--dataset", dest="dataset", help=argparse.SUPPRESS)  # 0.1's spelling of --beir
    _shared(bench, "pipeline")  # default: the four built-ins
    _shared(bench, "depth", help="candidates asked of the first stage (default 100)")
    _shared(bench, "budget")
    _shared(bench, "split")
    bench.add_argument("--limit-queries", metavar="N", help="only the first N queries (default all)")
    _shared(bench, "cache")
    bench.add_argument("--concurrency", default="1", metavar="N", help="queries run at once (default 1)")
    _shared(bench, "out", help="the report folder to write (default bench-out/<the folder's name>)")
    _shared(bench, "no_plots")

    pool = commands.add_parser(
        "pool",
        help="pool the top depth of several runs, less what the qrels judge, for labelling",
        description="Write the union of the top DEPTH of every run, less the pairs QRELS already judges, as a pool "
        "(JSONL, or CSV when OUT ends in .csv) that `rag-eval label` serves. Texts come from a BEIR folder. A run "
        "is named as in evaluate (its file's stem).",
    )
    pool.add_argument("runs", nargs="+", metavar="run", help="run file(s) (TREC or JSONL)")
    _shared(pool, "depth", required=True, help="how many of each run's top results to pool")
    _shared(pool, "qrels")
    pool.add_argument(
        "--strategy",
        choices=["depth", "rrf"],
        default="depth",
        help="order of each query's items: best rank (depth) or reciprocal rank fusion (rrf)",
    )
    _shared(pool, "beir")
    _shared(pool, "split")
    _shared(pool, "out", required=True, help="the pool file to write (.jsonl, or .csv)")

    mrg = commands.add_parser(
        "merge",
        help="merge judgement logs into qrels; conflicts listed, Cohen's kappa reported",
        description="Merge judgement logs (rag-eval label's OUT.judgements.jsonl) into qrels. Each assessor's latest "
        "grade of a pair counts; a pair the base qrels judge keeps its grade; other disagreements are resolved by "
        "--resolve and every one is listed on stdout as CSV, never overwritten silently. See docs/labelling.md.",
    )
    mrg.add_argument("logs", nargs="+", metavar="log", help="judgement log(s) (JSONL)")
    _shared(mrg, "qrels")
    mrg.add_argument(
        "--resolve",
        choices=["median", "max", "min"],
        default="median",
        help="grade for a pair assessors disagree on (default: the lower median)",
    )
    _shared(mrg, "relevance_threshold")
    mrg.add_argument("--threshold", dest="legacy_threshold", help=argparse.SUPPRESS)  # 0.1's spelling of -l
    _shared(mrg, "out", required=True, help="the merged TREC qrels file to write")

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
    _shared(
        label,
        "out",
        help="the qrels file to write, TREC or BEIR TSV (an existing one keeps its format and judgements); the "
        "log is OUT.judgements.jsonl",
    )
    label.add_argument("--qrels", dest="legacy_out", help=argparse.SUPPRESS)  # 0.1's spelling of -o/--out
    label.add_argument("--assessor", help="your name in the log (default: the login name)")
    label.add_argument("--port", default="0", help="port on 127.0.0.1 (default 0: a free one, printed)")
    _shared(label, "scale")
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

    demo = commands.add_parser(
        "demo",
        help="the whole flow offline on Python's own docs (needs the models extra)",
        description="Run bm25>>dense on the docstrings of this Python's standard library, print the stage-aware "
        "summary and write its report folder (needs the models extra).",
    )
    _shared(demo, "out", help="the report folder to write (default ./demo-report)")
    _shared(demo, "no_plots")
    _judge_parser(commands)
    _agreement_parser(commands)
    _estimate_parsers(commands)
    _queries_parser(commands)
    _report_parser(commands)
    _gate_parser(commands)
    _tune_parser(commands)
    return parser


def _report_parser(commands: Any) -> None:
    rep = commands.add_parser(
        "report",
        help="one self-contained HTML page of result folders (a diff view with two or more)",
        description="Write one self-contained HTML file (inline styles, script and SVG plots; nothing fetched, opens "
        "offline) of one result folder, or of several, each diffed against the first: the stage-aware summary with "
        "intervals, recall@k per stage, where relevant items were lost, latency and failures, the metric card and a "
        "per-query drill-down of each stage's ranked chunks. See docs/html-report.md. Needs the html extra.",
    )
    rep.add_argument("folders", nargs="+", metavar="FOLDER", help="result folders (Report.save_folder, rag-eval bench)")
    _shared(rep, "out", required=True, help="the HTML file to write")
    rep.add_argument(
        "--drill-depth",
        metavar="N",
        help="hits kept per stage and query in the drill-down (default: the budget plus 10)",
    )
    _shared(rep, "beir")  # its corpus.jsonl and queries.jsonl give the texts the drill-down shows
    _shared(rep, "split")
    _shared(rep, "no_plots")
    rep.add_argument("--title", metavar="TEXT", help="the page's title (default: the folders' names)")


def _tune_parser(commands: Any) -> None:
    tn = commands.add_parser(
        "tune",
        help="tune fusion weights, depth, budget or a reranker on labels, with held-out validation",
        description="Search pipeline settings on a BEIR-layout collection: the retrievers (default bm25 and dense) "
        "fused by wsum (alpha) or rrf (rrf_k), the depth, the budget, a reranker on or off (--space NAME=VALUES). "
        "The best setting by one metric (-m once; default recall@budget) on a seeded tuning split of the queries "
        "is reported with its value on the held-out rest and a bootstrap interval; the whole grid is printed and, "
        "with -o, written with a plot. Each setting runs through the stage cache: only what changed is computed. "
        "See docs/tuning.md. The built-ins need the models extra.",
    )
    _shared(tn, "beir", required=True)
    _shared(tn, "split")
    tn.add_argument(
        "--space",
        action="append",
        metavar="NAME=VALUES",
        help="a setting and its values, repeatable: alpha=0:1:0.1 (A:B:STEP), rrf_k=10,60, method=rrf,wsum, "
        "weights=0.5/0.5,0.7/0.3, depth=20,100, budget=3,5, reranker=on,off",
    )
    tn.add_argument(
        "--retriever",
        action="append",
        dest="retrievers",
        metavar="NAME",
        help="bm25, dense, or package.module:function (the collection in, a Retriever out); repeatable, two or "
        "more are fused (default: bm25 and dense)",
    )
    tn.add_argument(
        "--reranker",
        metavar="NAME",
        help="minilm, or package.module:function (the collection in, a Reranker out): what reranker=on adds",
    )
    _shared(tn, "metric")
    tn.add_argument(
        "--tune-share",
        default="0.5",
        metavar="SHARE",
        help="the share of the queries (seeded draw) to tune on; the rest are held out (default 0.5)",
    )
    tn.add_argument(
        "--groups",
        metavar="FILE",
        help="query_id<TAB>group lines (or a JSON object): queries of one group stay on one side of the split, as "
        "queries asked twice (one normalised text) always do",
    )
    tn.add_argument(
        "--split-from",
        metavar="TUNING_JSON",
        help="reuse the split a saved result (OUT/tuning.json) records, checked against its seed and share first",
    )
    tn.add_argument("--search", choices=["grid", "random"], default="grid", help="every setting, or --trials drawn")
    tn.add_argument("--trials", metavar="N", help="settings a random search draws (seeded)")
    _shared(tn, "depth", help="candidates asked of the first stage, when --space has no depth (default 100)")
    _shared(tn, "budget")
    _shared(tn, "seed")
    _shared(tn, "resamples")
    _shared(tn, "cache")
    _shared(tn, "out", help="a folder to write the grid (tuning.csv), the result (tuning.json) and the plot to")
    _shared(tn, "no_plots")


def _gate_parser(commands: Any) -> None:
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
    _shared(gate, "pipeline")
    _shared(gate, "beir")
    _shared(gate, "split")
    _shared(gate, "cache")
    _shared(gate, "out", help="with --pipeline: the candidate's result folder to write (default gate-candidate)")
    _shared(gate, "metric")
    gate.add_argument("--max-drop", metavar="D", help="the largest drop of each --metric that does not matter")
    gate.add_argument("--stage", metavar="NAME", help="the stage (or run/stage) each --metric is read from")
    gate.add_argument(
        "--rule",
        action="append",
        metavar="METRIC[:STAGE]:MAXDROP",
        help="a rule of its own, repeatable (e.g. recall@depth:bm25:0.02)",
    )
    _shared(gate, "test", choices=["randomization", "t", "wilcoxon", "bootstrap"])
    _shared(gate, "correction")
    _shared(gate, "alpha")
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
    _shared(gate, "seed")


def _estimate_parsers(commands: Any) -> None:
    hs = commands.add_parser(
        "human-sample",
        help="draw the queries people grade in full, for judge-assisted estimates",
        description="Draw a uniform random sample of -n queries without replacement (seeded; the seed and the "
        "population are recorded) from the queries of a pool, a saved report or a result folder, and write it as "
        "JSON. People grade every pooled item of these queries; judge-assisted estimates (rag-eval estimate) use "
        "them and only them. See docs/ppi.md.",
    )
    hs.add_argument("source", help="the query set: a pool (rag-eval pool's JSONL), a saved report or a result folder")
    hs.add_argument("-n", dest="sample_size", required=True, metavar="N", help="queries to draw (2 or more)")
    _shared(hs, "seed")
    _shared(hs, "out", required=True, help="the sample's JSON file")

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
    _shared(est, "metric")
    _shared(est, "baseline")
    _shared(est, "alpha")
    est.add_argument("--plain", action="store_true", help="plain PPI (lam = 1) instead of PPI++ (lam tuned)")
    _shared(est, "format", choices=["table", "csv", "json", "markdown"])


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
    _shared(agr, "scale")
    _shared(agr, "relevance_threshold")
    agr.add_argument(
        "--warn-below",
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
    _shared(agr, "metric")
    _shared(agr, "test")
    _shared(agr, "alpha")
    _shared(agr, "format", choices=["table", "json"])


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
    judge.add_argument(
        "--judge",
        required=True,
        metavar="MODULE:FUNCTION",
        help="package.module:function returning a judge (e.g. rag_eval.adapters.langchain.judge(model)), or a "
        "function (query, text) -> grade",
    )
    _shared(judge, "out", required=True, help="the judgement log to append to (JSON lines; created when missing)")
    _shared(judge, "scale")
    judge.add_argument("--batch-size", default="16", metavar="N", help="items per call of the judge (default 16)")
    judge.add_argument(
        "--human",
        metavar="QRELS",
        help="people's grades (qrels or a judgement log): the items they graded are not asked (default: all are)",
    )


def _queries_parser(commands: Any) -> None:
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
    sample.add_argument("-n", dest="sample_size", required=True, metavar="N", help="how many queries to draw")
    sample.add_argument(
        "--stratify",
        default="frequency",
        metavar="CRITERIA",
        help="comma-separated: frequency (head, torso, tail: 50%%, 30%%, 20%% of the traffic), cluster (k-means "
        "over all-MiniLM-L6-v2 embeddings: the querysets and models extras) and/or columns of the log "
        "(default frequency)",
    )
    sample.add_argument(
        "--clusters",
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
    sample.add_argument(
        "--near-threshold",
        default="0.5",
        metavar="J",
        help="Jaccard similarity of character 4-grams at which two queries are near-duplicates (default 0.5)",
    )
    _shared(sample, "seed")
    _shared(sample, "out", required=True, help="the query set to write (JSON lines)")


def _positional_inputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("qrels", help="qrels file (TREC 'qid iter docid grade', BEIR TSV with header, or JSONL)")
    parser.add_argument(
        "runs", nargs="+", metavar="run", help="run file(s) (TREC 'qid Q0 docid rank score tag', or JSONL)"
    )


def _measuring(parser: argparse.ArgumentParser) -> None:
    """What to measure and how: the options evaluate and compare share."""
    for key in ("metric", "dialect", "conventions", "complete", "max_depth", "relevance_threshold", "judged_only"):
        _shared(parser, key)
    _shared(parser, "judged_threshold")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status is its outcome (docs/cli.md's table), whatever happens to stdout and
    stderr: a reader that goes away (``| head``) only stops the output; output that cannot be written (stdout on
    a full disk) is one line on stderr and status 2 where the command would have said 0 (:class:`_Guarded`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    streams = sys.stdout, sys.stderr
    out, err = _Guarded(streams[0], "stdout"), _Guarded(streams[1], "stderr")
    sys.stdout, sys.stderr = out, err
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            status = _dispatch(args, argv)
    finally:
        out.flush()  # now, while its failure is still caught (at exit Python would make it status 120)
        sys.stdout, sys.stderr = streams
    if out.failure is not None and status == 0:
        err.write(f"rag-eval: error: {out.failure}\n")
        status = EXIT_BAD_INPUT
    err.flush()
    return status


class _Guarded:
    """An output stream that may fail: on a broken pipe (its reader gone) or a failed write (a full disk) the rest
    goes to ``os.devnull`` (as Python's docs advise for SIGPIPE) and the command runs on to its own exit status;
    a failed write is kept in :attr:`failure` (a broken pipe is not one: the reader chose to stop)."""

    def __init__(self, stream: TextIO, name: str) -> None:
        self._stream = stream
        self._name = name
        self._broken = False
        self.failure: str | None = None

    def write(self, text: str) -> int:
        if not self._broken:
            try:
                return self._stream.write(text)
            except OSError as exc:
                self._broke(exc)
        return len(text)

    def flush(self) -> None:
        if not self._broken:
            try:
                self._stream.flush()
            except OSError as exc:
                self._broke(exc)

    def _broke(self, exc: OSError) -> None:
        self._broken = True
        try:
            fd = self._stream.fileno()
        except (OSError, ValueError, AttributeError):  # a stream with no descriptor (a capture): writes dropped
            fd = None
        if not isinstance(exc, BrokenPipeError):
            where = self._name
            with contextlib.suppress(OSError, TypeError):
                where = f"{self._name} ({os.readlink(f'/proc/self/fd/{fd}')})"  # the file it was redirected to
            self.failure = f"{where}: cannot write the output: {exc.strerror or exc}"
        if fd is not None:
            with contextlib.suppress(OSError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, fd)  # what is still buffered is flushed there, silently
                os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """Warnings as one line each, like errors: ``rag-eval: warning: ...`` (no source line of rag_eval's)."""
    print(f"rag-eval: warning: {visible(' '.join(str(message).split()))}", file=sys.stderr)


def _dispatch(args: argparse.Namespace, argv: list[str]) -> int:
    commands = {
        "evaluate": _evaluate,
        "compare": _compare,
        "power": _power,
        "pool": _pool,
        "merge": _merge,
        "label": _label,
        "queries": _queries,
        "judge": _judge,
        "agreement": _agreement,
        "estimate": _estimate,
        "human-sample": _human_sample,
        "gate": _gate,
        "report": _report,
        "tune": _tune,
    }
    try:
        _read_numbers(args)
        if args.command == "bench":
            return _bench(args, command="rag-eval " + " ".join(argv))
        if args.command == "demo":
            return _demo(args)
        return commands[args.command](args)
    except (InputError, ValueError, HarnessError) as exc:  # HarnessError: a cache that cannot be written, named
        print(f"rag-eval: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        if exc.filename is None:  # not a file's: a bug or the machine's, with its traceback
            raise
        print(f"rag-eval: error: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


# The numeric flags, read as plain ASCII decimals (argparse's int() and float() read "1_0" as 10 and other scripts'
# digits as digits), each within its range; a bad one is one line and exit 2 like any other bad input.
_INT_FLAGS = {
    "resamples": ("--resamples", 1, MAX_CUTOFF),
    "seed": ("--seed", 0, 2**63 - 1),
    "permutations": ("--permutations", 1, MAX_CUTOFF),
    "port": ("--port", 0, 65535),
    "depth": ("--depth", 1, MAX_CUTOFF),
    "limit_queries": ("--limit-queries", 1, MAX_CUTOFF),
    "concurrency": ("--concurrency", 1, 1024),
    "comparisons": ("--comparisons", 1, MAX_CUTOFF),
    "simulations": ("--simulations", 1, MAX_CUTOFF),
    "max_depth": ("-M (max_depth)", 1, MAX_CUTOFF),
    "threshold": ("-l (relevance_threshold)", 1, GRADE_LIMIT - 1),
    "legacy_threshold": ("--threshold", 1, GRADE_LIMIT - 1),
    "sample_size": ("-n", 1, MAX_CUTOFF),
    "clusters": ("--clusters", 1, MAX_CUTOFF),
    "batch_size": ("--batch-size", 1, MAX_CUTOFF),
    "trials": ("--trials", 1, MAX_CUTOFF),
}
_SHARE_FLAGS = {
    "judged_threshold": "--judged-threshold",
    "alpha": "--alpha",
    "power": "--power",
    "near_threshold": "--near-threshold",
    "tune_share": "--tune-share",
}
# flags read as any plain decimal (their range is checked where they are used)
_DECIMAL_FLAGS = {
    "effect": "--effect",
    "correlation": "--correlation",
    "margin": "--margin",
    "warn_below": "--warn-below",
    "max_drop": "--max-drop",
}


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
    for attr, flag in _DECIMAL_FLAGS.items():
        text = getattr(args, attr, None)
        if isinstance(text, str):
            value = score_text(text.strip())
            if value is None:
                raise InputError(f"{flag} {text!r} is not a plain decimal number")
            setattr(args, attr, value)


def _one_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        return visible(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}")
    return visible(" ".join(str(exc).split()))


def _terminal(text: str) -> str:
    """A text output (not CSV or JSON, which are data): the names in it printed with their control characters,
    escape sequences and bidirectional overrides visible (``\\x1b``), its own lines and tabs kept."""
    return visible(text, keep="\n\t")


def run_names(paths: Sequence[str]) -> list[str]:
    """The name of each run file, the one rule of every command: the file's stem (``bm25`` for ``x/bm25.trec``
    and ``bm25.trec.gz``), or the path as given for the files whose stems collide. The same path twice is refused:
    it would be one run counted twice, or one dropped."""
    seen: dict[str, int] = {}
    for i, path in enumerate(paths):
        if path in seen:
            raise InputError(f"run file {path!r} is given twice (runs {seen[path] + 1} and {i + 1})")
        seen[path] = i
    stems = [_stem(p) for p in paths]
    names = [p if stems.count(s) > 1 else s for s, p in zip(stems, paths, strict=True)]
    return names if len(set(names)) == len(names) else list(paths)  # a stem equal to another's path: paths


def _stem(path: str) -> str:
    name = Path(path).name
    return Path(name.removesuffix(".gz")).stem or name


def _named_runs(paths: Sequence[str]) -> dict[str, Run]:
    """The runs of ``paths``, each loaded once, under :func:`run_names`."""
    names = run_names(paths)
    return {name: Run.load(path) for name, path in zip(names, paths, strict=True)}


def _baseline(given: str | None, names: list[str], paths: list[str]) -> str:
    """The run ``--baseline`` means: a run's name, its path as given (or the same file by another path), or its
    file name where only one run has it; the first run when not given. Anything else is refused naming the runs."""
    if given is None:
        return names[0]
    if given in names:
        return given
    choices = ", ".join(f"{n!r} ({p})" if n != p else repr(n) for n, p in zip(names, paths, strict=True))
    matches = [i for i, p in enumerate(paths) if p == given or _same_file(p, given)]
    if not matches:
        matches = [i for i, p in enumerate(paths) if Path(p).name == given]
    if len(matches) > 1:
        raise InputError(
            f"--baseline {given!r} could be any of {len(matches)} runs: say which by its name; the runs are {choices}"
        )
    if not matches:
        raise InputError(f"--baseline {given!r} is neither a run name nor a run file: the runs are {choices}")
    return names[matches[0]]


def _same_file(a: str, b: str) -> bool:
    if os.path.normpath(a) == os.path.normpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # b is no file
        return False


def _conventions(args: argparse.Namespace) -> Conventions:
    """The ``--conventions`` preset, changed by trec_eval's flags -c, -M, -l and -J."""
    changes: dict[str, object] = {}
    if args.complete:
        changes["missing_run"] = "zero"
    if args.max_depth is not None:
        changes["max_depth"] = args.max_depth
    if args.threshold is not None:
        changes["relevance_threshold"] = args.threshold
    if args.judged_only:
        changes["unjudged"] = "remove"
    return resolve_conventions(args.conventions).replace(**changes)


def _evaluate(args: argparse.Namespace) -> int:
    conventions = _conventions(args)
    metrics = resolve_metrics(args.metrics, dialect=args.dialect, conventions=args.conventions)
    qrels = Qrels.load(args.qrels)
    named = _named_runs(args.runs)
    report = evaluate(qrels, named, metrics, conventions=conventions, judged_threshold=args.judged_threshold)
    if args.format == "trec_eval":
        text = format_trec_eval(report, qrels=qrels, runs=named, per_query=args.per_query, metrics=metrics)
    else:
        text = format_report(report, args.format, per_query=args.per_query, resamples=args.resamples, seed=args.seed)
    sys.stdout.write(text if args.format in ("csv", "json") else _terminal(text))
    sys.stdout.flush()
    if args.format != "json" and not args.no_card:
        print(_terminal(report.card.render()), file=sys.stderr)
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


def _compare(args: argparse.Namespace) -> int:
    from .statistics import compare

    conventions = _conventions(args)
    metrics = resolve_metrics(args.metrics, dialect=args.dialect, conventions=args.conventions)
    qrels = Qrels.load(args.qrels)
    names = run_names(args.runs)
    baseline = _baseline(args.baseline, names, list(args.runs))
    named = _named_runs(args.runs)
    report = evaluate(qrels, named, metrics, conventions=conventions, judged_threshold=args.judged_threshold)
    result = compare(
        report,
        baseline=baseline,
        test=args.test,
        correction=args.correction,
        alpha=args.alpha,
        resamples=args.resamples,
        permutations=args.permutations,
        seed=args.seed,
        margin=args.margin,
    )
    text = format_comparison(result, args.format)
    sys.stdout.write(text if args.format in ("csv", "json") else _terminal(text))
    sys.stdout.flush()
    if args.format != "json" and not args.no_card:
        print(_terminal(result.card.render()), file=sys.stderr)
    return 0


def _power(args: argparse.Namespace) -> int:
    from .reports import Report
    from .statistics import power

    where = Path(args.report)
    if not where.exists():
        raise InputError("no such report file or result folder", source=args.report)
    report = Report.load_folder(where) if where.is_dir() else Report.load(where)
    measured = set(report.per_query["metric"])  # a stage-aware name (recall@budget) is taken as the report has it
    metrics: list[str] = []
    for name in args.metrics or [None]:
        if name is not None and name in measured:
            metrics.append(name)
        else:
            metrics.extend(str(m) for m in resolve_metrics(None if name is None else [name]))
    metrics = list(dict.fromkeys(metrics))
    systems = _report_systems(report)
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
    sys.stdout.write(_terminal("\n\n".join(a.to_text() for a in analyses)) + "\n")
    sys.stdout.flush()
    return 0


def _report_systems(report: Any) -> list[str]:
    """The systems of a report as compare names them: its runs, or run/stage for a pipeline's stages."""
    return list(dict.fromkeys(with_systems(report.per_query)["system"]))


def _pool(args: argparse.Namespace) -> int:
    from .data import Collection
    from .ground_truth import pool

    named = _named_runs(args.runs)
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
    print(
        f"rag-eval: pool {pooled.id}: {len(pooled)} items over {len(pooled.query_ids)} queries from "
        f"{len(named)} runs at depth {args.depth} ({pooled.already_judged} already judged) -> {args.out}",
        file=sys.stderr,
    )
    if not len(pooled):
        print("rag-eval: nothing pooled (nothing to label): exit 4", file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0


def _merge(args: argparse.Namespace) -> int:
    from .ground_truth import merge, write_qrels

    if args.threshold is not None and args.legacy_threshold is not None:
        raise InputError(
            "give the relevance threshold once: -l/--relevance-threshold (--threshold is its old spelling)"
        )
    given = args.threshold if args.threshold is not None else args.legacy_threshold
    base = Qrels.load(args.qrels) if args.qrels else None
    merged = merge(base, *args.logs, resolve=args.resolve, threshold=1 if given is None else given)
    write_qrels(merged.qrels, args.out)
    conflicts = merged.conflicts
    if len(conflicts):
        sys.stdout.write(csv_text(conflicts))
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
    if not judged:
        print("rag-eval: nothing merged (the logs hold no judgement): exit 4", file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0


def _label(args: argparse.Namespace) -> int:
    from .labelling import parse_scale, serve

    if args.out is not None and args.legacy_out is not None:
        raise InputError("give the qrels file to write once: -o/--out (--qrels is its old spelling)")
    out = args.out if args.out is not None else args.legacy_out
    if out is None:
        raise InputError("label needs -o/--out QRELS: the TREC qrels file to write")
    scale = parse_scale(args.scale)
    return serve(
        args.pool,
        out,
        assessor=args.assessor or _login_name(),
        port=args.port,
        scale=scale,
        order=args.order,
        judge_log=args.judge_log,
    )


def _judge(args: argparse.Namespace) -> int:
    from .ground_truth.judging import judge, load_judge
    from .labelling import parse_scale

    scale = parse_scale(args.scale)
    grader = load_judge(args.judge)
    run = judge(args.pool, grader, log=args.out, scale=scale, batch_size=args.batch_size, human=args.human)
    if len(run.failures):
        sys.stdout.write(csv_text(run.failures))
    print(f"rag-eval: {run.summary()}", file=sys.stderr)
    if run.failed:  # the pool is not graded: what was is in the log, and a run again asks only the failed
        print(f"rag-eval: {run.failed} of {run.items} items not graded (listed on stdout): exit 4", file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0


def _login_name() -> str:
    import getpass

    try:
        return getpass.getuser() or "assessor"
    except (KeyError, OSError):  # no login name (some containers)
        return "assessor"


def _queries(args: argparse.Namespace) -> int:
    """``rag-eval queries sample``: the strata table to stdout, a summary line to stderr."""
    from .data import QuerySet
    from .ground_truth import merge_near_duplicates, sample_queries

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
            print(f"rag-eval: error: {_one_line(exc)} (or give --no-near-duplicates)", file=sys.stderr)
            return EXIT_BAD_INPUT
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
        print(f"rag-eval: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
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
    for row in rows:
        cells = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))]
        print("  ".join(cells))
    if card.clustering:
        c = card.clustering
        print(f"clusters: k={c['k']} ({c['k_rule']}), k-means seed {c['seed']}, n_init {c['n_init']}, {c['model']}")
    merged = "" if args.no_near_duplicates else f", {distinct - len(queries):,} near-duplicates merged"
    print(
        f"rag-eval: {card.records:,} log records, {distinct:,} distinct queries{merged}; {len(sample):,} drawn "
        f"(seed {args.seed}) -> {args.out}",
        file=sys.stderr,
    )
    return 0


def _bench(args: argparse.Namespace, *, command: str) -> int:
    from .bench.run import run

    if args.beir is not None and args.dataset is not None:
        raise InputError("give the BEIR folder once: --beir (--dataset is its old spelling)")
    args.beir = args.beir if args.beir is not None else args.dataset
    if args.beir is None:
        raise InputError("bench needs --beir FOLDER: a BEIR-layout folder")
    return run(args, command=command)


def _demo(args: argparse.Namespace) -> int:
    from .bench.demo import main as demo

    return demo([*(["--out", args.out] if args.out is not None else []), *(["--no-plots"] if args.no_plots else [])])


def _agreement(args: argparse.Namespace) -> int:
    import json

    from .ground_truth import JudgementLog
    from .ground_truth.agreement import grades_of, judge_agreement
    from .labelling import parse_scale
    from .statistics import ranking_agreement

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
        names = (_stem(args.inputs[0]), _stem(args.inputs[1]))
    else:
        raise InputError(
            f"give a judgement log, or two qrels files (people's, the judge's); not {len(args.inputs)} files"
        )
    items = judge_agreement(human, judged, scale=scale, threshold=threshold, warn_below=warn_below, names=names)
    ranking = None
    if args.runs:
        metrics = resolve_metrics(args.metrics)
        named = _named_runs(args.runs)
        human_report = evaluate(human, named, metrics[:1])
        judge_report = evaluate(judged, named, metrics[:1])
        ranking = ranking_agreement(human_report, judge_report, str(metrics[0]), test=args.test, alpha=args.alpha)
    if args.format == "json":
        payload = {"items": items.to_dict(), "ranking": None if ranking is None else ranking.to_dict()}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        sys.stdout.write(_terminal(items.render() + "\n" + ("" if ranking is None else ranking.render() + "\n")))
    sys.stdout.flush()
    if not items.n:
        print("rag-eval: no item graded by both: the agreement is not measured: exit 4", file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0


def _load_report(given: str, flag: str) -> Any:
    """A saved report (Report.save's Parquet file) or a result folder."""
    from .reports import Report

    where = Path(given)
    if not where.exists():
        raise InputError(f"no such report file or result folder ({flag})", source=given)
    return Report.load_folder(where) if where.is_dir() else Report.load(where)


def _human_sample(args: argparse.Namespace) -> int:
    from .ground_truth import Pool
    from .ground_truth.human_sample import draw_human_sample

    where = Path(args.source)
    if not where.exists():
        raise InputError("no such pool, report file or result folder", source=args.source)
    if where.is_file() and where.suffix in (".jsonl", ".json"):
        ids = Pool.load(where).query_ids
    else:
        report = _load_report(args.source, "source")
        ids = sorted(set(report.per_query["query_id"]))
    sample = draw_human_sample(ids, args.sample_size, seed=args.seed)
    sample.save(args.out)
    print(
        f"rag-eval: human sample of {len(sample)} of {len(sample.population)} queries (uniform, seed {args.seed}) "
        f"-> {args.out}",
        file=sys.stderr,
    )
    return 0


def _estimate(args: argparse.Namespace) -> int:
    import json

    from ._markdown import markdown_cell, markdown_table
    from .ground_truth import Pool
    from .ground_truth.human_sample import HumanSample, check_complete
    from .statistics.prediction_powered import judge_assisted

    if (args.pool is None) != (args.human_qrels is None):
        raise InputError("give --pool and --human-qrels together (the check that the sample is fully graded)")
    judge_report = _load_report(args.judge_report, "--judge-report")
    human_report = _load_report(args.human_report, "--human-report")
    sample = HumanSample.load(args.sample) if args.sample else None
    if args.pool is not None:
        if sample is None:
            raise InputError("--pool and --human-qrels check the sample's queries: give --sample too")
        check_complete(sample, Pool.load(args.pool), Qrels.load(args.human_qrels))
    result = judge_assisted(
        judge_report, human_report, sample=sample, metrics=args.metrics or None, alpha=args.alpha, tuned=not args.plain
    )
    differences = result.compare(args.baseline) if len(result.systems) > 1 else None
    if args.format == "json":

        def records(frame: Any) -> Any:
            return json.loads(frame.to_json(orient="records", double_precision=15))

        out = {
            "settings": result.settings,
            "estimates": records(result.table),
            "differences": [] if differences is None else records(differences),
            "difference_notes": [] if differences is None else list(differences.attrs.get("notes", ())),
        }
        sys.stdout.write(json.dumps(out, indent=1) + "\n")
    elif args.format == "csv":
        sys.stdout.write(csv_text(result.table))
        if differences is not None:
            sys.stdout.write("\n" + csv_text(differences))
    elif args.format == "markdown":
        sys.stdout.write(result._repr_markdown_() + "\n")
        if differences is not None:
            sys.stdout.write("\n" + markdown_table(differences) + "\n")
            sys.stdout.write("".join(f"\n{markdown_cell(note)}\n" for note in differences.attrs.get("notes", ())))
    else:
        sys.stdout.write(_terminal(result.render()) + "\n")
        if differences is not None:
            columns = ["system", "baseline", "metric", "n_human", "n_nan", "n_unpaired", "diff", "ci_low", "ci_high"]
            shown = differences[columns].copy()
            shown["p"] = [f"{p:.4g}" for p in differences["p_value"]]
            shown["human only"] = [
                f"{d:+.4f} [{lo:+.4f}, {hi:+.4f}]"
                for d, lo, hi in zip(
                    differences["human_diff"], differences["human_ci_low"], differences["human_ci_high"], strict=True
                )
            ]
            shown["judge only (naive)"] = [
                f"{d:+.4f} [{lo:+.4f}, {hi:+.4f}]"
                for d, lo, hi in zip(
                    differences["judge_diff"], differences["judge_ci_low"], differences["judge_ci_high"], strict=True
                )
            ]
            sys.stdout.write(
                f"\npaired differences ({result.settings['method']}):\n"
                + shown.to_string(index=False, float_format=lambda v: f"{v:+.4f}")
                + "\n"
                + "".join(f"{note}\n" for note in differences.attrs.get("notes", ()))
            )
    sys.stdout.flush()
    return 0


def _report(args: argparse.Namespace) -> int:
    from .renderers.html_report import folder_names, side_from_folder, write_html
    from .reports import Report

    depth = None if args.drill_depth is None else read_int(args.drill_depth, "--drill-depth", low=1, high=MAX_CUTOFF)
    for folder in args.folders:
        if not Path(folder).exists():
            raise InputError("no such result folder", source=folder)
    collection = None
    if args.beir is not None:
        from .data.collection import Collection

        collection = Collection.from_beir(args.beir, split=args.split)
    sides = [
        side_from_folder(Report.load_folder(folder), folder, collection=collection, name=name)
        for folder, name in zip(args.folders, folder_names(args.folders), strict=True)
    ]
    path = write_html(args.out, sides, drill_depth=depth, title=args.title, plots=not args.no_plots)
    size = path.stat().st_size
    print(f"rag-eval: report of {len(args.folders)} folder(s) -> {path} ({size:,} bytes)", file=sys.stderr)
    from .renderers.stage_pairs import pair_blocks

    for side in sides[1:]:  # the diff's pairings where names differ, and what has no counterpart: said here too
        for line in pair_blocks(sides[0].report, side.report, names=(sides[0].name, side.name)).notes:
            print(visible(f"rag-eval: diff of {side.name} against {sides[0].name}: {line}"), file=sys.stderr)
    return 0


def _tune(args: argparse.Namespace) -> int:
    import json

    from .data.collection import Collection
    from .data.groups import read_groups
    from .drivers.tuning import Space, parse_space, tune

    metrics = args.metrics or ["recall@budget"]
    if len(metrics) != 1:
        raise InputError(f"tune optimises one metric: give -m once, not {len(metrics)} times")
    spec = parse_space(args.space or [])
    if args.depth is not None and "depth" in spec:
        raise InputError("give the depth once: --depth, or depth= in --space")
    if args.budget != "5" and "budget" in spec:
        raise InputError("give the budget once: --budget, or budget= in --space")
    spec.setdefault("depth", args.depth if args.depth is not None else 100)
    spec.setdefault("budget", int(args.budget) if args.budget.isascii() and args.budget.isdigit() else args.budget)
    collection = Collection.from_beir(args.beir, split=args.split)
    out = Path(args.out) if args.out is not None else None
    cache = args.cache if args.cache is not None else (str(out / "cache") if out is not None else None)
    top = max(spec["depth"]) if isinstance(spec["depth"], list) else spec["depth"]
    parts: Any = None

    def stage(name: str, kind: str) -> Any:
        nonlocal parts
        if ":" in name:
            import importlib

            module, _, attribute = name.partition(":")
            try:
                function = getattr(importlib.import_module(module), attribute)
            except (ImportError, AttributeError) as exc:
                raise InputError(f"--{kind} {name!r}: cannot load it: {exc}") from None
            return function(collection)
        builtin = {"retriever": ("bm25", "dense"), "reranker": ("minilm",)}[kind]
        if name not in builtin:
            raise InputError(f"--{kind} {name!r}: a built-in one ({', '.join(builtin)}) or package.module:function")
        if parts is None:
            from .bench.pipelines import Parts

            parts = Parts(collection, cache)
        return parts.rerank() if name == "minilm" else getattr(parts, name)(top)

    retrievers = [stage(name, "retriever") for name in args.retrievers or ["bm25", "dense"]]
    rerankers = [stage(args.reranker, "reranker")] if args.reranker is not None else []
    space = Space(retrievers, rerankers=rerankers, **spec)
    from .bench.pipelines import BATCH_SIZE

    found = tune(
        space,
        collection,
        metric=metrics[0],
        split=args.split_from if args.split_from is not None else args.tune_share,
        groups=None if args.groups is None else read_groups(args.groups),
        search=args.search,
        trials=args.trials,
        seed=args.seed,
        cache=cache,
        resamples=args.resamples,
        batch_size=BATCH_SIZE,
    )
    shown = found.table[["setting", "value", "n", "from_cache", "computed", "best"]]
    table = shown.to_string(index=False, float_format=lambda v: f"{v:.4f}")
    sys.stdout.write(_terminal(table + "\n\n" + found.render()) + "\n")
    if out is not None:
        from dataclasses import asdict

        h = found.held_out
        record = {
            "best": found.best.label(),
            "tuning_value": found.tuning_value,
            # what the held-out value rests on too (n of the held-out queries, NaN, min n); no interval: null
            "held_out": {k: (None if v != v else v) for k, v in asdict(h).items()},
            "cache_hits": found.cache_hits,
            "computed": found.computed,
            "settings": found.settings,
            "split": {"tuning": list(found.split[0]), "held_out": list(found.split[1])},
        }
        with all_or_none(out):  # the grid, the result and the plot, all three or none (docs/cli.md)
            write_output(out / "tuning.csv", csv_text(found.table).encode("utf-8"))
            write_output(out / "tuning.json", (json.dumps(record, indent=1, default=str) + "\n").encode("utf-8"))
            if not args.no_plots:
                found.plot(out / "tuning.svg")
        print(f"rag-eval: tuning of {len(found.table)} settings -> {out}", file=sys.stderr)
    return 0


def _gate(args: argparse.Namespace) -> int:
    """rag-eval gate: exit 0 pass, 1 regression, 3 inconclusive (unless --inconclusive pass); 2 (in _dispatch) for
    bad input or reports that are not comparable."""
    from .drivers.gating import Rule, gate

    rules: list[Rule] = []
    if args.metrics:
        if args.max_drop is None:
            raise InputError("--metric needs --max-drop (the largest drop that does not matter)")
        rules += [Rule(m, args.max_drop, args.stage) for m in args.metrics]
    elif args.max_drop is not None or args.stage is not None:
        raise InputError("--max-drop and --stage go with --metric")
    rules += [Rule.parse(text) for text in args.rule or []]
    if not rules:
        raise InputError("no rule: give --metric METRIC --max-drop D, or --rule METRIC[:STAGE]:MAXDROP")
    candidate = args.candidate_path
    if args.pipelines:
        if candidate is not None:
            raise InputError("give a CANDIDATE to compare, or --pipeline to run one, not both")
        candidate = _run_candidate(args)
    elif candidate is None:
        raise InputError("no candidate: give a CANDIDATE folder or report, or --pipeline NAME --beir FOLDER to run one")
    elif args.beir is not None or args.out is not None or args.cache is not None:
        raise InputError("--beir, -o and --cache go with --pipeline (the candidate to run)")
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
    )
    if args.junit:
        result.write_junit(args.junit)
    if args.markdown:
        result.write_markdown(args.markdown)
    sys.stdout.write(_terminal(result.to_text()) + "\n")
    sys.stdout.flush()
    return result.exit_code


def _run_candidate(args: argparse.Namespace) -> str:
    """rag-eval gate BASELINE --pipeline NAME --beir FOLDER: run the pipeline on the collection at the baseline's
    depth and budget (read from its card), as rag-eval bench does, into -o (default gate-candidate); its folder."""
    from .bench.run import run as bench

    if len(args.pipelines) != 1:
        raise InputError(f"gate runs one candidate pipeline, not {len(args.pipelines)}: give --pipeline once")
    if args.beir is None:
        raise InputError("--pipeline runs on a collection: give --beir FOLDER (the baseline's collection)")
    baseline = _load_report(args.baseline_path, "BASELINE")
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
    print(
        f"rag-eval: running the candidate {args.pipelines[0]} at the baseline's depth {spec['depth']} and "
        f"{spec['budget']} into {out}",
        file=sys.stderr,
    )
    if bench(bench_args, command="rag-eval gate --pipeline " + args.pipelines[0]) != 0:
        raise InputError(f"the candidate pipeline {args.pipelines[0]!r} could not be run (said above)")
    return out


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
