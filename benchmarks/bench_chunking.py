"""Chunking comparison on SQuAD with labels that survive re-chunking (issue 6). Not a test; run from the repository
root:

    .venv/bin/python benchmarks/bench_chunking.py [--dataset ../shared/datasets/squad-dev-v1.1] \\
        [--questions N] [--write]

The 48 articles of ``articles.jsonl`` are cut six ways (256, 512 and 1024 characters, each without overlap and with
25% overlap) by :func:`chunk_text`, a character chunker that snaps chunk ends back to whitespace and records each
chunk's ``[start, end)`` offsets in its article. Every chunking is indexed and searched by the same retriever
(bm25s: Lucene BM25, k1 1.5, b 0.75, English stopwords and Snowball stemming, as the built-in ``bm25`` pipeline),
and every ranking is judged with the same labels, SQuAD's answer spans (:meth:`rag_eval.SpanLabels.from_squad`: one
answer unit per question, its annotators' answers as alternatives), projected with :func:`rag_eval.project` (a chunk
covers an answer when it holds all of one of its spans). Measured:

- recall@100 (the first stage's ceiling), recall@5, nDCG@10, MRR@10, precision@5: at equal k, which favours
  large chunks (five 1024-character chunks are four times the context of five 256-character ones);
- recall at a context budget of ``--budget-chars`` characters (default 2048): the longest prefix of the ranking
  whose chunks fit, the fair comparison across chunk sizes (equal context, not equal k);
- wasted: the share of positions that hold only an answer already delivered higher up (overlapping chunks
  repeat it), in the top 10 and within the budget.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import rag_eval
from rag_eval import SpanLabels, project
from rag_eval.data import ChunkRef

DATASET = Path(__file__).resolve().parent.parent.parent / "shared" / "datasets" / "squad-dev-v1.1"
CHUNKINGS = ((256, 0), (256, 64), (512, 0), (512, 128), (1024, 0), (1024, 256))
METRICS = ("recall@100", "recall@5", "ndcg@10", "mrr@10", "precision@5")


@dataclass(frozen=True)
class Chunk:
    id: str
    doc_id: str
    start: int
    end: int
    text: str


def chunk_text(doc_id: str, text: str, size: int, overlap: int) -> list[Chunk]:
    """Cut ``text`` into chunks of at most ``size`` characters, each starting ``overlap`` characters before the
    previous one ended. A chunk's end is snapped back to the last whitespace in its final quarter (no word is cut
    there), and leading whitespace is skipped; offsets are exact: ``text[start:end] == chunk.text``."""
    if not 0 <= overlap < size // 2:
        raise ValueError(f"overlap must be in [0, size/2), not {overlap} for size {size}")
    chunks: list[Chunk] = []
    start, n = 0, len(text)
    while True:
        while start < n and text[start].isspace():
            start += 1
        if start >= n:
            return chunks
        end = min(start + size, n)
        if end < n and not text[end].isspace():
            cut = max(text.rfind(" ", start + 3 * size // 4, end), text.rfind("\n", start + 3 * size // 4, end))
            if cut > start:
                end = cut
        chunks.append(Chunk(f"{doc_id}#{len(chunks)}", doc_id, start, end, text[start:end]))
        if end >= n:
            return chunks
        start = max(end - overlap, start + 1)


def load(dataset: Path) -> tuple[dict[str, str], dict[str, str], SpanLabels]:
    """The articles ``{id: text}``, the questions ``{id: text}`` and the answer spans of a SQuAD folder."""
    articles, questions = {}, {}
    with open(dataset / "articles.jsonl", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            articles[record["_id"]] = record["text"]
    with open(dataset / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            questions[record["_id"]] = record["text"]
    return articles, questions, SpanLabels.from_squad(dataset)


def bm25_search(chunks: list[Chunk], questions: Mapping[str, str], depth: int) -> dict[str, list[tuple[str, float]]]:
    """The top ``depth`` chunks of every question by bm25s (Lucene BM25, k1 1.5, b 0.75, English stopwords and
    stemming): ``{question: [(chunk_id, score), ...]}``."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()  # method "lucene", k1 1.5, b 0.75
    retriever.index(
        bm25s.tokenize([c.text for c in chunks], stopwords="en", stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    ids = list(questions)
    tokens = bm25s.tokenize([questions[q] for q in ids], stopwords="en", stemmer=stemmer, show_progress=False)
    found, scores = retriever.retrieve(tokens, k=min(depth, len(chunks)), show_progress=False, n_threads=1)
    return {
        q: [(chunks[i].id, float(s)) for i, s in zip(row.tolist(), score.tolist())]
        for q, row, score in zip(ids, found, scores)
    }


def coverable(chunks: list[Chunk], labels: SpanLabels, query_ids) -> float:
    """Share of the questions' answer units that some chunk holds whole (one of its spans): recall's ceiling for
    this chunking under the whole-answer rule, whatever the retriever (an answer cut by a boundary is lost)."""
    import bisect

    by_doc: dict[str, tuple[list[int], list[int]]] = {}
    for c in sorted(chunks, key=lambda c: (c.doc_id, c.start)):
        starts, ends = by_doc.setdefault(c.doc_id, ([], []))
        starts.append(c.start)
        ends.append(c.end)
    held = total = 0
    for q in query_ids:
        for spans in labels.units(q).values():
            total += 1
            for span in spans:
                starts, ends = by_doc.get(span.doc_id, ([], []))
                i = bisect.bisect_right(starts, span.start) - 1  # the last chunk starting at or before the span
                if i >= 0 and ends[i] >= span.end:  # ends grow with starts: that chunk reaches furthest
                    held += 1
                    break
    return held / total if total else float("nan")


def within_chars(ranking: list[tuple[str, float]], sizes: Mapping[str, int], budget: int) -> list[tuple[str, float]]:
    """The longest prefix of ``ranking`` whose chunks hold at most ``budget`` characters in all."""
    used = 0
    for i, (chunk, _) in enumerate(ranking):
        used += sizes[chunk]
        if used > budget:
            return ranking[:i]
    return ranking


def compare(
    articles: Mapping[str, str],
    questions: Mapping[str, str],
    labels: SpanLabels,
    *,
    chunkings=CHUNKINGS,
    depth: int = 100,
    budgets: tuple[int, ...] = (2048,),
) -> tuple[list[dict], dict]:
    """The comparison's core: one row per chunking (its numbers), and ``{name: projection}`` at depth."""
    rows, projections = [], {}
    for size, overlap in chunkings:
        name = f"{size}" + (f"+{overlap}" if overlap else "")
        t0 = time.perf_counter()
        chunks = [c for doc, text in articles.items() for c in chunk_text(doc, text, size, overlap)]
        refs = {c.id: ChunkRef(c.doc_id, c.start, c.end) for c in chunks}
        sizes = {c.id: len(c.text) for c in chunks}
        ranking = bm25_search(chunks, questions, depth)
        t1 = time.perf_counter()
        projection = project(ranking, refs, labels, name=name)
        projections[name] = projection
        report = _measure(labels, projection, list(METRICS))
        row = {
            "chunking": name,
            "size": size,
            "overlap": overlap,
            "chunks": len(chunks),
            "mean_chars": sum(sizes.values()) / len(chunks),
            **{m: report.mean(name, m) for m in METRICS},
            "wasted@10": _wasted(projection, 10),
            "held": coverable(chunks, labels, questions),
            "units": projection.totals().units,
            "seconds_retrieval": t1 - t0,
            "seconds_measure": time.perf_counter() - t1,
        }
        for budget in budgets:
            cut = {q: within_chars(r, sizes, budget) for q, r in ranking.items()}
            within = project(cut, refs, labels, name=f"{name}@{budget}ch")
            at_budget = _measure(labels, within, [f"recall@{depth}"])
            row[f"recall@{budget}ch"] = at_budget.mean(within.name, f"recall@{depth}")
            row[f"chunks@{budget}ch"] = within.totals().positions / max(1, len(cut))
            row[f"wasted@{budget}ch"] = within.wasted_share
        rows.append(row)
    return rows, projections


def _measure(labels: SpanLabels, projection, metrics: list[str]):
    with warnings.catch_warnings():  # chunks of other articles are unjudged: the judged-share warning is expected
        warnings.filterwarnings("ignore", message=".*lower bounds.*")
        return rag_eval.evaluate(labels, projection, metrics)


def _wasted(projection, k: int) -> float:
    """Share of the top-k positions (over every query) that are wasted."""
    frame = projection.to_frame()
    top = frame[frame["rank"] <= k]
    return float((top.status == "wasted").mean()) if len(top) else 0.0


def table(rows: list[dict], budgets: tuple[int, ...]) -> list[str]:
    heads = [
        "chunking (chars+overlap)",
        "chunks",
        "mean chars",
        "answers held whole",
        "recall@100",
        "recall@5",
        *(f"recall@{b} chars (chunks)" for b in budgets),
        "nDCG@10",
        "MRR@10",
        "P@5",
        "wasted@10",
        *(f"wasted@{b} chars" for b in budgets),
    ]
    lines = ["| " + " | ".join(heads) + " |", "|---|" + "---:|" * (len(heads) - 1)]
    for r in rows:
        cells = [
            r["chunking"],
            f"{r['chunks']:,}",
            f"{r['mean_chars']:.0f}",
            f"{r['held']:.3f}",
            f"{r['recall@100']:.3f}",
            f"{r['recall@5']:.3f}",
            *(f"{r[f'recall@{b}ch']:.3f} ({r[f'chunks@{b}ch']:.1f})" for b in budgets),
            f"{r['ndcg@10']:.3f}",
            f"{r['mrr@10']:.3f}",
            f"{r['precision@5']:.3f}",
            f"{r['wasted@10']:.3f}",
            *(f"{r[f'wasted@{b}ch']:.3f}" for b in budgets),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--questions", type=int, default=0, help="a seeded sample of N questions (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--budget-chars", type=int, nargs="+", default=[2048])
    parser.add_argument("--write", action="store_true", help="append the table to benchmarks/RESULTS.md")
    args = parser.parse_args()
    articles, questions, labels = load(args.dataset)
    if args.questions:
        chosen = sorted(random.Random(args.seed).sample(sorted(questions), args.questions))
        questions = {q: questions[q] for q in chosen}
    labels = labels.subset(questions)
    budgets = tuple(args.budget_chars)
    start = time.perf_counter()
    rows, _ = compare(articles, questions, labels, depth=args.depth, budgets=budgets)
    seconds = time.perf_counter() - start
    sample = (
        f"a seeded sample of {len(questions):,} questions (seed {args.seed})"
        if args.questions
        else f"all {len(questions):,} questions"
    )
    command = " ".join(["python benchmarks/bench_chunking.py", *sys.argv[1:]]).replace(" --write", "")
    lines = [
        f"- {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, bm25s {_version('bm25s')}; {sample}; {seconds:.0f} s in all.",
        f"- Command: `.venv/bin/{command}`",
        "",
        *table(rows, budgets),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    for r in rows:
        print(
            f"{r['chunking']}: units {r['units']}, retrieval {r['seconds_retrieval']:.1f} s, "
            f"measuring {r['seconds_measure']:.1f} s"
        )
    if args.write:
        results = Path(__file__).resolve().parent / "RESULTS.md"
        with open(results, "a", encoding="utf-8") as out:
            out.write("\n" + text + "\n")
        print(f"appended to {results}")


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


if __name__ == "__main__":
    main()
