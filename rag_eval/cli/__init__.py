"""The ``rag-eval`` command line (layer 5): one module per group of commands, each with ``add_parser`` and
``run``; what they share is in ``_common`` (options, output, exit status) and ``_inputs`` (runs, metrics, reports).
Every command, its options and its exit codes: docs/cli.md (``rag-eval COMMAND --help``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .._version import __version__
from . import answers, drift, estimate, evaluate, gate, labels, pipelines, queries, report, traces, tune
from ._common import EXIT_BAD_INPUT, EXIT_INCOMPLETE, SHARED_OPTIONS, checked, guarded, read_numbers
from ._inputs import resolve_metrics, run_names

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INCOMPLETE",
    "SHARED_OPTIONS",
    "build_parser",
    "main",
    "resolve_metrics",
    "run_names",
]

# the command groups, in the order --help lists them
_GROUPS = (evaluate, gate, labels, estimate, queries, tune, pipelines, traces, drift, report, answers)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command: each group adds its own, and its ``run`` is the command's ``handler``."""
    parser = argparse.ArgumentParser(prog="rag-eval", description="Stage-aware retrieval evaluation for RAG.")
    parser.add_argument("--version", action="version", version=f"rag-eval {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for group in _GROUPS:
        known = set(commands.choices)
        group.add_parser(commands)
        for name in commands.choices.keys() - known:
            commands.choices[name].set_defaults(handler=group.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status is its outcome (docs/cli.md's table), whatever happens to stdout and
    stderr (see ``_common.guarded``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv

    def command(args: argparse.Namespace) -> int:
        from ..metrics import load_plugins

        load_plugins()  # the metric families of the modules named in RAG_EVAL_PLUGINS (docs/metrics.md)
        read_numbers(parser, args)
        return int(args.handler(args))

    return guarded(lambda: checked(command, args))
