"""The retrieval-against-answers benchmark (benchmarks/bench_answers.py) end to end on 12 SQuAD questions: the real
bm25 pipeline, the grade-0 pool, every context condition, the predictor table, the budget curve and the utility
labels, with the extractive answerer as the generator."""

from __future__ import annotations

import contextlib
import importlib.util
import re
import sys

import pytest

from rag_eval.stages.generator import Generation

from .conftest import DATASETS, ROOT, need_shared


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_answers", ROOT / "benchmarks" / "bench_answers.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_draw_is_seeded_and_a_smaller_draw_is_its_start(bench):
    ids = [f"q{i:03d}" for i in range(100)][::-1]
    first = bench._draw(ids, 10, 3)
    assert first == bench._draw(ids, 10, 3) and first != sorted(first) and len(set(first)) == 10
    assert bench._draw(ids, 4, 3) == first[:4] and bench._draw(list(reversed(ids)), 10, 3) == first
    assert first != bench._draw(ids, 10, 4)


def test_the_answers_kept_on_disk_resume_a_killed_run_with_no_call(bench, tmp_path):
    made = []

    def generate(question, chunks):
        made.append((question, tuple(chunks)))
        if not chunks:
            raise ValueError("no context")
        return f"{question}: {len(chunks)}"

    items = [("q1", ["a", "b"]), ("q1", ["b", "a"]), ("q2", []), ("q2", ["a"])]
    memo = bench.Memo(bench.Spec(generate, "fake 1"), tmp_path)
    assert memo("q1", ["a", "b"]) == "q1: 2" and memo("q1", ["a", "b"]) == "q1: 2" and len(made) == 1
    with pytest.raises(RuntimeError, match="ValueError: no context"):
        memo("q2", [])
    with open(memo.path, "ab") as f:
        f.write(b'{"key": "cut by a ki')  # a kill in the middle of a line
    again = bench.Memo(bench.Spec(generate, "fake 1"), tmp_path)
    assert (again.loaded, again.torn) == (2, 1)
    with pytest.raises(RuntimeError, match="no context"):  # the failure is kept: no second call
        again("q2", [])
    assert [again(q, c) for q, c in items[:2]] == ["q1: 2", "q1: 2"] and len(made) == 3
    assert again.calls == 1 and again.hits == 2
    assert (lambda m: (m.loaded, m.torn))(bench.Memo(bench.Spec(generate, "fake 1"), tmp_path)) == (3, 1)
    # another fingerprint or another prompt is another key
    other = bench.Memo(bench.Spec(generate, "fake 2"), tmp_path)
    assert other.key("q1", ["a", "b"]) != again.key("q1", ["a", "b"]) != again.key("q1", ["b", "a"])
    # two shards split the keys between them, each making only its own
    shards = [bench.Memo(bench.Spec(generate, "fake 3"), tmp_path / "s", (i, 2)) for i in range(2)]
    for q, c in items:
        owners = [s.mine(s.key(q, c)) for s in shards]
        assert sorted(owners) == [False, True]
        with pytest.raises(bench.NotMine):
            shards[owners.index(False)](q, c)
        with contextlib.suppress(RuntimeError):
            shards[owners.index(True)](q, c)
    assert sum(s.calls for s in shards) == 4 and len(made) == 7
    merged = bench.Memo(bench.Spec(generate, "fake 3"), tmp_path / "s")
    counted = bench.Memo(bench.Spec(lambda q, c: Generation(q.upper(), 12, 3), "fake 4"), tmp_path / "g")
    assert counted("q", ["a"]) == "Q" and (counted.prompt_tokens, counted.completion_tokens) == (12, 3)
    assert merged.loaded == 4 and [merged(q, c) for q, c in items if c] == ["q1: 2", "q1: 2", "q2: 1"]
    assert merged.calls == 0 and len(made) == 7


