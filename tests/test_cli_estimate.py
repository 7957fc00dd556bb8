"""`rag-eval human-sample` and `rag-eval estimate`: the sample drawn from a pool is the one draw_human_sample gives
for the seed; the estimates printed are judge_assisted's on the saved reports; bad input is one line and exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rag_eval import Pool, Qrels, Run, evaluate
from rag_eval.cli import main
from rag_eval.ground_truth.human_sample import HumanSample, draw_human_sample
from rag_eval.statistics.prediction_powered import judge_assisted

QUERIES = [f"q{i:02d}" for i in range(40)]


def _reports(tmp_path, sample):
    """Two systems; the judge grades every query (with some noise), people the sampled ones."""
    rng = np.random.default_rng(7)
    human, judged = {}, {}
    for q in QUERIES:
        grades = {f"d{j}": int(rng.integers(0, 4)) for j in range(6)}
        human[q] = grades
        judged[q] = {d: int(np.clip(g + rng.integers(-1, 2), 0, 3)) for d, g in grades.items()}
    runs = {
        name: Run.from_scores(
            {q: {f"d{j}": float(rng.random()) + (0.3 * j if name == "b" else 0.0) for j in range(6)} for q in QUERIES},
            name=name,
        )
        for name in ("a", "b")
    }
    judge_report = evaluate(Qrels.from_dict(judged), runs, ["ndcg@5", "precision@3"])
    sampled = {q: human[q] for q in sample.query_ids}
    human_report = evaluate(Qrels.from_dict(sampled), runs, ["ndcg@5", "precision@3"])
    judge_report.save(tmp_path / "judge.parquet")
    human_report.save(tmp_path / "human.parquet")
    return judge_report, human_report


def test_human_sample_from_a_report_is_the_seeded_draw(tmp_path, capsys):
    sample = draw_human_sample(QUERIES, 15, seed=3)
    _reports(tmp_path, sample)
    out = tmp_path / "sample.json"
    assert main(["human-sample", str(tmp_path / "judge.parquet"), "-n", "15", "--seed", "3", "-o", str(out)]) == 0
    assert HumanSample.load(out) == sample
    assert "human sample of 15 of 40 queries (uniform, seed 3)" in capsys.readouterr().err


def test_estimate_prints_judge_assisteds_numbers(tmp_path, capsys):
    sample = draw_human_sample(QUERIES, 15, seed=3)
    judge_report, human_report = _reports(tmp_path, sample)
    sample.save(tmp_path / "sample.json")
    args = ["estimate", "--judge-report", str(tmp_path / "judge.parquet"), "--human-report"]
    args += [str(tmp_path / "human.parquet"), "--sample", str(tmp_path / "sample.json"), "--format", "json"]
    assert main(args) == 0
    shown = json.loads(capsys.readouterr().out)
    expected = judge_assisted(judge_report, human_report, sample=sample)
    table = expected.table
    assert len(shown["estimates"]) == len(table) == 4
    for row, (_, want) in zip(shown["estimates"], table.iterrows()):
        assert row["system"] == want["system"] and row["metric"] == want["metric"]
        assert row["estimate"] == pytest.approx(want["estimate"], abs=1e-12)
        assert row["ci_low"] == pytest.approx(want["ci_low"], abs=1e-12)
    differences = expected.compare()
    assert [d["diff"] for d in shown["differences"]] == pytest.approx(list(differences["diff"]), abs=1e-12)
    assert main(args[:-2]) == 0  # the table
    text = capsys.readouterr().out
    assert "paired differences" in text and "human only" in text


def test_estimate_refuses_bad_input_in_one_line(tmp_path, capsys):
    sample = draw_human_sample(QUERIES, 15, seed=3)
    _reports(tmp_path, sample)
    base = ["estimate", "--judge-report", str(tmp_path / "judge.parquet"), "--human-report"]
    assert main([*base, str(tmp_path / "missing.parquet")]) == 2
    assert "no such report file or result folder (--human-report)" in capsys.readouterr().err
    assert main([*base, str(tmp_path / "human.parquet"), "--alpha", "2"]) == 2
    capsys.readouterr()
    assert main([*base, str(tmp_path / "human.parquet"), "--pool", "p.jsonl"]) == 2
    assert "give --pool and --human-qrels together" in capsys.readouterr().err
    other = draw_human_sample(QUERIES, 15, seed=4)
    other.save(tmp_path / "other.json")
    assert main([*base, str(tmp_path / "human.parquet"), "--sample", str(tmp_path / "other.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rag-eval: error:") and err.count("\n") == 1


def test_estimate_checks_the_sample_is_fully_graded(tmp_path, capsys):
    sample = draw_human_sample(QUERIES, 15, seed=3)
    _reports(tmp_path, sample)
    sample.save(tmp_path / "sample.json")
    first = sample.query_ids[0]
    from rag_eval.ground_truth import PoolItem

    pool = Pool((PoolItem(first, "d0", {"a": 1}, 1 / 61), PoolItem(first, "dX", {"a": 2}, 1 / 62)), 2, "depth", ("a",))
    pool.save(tmp_path / "pool.jsonl")
    Qrels.from_dict({q: {"d0": 1} for q in sample.query_ids}).to_trec(tmp_path / "human.qrels")
    args = ["estimate", "--judge-report", str(tmp_path / "judge.parquet"), "--human-report"]
    args += [str(tmp_path / "human.parquet"), "--sample", str(tmp_path / "sample.json")]
    args += ["--pool", str(tmp_path / "pool.jsonl"), "--human-qrels", str(tmp_path / "human.qrels")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{first!r} (1 ungraded)" in err and "not fully human-graded to the pool's depth 2" in err
