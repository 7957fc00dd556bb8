"""``rag-eval demo``: the whole flow, offline, on a corpus every Python installation carries.

The corpus is the docstrings of ~36 standard-library modules (:mod:`rag_eval.bench.corpus`); the questions are ones
Python users ask; the labels were made by pooling the top 10 of two pipelines for each question and judging every
pooled chunk 0-3 (``demo_data/pooling.json`` says which systems, depth and date). A labelled chunk whose local
docstring differs from the one judged (its text hash) counts as unjudged, and the demo says how many.

The demo runs ``bm25>>dense`` at depth 50 and budget 5, prints the stage-aware summary, and writes its report
folder (``./demo-report/`` by default); a second run reuses the caches in that folder.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from importlib import resources
from pathlib import Path

from .._version import __version__
from ..data.collection import Collection
from ..data.qrels import Qrels
from .corpus import build_corpus, text_hash

DEMO_PIPELINE = "bm25>>dense"
DEMO_DEPTH = 50
DEMO_BUDGET = 5
DEMO_EFFECT = 0.02  # the difference in recall@budget the "How many questions" paragraph asks about


def _data(name: str) -> str:
    return resources.files("rag_eval.bench").joinpath("demo_data", name).read_text(encoding="utf-8")


def questions() -> dict[str, str]:
    records = (json.loads(line) for line in _data("questions.jsonl").splitlines() if line.strip())
    return {r["_id"]: r["text"] for r in records}


def labels() -> list[dict]:
    """Every judgement: query id, chunk id, grade, and the hash of the chunk text that was judged."""
    rows = []
    for line in _data("labels.tsv").splitlines()[1:]:
        if line.strip():
            query_id, chunk_id, grade, judged_hash = line.split("\t")
            rows.append({"query_id": query_id, "chunk_id": chunk_id, "grade": int(grade), "text_hash": judged_hash})
    return rows


def demo_collection() -> tuple[Collection, dict[str, int]]:
    """The corpus built from this Python's docstrings, the questions, and the labels that still apply here.

    Returns the collection and counts: judgements kept, and those whose chunk text differs here (or whose chunk
    is gone), which count as unjudged.
    """
    corpus = build_corpus()
    judged: dict[str, dict[str, int]] = {}
    kept = changed = 0
    for row in labels():
        chunk = corpus.get(row["chunk_id"])
        if chunk is None or text_hash(chunk.text) != row["text_hash"]:
            changed += 1
            continue
        judged.setdefault(row["query_id"], {})[row["chunk_id"]] = row["grade"]
        kept += 1
    asked = questions()
    qrels = Qrels.from_dict({q: judged.get(q, {}) for q in asked})
    return Collection("python-stdlib-docs", corpus, asked, qrels), {"kept": kept, "changed": changed}


def pool(depth: int = 10, systems: tuple[str, ...] = ("bm25", "dense"), cache_dir: str | None = None) -> list[dict]:
    """The labelling pool: for each question, the union of the top ``depth`` chunks of each system, with texts.
    (How ``demo_data/labels.tsv`` was made; rerun it to relabel after the corpus changes.)"""
    from .pipelines import BATCH_SIZE, Parts, build

    corpus = build_corpus()
    collection = Collection("python-stdlib-docs", corpus, questions(), Qrels.from_dict({}))
    parts = Parts(collection, cache_dir)
    pooled: dict[str, dict[str, None]] = {q: {} for q in collection.queries}
    for system in systems:
        pipeline = build(system, collection, depth=depth, budget=depth, parts=parts)
        result = pipeline.run(collection.queries, progress=False, batch_size=BATCH_SIZE)
        final = result.stages[result.final_stage]
        offsets, hits = final.hit_columns()  # a failed query owns no hits
        docs, o = hits.field("doc_id").to_pylist(), offsets.tolist()
        for i, q in enumerate(final.query_ids):
            pooled[q].update(dict.fromkeys(docs[o[i] : min(o[i + 1], o[i] + depth)]))
    return [
        {
            "query_id": q,
            "question": collection.queries[q],
            "candidates": [
                {
                    "chunk_id": d,
                    "title": corpus[d].title,
                    "text": corpus[d].text,
                    "text_hash": text_hash(corpus[d].text),
                }
                for d in ids
            ],
        }
        for q, ids in pooled.items()
    ]


def how_many_questions(report) -> str:
    """The demo's "How many questions" paragraph: from its report, the minimum detectable difference in
    recall@budget between the first stage and the reranker at the report's number of questions, and the questions
    needed to detect a difference of ``DEMO_EFFECT`` (:func:`rag_eval.power`, paired t-test, one comparison)."""
    from ..reports import power

    first, reranker = report.stages[0], report.stages[-1]
    try:
        analysis = power(
            report,
            baseline=first,
            system=reranker,
            metric="recall@budget",
            effect=DEMO_EFFECT,
            method="t",
            comparisons=1,
        )
    except ValueError as error:
        return f"How many questions: no power analysis of recall@budget ({error})."
    needed = analysis.queries_needed
    return (
        f"How many questions: with the paired t-test at alpha {analysis.alpha:g} and power {analysis.power:g}, "
        f"{analysis.n} questions detect a difference in recall@budget between {first} and {reranker} of "
        f"{analysis.minimum_detectable_difference:.3f} or more (sd of the per-question differences "
        f"{analysis.sd:.3f}); detecting {DEMO_EFFECT:g} would take "
        + (f"{needed} questions." if needed is not None else "more questions than can be searched.")
    )


def main(argv: list[str] | None = None, *, prog: str = "rag-eval demo") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="Run the bundled demo: bm25>>dense on Python's own docs.")
    parser.add_argument("--out", default="demo-report", help="report folder (default ./demo-report)")
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)
    from ..reports import evaluate
    from .outputs import write_report_folder
    from .pipelines import BATCH_SIZE, Parts, build

    started = time.perf_counter()
    out = Path(args.out)
    cache = out / "cache"
    collection, counts = demo_collection()
    print(
        f"corpus: {len(collection.corpus)} chunks from the docstrings of this Python's standard library; "
        f"{len(collection.queries)} questions",
        file=sys.stderr,
    )
    if counts["changed"]:
        print(
            f"{counts['changed']} of {counts['kept'] + counts['changed']} labelled chunks read differently in this "
            f"Python {platform.python_version()} than when judged: they count as unjudged",
            file=sys.stderr,
        )
    parts = Parts(collection, cache)
    pipeline = build(DEMO_PIPELINE, collection, depth=DEMO_DEPTH, budget=DEMO_BUDGET, parts=parts)
    result = pipeline.run(collection.queries, cache=cache / "stages", batch_size=BATCH_SIZE)
    report = evaluate(collection.qrels, {DEMO_PIPELINE: result})
    wall = time.perf_counter() - started
    questions_paragraph = how_many_questions(report)
    facts = {
        "collection": (
            f"{len(collection.corpus)} docstring chunks of {len(collection.queries)} questions' worth of stdlib"
        ),
        "pipeline": f"`{pipeline}`",
        "labels": (
            f"{counts['kept']} judgements apply here; {counts['changed']} judged chunks differ in this Python"
            " and count as unjudged"
        ),
        "machine": (
            f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, rag_eval {__version__}"
        ),
        "date": f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        "wall time": f"{wall:.1f} s",
        "how many questions": questions_paragraph.removeprefix("How many questions: "),
    }
    path = write_report_folder(
        out,
        report,
        {DEMO_PIPELINE: result},
        collection.qrels,
        title="rag_eval demo: bm25 >> MiniLM rerank on Python's docs",
        facts=facts,
        plots=not args.no_plots,
        collection=collection,
    )
    summary = report.summary
    print(
        summary[["stage", "metric", "mean", "ci_low", "ci_high", "n", "n_nan", "n_failed"]].to_string(
            index=False, float_format=lambda v: f"{v:.3f}"
        )
    )
    print(questions_paragraph)
    print(f"report: {path.resolve()}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
