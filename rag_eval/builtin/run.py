"""The benchmark: run pipelines on a BEIR-layout collection and write a report folder.

    rag-eval bench --beir ../shared/datasets/scifact --pipeline bm25 --pipeline "bm25>>dense" \\
        --depth 100 --budget 5 -o bench-out/scifact

(also ``python benchmarks/run.py ...``; the options are :mod:`rag_eval.cli`'s: ``rag-eval bench --help``).
``--pipeline`` is a built-in name (``bm25``, ``dense``, ``bm25>>dense``, ``hybrid``; default: all four) or
``package.module:function`` returning a :class:`rag_eval.Pipeline`: how you plug in your own. Needs the ``models``
extra for the built-in pipelines.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from .._version import __version__


def parse_budget(text: str) -> int | str:
    """``--budget``: a number of chunks (ASCII digits), else the text for :class:`rag_eval.stages.Budget` to read
    (``512tok``), which refuses what it cannot."""
    stripped = text.strip()
    return int(stripped) if stripped.isascii() and stripped.isdigit() else text


def run(args: argparse.Namespace, *, command: str) -> int:
    """``rag-eval bench``: ``args`` as :func:`rag_eval.cli.build_parser` parses them (numbers read already)."""
    from ..data.collection import Collection
    from ..errors import InputError
    from ..reports import evaluate
    from ..reports.funnel_text import funnel_of, funnel_text
    from ..stages import Budget
    from .outputs import write_report_folder
    from .pipelines import BATCH_SIZE, BUILTIN, Parts, build

    started = time.perf_counter()
    try:
        budget = parse_budget(args.budget)
        Budget.parse(budget)  # refused before the collection is read
        collection = Collection.from_beir(args.beir, split=args.split).limit(args.limit_queries)
        out = Path(args.out or Path("bench-out") / Path(args.beir).name)
        cache = Path(args.cache) if args.cache else out / "cache"
        names = args.pipelines or list(BUILTIN)
        generating = _generating(args, names)
        parts = Parts(collection, cache)
        pipelines = {
            name: build(
                name,
                collection,
                depth=100 if args.depth is None else args.depth,
                budget=budget,
                cache_dir=cache,
                parts=parts,
            )
            for name in names
        }
    except (InputError, ValueError, ImportError) as exc:
        print(f"rag-eval: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    results = {}
    for name, pipeline in pipelines.items():
        print(f"{name}: {pipeline} on {collection.name} ({len(collection.queries)} queries)", file=sys.stderr)
        results[name] = pipeline.run(
            collection.queries, cache=cache / "stages", concurrency=args.concurrency, batch_size=BATCH_SIZE
        )
    report = evaluate(collection.qrels, results)
    answered = None
    if generating is not None:
        report, answered = _answer(report, results[names[0]], collection, *generating, cache=cache)
    wall = time.perf_counter() - started
    facts = {
        "collection": f"{collection.name} ({len(collection.corpus)} chunks, {len(collection.queries)} queries, "
        f"qrels {args.split})",
        "pipelines": ", ".join(f"`{p}`" for p in pipelines.values()),
        "command": f"`{command}`",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"rag_eval {__version__}",
        "date": f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        "wall time": f"{wall:.1f} s (including encoding and indexing; cached parts are read, not recomputed)",
    }
    path = write_report_folder(
        out,
        report,
        results,
        collection.qrels,
        title=f"rag_eval benchmark: {collection.name}",
        facts=facts,
        plots=not args.no_plots,
        collection=collection,
    )
    shown = report.summary
    columns = [
        c
        for c in ("run", "stage", "metric", "mean", "ci_low", "ci_high", "n", "n_nan", "n_failed")
        if c in shown.columns
    ]
    found = funnel_of(report)
    if found:  # the answer first: where the relevant items went, each stage's headline number; then the detail
        print(funnel_text(found))
    print(shown[columns].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    if report.card.answers is not None:
        from ..reports.answered import record_lines

        print("\n".join(f"answers: {line}" for line in record_lines(report.card.answers)))
    print(f"report: {path}")
    silent = [name for name, result in results.items() if _answered_nothing(result)]
    if silent:  # the folder records why; the outcome is not a benchmark (docs/cli.md: exit 4)
        print(
            f"rag-eval: {', '.join(map(repr, silent))} answered none of the {len(collection.queries)} queries (each "
            "failed; report.md says why): exit 4",
            file=sys.stderr,
        )
        return 4
    if answered is not None and answered.failures:
        first, why = next(iter(answered.failures.items()))
        print(f"rag-eval: {len(answered.failures)} queries have no answer (first {first!r}: {why}); a run again asks "
              "only them: exit 4", file=sys.stderr)  # fmt: skip
        return 4
    return 0


def _generating(args: argparse.Namespace, names: list[str]) -> tuple[Any, Any] | None:
    """``--generate``: the generator and the reference answers (the folder's answers.jsonl), checked before any
    pipeline runs; None without it."""
    from ..errors import InputError

    if not getattr(args, "generate", False):
        if getattr(args, "generator", "smollm2") != "smollm2":
            raise InputError("--generator goes with --generate")
        return None
    if len(names) != 1:
        raise InputError(f"--generate answers one pipeline's context: give --pipeline once (not {len(names)})")
    references = Path(args.beir) / "answers.jsonl"
    if not references.is_file():
        raise InputError(
            "--generate grades the answers against the folder's answers.jsonl (SQuAD's: one line per query, "
            "its answers), and there is none; rag-eval answers FOLDER --references PATH takes them from elsewhere",
            source=args.beir,
        )
    from ..data.answers import ReferenceAnswers
    from .generator import generator_of

    return generator_of(args.generator), ReferenceAnswers.from_squad(references)


def _answer(report: Any, result: Any, collection: Any, generator: Any, references: Any, *, cache: Path) -> Any:
    """Answer the queries with a reference from the pipeline's delivered contexts; the report with them attached."""
    from ..errors import InputError
    from ..stages.generator import delivered_contexts, generate_answers

    contexts = {q: c for q, c in delivered_contexts(result).items() if q in references}
    if not contexts:
        raise InputError("no query of the collection has a reference answer in answers.jsonl")
    texts = {d: chunk.content for d, chunk in collection.corpus.items()}
    print(f"answers: {generator!r} on {len(contexts)} queries", file=sys.stderr)
    with generator:
        answers = generate_answers(generator, contexts, questions=result.queries, texts=texts, cache=cache / "answers")
    return report.with_answers(answers, references, questions=result.queries), answers


def _answered_nothing(result) -> bool:
    """Whether the pipeline's last stage failed (or was not run) on every query."""
    stages = list(result.stages.values())
    return bool(stages) and len(stages[-1].failed) > 0 and bool(stages[-1].failed.all())
