"""The content hashes are made a block of lines at a time (reports.hashes._BLOCK): any block size gives the value
of one block over everything, which the result-folder tests pin."""

from __future__ import annotations

import random

import pytest

from rag_eval.reports import hashes
from rag_eval.stages import Hit
from rag_eval.stages.hit_table import TableBuilder
from rag_eval.stages.result import StageOutput

ALPHABET = ["a", "b", "é", '"', "\\", "x", "😀"]


class _Result:
    def __init__(self, stages: dict[str, StageOutput]) -> None:
        self.stages = stages


def _stages(rng: random.Random, with_text: list[bool]) -> dict[str, StageOutput]:
    def word() -> str:
        return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 3)))

    stages = {}
    for s, text in enumerate(with_text):
        builder = TableBuilder()
        for q in range(rng.randint(0, 8)):
            if rng.random() < 0.1:
                builder.add(f"q{q}", "", None, error="down")
                continue
            hits = {}
            for _ in range(rng.randint(0, 6)):
                doc = word()
                hits[doc] = Hit(doc, 1.0, text=word()) if text and rng.random() < 0.7 else Hit(doc, 1.0)
            builder.add(f"q{q}", "", list(hits.values()))
        stages[f"s{s}"] = StageOutput(f"s{s}", "retriever", "f", builder.table())
    return stages


def _chunk_hash(results: list[_Result]) -> str:
    return hashes.corpus_sha256({str(i): r for i, r in enumerate(results)})[0]  # type: ignore[dict-item]


@pytest.mark.parametrize("with_text", [[False], [False, False, False], [True], [True, False]])
def test_the_chunk_hash_is_the_same_for_any_block_size(monkeypatch, with_text):
    rng = random.Random(len(with_text) * 2 + with_text[0])
    for _ in range(12):
        results = [_Result(_stages(rng, with_text)) for _ in range(rng.randint(1, 2))]
        monkeypatch.setattr(hashes, "_BLOCK", 1 << 18)
        whole = _chunk_hash(results)
        for block in (1, 2, 3):
            monkeypatch.setattr(hashes, "_BLOCK", block)
            assert _chunk_hash(results) == whole
        monkeypatch.setattr(hashes, "_BLOCK", 1 << 18)
        for run in (1, 2, 5):  # each stage's ids sorted in runs of that many, then merged
            monkeypatch.setattr(hashes, "_RUN", run)
            assert _chunk_hash(results) == whole
        monkeypatch.setattr(hashes, "_RUN", 1 << 24)


def test_the_chunk_hash_of_ids_alone_is_the_sorted_distinct_ids():
    stages = {
        "a": StageOutput.from_outcomes("a", "retriever", "f", {}),
    }
    builder = TableBuilder()
    builder.add("q1", "", [Hit("d2", 1.0), Hit("d1", 0.5)])
    builder.add("q2", "", [Hit("d1", 1.0), Hit('d"3', 0.5)])
    stages["b"] = StageOutput("b", "retriever", "f", builder.table())
    expected = hashes._digest(([d] for d in sorted({"d1", "d2", 'd"3'})), "chunks")
    assert _chunk_hash([_Result(stages)]) == expected


def test_the_qrels_hash_is_the_same_for_any_block_size(monkeypatch):
    qrels = {"q1": {"d1": 1, 'd"2': 0}, "q2": {"é": 2}, "q0": {"d1": 3}}
    whole = hashes.qrels_sha256(qrels)
    monkeypatch.setattr(hashes, "_BLOCK", 1)
    assert hashes.qrels_sha256(qrels) == whole
    lines = [[q, d, g] for q in sorted(qrels) for d, g in sorted(qrels[q].items())]
    assert whole == hashes._digest(lines, "qrels")