@pytest.mark.slow
def test_the_benchmark_runs_end_to_end_on_a_few_questions(bench, tmp_path):
    pytest.importorskip("bm25s", reason="the benchmark's pipelines need bm25s (pip install -e '.[models]')")
    folder = need_shared(DATASETS / "squad-dev-v1.1")
    out = tmp_path / "answers.md"
    args = ["--dataset", str(folder), "--questions", "12", "--pipelines", "bm25", "--resamples", "50"]
    assert bench.main([*args, "--cache", str(tmp_path / "cache"), "--write", str(out)]) == 0
    text = out.read_text("utf-8")
    assert "12 questions drawn with seed 0" in text
    # without context the answerer says nothing: accuracy 0 on every question
    assert re.search(r"^\| bm25 \| 0\.000 \| ", text, re.M)
    rows = dict(re.findall(r"^\| (none|oracle|delivered|delivered \+5 shuffled|top 10) \| (\d+) \| 0 \|", text, re.M))
    assert rows["none"] == rows["oracle"] == rows["delivered"] == rows["top 10"] == "12"
    assert int(rows["delivered +5 shuffled"]) <= 12
    assert "| answer gap (n 12) |" in text and "ranked by auc" in text
    assert re.search(r"^\| 10 \| 12 \| ", text, re.M)  # the budget curve's last k
    assert "Utility labels (eRAG) of the 36 delivered chunks" in text
    assert "correct: F1 >= 0.5" in text
    # correct as containment: a reference inside the answer (from the cache: no generator call)
    contained = tmp_path / "contained.md"
    again = ["--correct", "contains", "--cache", str(tmp_path / "cache"), "--write", str(contained)]
    assert bench.main([*args, *again]) == 0
    other = contained.read_text("utf-8")
    assert "correct: a reference answer contained in the answer" in other and "F1 >= 0.5;" not in other
    assert re.search(r"^\| bm25 \| 0\.000 \| ", other, re.M)  # an empty answer contains nothing
    f1_rows = re.findall(r"^\| (?:none|oracle|delivered) \| 12 \| 0 \| [^|]+ \| ([^|]+) \|$", text, re.M)
    assert len(f1_rows) >= 3  # F1 does not depend on what counts as correct
    assert re.findall(r"^\| (?:none|oracle|delivered) \| 12 \| 0 \| [^|]+ \| ([^|]+) \|$", other, re.M) == f1_rows
    # a subset of the conditions: only those rows, no utility labels, the curve at the ks asked; from the cache
    subset = tmp_path / "subset.md"
    some = ["--conditions", "core,top 2", "--cache", str(tmp_path / "cache"), "--write", str(subset)]
    assert bench.main([*args, *some]) == 0
    part = subset.read_text("utf-8")
    assert "conditions: none, oracle, delivered, delivered relevant, top 2;" in part
    assert set(re.findall(r"^\| (none|oracle|delivered|delivered relevant|top \d+|delivered \+\d \w+) \| 12 \|", part,
                          re.M)) == {"none", "oracle", "delivered", "delivered relevant", "top 2"}  # fmt: skip
    assert re.search(r"^\| 2 \| 12 \| ", part, re.M) and not re.search(r"^\| 10 \| 12 \| ", part, re.M)
    assert "Utility labels (eRAG): not asked" in part and "Distractor conditions: not asked." in part
    with pytest.raises(SystemExit, match="the tables need 'delivered'"):
        bench.main([*args, "--conditions", "top 2", "--cache", str(tmp_path / "cache")])
    # the rows it shares with the full run are the same rows
    for line in re.findall(r"^\| (?:none|oracle|delivered) \| 12 \| 0 \| .*$", part, re.M):
        assert line in text


def test_conditions_are_chosen_by_name_or_group(bench):
    names = ["none", "oracle", "delivered", "delivered relevant", "delivered +1 first", "delivered +3 last",
             "top 1", "top 10"]  # fmt: skip
    assert bench._selected("all", names) == (names, True)
    assert bench._selected("core", names) == (names[:4], False)
    assert bench._selected("curve,utility", names) == (["top 1", "top 10"], True)
    assert bench._selected("distractors, top 10", names) == (["delivered +1 first", "delivered +3 last", "top 10"],
                                                             False)  # fmt: skip
    with pytest.raises(SystemExit, match=r"unknown \['top 2'\]"):
        bench._selected("core,top 2", names)
