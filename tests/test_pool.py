"""Pooling: the union of every system's top depth, less what the qrels judge; ordered, exported and read back."""

from __future__ import annotations

import csv
import json

import pytest

import rag_eval
from rag_eval import InputError, Pipeline, Pool, Qrels, Run, pool
from rag_eval.adapters.functions import reranker, retriever
from rag_eval.errors import LowJoinMatch
from rag_eval.stages import Hit

# two systems with ties, a repeated doc, a query only one of them answers
BM25 = Run.from_scores({"q1": {"d1": 3.0, "d2": 2.0, "d3": 2.0, "d4": 1.0}, "q2": {"d7": 1.0}}, name="bm25")
DENSE = Run.from_ranking({"q1": ["d5", "d3", "d1", "d6"], "q3": ["d9"]}, name="dense")


def table(p: Pool) -> list[tuple[str, str, dict[str, int]]]:
    return [(i.query_id, i.doc_id, dict(i.ranks)) for i in p]


def test_depth_pool_is_the_union_of_each_top_depth():
    p = pool([BM25, DENSE], depth=3)
    # bm25 ranks its tie d2/d3 by doc id descending (trec_eval's rule): d1, d3, d2
    assert table(p) == [
        ("q1", "d1", {"bm25": 1, "dense": 3}),  # best rank 1, two systems
        ("q1", "d5", {"dense": 1}),
        ("q1", "d3", {"bm25": 2, "dense": 2}),  # best rank 2, two systems: before d2
        ("q1", "d2", {"bm25": 3}),
        ("q2", "d7", {"bm25": 1}),
        ("q3", "d9", {"dense": 1}),
    ]
    assert p.systems == ("bm25", "dense") and p.depth == 3 and p.strategy == "depth"
    assert p.query_ids == ["q1", "q2", "q3"] and len(p) == 6 and p.already_judged == 0
    assert "d4" not in {i.doc_id for i in p} and "d6" not in {i.doc_id for i in p}  # below depth 3


def test_rrf_orders_each_query_by_reciprocal_rank_fusion():
    p = pool({"a": BM25, "b": DENSE}, depth=4, strategy="rrf")
    q1 = [(i.doc_id, round(i.rrf * 1e6)) for i in p if i.query_id == "q1"]
    # d1: 1/61 + 1/63 = .032266 just above d3: 2/62 = .032258; d5: 1/61; d2: 1/63; d4 and d6: 1/64, by doc id
    expected = {"d1": 1 / 61 + 1 / 63, "d3": 2 / 62, "d5": 1 / 61, "d2": 1 / 63, "d4": 1 / 64, "d6": 1 / 64}
    assert [d for d, _ in q1] == ["d1", "d3", "d5", "d2", "d4", "d6"]
    assert dict(q1) == {d: round(v * 1e6) for d, v in expected.items()}
    assert p.systems == ("a", "b")


def test_qrels_take_out_what_is_judged_and_count_it():
    qrels = Qrels.from_dict({"q1": {"d1": 2, "d3": 0}, "q3": {"d9": 1}})
    p = pool([BM25, DENSE], depth=3, qrels=qrels)
    assert [(i.query_id, i.doc_id) for i in p] == [("q1", "d5"), ("q1", "d2"), ("q2", "d7")]
    assert p.already_judged == 3
    assert pool([BM25, DENSE], depth=3, qrels={"q1": {"d1": 2, "d3": 0}, "q3": {"d9": 1}}) == p


def test_texts_come_from_the_caller_for_plain_runs():
    p = pool([BM25], depth=1, queries={"q1": "what is d1?"}, texts={"d1": "one", "d7": "seven"})
    frame = p.to_frame()
    assert list(frame.columns) == ["query_id", "doc_id", "systems", "ranks", "query", "text", "rrf"]
    assert frame.to_dict("records") == [
        {
            "query_id": "q1",
            "doc_id": "d1",
            "systems": ("bm25",),
            "ranks": {"bm25": 1},
            "query": "what is d1?",
            "text": "one",
            "rrf": 1 / 61,
        },
        {
            "query_id": "q2",
            "doc_id": "d7",
            "systems": ("bm25",),
            "ranks": {"bm25": 1},
            "query": None,
            "text": "seven",
            "rrf": 1 / 61,
        },
    ]
    assert list(pool([BM25], depth=1).to_frame().columns) == ["query_id", "doc_id", "systems", "ranks", "rrf"]


