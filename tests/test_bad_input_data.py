"""Bad input to the data layer: ids that collide once converted, ids that cannot round-trip, numbers spelled
oddly, line endings, streams, and frames with a column twice.

Every test here is a row of docs/bad-input/files.md (sections "Ids: collisions and round trips" and "Numbers,
line endings and streams"). The TREC kinds run through the C reader and again through the pure-Python one.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
import warnings
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from rag_eval import InputError, Qrels, Run, evaluate
from rag_eval.data.collection import Collection
from rag_eval.errors import DuplicateJudgement, DuplicateResult, IdsConverted

from .conftest import ROOT

BOUNDED = ["recall@10", "ap", "ndcg@10", "P@5", "mrr", "judged@10"]


def write(tmp_path, name: str, content: str | bytes):
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def error_of(call, *args, **kwargs) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdsConverted)
        with pytest.raises(InputError) as info:
            call(*args, **kwargs)
    return str(info.value)


def quietly(call, *args, **kwargs):
    """``call`` with the int-conversion warning expected (and checked) rather than an error."""
    with pytest.warns(IdsConverted):
        return call(*args, **kwargs)


def in_bounds(report) -> None:
    values = report.per_query["value"].dropna()
    assert len(values) and ((values >= 0) & (values <= 1)).all(), report.per_query


# ----- ids: collisions -----------------------------------------------------------------------------------------


def test_dict_ids_that_collide_once_converted(reader):
    assert error_of(Run.from_scores, {"q": {7: 2.0, "7": 1.0}}) == (
        "run: query 'q': doc ids 7 and '7' are the same id once converted to str"
    )
    assert error_of(Run.from_scores, {1: {"d": 1.0}, "1": {"e": 0.5}}) == (
        "run: query ids 1 and '1' are the same id once converted to str"
    )
    assert error_of(Qrels.from_dict, {1: {"d": 1}, "1": {"e": 0}}) == (
        "qrels: query ids 1 and '1' are the same id once converted to str"
    )
    assert error_of(Qrels.from_dict, {"q": {"7": 1, 7: 0}}) == (
        "qrels: query 'q': doc ids '7' and 7 are the same id once converted to str"
    )
    # the same doc id in two queries is no collision; nor are 7 and '007'
    run = quietly(Run.from_scores, {"q": {7: 2.0}, "r": {"7": 1.0, "007": 0.5}})
    assert run.to_dict() == {"q": {"7": 2.0}, "r": {"7": 1.0, "007": 0.5}}


def test_ranking_ids_that_collide_once_converted():
    assert error_of(Run.from_ranking, {1: ["a"], "1": ["b"]}) == (
        "run: query ids 1 and '1' are the same id once converted to str"
    )
    assert error_of(Run.from_ranking, {"q": ["a", 7, "b", "7"]}) == (
        "run: query 'q': doc ids 7 and '7' are the same id once converted to str"
    )
    assert error_of(Run.from_ranking, {"q": [(7, 2.0), ("7", 1.0)]}) == (
        "run: query 'q': doc ids 7 and '7' are the same id once converted to str"
    )


def test_frame_ids_that_collide_by_type():
    frame = pd.DataFrame({"query_id": [7, "q", "7"], "doc_id": ["a", "b", "c"], "score": [1.0, 2.0, 3.0]})
    assert error_of(Run.from_frame, frame) == (
        "DataFrame: query ids 7 (row 0) and '7' (row 2) are the same id once converted to str"
    )
    frame = pd.DataFrame({"query_id": ["q", "q", "r", "q"], "doc_id": [7, "x", "7", "7"], "grade": [1, 0, 1, 0]})
    assert error_of(Qrels.from_frame, frame) == (
        "DataFrame: query 'q': doc ids 7 (row 0) and '7' (row 3) are the same id once converted to str"
    )
    frame = pd.DataFrame({"query_id": ["q", "r"], "doc_id": [7, "7"], "score": [1.0, 2.0]})  # two queries: fine
    assert quietly(Run.from_frame, frame).to_dict() == {"q": {"7": 1.0}, "r": {"7": 2.0}}


def test_jsonl_ids_that_collide_by_type(tmp_path):
    run = write(
        tmp_path,
        "run.jsonl",
        '{"query_id": 7, "doc_id": "a", "score": 1}\n\n{"query_id": "7", "doc_id": "b", "score": 2}\n',
    )
    assert error_of(Run.from_jsonl, run) == (
        f"{run}:3: query ids 7 (line 1) and '7' (line 3) are the same id once converted to str"
    )
    qrels = write(
        tmp_path,
        "qrels.jsonl",
        '{"query_id": "q", "doc_id": "7", "grade": 1}\n{"query_id": "q", "doc_id": 7, "grade": 0}\n',
    )
    assert error_of(Qrels.from_jsonl, qrels) == (
        f"{qrels}:2: query 'q': doc ids '7' (line 1) and 7 (line 2) are the same id once converted to str"
    )
    assert error_of(Qrels.load, qrels).startswith(f"{qrels}:2: query 'q': doc ids")


def test_beir_ids_that_collide_by_type(tmp_path):
    (tmp_path / "qrels").mkdir()
    write(
        tmp_path,
        "corpus.jsonl",
        '{"_id": 7, "text": "seven"}\n{"_id": "d", "text": "d"}\n{"_id": "7", "text": "VII"}\n',
    )
    write(tmp_path, "queries.jsonl", '{"_id": "q", "text": "?"}\n')
    write(tmp_path / "qrels", "test.tsv", "query-id\tcorpus-id\tscore\nq\t7\t1\n")
    corpus = tmp_path / "corpus.jsonl"
    assert error_of(Collection.from_beir, tmp_path) == (
        f"{corpus}:3: ids 7 (line 1) and '7' (line 3) are the same id once converted to str"
    )
    write(tmp_path, "corpus.jsonl", '{"_id": 7, "text": "seven"}\n{"_id": "d", "text": "d"}\n')
    collection = quietly(Collection.from_beir, tmp_path)
    assert list(collection.corpus) == ["7", "d"] and collection.corpus["7"].text == "seven"
    write(tmp_path, "corpus.jsonl", '{"_id": 7.5, "text": "seven"}\n')
    assert error_of(Collection.from_beir, tmp_path) == f"{corpus}:1: id 7.5 is a float, not a str"


def test_parquet_reader(tmp_path):
    path = tmp_path / "run.parquet"
    pd.DataFrame({"query_id": [1, 1, 2], "doc_id": [10, 11, 10], "score": [0.5, 1.5, 2.0]}).to_parquet(path)
    run = quietly(Run.from_parquet, path)
    assert run.to_dict() == {"1": {"11": 1.5, "10": 0.5}, "2": {"10": 2.0}}
    assert run.name == "run.parquet" and run.source.path == str(path)
    assert quietly(Run.load, path) == run  # told from its magic bytes, PAR1
    qpath = tmp_path / "qrels.parquet"
    pd.DataFrame({"qid": ["1", "2"], "docno": ["10", "10"], "label": [1, 0]}).to_parquet(qpath)
    assert Qrels.load(qpath).to_dict() == {"1": {"10": 1}, "2": {"10": 0}}
    assert Qrels.from_parquet(qpath).source.path == str(qpath)
    bad = tmp_path / "bool.parquet"
    pd.DataFrame({"query_id": ["q"], "doc_id": ["d"], "score": [True]}).to_parquet(bad)
    assert error_of(Run.load, bad) == f"{bad}: column 'score' holds booleans, not scores"
    broken = write(tmp_path, "broken.parquet", b"PAR1 and then nothing a Parquet reader can use")
    assert error_of(Run.load, broken).startswith(f"{broken}: not a readable Parquet file")


def test_collisions_keep_metrics_in_bounds():
    # the reported example: recall@10 = AP = 2.0 before; now an error, and no input gives a value out of bounds
    with pytest.raises(InputError, match="doc ids 7 and '7'"):
        evaluate({"q": {"7": 1}}, Run.from_scores({"q": {7: 2.0, "7": 1.0}}), BOUNDED)
    mixed = [
        {"q": {7: 2.0, "8": 1.0}},
        {1: {7: 2.0}, "2": {"7": 1.0, 8: 0.5}},
    ]
    for scores in mixed:
        run = quietly(Run.from_scores, scores)
        qrels = quietly(Qrels.from_dict, {q: {d: 1 for d in docs} for q, docs in scores.items()})
        report = evaluate(qrels, run, BOUNDED)
        in_bounds(report)
        assert report.values("run", "recall@10").to_dict() == {q: 1.0 for q in run.query_ids}
    frame = pd.DataFrame({"query_id": [1, 1, 2], "doc_id": [7, 8, 7], "score": [3.0, 2.0, 1.0]})
    report = evaluate(quietly(Qrels.from_dict, {1: {7: 1}, 2: {7: 1}}), quietly(Run.from_frame, frame), BOUNDED)
    in_bounds(report)
    assert report.values("run", "ap").to_dict() == {"1": 1.0, "2": 1.0}


def test_plain_repeats_keep_their_warnings(tmp_path):
    frame = pd.DataFrame({"query_id": ["q", "q"], "doc_id": [7, 7], "grade": [1, 0]})
    with pytest.warns(DuplicateJudgement, match="1 duplicate judgement"), pytest.warns(IdsConverted):
        assert Qrels.from_frame(frame).to_dict() == {"q": {"7": 1}}
    run = write(tmp_path, "run.jsonl", '{"qid": "q", "docno": 7, "score": 2}\n{"qid": "q", "docno": 7, "score": 1}\n')
    with pytest.warns(DuplicateResult, match="1 repeated doc id"), pytest.warns(IdsConverted):
        assert Run.from_jsonl(run).to_dict() == {"q": {"7": 2.0}}


# ----- ids: writers ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "qid, reason",
    [
        ("#q", "starts with '#', so the line would be read back as a comment"),
        ("a b", "holds whitespace, which separates the fields of a TREC line"),
        ("a\rb", "holds whitespace, which separates the fields of a TREC line"),
        ("", "is empty"),
    ],
)
def test_writer_refuses_ids_that_cannot_round_trip(tmp_path, qid, reason):
    out = tmp_path / "out.trec"
    qrels = Qrels.from_dict({"ok": {"d": 1}, qid: {"d": 1}})
    assert error_of(qrels.to_trec, out) == (
        f"{out}: query id {qid!r} {reason}: it cannot be written to a trec file and read back"
    )
    run = Run.from_scores({"ok": {"d": 1.0}, qid: {"d": 1.0}})
    assert error_of(run.to_trec, out) == (
        f"{out}: query id {qid!r} {reason}: it cannot be written to a trec file and read back"
    )
    assert not out.exists()  # refused before anything is written
    if qid != "#q":  # a doc id is never at the start of a line: only whitespace and emptiness matter there
        assert error_of(Run.from_scores({"q": {qid: 1.0}}).to_trec, out) == (
            f"{out}: doc id {qid!r} {reason}: it cannot be written to a trec file and read back"
        )
        assert error_of(Qrels.from_dict({"q": {qid: 1}}).to_trec, out) == (
            f"{out}: query 'q': doc id {qid!r} {reason}: it cannot be written to a trec file and read back"
        )
        assert not out.exists()
    # '#' inside an id, or at the start of a doc id, round-trips
    Qrels.from_dict({"q#1": {"#d": 2}}).to_trec(out)
    assert Qrels.from_trec(out).to_dict() == {"q#1": {"#d": 2}}


@pytest.mark.parametrize(
    "tag, reason",
    [
        ("my run", "holds whitespace, which separates the fields of a TREC line"),
        ("a\tb", "holds whitespace, which separates the fields of a TREC line"),
    ],
)
def test_writer_refuses_a_bad_run_tag(tmp_path, tag, reason):
    out = tmp_path / "out.trec"
    run = Run.from_scores({"q": {"d": 1.0}})
    assert error_of(run.to_trec, out, tag=tag) == (
        f"{out}: run tag {tag!r} {reason}: it cannot be written to a trec file and read back"
    )
    assert not out.exists()
    assert error_of(Run.from_scores({"q": {"d": 1.0}}, name="").to_trec, out) == (
        f"{out}: run tag '' is empty: it cannot be written to a trec file and read back"
    )  # no tag, no name
    assert not out.exists()
    run.to_trec(out, tag="#tag")  # the 6th field: a '#' there is data
    assert Run.from_trec(out).tag == "#tag"


# ----- frames and JSON objects: one column per role --------------------------------------------------------------


@pytest.mark.parametrize(
    "column, build",
    [
        (
            "score",
            lambda: Run.from_frame(
                pd.DataFrame([["q", "d", 1.0, 2.0]], columns=["query_id", "doc_id", "score", "score"])
            ),
        ),
        (
            "grade",
            lambda: Qrels.from_frame(
                pd.DataFrame([["q", "d", 1, 0]], columns=["query_id", "doc_id", "grade", "grade"])
            ),
        ),
        (
            "query_id",
            lambda: Run.from_frame(
                pd.DataFrame([["q", "r", "d", 1.0]], columns=["query_id", "query_id", "doc_id", "score"])
            ),
        ),
        (
            "doc_id",
            lambda: Qrels.from_frame(
                pd.DataFrame([["q", "d", "e", 1]], columns=["query_id", "doc_id", "doc_id", "grade"])
            ),
        ),
    ],
)
def test_frame_with_a_column_twice(column, build):
    assert error_of(build) == f"DataFrame: column {column!r} appears 2 times: which one to read is a guess"


def test_frame_with_two_names_for_one_role():
    frame = pd.DataFrame({"query_id": ["q", "r"], "qid": ["q", "x"], "doc_id": ["a", "b"], "score": [1.0, 2.0]})
    assert error_of(Run.from_frame, frame) == (
        "DataFrame: columns 'query_id' and 'qid' both name one field and hold different values: keep one of them"
    )
    frame = pd.DataFrame({"qid": ["q"], "docno": ["a"], "label": [2], "score": [0.3]})  # a run merged with qrels
    assert error_of(Qrels.from_frame, frame) == (
        "DataFrame: columns 'label' and 'score' both name one field and hold different values: keep one of them"
    )
    same = pd.DataFrame({"query_id": ["q", "r"], "qid": ["q", "r"], "doc_id": ["a", "b"], "score": [1.0, 2.0]})
    assert Run.from_frame(same).to_dict() == {"q": {"a": 1.0}, "r": {"b": 2.0}}  # the same values: harmless


def test_json_object_with_a_key_twice_or_two_names(tmp_path):
    twice = write(tmp_path, "run.jsonl", '{"query_id": "q", "doc_id": "d", "score": 1, "score": 2}\n')
    assert error_of(Run.from_jsonl, twice) == f"{twice}:1: key 'score' appears twice in one object"
    names = write(
        tmp_path,
        "qrels.jsonl",
        '{"query_id": "q", "doc_id": "d", "grade": 1}\n{"query_id": "q", "qid": "r", "doc_id": "e", "grade": 1}\n',
    )
    assert error_of(Qrels.from_jsonl, names) == (
        f"{names}:2: keys 'query_id' and 'qid' both name one field and hold different values ('q' and 'r')"
    )
    same = write(tmp_path, "same.jsonl", '{"query_id": "q", "qid": "q", "doc_id": "d", "grade": 1}\n')
    assert Qrels.from_jsonl(same).to_dict() == {"q": {"d": 1}}


def test_beir_header_with_two_names_for_one_field(tmp_path):
    path = write(tmp_path, "qrels.tsv", "query-id\tcorpus-id\tlabel\tscore\nq1\td1\t1\t0\n")
    assert error_of(Qrels.from_beir, path) == f"{path}:1: header: columns 'label' and 'score' name the same field"


# ----- numbers -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["1_0", "\u0661", "0x10", "1e", "e5", "1.5.", "+-1", "1,5", "inff", "\u00bd"])
def test_scores_spelled_oddly_in_trec_files(tmp_path, reader, text):
    path = write(tmp_path, "run.trec", f"q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 {text} t\n")
    assert error_of(Run.from_trec, path) == f"{path}:2: field 5 is {text!r}, not a number"


def test_scores_spelled_plainly_in_trec_files(tmp_path, reader):
    spelled = ["1.", ".5", "-2", "+3", "1e3", "2E-1", "007", "INF", "-Infinity", "1e400", "123456789012345678901"]
    lines = "".join(f"q1 Q0 d{i} {i} {text} t\n" for i, text in enumerate(spelled))
    with pytest.warns(Warning, match="infinite score"):
        run = Run.from_trec(write(tmp_path, "run.trec", lines))
    assert run.to_dict(ties="trec_eval") != {}
    assert dict(zip(run.doc_ids.tolist(), run.scores.tolist())) == {
        f"d{i}": float(text) for i, text in enumerate(spelled)
    }


@pytest.mark.parametrize("text", ["1_0", "\u0661", "1e2", "1.5", "0x1", "1.0e0", ".0", "inf", "nan"])
def test_grades_spelled_oddly_in_trec_files(tmp_path, reader, text):
    path = write(tmp_path, "qrels.txt", f"q1 0 d1 1\nq1 0 d2 {text}\n")
    assert error_of(Qrels.from_trec, path) == f"{path}:2: field 4 is {text!r}, not an integer grade"


def test_grades_spelled_plainly_in_trec_files(tmp_path, reader):
    path = write(tmp_path, "qrels.txt", "q 0 a 1.0\nq 0 b 2.\nq 0 c +3\nq 0 d -1\nq 0 e 007\nq 0 f -0\n")
    assert Qrels.from_trec(path).to_dict() == {"q": {"a": 1, "b": 2, "c": 3, "d": -1, "e": 7, "f": 0}}


def test_numbers_spelled_oddly_in_beir_and_jsonl(tmp_path):
    tsv = write(tmp_path, "qrels.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t1_0\n")
    assert error_of(Qrels.from_beir, tsv) == f"{tsv}:3: grade '1_0' is not an integer"
    tsv = write(tmp_path, "qrels.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t 1\n")
    assert error_of(Qrels.from_beir, tsv) == f"{tsv}:2: grade ' 1' is not an integer"
    run = write(tmp_path, "run.jsonl", '{"query_id": "q", "doc_id": "d", "score": "1_0"}\n')
    assert error_of(Run.from_jsonl, run) == f"{run}:1: score '1_0' is not a number"
    qrels = write(tmp_path, "qrels.jsonl", '{"query_id": "q", "doc_id": "d", "grade": "1e2"}\n')
    assert error_of(Qrels.from_jsonl, qrels) == f"{qrels}:1: grade '1e2' is not an integer"
    plain = write(
        tmp_path,
        "plain.jsonl",
        '{"query_id": "q", "doc_id": "d", "grade": "2"}\n{"query_id": "q", "doc_id": "e", "grade": 1.0}\n',
    )
    assert Qrels.from_jsonl(plain).to_dict() == {"q": {"d": 2, "e": 1}}


def test_booleans_where_a_number_is_expected(tmp_path, reader):
    assert error_of(Run.from_scores, {"q": {"a": 1.0, "b": True}}) == (
        "run: query 'q', doc 'b': score True is a boolean, not a number"
    )
    assert error_of(Run.from_scores, {"q": {"b": np.True_}}) == (
        f"run: query 'q', doc 'b': score {np.True_!r} is a boolean, not a number"
    )
    assert error_of(Run.from_ranking, {"q": [("b", False)]}) == (
        "run: query 'q', doc 'b': score False is a boolean, not a number"
    )
    assert (
        error_of(Qrels.from_dict, {"q": {"d": True}})
        == "qrels: query 'q', doc 'd': grade True is a boolean, not an integer"
    )
    frame = pd.DataFrame({"query_id": ["q"], "doc_id": ["d"], "score": [True]})
    assert error_of(Run.from_frame, frame) == "DataFrame: column 'score' holds booleans, not scores"
    frame = pd.DataFrame({"query_id": ["q"], "doc_id": ["d"], "grade": [True]})
    assert error_of(Qrels.from_frame, frame) == "DataFrame: column 'grade' holds booleans, not integer grades"
    frame = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["d", "e"], "score": [1.0, True]}, dtype=object)
    assert error_of(Run.from_frame, frame) == "DataFrame: row 1: score True is a boolean, not a number"
    path = write(tmp_path, "qrels.jsonl", '{"query_id": "q", "doc_id": "d", "grade": true}\n')
    assert error_of(Qrels.from_jsonl, path) == f"{path}:1: grade True is a boolean, not an integer"


def test_numeric_strings_in_dicts_and_frames(reader):
    run = Run.from_scores({"q": {"a": "0.5", "b": "-1e1", "c": 2, "d": Decimal("0.25")}})
    assert run.to_dict() == {"q": {"c": 2.0, "a": 0.5, "d": 0.25, "b": -10.0}}
    assert Qrels.from_dict({"q": {"a": "2", "b": "1.0"}}).to_dict() == {"q": {"a": 2, "b": 1}}
    for text in ("1_0", " 0.5", "\u0661", "0x1"):
        assert (
            error_of(Run.from_scores, {"q": {"a": text}}) == f"run: query 'q', doc 'a': score {text!r} is not a number"
        )
        assert (
            error_of(Qrels.from_dict, {"q": {"a": text}})
            == f"qrels: query 'q', doc 'a': grade {text!r} is not an integer"
        )
    frame = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "score": ["0.5", "1_0"]})
    assert error_of(Run.from_frame, frame) == "DataFrame: row 1: score '1_0' is not a number"
    frame = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "grade": ["1", "\u0662"]})
    assert error_of(Qrels.from_frame, frame) == "DataFrame: row 1: grade '\u0662' is not an integer"
    frame = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "grade": ["1", "0"]})
    assert Qrels.from_frame(frame).to_dict() == {"q": {"a": 1, "b": 0}}


def test_int_score_too_large_for_a_float(reader):
    assert error_of(Run.from_scores, {"q": {"a": 10**400}}) == (
        f"run: query 'q', doc 'a': score {10**400!r} is too large for a float"
    )


# ----- line endings --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ending", ["\r", "\r\n", "mixed"])
def test_cr_and_crlf_line_endings(tmp_path, reader, ending):
    lines = ["q1 Q0 d1 1 3 a", "q1 Q0 d2 2 2 b", "q2 Q0 d3 1 1 c"]
    ends = ["\r", "\n", "\r\n"] if ending == "mixed" else [ending] * 3
    run = Run.from_trec(write(tmp_path, "run.trec", "".join(line + end for line, end in zip(lines, ends, strict=True))))
    assert run.to_dict() == {"q1": {"d1": 3.0, "d2": 2.0}, "q2": {"d3": 1.0}}  # every line counts
    qrels = Qrels.from_trec(write(tmp_path, "qrels.txt", "q1 0 d1 1\rq1 0 d2 0\r\nq2 0 d3 2"))
    assert qrels.to_dict() == {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}
    report = evaluate(qrels, run, ["P@2", "recall@2"])
    assert report.values("run.trec", "P@2").to_dict() == {"q1": 0.5, "q2": 0.5}
    beir = write(tmp_path, "qrels.tsv", "query-id\tcorpus-id\tscore\rq1\td1\t1\rq1\td2\t0\r")
    assert Qrels.from_beir(beir).to_dict() == {"q1": {"d1": 1, "d2": 0}}
    jsonl = write(
        tmp_path, "run.jsonl", '{"qid": "q", "docno": "a", "score": 1}\r{"qid": "q", "docno": "b", "score": 2}\r'
    )
    assert Run.load(jsonl).to_dict() == {"q": {"b": 2.0, "a": 1.0}}
    assert Qrels.load(write(tmp_path, "q.tsv", "# c\rquery-id\tcorpus-id\tscore\rq\td\t1")).to_dict() == {"q": {"d": 1}}


def test_line_numbers_count_every_ending(tmp_path, reader):
    path = write(tmp_path, "run.trec", "q1 Q0 d1 1 1 t\r\rq1 Q0 d2 2 x t\r")
    assert error_of(Run.from_trec, path) == f"{path}:3: field 5 is 'x', not a number"
    path = write(tmp_path, "run.trec", "q1 Q0 d1 1 1 t\r\n\r\nq1 Q0 d2 2 1_0 t\r\n")
    assert error_of(Run.from_trec, path) == f"{path}:3: field 5 is '1_0', not a number"
    path = write(tmp_path, "qrels.txt", b"q1 0 d1 1\rq1 0 d2 0\r\nq1 0 d\xe9 1\r")
    assert error_of(Qrels.from_trec, path) == f"{path}:3: not valid UTF-8 (byte 0xe9)"
    path = write(tmp_path, "comments.trec", "# a\r# b\r\r")
    assert error_of(Run.load, path) == f"{path}: empty file (only comments and blank lines)"
    path = write(tmp_path, "late.trec", "# a\rq1 Q0 d1 1 1 t")  # a comment, then content on a CR-ended line
    assert Run.load(path).to_dict() == {"q1": {"d1": 1.0}}


def test_run_tag_is_the_last_lines_tag(tmp_path, reader):
    path = write(tmp_path, "run.trec", "q1 Q0 d1 1 3 first\nq1 Q0 d2 2 2 middle\r\nq2 Q0 d3 1 1 last\n# end\n")
    assert Run.from_trec(path).tag == "last"  # what trec_eval prints as runid


# ----- streams -------------------------------------------------------------------------------------------------------

QRELS = "q1 0 d1 1\nq1 0 d2 1\nq2 0 d3 1\n"
RUN = "q1 Q0 d1 1 3 t\nq1 Q0 d9 2 2 t\nq1 Q0 d2 3 1 t\nq2 Q0 d3 1 1 t\n"


def _fifo(tmp_path, name: str, content: str) -> tuple[str, threading.Thread]:
    path = str(tmp_path / name)
    os.mkfifo(path)

    def feed() -> None:
        with open(path, "w") as out:
            out.write(content)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    return path, writer


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_reading_a_fifo(tmp_path, reader):
    for load, content, expected in (
        (Qrels.load, QRELS, {"q1": {"d1": 1, "d2": 1}, "q2": {"d3": 1}}),
        (Run.load, RUN, {"q1": {"d1": 3.0, "d9": 2.0, "d2": 1.0}, "q2": {"d3": 1.0}}),
        (Run.load, '{"qid": "q", "docno": "a", "score": 1}\n', {"q": {"a": 1.0}}),
        (Qrels.from_trec, QRELS, {"q1": {"d1": 1, "d2": 1}, "q2": {"d3": 1}}),
    ):
        path, writer = _fifo(tmp_path, f"fifo-{time.monotonic_ns()}", content)
        assert load(path).to_dict() == expected
        writer.join(5)
    path, writer = _fifo(tmp_path, "run-fifo", RUN)
    qrels = Qrels.from_dict({"q1": {"d1": 1, "d2": 1}, "q2": {"d3": 1}})
    report = evaluate(qrels, Run.load(path), ["P@2", "recall@3"])
    assert report.values("run-fifo", "P@2").to_dict() == {"q1": 0.5, "q2": 0.5}
    assert report.values("run-fifo", "recall@3").to_dict() == {"q1": 1.0, "q2": 1.0}


@pytest.mark.skipif(sys.platform == "win32", reason="/dev/stdin")
def test_cli_reads_the_run_from_stdin(tmp_path):
    qrels = write(tmp_path, "qrels.txt", QRELS)
    cli = str(ROOT / ".venv" / "bin" / "rag-eval")
    command = [cli] if os.path.exists(cli) else [sys.executable, "-m", "rag_eval.cli"]
    done = subprocess.run(
        [*command, "evaluate", str(qrels), "/dev/stdin", "-m", "P@5", "-m", "recall@2", "--format", "json"],
        input=RUN.replace("\n", "\r"),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    means = {row["metric"]: (row["mean"], row["n"]) for row in json.loads(done.stdout)["summary"]}
    # q1: d1, d2 relevant among 3 results (P@5 = 2/5), recall@2 = 1/2; q2: 1/5 and 1
    assert means["precision@5"] == (pytest.approx(0.3), 2)
    assert means["recall@2"] == (pytest.approx(0.75), 2)
    done = subprocess.run(
        [*command, "evaluate", str(qrels), "/dev/stdin", "-m", "P@5"],
        input="q1 Q0 d1 1 1_0 t\n",
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == "rag-eval: error: /dev/stdin:1: field 5 is '1_0', not a number"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_without_a_writer_blocks(tmp_path):
    path = str(tmp_path / "lonely")
    os.mkfifo(path)
    result: dict[str, object] = {}
    reading = threading.Thread(target=lambda: result.setdefault("run", Run.load(path)), daemon=True)
    reading.start()
    reading.join(0.5)
    assert reading.is_alive()  # waits for a writer, as cat or trec_eval would
    with open(path, "w") as out:
        out.write("q Q0 d 1 1 t\n")
    reading.join(5)
    assert not reading.is_alive() and result["run"].to_dict() == {"q": {"d": 1.0}}
    assert math.isfinite(result["run"].scores[0])
