"""How the commands read what they are given: run files and their names, ``--baseline``, the conventions and the
metrics of the measuring options, saved reports (see docs/cli.md)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError

if TYPE_CHECKING:
    from ..data import Run
    from ..metrics import Conventions
    from ..metrics.grammar import Metric

__all__ = ["baseline", "conventions", "load_report", "named_runs", "resolve_metrics", "run_names", "stem"]


def run_names(paths: Sequence[str]) -> list[str]:
    """The name of each run file, the one rule of every command: the file's stem (``bm25`` for ``x/bm25.trec``
    and ``bm25.trec.gz``), or the path as given for the files whose stems collide. The same path twice is refused:
    it would be one run counted twice, or one dropped."""
    seen: dict[str, int] = {}
    for i, path in enumerate(paths):
        if path in seen:
            raise InputError(f"run file {path!r} is given twice (runs {seen[path] + 1} and {i + 1})")
        seen[path] = i
    stems = [stem(p) for p in paths]
    names = [p if stems.count(s) > 1 else s for s, p in zip(stems, paths, strict=True)]
    return names if len(set(names)) == len(names) else list(paths)  # a stem equal to another's path: paths


def stem(path: str) -> str:
    """A file's name without its suffix (and ``.gz``)."""
    name = Path(path).name
    return Path(name.removesuffix(".gz")).stem or name


def named_runs(paths: Sequence[str]) -> dict[str, Run]:
    """The runs of ``paths``, each loaded once, under :func:`run_names`."""
    from ..data import Run

    names = run_names(paths)
    return {name: Run.load(path) for name, path in zip(names, paths, strict=True)}


def baseline(given: str | None, names: list[str], paths: list[str]) -> str:
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


def conventions(args: argparse.Namespace) -> Conventions:
    """The ``--conventions`` preset, changed by trec_eval's flags -c, -M, -l and -J."""
    from ..metrics.conventions import resolve_conventions

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


def resolve_metrics(
    texts: Sequence[str] | None, *, dialect: str | None = None, conventions: str = "default"
) -> list[Metric]:
    """The metrics of the ``-m`` arguments ``texts``: trec_eval's ``-m`` syntax (a nickname, or a trec_eval
    measure's name alone or with ``.PARAMS``) expanded and merged as trec_eval merges them, in trec_eval's order,
    where the first such argument stands (nDCG's gain pinned linear with ``dialect="trec_eval"``, else the
    conventions'); every other name parsed with ``dialect`` (``P_5``, ``ndcg@10``). Repeats are dropped (the first
    kept). Without ``texts``: trec_eval's ``official`` under ``conventions="trec_eval"``, else the default metrics."""
    from ..metrics.grammar import parse_metric
    from ..metrics.trec_eval_measures import is_trec_eval_measure, trec_eval_metrics
    from ..reports import DEFAULT_METRICS

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


def load_report(given: str, flag: str | None = None) -> Any:
    """A saved report (Report.save's Parquet file) or a result folder; ``flag`` names what gave it."""
    from ..reports import Report

    where = Path(given)
    if not where.exists():
        raise InputError(f"no such report file or result folder{f' ({flag})' if flag else ''}", source=given)
    return Report.load_folder(where) if where.is_dir() else Report.load(where)
