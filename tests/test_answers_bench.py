"""The retrieval-against-answers benchmark (benchmarks/bench_answers.py) end to end on 12 SQuAD questions: the real
bm25 pipeline, the grade-0 pool, every context condition, the predictor table, the budget curve and the utility
labels, with the extractive answerer as the generator."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest

from .conftest import DATASETS, ROOT, need_shared


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_answers", ROOT / "benchmarks" / "bench_answers.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_draw_is_seeded_and_sorted(bench):
    ids = [f"q{i:03d}" for i in range(100)][::-1]
    first = bench._draw(ids, 10, 3)
    assert first == bench._draw(ids, 10, 3) and first == sorted(first) and len(set(first)) == 10
    assert first != bench._draw(ids, 10, 4)


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
