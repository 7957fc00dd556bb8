"""The SQuAD chunking comparison's core (benchmarks/bench_chunking.py) on a slice: 2 articles, 20 questions, six
chunkings, the real bm25s retriever, SQuAD's answer spans projected onto each chunking."""

from __future__ import annotations

import importlib.util
import itertools
import json
import re
import sys

import pytest

from .conftest import DATASETS, ROOT, need_shared


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_chunking", ROOT / "benchmarks" / "bench_chunking.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def squad_slice(bench):
    pytest.importorskip("bm25s", reason="the chunking benchmark needs bm25s (pip install -e '.[models]')")
    folder = need_shared(DATASETS / "squad-dev-v1.1")
    articles, questions, labels = bench.load(folder)
    kept = {a: articles[a] for a in ("a00", "a01")}
    answers = {}
    with open(folder / "answers.jsonl", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            answers[record["query_id"]] = record["article_id"]
    chosen = [q for a in kept for q in [q for q in questions if answers[q] == a][::10][:10]]  # 10 of each article
    assert len(chosen) == 20 and {answers[q] for q in chosen} == {"a00", "a01"}
    return kept, {q: questions[q] for q in chosen}, labels.subset(chosen)


@pytest.fixture(scope="module")
def compared(bench, squad_slice):
    articles, questions, labels = squad_slice
    return bench.compare(articles, questions, labels, budgets=(1024, 2048, 4096))


def test_chunker_offsets_are_exact_and_tile_the_text(bench):
    text = "alpha beta  gamma\n\ndelta epsilon zeta eta theta iota kappa lambda " * 5
    for size, overlap in ((32, 0), (32, 8), (64, 16)):
        chunks = bench.chunk_text("d", text, size, overlap)
        assert all(text[c.start : c.end] == c.text and 0 < len(c.text) <= size for c in chunks)
        assert all(not c.text[0].isspace() for c in chunks)
        for a, b in itertools.pairwise(chunks):
            assert a.start < b.start and a.end < b.end
            assert b.start >= a.end - overlap  # overlap at most as asked, none without
        covered = set().union(*(range(c.start, c.end) for c in chunks))
        assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())  # nothing but blanks is lost
        if overlap == 0:
            assert all(a.end <= b.start for a, b in itertools.pairwise(chunks))
    with pytest.raises(ValueError, match="overlap"):
        bench.chunk_text("d", text, 32, 16)


def test_comparison_on_a_slice(compared, squad_slice):
    rows, projections = compared
    _articles, questions, labels = squad_slice
    assert [r["chunking"] for r in rows] == ["256", "256+64", "512", "512+128", "1024", "1024+256"]
    for r in rows:
        p = projections[r["chunking"]]
        # one unit per question (its annotators' answers are alternatives), every one in recall's denominator
        assert r["units"] == p.totals().units == len(questions) == labels.num_units == 20
        assert set(p.qrels.query_ids) == set(questions) == set(p.run.query_ids)
        assert p.totals().positions == len(questions) * min(100, r["chunks"])  # every position kept
        # more context never loses an answer; k chunks are a prefix of 100
        assert r["recall@1024ch"] <= r["recall@2048ch"] <= r["recall@4096ch"] <= r["recall@100"] + 1e-12
        assert r["recall@5"] <= r["recall@100"] <= r["held"]
        assert 0 <= r["precision@5"] <= 0.2  # one unit per question: at most 1 of 5
        assert 0 <= r["wasted@10"] <= 1
        assert r["mrr@10"] <= r["ndcg@10"] + 1e-12  # one unit per question: 1/rank <= 1/log2(rank + 1)
        # a budget of characters delivers chunks in proportion to their size
        assert r["chunks@1024ch"] >= 1024 // r["size"] - 0.001
    by = {r["chunking"]: r for r in rows}
    assert by["1024"]["chunks@1024ch"] == 1.0 and by["1024"]["chunks@2048ch"] == 2.0
    assert by["256"]["chunks"] > by["512"]["chunks"] > by["1024"]["chunks"]
    assert by["512+128"]["chunks"] > by["512"]["chunks"]
    # overlap only adds chunks that can hold an answer a boundary cut
    assert by["256+64"]["held"] >= by["256"]["held"]


def test_wasted_positions_repeat_a_delivered_answer(compared):
    _, projections = compared
    frame = projections["1024+256"].to_frame()
    for _, rows in frame.groupby("query_id"):
        statuses = list(rows.sort_values("rank").status)
        if "wasted" in statuses:  # a wasted position always comes after the position credited with the answer
            assert "unit" in statuses[: statuses.index("wasted")]
    assert re.fullmatch(r"a0[01]#\d+", frame.chunk_id.iloc[0])
