"""The ``rag-eval`` command line (layer 5): one module per group of commands, each with ``add_parser`` and
``run``; what they share is in ``_common`` (options, output, exit status) and ``_inputs`` (runs, metrics, reports).
Every command, its options and its exit codes: docs/cli.md (``rag-eval COMMAND --help``)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from .._version import __version__
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

# each command group's module and its commands, in the order --help lists them: a command imports its own group
# only, so that `rag-eval evaluate` does not pay for the labelling page or the generator (tests/test_cli_family.py
# checks this table against what each group adds)
_GROUPS: dict[str, tuple[str, ...]] = {
    "evaluate": ("compare", "evaluate", "power"),
    "gate": ("gate",),
    "labels": ("agreement", "judge", "label", "merge", "pool"),
    "estimate": ("estimate", "human-sample"),
    "queries": ("queries",),
    "tune": ("tune",),
    "pipelines": ("bench", "demo"),
    "traces": ("traces",),
    "drift": ("drift",),
    "report": ("report",),
    "answers": ("answers",),
}


def _group(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{name}")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command (or of ``command``'s group only): each group adds its own, and its ``run`` is
    the command's ``handler``."""
    parser = argparse.ArgumentParser(prog="rag-eval", description="Stage-aware retrieval evaluation for RAG.")
    parser.add_argument("--version", action="version", version=f"rag-eval {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    names = [g for g, owned in _GROUPS.items() if command is None or command in owned] or list(_GROUPS)
    for group in map(_group, names):
        known = set(commands.choices)
        group.add_parser(commands)
        for name in commands.choices.keys() - known:
            commands.choices[name].set_defaults(handler=group.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status is its outcome (docs/cli.md's table), whatever happens to stdout and
    stderr (see ``_common.guarded``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(next((a for a in argv if not a.startswith("-")), None))
    args = parser.parse_args(argv)
    args.argv = argv

    def command(args: argparse.Namespace) -> int:
        from ..metrics import load_plugins

        load_plugins()  # the metric families of the modules named in RAG_EVAL_PLUGINS (docs/metrics.md)
        read_numbers(parser, args)
        return int(args.handler(args))

    return guarded(lambda: checked(command, args))
