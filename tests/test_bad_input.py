"""Bad input, one test per kind: either a warned handling or a clear error naming the file, line and field.

Every kind here is a row of the table "Files" in docs/bad-input/files.md (its last column names the test). The
TREC file kinds run twice, through the C line reader and through the pure-Python one (``reader`` fixture); one test
also runs the pure-Python reader in a fresh process, as ``RAG_EVAL_PURE_PYTHON=1`` selects it at import time.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import warnings

import pandas as pd
import pytest

from rag_eval import Conventions, Hit, InputError, Qrels, Run, _accel, evaluate
from rag_eval.adapters.functions import retriever
from rag_eval.cli import main
from rag_eval.data.collection import Collection
from rag_eval.errors import LowJudgedShare
from rag_eval.stages import Pipeline

from .conftest import ROOT

LIMIT = 2**29  # grades must lie strictly within +-LIMIT
C_READER = _accel.speedups


def write(tmp_path, name: str, content: str | bytes):
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def error_of(call, *args, **kwargs) -> InputError:
    with pytest.raises(InputError) as info:
        call(*args, **kwargs)
    return info.value


def messages(caught) -> list[str]:
    """The warnings caught, less the judged-share one (these fixtures judge few documents; tests/test_judged.py
    checks that warning)."""
    return [str(w.message) for w in caught if not issubclass(w.category, LowJudgedShare)]


def values(report, metric: str, run: str = "run") -> dict[str, float]:
    return report.values(run, metric).to_dict()


# ----- files: existence, emptiness, encoding, compression ---------------------------------------------------


def test_missing_file(tmp_path):
    path = tmp_path / "nope.trec"
    for load in (
        Qrels.from_trec,
        Qrels.from_beir,
        Qrels.from_jsonl,
        Qrels.load,
        Run.from_trec,
        Run.from_jsonl,
        Run.load,
    ):
        err = error_of(load, path)
        assert str(err) == f"{path}: no such file"
        assert err.source == str(path) and err.line is None


def test_directory_instead_of_file(tmp_path):
    for load in (Qrels.load, Run.load, Run.from_trec):
        assert str(error_of(load, tmp_path)) == f"{tmp_path}: is a directory, not a file"


@pytest.mark.parametrize("content", ["", "\n \n\t\r\n"], ids=["zero-bytes", "whitespace-only"])
def test_empty_file(tmp_path, content):
    for name, loads in (
        ("qrels.txt", (Qrels.from_trec, Qrels.from_beir, Qrels.load)),
        ("qrels.jsonl", (Qrels.from_jsonl, Qrels.load)),
        ("run.trec", (Run.from_trec, Run.load)),
        ("run.jsonl", (Run.from_jsonl, Run.load)),
    ):
        path = write(tmp_path, name, content)
        for load in loads:
            assert str(error_of(load, path)) == f"{path}: empty file"
    gz = write(tmp_path, "run.trec.gz", gzip.compress(content.encode()))
    assert str(error_of(Run.from_trec, gz)) == f"{gz}: empty file"


def test_comment_only_file_via_load(tmp_path):
    path = write(tmp_path, "run.trec", "# nothing but comments\n\n# here\n")
    for load in (Qrels.load, Run.load):
        assert str(error_of(load, path)) == f"{path}: empty file (only comments and blank lines)"


def test_comment_only_file(tmp_path):
    path = write(tmp_path, "data.txt", "# nothing but comments\n\n# here\n")
    for load in (Qrels.from_beir, Qrels.from_trec, Qrels.from_jsonl, Run.from_trec, Run.from_jsonl):
        assert str(error_of(load, path)) == f"{path}: empty file (only comments and blank lines)"


def test_non_utf8_bytes(tmp_path, reader):
    run = write(tmp_path, "run.trec", b"q1 Q0 d1 1 0.5 t\n\nq1 Q0 d\xe9 2 0.4 t\n")
    err = error_of(Run.from_trec, run)
    assert str(err) == f"{run}:3: not valid UTF-8 (byte 0xe9)"
    assert err.line == 3
    qrels = write(tmp_path, "qrels.txt", b"q1 0 d1 1\n\xff 0 d2 0\n")
    assert str(error_of(Qrels.load, qrels)) == f"{qrels}:2: not valid UTF-8 (byte 0xff)"


def test_utf8_bom(tmp_path, reader):
    qrels = Qrels.from_trec(write(tmp_path, "qrels.txt", b"\xef\xbb\xbfq1 0 d1 1\nq1 0 d2 0\n"))
    assert qrels.to_dict() == {"q1": {"d1": 1, "d2": 0}}  # the first query id is 'q1', not '\ufeffq1'
    run = Run.from_trec(write(tmp_path, "run.trec", b"\xef\xbb\xbfq1 Q0 d1 1 0.5 t\n"))
    assert run.query_ids == ("q1",)
    beir = Qrels.from_beir(write(tmp_path, "qrels.tsv", b"\xef\xbb\xbfquery-id\tcorpus-id\tscore\nq1\td1\t1\n"))
    assert beir.to_dict() == {"q1": {"d1": 1}}
    jsonl = Qrels.load(write(tmp_path, "qrels.jsonl", b'\xef\xbb\xbf{"qid": "q1", "docno": "d1", "label": 2}\n'))
    assert jsonl.to_dict() == {"q1": {"d1": 2}}
    assert evaluate(qrels, run, ["P@1"]).mean(run.name, "P@1") == 1.0


def test_byte_order_mark_alone(tmp_path):
    path = write(tmp_path, "run.trec", b"\xef\xbb\xbf\n")
    for load in (
        Qrels.load,
        Qrels.from_trec,
        Qrels.from_beir,
        Qrels.from_jsonl,
        Run.load,
        Run.from_trec,
        Run.from_jsonl,
    ):
        assert str(error_of(load, path)) == f"{path}: empty file"


def test_corrupt_gzip(tmp_path):
    truncated = write(tmp_path, "qrels.txt.gz", gzip.compress(b"q1 0 d1 1\n" * 50)[:-10])
    err = error_of(Qrels.from_trec, truncated)
    assert str(err).startswith(f"{truncated}: not a readable gzip file (")
    # gzip's magic bytes without a .gz name are read as gzip too
    garbage = write(tmp_path, "run.trec", b"\x1f\x8b" + b"garbage")
    assert str(error_of(Run.load, garbage)).startswith(f"{garbage}: not a readable gzip file (")


def test_very_long_line(tmp_path, reader):
    long_id = "x" * 2_000_000  # a 2 MB doc id on one line
    qrels = Qrels.from_trec(write(tmp_path, "qrels.txt", f"q1 0 {long_id} 1\nq1 0 d2 0\n"))
    run = Run.from_trec(write(tmp_path, "run.trec", f"q1 Q0 d2 1 0.9 t\nq1 Q0 {long_id} 2 0.8 t\n"))
    assert len(run.doc_ids[1]) == 2_000_000
    assert values(evaluate(qrels, run, ["mrr@10"]), "mrr@10", run.name) == {"q1": 0.5}


# ----- TREC fields ------------------------------------------------------------------------------------------


def test_qrels_wrong_column_count(tmp_path, reader):
    for text, line, found in (("q1 0 d1 1\nq1 0 d2 1 extra\n", 2, 5), ("q1 0 d1 1\n\nq1 d2 1\n", 3, 3)):
        path = write(tmp_path, "qrels.txt", text)
        err = error_of(Qrels.from_trec, path)
        assert str(err) == f"{path}:{line}: expected 4 fields (qid iter docid grade), found {found}"
        assert err.line == line


def test_run_too_few_columns(tmp_path, reader):
    path = write(tmp_path, "run.trec", "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.4\n")
    err = error_of(Run.from_trec, path)
    assert str(err) == f"{path}:2: expected at least 6 fields (qid Q0 docid rank score tag), found 5"


def test_run_extra_columns_ignored(tmp_path, reader):
    run = Run.from_trec(write(tmp_path, "run.trec", "q1 Q0 d1 1 0.5 tag extra 7\nq1 Q0 d2 2 0.9 tag x\n"))
    assert run.ranking("q1") == [("d2", 0.9), ("d1", 0.5)]
    assert run.tag == "tag"


def test_non_numeric_grade(tmp_path, reader):
    path = write(tmp_path, "qrels.txt", "q1 0 d1 1\nq1 0 d2 yes\n")
    assert str(error_of(Qrels.from_trec, path)) == f"{path}:2: field 4 is 'yes', not an integer grade"


def test_non_integer_grade(tmp_path, reader):
    path = write(tmp_path, "qrels.txt", "q1 0 d1 1.0\nq1 0 d2 1.5\n")  # 1.0 is read as 1, as trec_eval's atol does
    assert str(error_of(Qrels.from_trec, path)) == f"{path}:2: field 4 is '1.5', not an integer grade"


def test_non_numeric_score(tmp_path, reader):
    path = write(tmp_path, "run.trec", "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 high t\n")
    assert str(error_of(Run.from_trec, path)) == f"{path}:2: field 5 is 'high', not a number"


@pytest.mark.parametrize("nan", ["nan", "NaN", "-nan"])
def test_nan_score(tmp_path, reader, nan):
    path = write(tmp_path, "run.trec", f"# header\nq1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 {nan} t\n")
    err = error_of(Run.from_trec, path)
    assert str(err) == f"{path}:3: field 5 (the score) is NaN"
    assert err.line == 3


def test_infinite_score(tmp_path, reader):
    path = write(tmp_path, "run.trec", "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 inf t\nq1 Q0 d3 3 -inf t\nq1 Q0 d4 4 0.7 t\n")
    with pytest.warns(UserWarning, match=r"2 infinite score\(s\) kept: \+inf ranks first, -inf last") as caught:
        run = Run.from_trec(path)
    assert len(caught) == 1 and str(path) in str(caught[0].message)
    assert [d for d, _ in run.ranking("q1")] == ["d2", "d4", "d1", "d3"]
    assert run.notes == (
        "2 infinite score(s) kept: +inf ranks first, -inf last, ties among them broken as for equal scores",
    )
    report = evaluate(Qrels.from_dict({"q1": {"d2": 1, "d3": 1}}), run, ["P@1", "recall@3", "recall@4"])
    assert report.summary.set_index("metric")["mean"].to_dict() == {
        "precision@1": 1.0,
        "recall@3": 0.5,
        "recall@4": 1.0,
    }
    assert "    note: 2 infinite score(s) kept: +inf ranks first, -inf last" in report.card.render()
    assert report.card.inputs[1].notes == list(run.notes)


def test_negative_grade(tmp_path, reader):
    qrels = Qrels.from_trec(write(tmp_path, "qrels.txt", "q1 0 d1 -1\nq1 0 d2 1\nq1 0 d3 0\n"))
    assert qrels.to_dict() == {"q1": {"d1": -1, "d2": 1, "d3": 0}}  # no warning (filterwarnings = error)
    run = Run.from_scores({"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}})
    default = evaluate(qrels, run, ["judged@1", "P@2", "bpref"])
    assert default.summary.set_index("metric")["mean"].to_dict() == {"judged@1": 1.0, "precision@2": 0.5, "bpref": 0.0}
    trec = evaluate(qrels, run, ["judged@1", "P@2", "bpref"], conventions="trec_eval")  # negative_grades="unjudged"
    assert trec.summary.set_index("metric")["mean"].to_dict() == {"judged@1": 0.0, "precision@2": 0.5, "bpref": 1.0}


@pytest.mark.parametrize("grade", [LIMIT, -LIMIT, 10**9, "536870912.0", 10**23])
def test_huge_grade_in_trec_file(tmp_path, reader, grade):
    path = write(tmp_path, "qrels.txt", f"# c\nq1 0 d1 1\n\nq1 0 d2 {grade}\n")
    err = error_of(Qrels.from_trec, path)
    value = int(float(grade)) if isinstance(grade, str) else grade
    assert str(err) == f"{path}:4: grade {value} is out of range (grades must lie within +-{LIMIT})"


def test_huge_grade_in_beir_and_jsonl(tmp_path):
    tsv = write(tmp_path, "qrels.tsv", f"query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t{LIMIT}\n")
    assert (
        str(error_of(Qrels.from_beir, tsv))
        == f"{tsv}:3: grade {LIMIT} is out of range (grades must lie within +-{LIMIT})"
    )
    jsonl = write(
        tmp_path,
        "qrels.jsonl",
        '{"qid": "q", "docno": "a", "label": 1}\n{"qid": "q", "docno": "b", "label": -536870912}\n',
    )
    assert (
        str(error_of(Qrels.from_jsonl, jsonl))
        == f"{jsonl}:2: grade -{LIMIT} is out of range (grades must lie within +-{LIMIT})"
    )
    frame = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "grade": [1, LIMIT]})
    message = str(error_of(Qrels.from_frame, frame))
    assert message.startswith("DataFrame: row 1: grade ") and f"{LIMIT}" in message
    assert message.endswith(f"is out of range (grades must lie within +-{LIMIT})")


def test_huge_grade_beyond_int64_in_beir(tmp_path):
    tsv = write(tmp_path, "qrels.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t99999999999999999999999\n")
    err = error_of(Qrels.from_beir, tsv)
    assert str(err).startswith(f"{tsv}:2: grade 99999999999999999999999 is out of range")


def test_huge_grade_in_dict_pure_python(monkeypatch):
    monkeypatch.setattr(_accel, "speedups", None)
    for grade in (LIMIT, -(2**30), 2**31):
        err = error_of(Qrels.from_dict, {"q": {"d": grade, "e": 1}})
        assert (
            str(err) == f"qrels: query 'q', doc 'd': grade {grade} is out of range (grades must lie within +-{LIMIT})"
        )


@pytest.mark.skipif(C_READER is None, reason="rag_eval._speedups is not built")
def test_huge_grade_in_dict():
    for grade in (LIMIT, -(2**30), 2**31):
        err = error_of(Qrels.from_dict, {"q": {"d": grade, "e": 1}})
        assert "out of range" in str(err)


def test_grade_too_large_for_exponential_gain():
    qrels = Qrels.from_dict({"q1": {"d1": 1001, "d2": 1}})  # loads: 1001 < 2**29
    run = Run.from_scores({"q1": {"d2": 2.0, "d1": 1.0}})
    err = error_of(evaluate, qrels, run, ["ndcg@10"])
    assert str(err).startswith("metric 'ndcg@10': grade 1001 is too large for exponential gain")
    linear = evaluate(qrels, run, ["ndcg(gain=linear)@10"])
    assert linear.mean("run", "ndcg(gain=linear)@10") == pytest.approx(
        (1 + 1001 / 1.584962500721156) / (1001 + 1 / 1.584962500721156)
    )
    assert evaluate(Qrels.from_dict({"q1": {"d1": 1000}}), run, ["ndcg@10"]).mean("run", "ndcg@10") == pytest.approx(
        1 / 1.584962500721156
    )


def test_blank_lines_and_comments(tmp_path, reader):
    text = "# qrels of the test\n\nq1 0 d1 1\n   # indented comment\n\t\nq1 0 d2 0\n"
    qrels = Qrels.from_trec(write(tmp_path, "qrels.txt", text))
    assert qrels.to_dict() == {"q1": {"d1": 1, "d2": 0}}
    run = Run.from_trec(write(tmp_path, "run.trec", "# run\nq1 Q0 d1 1 0.5 t\n\n#q2 Q0 d9 1 0.5 t\n"))
    assert run.query_ids == ("q1",)
    # later errors keep the file's own line numbers
    bad = write(tmp_path, "bad.txt", text + "\n# x\nq1 0 d3 x\n")
    assert str(error_of(Qrels.from_trec, bad)) == f"{bad}:9: field 4 is 'x', not an integer grade"
    # a '#' inside or after the first field is data, not a comment
    assert Qrels.from_trec(write(tmp_path, "hash.txt", "q#1 0 d1 1\n")).to_dict() == {"q#1": {"d1": 1}}


def test_blank_lines_and_comments_in_beir_and_jsonl(tmp_path):
    tsv = write(tmp_path, "qrels.tsv", "# BEIR\n\nquery-id\tcorpus-id\tscore\n# c\nq1\td1\t1\n\nq1\td2\tx\n")
    assert str(error_of(Qrels.from_beir, tsv)) == f"{tsv}:7: grade 'x' is not an integer"
    jsonl = write(
        tmp_path,
        "run.jsonl",
        '# c\n\n{"qid": "q", "docno": "d", "score": 1}\n  # c\n{"qid": "q", "docno": "e", "score": "x"}\n',
    )
    assert str(error_of(Run.from_jsonl, jsonl)) == f"{jsonl}:5: score 'x' is not a number"


def test_mixed_separators(tmp_path, reader):
    qrels = Qrels.from_trec(write(tmp_path, "qrels.txt", "q1\t0 d1  1\nq1 0\t\td2 \t 0\r\n"))
    assert qrels.to_dict() == {"q1": {"d1": 1, "d2": 0}}
    run = Run.from_trec(write(tmp_path, "run.trec", "q1\tQ0 d1  1\t \t0.5 t\nq1 Q0\td2 2 0.4\tt\n"))
    assert run.ranking("q1") == [("d1", 0.5), ("d2", 0.4)]


def test_spaces_in_beir_tsv(tmp_path):
    path = write(tmp_path, "qrels.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1 d2 1\n")
    assert str(error_of(Qrels.from_beir, path)) == f"{path}:3: expected 3 tab-separated fields, found 1"


def test_beir_wrong_field_count(tmp_path):
    path = write(tmp_path, "qrels.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\tx\n")
    assert str(error_of(Qrels.from_beir, path)) == f"{path}:2: expected 3 tab-separated fields, found 4"


def test_beir_header_without_known_columns(tmp_path):
    path = write(tmp_path, "qrels.tsv", "a\tb\tc\nq1\td1\t1\n")
    err = error_of(Qrels.from_beir, path)
    assert str(err) == f"{path}:1: header: no column named 'query_id' or 'qid' or 'query-id' (found ['a', 'b', 'c'])"


# ----- duplicates -------------------------------------------------------------------------------------------


def test_duplicate_judgement_conflicting_grades(tmp_path, reader):
    path = write(tmp_path, "qrels.txt", "q1 0 d1 2\nq1 0 d2 1\nq1 0 d1 0\n")
    with pytest.warns(UserWarning) as caught:
        qrels = Qrels.from_trec(path)
    assert messages(caught) == [
        f"{path}: 1 duplicate judgement(s) of the same document for a query; kept the first; 1 with conflicting "
        "grades, e.g. query 'q1' doc 'd1': 2 kept, 0 dropped"
    ]
    assert qrels.to_dict() == {"q1": {"d1": 2, "d2": 1}}


def test_duplicate_judgement_same_grade(tmp_path, reader):
    path = write(tmp_path, "qrels.txt", "q1 0 d1 1\nq1 0 d1 1\nq1 0 d1 1\n")
    with pytest.warns(UserWarning) as caught:
        qrels = Qrels.from_trec(path)
    assert messages(caught) == [f"{path}: 2 duplicate judgement(s) of the same document for a query; kept the first"]
    assert qrels.to_dict() == {"q1": {"d1": 1}}


def test_duplicate_doc_in_one_ranking(tmp_path, reader):
    path = write(tmp_path, "run.trec", "q1 Q0 d1 1 0.9 t\nq1 Q0 d2 2 0.8 t\nq1 Q0 d1 3 0.7 t\n")
    with pytest.warns(UserWarning, match="1 repeated doc id\\(s\\) within a query kept once, at the first position"):
        run = Run.from_trec(path)
    assert run.ranking("q1") == [("d1", 0.9), ("d2", 0.8)]
    assert run.notes == ("1 repeated doc id(s) within a query kept once, at the first position",)
    report = evaluate(Qrels.from_dict({"q1": {"d1": 1, "d3": 1}}), run, ["P@3"])
    assert values(report, "precision@3", run.name) == {"q1": pytest.approx(1 / 3)}  # not 2/3: d1 counts once
    assert "note: 1 repeated doc id(s)" in report.card.render()


def test_duplicate_doc_in_a_given_ranking():
    with pytest.warns(UserWarning, match="run: 1 repeated doc id"):
        run = Run.from_ranking({"q1": ["d1", "d2", "d1"]})
    assert run.ranking("q1") == [("d1", None), ("d2", None)]


# ----- queries and ids that do not line up ------------------------------------------------------------------

QRELS = {"1": {"d1": 1, "d2": 0}, "2": {"d3": 1}}


def test_query_only_in_run():
    run = Run.from_scores({"1": {"d1": 1.0}, "2": {"d3": 1.0}, "9": {"d1": 1.0}})
    report = evaluate(QRELS, run, ["P@1"])
    assert report.summary[["mean", "n"]].values.tolist() == [[1.0, 2]]
    assert report.card.queries[0].left_out == {"run_only": ["9"]}
    assert "left out, in the run but not in the qrels: 1 (9)" in report.card.render()


@pytest.mark.parametrize("missing_run, mean, n", [("zero", 0.5, 2), ("skip", 1.0, 1)])
def test_query_only_in_qrels(missing_run, mean, n):
    run = Run.from_scores({"1": {"d1": 1.0}})
    report = evaluate(QRELS, run, ["P@1"], conventions=Conventions(missing_run=missing_run))
    assert report.summary[["mean", "n"]].values.tolist() == [[mean, n]]
    record = report.card.queries[0]
    if missing_run == "zero":
        assert record.counted_as_zero == {"missing_run": ["2"]} and record.left_out == {}
        assert "counted as 0, in the qrels but not in the run" in report.card.render()
    else:
        assert record.left_out == {"missing_run": ["2"]} and record.counted_as_zero == {}


@pytest.mark.parametrize(
    "run_id, kind",
    [
        ("01", "leading zeros"),
        (" 1", "surrounding whitespace"),
        ("1 ", "surrounding whitespace"),
        ("001", "leading zeros"),
    ],
)
def test_query_ids_differ_by_whitespace_or_leading_zeros(run_id, kind):
    run = Run.from_scores({run_id: {"d1": 1.0}, "2": {"d3": 1.0}})
    with pytest.warns(UserWarning) as caught:
        report = evaluate(QRELS, run, ["P@1"])
    assert messages(caught) == [
        f"run 'run': 1 query id(s) differ from a qrels id only in {kind} (e.g. run {run_id!r} vs qrels '1'); they "
        "are different ids, so those queries score 0"
    ]
    assert values(report, "precision@1") == {"1": 0.0, "2": 1.0}  # kept distinct: no guessing
    assert report.card.queries[0].left_out == {"run_only": [run_id]}


def test_query_ids_differ_by_leading_zeros_in_files(tmp_path, reader):
    qrels = Qrels.from_trec(write(tmp_path, "qrels.txt", "1 0 d1 1\n"))
    run = Run.from_trec(write(tmp_path, "run.trec", "001 Q0 d1 1 0.5 t\n"))
    with pytest.warns(UserWarning, match="differ from a qrels id only in leading zeros"):
        assert evaluate(qrels, run, ["P@1"]).mean(run.name, "P@1") == 0.0


@pytest.mark.parametrize(
    "run_doc, judged_doc, kind",
    [("007", "7", "leading zeros"), (" d2", "d2", "surrounding whitespace"), ("d2\t", "d2", "surrounding whitespace")],
)
def test_doc_ids_differ_by_whitespace_or_leading_zeros(run_doc, judged_doc, kind):
    qrels = {"1": {judged_doc: 1}}
    with pytest.warns(UserWarning) as caught:
        report = evaluate(qrels, Run.from_scores({"1": {run_doc: 1.0}}), ["P@1"])
    assert messages(caught) == [
        f"run 'run': on 1 query(ies) with no judged result, doc ids differ from judged ones only in {kind} (e.g. "
        f"query '1': run {run_doc!r} vs qrels {judged_doc!r}); they are different ids, so those results are unjudged"
    ]
    assert values(report, "precision@1") == {"1": 0.0}


def test_empty_qrels():
    err = error_of(evaluate, {}, Run.from_scores({"1": {"d1": 1.0}}), ["P@1"])
    assert str(err) == "qrels: the qrels judge no query: there is nothing to measure"


# ----- metric names ------------------------------------------------------------------------------------------

# every family of the catalogue, as the unknown-name message lists them
KNOWN_FAMILIES = (
    "11pt_avg, ap, bing, bpref, err, g, gm_bpref, gm_map, hit, infap, iprec_at_recall, judged, mrr, ndcg, "
    "ndcg_rel, nerr, num_nonrel_judged_ret, num_q, num_rel, num_rel_ret, num_ret, precision, r_precision, "
    "rbp, rbp_resid, recall, recall_ceiling, relative_precision, relstring, rndcg, rprec_mult, runid, "
    "set_f, set_map, set_precision, set_recall, set_relative_precision, unjudged, utility"
)


def test_unknown_metric_name():
    run = Run.from_scores({"1": {"d1": 1.0}})
    err = error_of(evaluate, QRELS, run, ["foo@10"])
    assert str(err) == f"unknown metric 'foo@10'; known metrics: {KNOWN_FAMILIES}"
    assert str(error_of(evaluate, QRELS, run, ["ndgc@10"])) == "unknown metric 'ndgc@10'; did you mean 'ndcg'?"


@pytest.mark.parametrize("name, k", [("P@0", 0), ("ndcg@-1", -1), ("P_0", 0), ("recall@-5", -5)])
def test_cutoff_zero_or_negative(name, k):
    err = error_of(evaluate, QRELS, Run.from_scores({"1": {"d1": 1.0}}), [name])
    assert str(err) == f"metric {name!r}: the cutoff must be 1 or more, not {k}"


# ----- pipelines: the token budget ---------------------------------------------------------------------------


def test_token_budget_smaller_than_first_chunk():
    def search(query, k):
        first = "this chunk is far longer than five tokens" if query == "long" else "short one"
        return [Hit("d1", 2.0, text=first), Hit("d2", 1.0, text="two")]

    pipe = Pipeline(retriever(search, name="bm25"), depth=10, budget="5tok")
    result = pipe.run({"qa": "long", "qb": "short"}, progress=False)
    assert result.delivered() == {"qa": 0, "qb": 2}
    qrels = Qrels.from_dict({"qa": {"d1": 1}, "qb": {"d1": 1}})
    with pytest.warns(UserWarning) as caught:
        report = evaluate(qrels, result)
    note = (
        "1 query(ies) deliver no chunk: the first chunk alone exceeds the 5-token budget (e.g. 'qa'); they "
        "score 0 at the budget"
    )
    assert messages(caught) == [f"stage 'bm25': {note}"]
    assert report.values(repr(pipe), "hit@budget", stage="bm25").to_dict() == {"qa": 0.0, "qb": 1.0}
    assert report.values(repr(pipe), "recall@depth", stage="bm25").to_dict() == {"qa": 1.0, "qb": 1.0}
    assert note in next(r for r in report.card.inputs if r.name == "bm25").notes
    assert f"    note: {note}" in report.card.render()


@pytest.mark.parametrize(
    "budget, message",
    [
        (0, "a budget of chunks must be 1 or more, not 0"),
        (-3, "a budget of chunks must be 1 or more, not -3"),
        ("0tok", "budget must be a number of chunks (e.g. 5) or of tokens (e.g. '512tok'), not '0tok'"),
        ("abc", "budget must be a number of chunks (e.g. 5) or of tokens (e.g. '512tok'), not 'abc'"),
        (True, "budget must be a number of chunks or 'Ntok', not True"),
    ],
)
def test_budget_zero_or_garbage(budget, message):
    first = retriever(lambda query, k: [], name="none")
    with pytest.raises(ValueError) as info:
        Pipeline(first, depth=10, budget=budget)
    assert str(info.value) == message


# ----- BEIR folders --------------------------------------------------------------------------------------------

CORPUS = '{"_id": "d1", "title": "T", "text": "one"}\n{"_id": "d2", "text": "two"}\n'
QUERIES = '{"_id": "q1", "text": "what"}\n'
BEIR_QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\n"


def beir(tmp_path, corpus=CORPUS, queries=QUERIES, qrels=BEIR_QRELS):
    (tmp_path / "qrels").mkdir()
    for name, text in (("corpus.jsonl", corpus), ("queries.jsonl", queries), ("qrels/test.tsv", qrels)):
        if text is not None:
            write(tmp_path, name, text)
    return tmp_path


def test_beir_folder_reads(tmp_path):
    collection = Collection.from_beir(beir(tmp_path))
    assert collection.queries == {"q1": "what"} and list(collection.corpus) == ["d1", "d2"]


def test_malformed_beir_jsonl_line(tmp_path):
    root = beir(tmp_path, corpus=CORPUS + '{"_id": "d3", \n')
    err = error_of(Collection.from_beir, root)
    assert str(err) == f"{root / 'corpus.jsonl'}:3: not valid JSON (Expecting property name enclosed in double quotes)"


def test_beir_record_without_id(tmp_path):
    root = beir(tmp_path, corpus="# corpus\n" + CORPUS + '{"id": "d3", "text": "x"}\n')
    assert (
        str(error_of(Collection.from_beir, root)) == f"{root / 'corpus.jsonl'}:4: expected a JSON object with an '_id'"
    )


@pytest.mark.parametrize("record", ['{"_id": "q1"}', '{"_id": "q1", "text": 5}'], ids=["no-text", "int-text"])
def test_beir_query_without_text(tmp_path, record):
    root = beir(tmp_path, queries='{"_id": "q0", "text": "x"}\n' + record + "\n")
    assert str(error_of(Collection.from_beir, root)) == f"{root / 'queries.jsonl'}:2: expected a 'text' string"


@pytest.mark.parametrize("absent", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_beir_file_missing(tmp_path, absent):
    root = beir(
        tmp_path, **{{"corpus.jsonl": "corpus", "queries.jsonl": "queries", "qrels/test.tsv": "qrels"}[absent]: None}
    )
    err = error_of(Collection.from_beir, root)
    assert str(err) == f"{root / absent}: missing (a BEIR folder holds corpus.jsonl, queries.jsonl, qrels/<split>.tsv)"


def test_beir_judged_query_without_text(tmp_path):
    root = beir(tmp_path, qrels=BEIR_QRELS + "q2\td1\t1\n")
    assert (
        str(error_of(Collection.from_beir, root))
        == f"{root / 'queries.jsonl'}: 1 judged queries have no text, e.g. ['q2']"
    )


def test_corpus_id_missing_from_corpus(tmp_path):
    root = beir(tmp_path, qrels=BEIR_QRELS + "q1\td9\t1\n")
    with pytest.warns(UserWarning) as caught:
        collection = Collection.from_beir(root)
    assert messages(caught) == [
        f"{root / 'qrels' / 'test.tsv'}: 1 judged doc id(s) are not in corpus.jsonl (e.g. 'd9'); no retriever can "
        "return them, so recall stays below 1 on their queries"
    ]
    assert collection.qrels.to_dict() == {"q1": {"d1": 1, "d9": 1}}  # the judgement is kept


# ----- in-memory inputs ----------------------------------------------------------------------------------------


def test_int_ids_in_a_dict():
    with pytest.warns(UserWarning) as caught:
        qrels = Qrels.from_dict({1: {2: 1}})
    assert messages(caught) == ["qrels: query ids and doc ids given as int were converted to str"]
    with pytest.warns(UserWarning, match="run: query ids and doc ids given as int were converted to str"):
        run = Run.from_scores({1: {2: 0.5}})
    assert qrels.to_dict() == {"1": {"2": 1}} and run.query_ids == ("1",)
    assert evaluate(qrels, run, ["P@1"]).mean("run", "P@1") == 1.0


def test_non_mapping_input():
    with pytest.raises(TypeError, match=r"qrels must be a mapping \{query_id: \{doc_id: grade\}\}, not list"):
        Qrels.from_dict([("q", "d", 1)])
    with pytest.raises(TypeError, match=r"scores must be a mapping \{query_id: \{doc_id: score\}\}, not list"):
        Run.from_scores([("q", "d", 1.0)])
    with pytest.raises(TypeError, match=r"qrels must be a Qrels or a \{query_id: \{doc_id: grade\}\} mapping, not str"):
        evaluate("qrels.txt", Run.from_scores({"q": {"d": 1.0}}))


@pytest.mark.parametrize("grade", [1.5, "1_0", None, True])
def test_non_integer_grade_in_a_dict(grade):
    err = error_of(Qrels.from_dict, {"q": {"d": grade}})
    reason = "is a boolean, not an integer" if grade is True else "is not an integer"
    assert str(err) == f"qrels: query 'q', doc 'd': grade {grade!r} {reason}"


def test_non_numeric_score_in_a_dict():
    assert (
        str(error_of(Run.from_scores, {"q": {"d": "high"}})) == "run: query 'q', doc 'd': score 'high' is not a number"
    )


def test_nan_score_in_a_dict():
    err = error_of(Run.from_scores, {"q": {"d": 0.5, "e": float("nan")}})
    assert str(err) == "run: query 'q', doc 'e': score is NaN"


# ----- JSONL ----------------------------------------------------------------------------------------------------

GOOD_LINE = '{"query_id": "q", "doc_id": "d", "score": 1}\n'


@pytest.mark.parametrize(
    "line2, problem",
    [
        ('{"query_id": "q",', "not valid JSON (Expecting property name enclosed in double quotes)"),
        ("not json", "not valid JSON (Expecting value)"),
    ],
)
def test_jsonl_non_json_line(tmp_path, line2, problem):
    path = write(tmp_path, "run.jsonl", GOOD_LINE + line2 + "\n")
    assert str(error_of(Run.from_jsonl, path)) == f"{path}:2: {problem}"
    qrels = write(tmp_path, "qrels.jsonl", '{"qid": "q", "docno": "d", "label": 1}\n' + line2 + "\n")
    assert str(error_of(Qrels.from_jsonl, qrels)) == f"{qrels}:2: {problem}"


def test_jsonl_not_an_object(tmp_path):
    path = write(tmp_path, "run.jsonl", GOOD_LINE + '["q", "e", 1]\n')
    assert str(error_of(Run.from_jsonl, path)) == f"{path}:2: expected a JSON object"


def test_jsonl_missing_key(tmp_path):
    path = write(tmp_path, "run.jsonl", GOOD_LINE + '{"query_id": "q", "score": 1}\n')
    assert (
        str(error_of(Run.from_jsonl, path))
        == f"{path}:2: no key named 'doc_id' or 'docno' (found ['query_id', 'score'])"
    )
    no_score = write(tmp_path, "noscore.jsonl", '{"query_id": "q", "doc_id": "d"}\n')
    assert str(error_of(Run.from_jsonl, no_score)) == (
        f"{no_score}:1: no 'score' key (use order='given' for a ranking without scores)"
    )
    assert Run.from_jsonl(no_score, order="given").ranking("q") == [("d", None)]


def test_jsonl_scores_on_some_lines_only(tmp_path):
    later = write(tmp_path, "later.jsonl", '{"query_id": "q", "doc_id": "d"}\n' + GOOD_LINE)
    assert str(error_of(Run.from_jsonl, later, order="given")) == (
        f"{later}:1: has no 'score' and later lines do: give every line a score or none"
    )
    earlier = write(tmp_path, "earlier.jsonl", GOOD_LINE + '{"query_id": "q", "doc_id": "e"}\n')
    assert str(error_of(Run.from_jsonl, earlier, order="given")) == (
        f"{earlier}:2: some lines have a 'score' and this one has none"
    )


@pytest.mark.parametrize(
    "score, shown",
    [
        ('"x"', "'x' is not a number"),
        ("NaN", "nan is NaN"),
        ("true", "True is a boolean, not a number"),
        ("null", "None is not a number"),
        ('"1_0"', "'1_0' is not a number"),
    ],
)
def test_jsonl_non_numeric_score(tmp_path, score, shown):
    path = write(tmp_path, "run.jsonl", GOOD_LINE + '{"query_id": "q", "doc_id": "e", "score": ' + score + "}\n")
    assert str(error_of(Run.from_jsonl, path)) == f"{path}:2: score {shown}"


def test_jsonl_non_integer_grade(tmp_path):
    path = write(
        tmp_path, "qrels.jsonl", '{"qid": "q", "docno": "d", "label": 1}\n{"qid": "q", "docno": "e", "label": 0.5}\n'
    )
    assert str(error_of(Qrels.from_jsonl, path)) == f"{path}:2: grade 0.5 is not an integer"


def test_jsonl_infinite_score(tmp_path):
    path = write(tmp_path, "run.jsonl", GOOD_LINE + '{"query_id": "q", "doc_id": "e", "score": -Infinity}\n')
    with pytest.warns(UserWarning, match=r"1 infinite score\(s\) kept"):
        run = Run.from_jsonl(path)
    assert run.ranking("q") == [("d", 1.0), ("e", float("-inf"))]


# ----- the command line --------------------------------------------------------------------------------------


def run_cli(capsys, *args) -> tuple[int, str, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # the CLI prints warnings itself; pytest's 'error' filter would raise them
        code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


GOOD_QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 1\n"
GOOD_RUN = "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.4 t\nq2 Q0 d3 1 0.3 t\n"

CLI_ERRORS = {
    "missing-file": (GOOD_QRELS, None, "P@1", "{run}: no such file"),
    "bad-field": (
        GOOD_QRELS,
        "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 high t\n",
        "P@1",
        "{run}:2: field 5 is 'high', not a number",
    ),
    "bad-grade": ("q1 0 d1 1\nq1 0 d2 yes\n", GOOD_RUN, "P@1", "{qrels}:2: field 4 is 'yes', not an integer grade"),
    "non-utf8": (GOOD_QRELS, b"q1 Q0 d1 1 0.5 t\nq1 Q0 d\xe9 2 0.4 t\n", "P@1", "{run}:2: not valid UTF-8 (byte 0xe9)"),
    "nan-score": (GOOD_QRELS, "q1 Q0 d1 1 nan t\n", "P@1", "{run}:1: field 5 (the score) is NaN"),
    "empty-file": ("", GOOD_RUN, "P@1", "{qrels}: empty file"),
    "huge-grade": (
        "q1 0 d1 1000000000\n",
        GOOD_RUN,
        "P@1",
        "{qrels}:1: grade 1000000000 is out of range (grades must lie within +-536870912)",
    ),
    "unknown-metric": (GOOD_QRELS, GOOD_RUN, "foo@1", f"unknown metric 'foo@1'; known metrics: {KNOWN_FAMILIES}"),
    "cutoff-0": (GOOD_QRELS, GOOD_RUN, "P@0", "metric 'P@0': the cutoff must be 1 or more, not 0"),
    "exp-gain": (
        "q1 0 d1 1001\n",
        GOOD_RUN,
        "ndcg@10",
        "metric 'ndcg@10': grade 1001 is too large for exponential gain "
        "(2^grade - 1 overflows beyond grade 1000); use gain=linear, e.g. 'ndcg(gain=linear)', or map it with gains=",
    ),
}


@pytest.mark.parametrize("case", sorted(CLI_ERRORS))
def test_cli_error_is_one_line_and_exit_2(capsys, tmp_path, case):
    qrels_text, run_text, metric, message = CLI_ERRORS[case]
    qrels = write(tmp_path, "qrels.txt", qrels_text)
    run = tmp_path / "run.trec"
    if run_text is not None:
        write(tmp_path, "run.trec", run_text)
    code, out, err = run_cli(capsys, "evaluate", qrels, run, "-m", metric)
    assert (code, out) == (2, "")
    assert err == "rag-eval: error: " + message.format(qrels=qrels, run=run) + "\n"


@pytest.mark.parametrize(
    "case, qrels_text, run_text, warning",
    [
        (
            "infinite-score",
            GOOD_QRELS,
            "q1 Q0 d1 1 inf t\nq2 Q0 d3 1 -inf t\n",
            "{run}: 2 infinite score(s) kept: +inf ranks first, -inf last, ties among them broken as for equal scores",
        ),
        (
            "duplicate-judgement",
            GOOD_QRELS + "q1 0 d1 0\n",
            GOOD_RUN,
            "{qrels}: 1 duplicate judgement(s) of the same document for a query; kept the first; 1 with conflicting "
            "grades, e.g. query 'q1' doc 'd1': 1 kept, 0 dropped",
        ),
        (
            "leading-zeros",
            "1 0 d1 1\n",
            "01 Q0 d1 1 0.5 t\n",
            "run 'run.trec': 1 query id(s) differ from a qrels id only in leading zeros (e.g. run '01' vs qrels '1'); "
            "they are different ids, so those queries score 0",
        ),
    ],
)
def test_cli_warning_is_one_line(capsys, tmp_path, case, qrels_text, run_text, warning):
    qrels = write(tmp_path, "qrels.txt", qrels_text)
    run = write(tmp_path, "run.trec", run_text)
    code, out, err = run_cli(capsys, "evaluate", qrels, run, "-m", "P@1", "--no-card", "--judged-threshold", "0")
    assert code == 0 and "precision@1" in out
    assert err == "rag-eval: warning: " + warning.format(qrels=qrels, run=run) + "\n"


# ----- the pure-Python reader, selected by the environment at import --------------------------------------------

PURE_KINDS = {
    "qrels-columns": ("qrels.txt", "q1 0 d1 1\n\n# c\nq1 0 d2 1 extra\n", "Qrels.from_trec"),
    "grade": ("qrels.txt", "q1 0 d1 1\nq1 0 d2 1.5\n", "Qrels.from_trec"),
    "huge-grade": ("qrels.txt", "# c\nq1 0 d2 -536870912\n", "Qrels.from_trec"),
    "run-columns": ("run.trec", "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.4\n", "Run.from_trec"),
    "score": ("run.trec", "q1 Q0 d1 1 0.5 t\nq1\tQ0 d2 2 high t\n", "Run.from_trec"),
    "nan": ("run.trec", "\n\nq1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 nan t\n", "Run.from_trec"),
    "non-utf8": ("run.trec", b"q1 Q0 d1 1 0.5 t\nq1 Q0 d\xff 2 0.4 t\n", "Run.from_trec"),
}

PURE_SCRIPT = """
import json, sys
from rag_eval import InputError, Qrels, Run, _accel
assert _accel.speedups is None, "RAG_EVAL_PURE_PYTHON=1 must select the pure-Python reader"
out = {}
for kind, (path, loader) in json.loads(sys.argv[1]).items():
    try:
        eval(loader)(path)
        out[kind] = None
    except InputError as exc:
        out[kind] = str(exc)
