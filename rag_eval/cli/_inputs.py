"""How the commands read what they are given: run files and their names, ``--baseline``, the conventions and the
metrics of the measuring options, saved reports, the snapshots and corpora drift compares (see docs/cli.md and
docs/drift.md)."""

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

__all__ = [
    "baseline",
    "chunk_refs",
    "conventions",
    "corpus_texts",
    "drift_inputs",
    "load_report",
    "named_runs",
    "resolve_metrics",
    "run_names",
    "snapshot",
    "stem",
]


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


# ----- drift's inputs (drift, gate --drift, report --qrels) -----------------------------------------------------


def corpus_texts(path: str | None) -> dict[str, str] | None:
    """``{doc_id: content}`` of a BEIR corpus (title and text joined as the collections index them)."""
    if path is None:
        return None
    from ..data.collection import Chunk
    from ..data.input_files import read_input

    where = Path(path)
    file = read_input(where / "corpus.jsonl" if where.is_dir() else where)
    out: dict[str, str] = {}
    for number, record in file.json_objects():
        doc, text = record.get("_id", record.get("id")), record.get("text")
        if not isinstance(doc, (str, int)) or isinstance(doc, bool) or not isinstance(text, str):
            raise file.error("a document needs an _id (or id) and a text", number)
        if str(doc) in out:
            raise file.error(f"document id {doc!r} twice", number)
        out[str(doc)] = Chunk(str(record.get("title") or ""), text).content
    return out


def chunk_refs(path: str | None) -> dict[str, Any] | None:
    """``{chunk_id: ChunkRef}`` from JSON lines ``{"chunk_id", "doc_id", "start", "end"}`` (offsets optional)."""
    if path is None:
        return None
    from ..data.input_files import read_input
    from ..data.spans import ChunkRef

    file = read_input(path)
    out: dict[str, Any] = {}
    for number, record in file.json_objects():
        chunk, doc = record.get("chunk_id"), record.get("doc_id")
        start, end = record.get("start"), record.get("end")
        if not isinstance(chunk, str) or not chunk or not isinstance(doc, str) or not doc:
            raise file.error("a chunk needs a chunk_id and a doc_id (non-empty strings)", number)
        if any(v is not None and (isinstance(v, bool) or not isinstance(v, int)) for v in (start, end)):
            raise file.error("start and end are whole numbers (character offsets) or absent", number)
        if chunk in out:
            raise file.error(f"chunk id {chunk!r} twice", number)
        try:
            out[chunk] = ChunkRef(doc, start, end)
        except InputError as exc:
            raise file.error(exc.problem, number) from None
    return out


def snapshot(path: str, run_name: str | None, several: str = "name one with --run") -> Any:
    """The PipelineResult of a result folder (its pipeline ``run_name``, or its only one: else ``several`` says what
    to do) or of a trace export."""
    where = Path(path)
    if not where.exists():
        raise InputError("no such folder or file", source=path)
    if where.is_file():
        from ..stages.traced import from_traces

        return from_traces(where)
    from ..renderers.result_folder import load_results

    results = load_results(where)
    if run_name is None and len(results) > 1:
        raise InputError(f"it holds {len(results)} pipelines ({', '.join(results)}): {several}", source=path)
    if run_name is not None and run_name not in results:
        raise InputError(f"no pipeline {run_name!r} in it (it holds {', '.join(results)})", source=path)
    return results[run_name or next(iter(results))]


def drift_inputs(args: argparse.Namespace) -> dict[str, Any]:
    """drift()'s corpora and chunk maps from ``--corpus-before/--corpus-after`` and ``--chunks-before/--chunks-after``
    (each read once; absent ones None)."""
    return {
        "corpus_before": corpus_texts(args.corpus_before),
        "corpus_after": corpus_texts(args.corpus_after),
        "chunks_before": chunk_refs(args.chunks_before),
        "chunks_after": chunk_refs(args.chunks_after),
    }
