"""The demo's collection (Python's docstrings, its 56 questions and labels) as result folders and HTML pages without a
model, for tests/test_html_report_browser.py and docs/screenshots/take.py: ``bm25`` alone, and ``bm25`` followed
by ``overlap``, a function reranker putting first, of the top 20, the chunks sharing the most words with the
question; both at the demo's depth and budget. The page of one folder is the demo's (``Report.to_html`` with the
collection, as ``rag-eval demo`` writes it); the diff is ``rag-eval report`` of two folders with ``--beir``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

from rag_eval import Pipeline, evaluate
from rag_eval.adapters import functions
from rag_eval.builtin.demo import DEMO_BUDGET, DEMO_DEPTH, demo_collection
from rag_eval.builtin.pipelines import Parts
from rag_eval.data.collection import Collection

RERANK_TOP = 20
TITLE = "rag_eval demo: bm25 >> overlap rerank on Python's docs"


def write_beir(collection: Collection, folder: Path) -> Path:
    """``collection`` as a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv), for ``rag-eval report --beir``."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for doc_id, chunk in collection.corpus.items():
            out.write(json.dumps({"_id": doc_id, "title": chunk.title, "text": chunk.text}) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as out:
        for query_id, text in collection.queries.items():
            out.write(json.dumps({"_id": query_id, "text": text}) + "\n")
    lines = ["query-id\tcorpus-id\tscore"]
    lines += [f"{q}\t{d}\t{g}" for q in collection.qrels for d, g in collection.qrels[q].items()]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def overlap_reranker(texts: dict[str, str]):
    """Of the top :data:`RERANK_TOP` hits, those sharing the most words with the question first (ties keep bm25's
    order), the rest after."""

    def words(text: str) -> set[str]:
        return set(re.findall(r"[a-z0-9_]+", text.lower()))

    def overlap(query: str, hits) -> list[str]:
        asked = words(query)
        top = [h.doc_id for h in hits[:RERANK_TOP]]
        shared = {d: len(asked & words(texts[d])) for d in top}
        return sorted(top, key=lambda d: -shared[d]) + [h.doc_id for h in hits[RERANK_TOP:]]

    return functions.reranker(overlap, name="overlap")


def pipeline_folder(collection: Collection, name: str, pipeline: Pipeline, folder: Path):
    """``pipeline`` run on ``collection``'s questions, evaluated and saved as the result folder ``folder``; returns
    the report and the result."""
    result = pipeline.run(collection.queries, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the demo's judged share is below its ceiling: said by the demo itself
        report = evaluate(collection.qrels, {name: result})
    report.save_folder(folder, qrels=collection.qrels, runs={name: result}, collection=collection, plots=False)
    return report, result


def demo_folders(root: Path) -> dict[str, Path]:
    """Under ``root``: the result folders ``bm25`` and ``bm25-overlap``, the BEIR folder ``beir``, and the pages
    ``demo.html`` (bm25 >> overlap) and ``diff.html`` (bm25-overlap against bm25, by ``rag-eval report``)."""
    collection, _ = demo_collection()
    parts = Parts(collection, None)
    made = {"beir": write_beir(collection, root / "beir")}
    bm25 = Pipeline(parts.bm25(DEMO_DEPTH), depth=DEMO_DEPTH, budget=DEMO_BUDGET)
    made["bm25"] = root / "bm25"
    pipeline_folder(collection, "bm25", bm25, made["bm25"])
    reranked = Pipeline(parts.bm25(DEMO_DEPTH), overlap_reranker(parts.texts), depth=DEMO_DEPTH, budget=DEMO_BUDGET)
    made["bm25-overlap"] = root / "bm25-overlap"
    report, result = pipeline_folder(collection, "bm25>>overlap", reranked, made["bm25-overlap"])
    made["demo"] = report.to_html(
        root / "demo.html", results={"bm25>>overlap": result}, collection=collection, title=TITLE
    )
    made["diff"] = root / "diff.html"
    report_cli(made["bm25"], made["bm25-overlap"], out=made["diff"], beir=made["beir"])
    return made


def report_cli(*folders: Path, out: Path, beir: Path) -> None:
    """``rag-eval report FOLDER... -o OUT --beir BEIR`` in a fresh interpreter; its stderr in the error."""
    command = [sys.executable, "-m", "rag_eval.cli", "report", *map(str, folders), "-o", str(out), "--beir", str(beir)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr[-2000:]}")