print(json.dumps(out))
"""


def test_pure_python_reader_gives_the_same_errors(tmp_path):
    expected, jobs = {}, {}
    for kind, (name, text, loader) in PURE_KINDS.items():
        path = write(tmp_path, f"{kind}-{name}", text)
        expected[kind] = str(error_of(eval(loader), path))  # in this process: the C reader where it is built
        jobs[kind] = (str(path), loader)
    env = dict(os.environ, RAG_EVAL_PURE_PYTHON="1", PYTHONWARNINGS="error")
    done = subprocess.run(
        [sys.executable, "-c", PURE_SCRIPT, json.dumps(jobs)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == expected
    assert expected["nan"].endswith(":4: field 5 (the score) is NaN")
    assert expected["huge-grade"].endswith(":2: grade -536870912 is out of range (grades must lie within +-536870912)")


def test_the_bad_input_table_lists_every_test():
    """The bad-input tables (docs/bad-input.md lists their pages, docs/bad-input/*.md) name a test of the
    tests/test_bad_input*.py files in every row, and every test there has a row (each area of the code keeps its
    kinds in a file of its own: test_bad_input_<area>.py)."""
    import ast

    index = (ROOT / "docs" / "bad-input.md").read_text(encoding="utf-8")
    pages = sorted((ROOT / "docs" / "bad-input").glob("*.md"))
    assert pages, "the bad-input tables have pages of their own"
    linked = set(re.findall(r"\]\(bad-input/([\w-]+\.md)\)", index))
    assert linked == {page.name for page in pages}, "docs/bad-input.md links every page of docs/bad-input/, no other"
    # each page starts with its "# " title, which ends the section of the page before it
    doc = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    named: set[str] = set()
    # issue 27's rows name tests of other files: `test_file.py::test_a`, `::test_b` (the file named last in the
    # section)
    elsewhere: dict[str, set[str]] = {}
    current = ""
    for line in doc.splitlines():
        if line.startswith("#"):
            current = ""
        if not line.startswith("| "):
            continue
        cell = line.split("|")[-2].strip()
        if "::" not in cell:
            named.add(cell.strip("`"))
            continue
        for token in re.findall(r"`([^`]*)`", cell):
            file, _, test = token.rpartition("::")
            current = file or current
            assert current, f"{cell}: name the test's file before '::{test}'"
            elsewhere.setdefault(current, set()).add(test.partition("[")[0])  # (a parametrised case's test)
    named.discard("test")
    for file, tests in elsewhere.items():
        tree = ast.parse((ROOT / "tests" / file).read_text(encoding="utf-8"))
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert tests - defined == set(), f"rows naming no test of tests/{file}"
    here: set[str] = set()
    for path in sorted((ROOT / "tests").glob("test_bad_input*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        here |= {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}
    here.discard("test_the_bad_input_table_lists_every_test")
    here.discard("test_beir_folder_reads")  # the well-formed baseline of the BEIR rows
    here.discard("test_pure_python_reader_gives_the_same_errors")  # a check across rows, not a kind
    assert named - here == set(), "rows naming no test"
    assert here - named == set(), "tests without a row"
    assert len(named) >= 35
