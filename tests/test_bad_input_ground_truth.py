"""Bad input for ground truth: pools, judgement logs and the labelling page's inputs (docs/bad-input/ground-truth.md,
"Ground truth and labelling")."""

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


def test_a_last_line_that_is_no_torn_judgement_is_refused_not_ignored(tmp_path, capsys):
    """Only the start of a JSON object cut short is a torn line (ignored with a warning). A one-line TREC qrels file
    without its final newline given as a log was ignored so (merge made empty qrels), and so was a whole last record
    that is no judgement (a grade off the scale): both are refused, naming the file and line."""
    from rag_eval import Qrels
    from rag_eval.ground_truth import JudgementLog, merge

    qrels = tmp_path / "qrels.txt"
    qrels.write_bytes(b"q1 0 d1 1")  # no newline
    with pytest.raises(InputError) as info:
        merge(None, qrels)
    assert str(info.value) == (
        f"{qrels}:1: not valid JSON (Expecting value): a judgement log holds one JSON object a line (qrels are "
        "merge's first argument, --qrels in rag-eval merge)"
    )
    out = tmp_path / "merged.qrels"
    assert main(["merge", str(qrels), "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"rag-eval: error: {info.value}\n" and not out.exists()
    with pytest.raises(InputError):  # opening it to append would have cut the line off: it stays as it was
        JudgementLog.open(qrels)
    assert qrels.read_bytes() == b"q1 0 d1 1"

    log = tmp_path / "log.jsonl"
    JudgementLog.open(log).append("q1", "d1", 2, assessor="alice", time="2026-11-05T09:12:33.481Z")
    whole = log.read_bytes()
    log.write_bytes(whole + whole.replace(b'"grade": 2', b'"grade": 7').rstrip(b"\n"))  # a whole record, no newline
    with pytest.raises(InputError) as info:
        JudgementLog.load(log)
    assert str(info.value) == f"{log}:2: grade 7 is outside the scale 0..3"
    log.write_bytes(whole + b'{"query_id": "q1", "doc_id": "d2", "gra')  # a kill mid-line: torn, ignored
    with pytest.warns(UserWarning, match="the last line is cut short"):
        assert merge(None, log).qrels == Qrels.from_dict({"q1": {"d1": 2}})