CHUNKS = {"c1": "alpha beta", "c2": "beta gamma", "c3": "gamma delta", "c4": "delta alpha"}


def test_each_stage_of_a_pipeline_is_a_system_with_its_texts(tmp_path):
    def search(query: str, k: int):
        words = set(query.split())
        scored = sorted(CHUNKS, key=lambda c: (-len(words & set(CHUNKS[c].split())), c))
        return [Hit(c, float(len(scored) - i), CHUNKS[c]) for i, c in enumerate(scored[:k])]

    def flip(query: str, hits):
        return list(reversed(hits))

    result = Pipeline(retriever(search, name="first"), reranker(flip, name="flip"), depth=3, budget=2).run(
        {"q1": "alpha", "q2": "gamma delta"}, cache=tmp_path
    )
    p = pool({"p": result}, depth=2)
    assert p.systems == ("p/first", "p/flip")
    # q1: first = c1, c4, c2; flip = c2, c4, c1
    assert table(p)[:3] == [
        ("q1", "c1", {"p/first": 1}),
        ("q1", "c2", {"p/flip": 1}),
        ("q1", "c4", {"p/first": 2, "p/flip": 2}),
    ]
    assert {i.doc_id: i.text for i in p} == {c: CHUNKS[c] for c in ("c1", "c2", "c3", "c4")}
    assert {i.query for i in p if i.query_id == "q2"} == {"gamma delta"}


def test_jsonl_round_trip_keeps_provenance(tmp_path):
    with (
        pytest.warns(LowJoinMatch, match=r"pooled doc ids: matched 1 of \d+ in the corpus given"),
        pytest.warns(LowJoinMatch, match=r"pooled query ids: matched 1 of 3 .*'q2', 'q3'"),
    ):  # a short corpus, a short query set: each said
        p = pool(
            [BM25, DENSE], depth=2, qrels={"q1": {"d1": 1}}, queries={"q1": "Q"}, texts={"d3": "three"}, strategy="rrf"
        )
    path = tmp_path / "pool.jsonl"
    p.save(path)
    lines = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    assert len(lines) == len(p)
    assert all(
        line["pool"] == {"id": p.id, "depth": 2, "strategy": "rrf", "systems": ["bm25", "dense"], "already_judged": 1}
        for line in lines
    )
    assert Pool.load(path) == p
    assert len(p.id) == 12 and p.id != pool([BM25, DENSE], depth=3).id


def test_csv_export(tmp_path):
    with pytest.warns(LowJoinMatch, match="pooled doc ids: matched 1 of 4"):  # a corpus of one chunk: said
        p = pool([BM25, DENSE], depth=1, texts={"d1": 'say "one", twice\nor not'})
    path = tmp_path / "pool.csv"
    p.to_csv(path)
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["query_id"], r["doc_id"], r["systems"], json.loads(r["ranks"])) for r in rows] == [
        ("q1", "d1", "bm25", {"bm25": 1}),
        ("q1", "d5", "dense", {"dense": 1}),
        ("q2", "d7", "bm25", {"bm25": 1}),
        ("q3", "d9", "dense", {"dense": 1}),
    ]
    assert rows[0]["text"] == 'say "one", twice\nor not' and {r["pool_id"] for r in rows} == {p.id}


