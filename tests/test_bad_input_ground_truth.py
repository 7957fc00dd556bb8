"""Bad input for ground truth: pools, judgement logs and the labelling page's inputs (docs/bad-input.md, "Ground
truth and labelling")."""

from __future__ import annotations

import pytest

from rag_eval import InputError, Pool, Run, pool
from rag_eval.cli import main


def test_a_pool_csv_given_where_the_pool_is_loaded_names_the_jsonl(tmp_path, capsys):
    made = pool({"bm25": Run.from_scores({"q1": {"d1": 2.0, "d2": 1.0}})}, depth=2)
    csv_path, jsonl_path = tmp_path / "pool.csv", tmp_path / "pool.jsonl"
    made.to_csv(csv_path)
    made.save(jsonl_path)
    expected = (
        f"{csv_path}:1: this is a pool's CSV view (Pool.to_csv, for spreadsheets), which is not read back: give the "
        "pool's JSONL file (Pool.save; rag-eval pool -o POOL.jsonl)"
    )
    with pytest.raises(InputError) as info:
        Pool.load(csv_path)
    assert str(info.value) == expected
    # rag-eval label refuses it the same way, in one line, before it serves anything or writes OUT
    out = tmp_path / "out.qrels"
    assert main(["label", str(csv_path), "-o", str(out), "--assessor", "a"]) == 2
    assert capsys.readouterr().err == f"rag-eval: error: {expected}\n"
    assert not out.exists()
    assert Pool.load(jsonl_path) == made  # the JSONL file of the same pool loads