def test_pool_argument_errors():
    with pytest.raises(InputError, match=r"^depth must be 1 or more, not 0$"):
        pool([BM25], depth=0)
    for depth in (True, 2.0, "3", None):
        with pytest.raises(InputError, match=rf"^depth must be an int, not {type(depth).__name__} "):
            pool([BM25], depth=depth)
    with pytest.raises(InputError, match=r"^depth must be at most 1000000000, not 10000000000$"):
        pool([BM25], depth=10**10)
    with pytest.raises(ValueError, match="strategy must be 'depth' or 'rrf'"):
        pool([BM25], depth=1, strategy="borda")
    with pytest.raises(ValueError, match="two systems are named 'bm25'"):
        pool([BM25, BM25], depth=1)
    with pytest.raises(ValueError, match="nothing to pool"):
        pool([], depth=1)
    with pytest.raises(TypeError, match="not a Run or a pipeline result"):
        pool({"x": {"q1": ["d1"]}}, depth=1)


@pytest.mark.parametrize(
    "line, problem",
    [
        ("not json", "not valid JSON"),
        ("[1]", "expected a JSON object"),
        ('{"query_id": "q", "doc_id": "d", "ranks": {}, "pool": {}}', "field 'ranks' must map each system"),
        ('{"query_id": "q", "ranks": {"a": 1}, "pool": {}}', "field 'doc_id' is missing or not a str"),
        ('{"query_id": "q", "doc_id": "d", "ranks": {"a": 0}, "pool": {}}', "rank >= 1"),
        ('{"query_id": "q", "doc_id": "d", "ranks": {"a": 1}, "pool": {"id": "x"}}', "field 'pool.depth'"),
    ],
)
def test_bad_pool_file_names_file_and_line(tmp_path, line, problem):
    path = tmp_path / "pool.jsonl"
    p = pool([BM25], depth=1)
    p.save(path)
    path.write_text(path.read_text("utf-8") + line + "\n", "utf-8")
    with pytest.raises(InputError) as info:
        Pool.load(path)
    assert str(info.value).startswith(f"{path}:3: ") and problem in str(info.value)


def test_a_pool_file_holds_one_pool(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    pool([BM25], depth=1).save(a)
    pool([DENSE], depth=1).save(b)
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(a.read_text("utf-8") + b.read_text("utf-8"), "utf-8")
    with pytest.raises(InputError, match=r"mixed.jsonl:3: pool '\w+' differs from line 1's"):
        Pool.load(mixed)
    twice = tmp_path / "twice.jsonl"
    twice.write_text(a.read_text("utf-8") * 2, "utf-8")
    with pytest.raises(InputError, match=r"twice.jsonl:3: query 'q1', doc 'd1' is pooled twice"):
        Pool.load(twice)


def test_pool_is_public():
    assert rag_eval.pool is pool and rag_eval.Pool is Pool


def test_cli_pool_writes_the_same_pool_as_the_api(tmp_path, capsys):
    from rag_eval.cli import main

    from .conftest import ROOT

    examples = ROOT / "rag_eval" / "examples"
    runs = [examples / "bm25.trec", examples / "bm25_rerank.trec"]
    out = tmp_path / "pool.jsonl"
    code = main(
        [
            "pool",
            *map(str, runs),
            "--depth",
            "5",
            "--qrels",
            str(examples / "qrels.txt"),
            "--strategy",
            "rrf",
            "-o",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    # the CLI names each run by its file's stem, as every command does (docs/naming.md)
    named = {"bm25": Run.load(runs[0]), "bm25_rerank": Run.load(runs[1])}
    expected = pool(named, depth=5, qrels=Qrels.load(examples / "qrels.txt"), strategy="rrf")
    assert expected.systems == ("bm25", "bm25_rerank")
    assert code == 0 and Pool.load(out) == expected
    assert err == (
        f"rag-eval: pool {expected.id}: {len(expected)} items over {len(expected.query_ids)} queries from "
        f"2 runs at depth 5 ({expected.already_judged} already judged) -> {out}\n"
    )
    assert len(expected) > 0 and expected.already_judged > 0
    assert main(["pool", str(runs[0]), "--depth", "5", "-o", str(tmp_path / "pool.csv")]) == 0
    assert (tmp_path / "pool.csv").read_text("utf-8").startswith("query_id,doc_id,systems,ranks,rrf,")
    assert main(["pool", str(runs[0]), "--depth", "0", "-o", str(out)]) == 2
    assert capsys.readouterr().err.endswith("rag-eval: error: --depth must be 1 or more, not 0\n")
