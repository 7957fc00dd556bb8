"""Qrels: every loader, transparent gzip, ids kept as strings, errors that name the file and line, round trips."""

from __future__ import annotations

import gzip
import hashlib
import json
import warnings

import numpy as np
import pandas as pd
import pytest

import rag_eval
from rag_eval import InputError, Qrels

# Numeric-looking ids with leading zeros, the same id used as a query and as a doc, a negative grade, a grade 0,
# and queries interleaved in the file.
EXPECTED = {"00123": {"5": 2, "d-7": 0, "007": 1}, "5": {"00123": 1, "x": -1}}
ROWS = [("00123", "5", 2), ("00123", "d-7", 0), ("5", "00123", 1), ("00123", "007", 1), ("5", "x", -1)]

TREC_TEXT = "".join(f"{q} 0 {d} {g}\n" for q, d, g in ROWS)
BEIR_TEXT = "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in ROWS)
JSONL_KEYS = {
    "ours": ("query_id", "doc_id", "grade"),
    "pyterrier": ("qid", "docno", "label"),
    "ir_measures": ("query_id", "doc_id", "relevance"),
}


def jsonl_text(keys: tuple[str, str, str]) -> str:
    return "".join(json.dumps(dict(zip(keys, row))) + "\n" for row in ROWS)


def write(tmp_path, name: str, content: str | bytes):
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return path


def gzipped(path):
    out = path.with_name(path.name + ".gz")
    out.write_bytes(gzip.compress(path.read_bytes()))
    return out


def assert_ids_are_str(qrels: Qrels) -> None:
    for qid, judged in qrels.to_dict().items():
        assert type(qid) is str
        assert all(type(d) is str for d in judged)
        assert all(type(g) is int for g in judged.values())


# ----- reading files ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(TREC_TEXT, id="single-spaces"),
        pytest.param(TREC_TEXT.replace(" ", "\t"), id="tabs"),
        pytest.param("".join(f"{q}  \t0   {d}\t \t{g}\n" for q, d, g in ROWS), id="mixed-whitespace"),
        pytest.param("\n" + TREC_TEXT.replace("\n", "\r\n") + "\n\n", id="crlf-and-blank-lines"),
    ],
)
def test_from_trec_reads_grades_and_keeps_numeric_ids_as_strings(tmp_path, text):
    qrels = Qrels.from_trec(write(tmp_path, "qrels.txt", text))
    assert qrels.to_dict() == EXPECTED
    assert qrels.query_ids == ("00123", "5")
    assert len(qrels) == 2
    assert qrels["5"]["x"] == -1
    assert qrels["00123"]["007"] == 1
    assert "123" not in qrels and "00123" in qrels
    assert_ids_are_str(qrels)


@pytest.mark.parametrize("sep", [" ", "\t", " \t "], ids=["spaces", "tabs", "mixed"])
def test_only_ascii_whitespace_separates_fields(tmp_path, sep):
    # trec_eval splits on ASCII whitespace: a no-break space or a Unicode line separator is part of an id
    text = sep.join(["q\u00a01", "0", "d\u20281", "1"]) + "\n" + sep.join(["q\u00a01", "0", "d2", "0"]) + "\n"
    qrels = Qrels.from_trec(write(tmp_path, "qrels.txt", text))
    assert qrels.to_dict() == {"q\u00a01": {"d\u20281": 1, "d2": 0}}


def test_from_trec_accepts_an_integral_float_grade_like_trec_eval(tmp_path):
    qrels = Qrels.from_trec(write(tmp_path, "qrels.txt", "q1 0 d1 1.0\nq1 0 d2 0\n"))
    assert qrels.to_dict() == {"q1": {"d1": 1, "d2": 0}}
    assert_ids_are_str(qrels)


def test_from_beir_reads_a_tsv_with_header(tmp_path):
    qrels = Qrels.from_beir(write(tmp_path, "test.tsv", BEIR_TEXT))
    assert qrels.to_dict() == EXPECTED
    assert qrels.query_ids == ("00123", "5")
    assert_ids_are_str(qrels)


def test_from_beir_finds_columns_by_header_name_not_position(tmp_path):
    text = "score\tcorpus-id\tquery-id\n" + "".join(f"{g}\t{d}\t{q}\n" for q, d, g in ROWS)
    assert Qrels.from_beir(write(tmp_path, "test.tsv", text)).to_dict() == EXPECTED


@pytest.mark.parametrize("naming", sorted(JSONL_KEYS))
def test_from_jsonl_reads_each_key_naming(tmp_path, naming):
    qrels = Qrels.from_jsonl(write(tmp_path, "qrels.jsonl", jsonl_text(JSONL_KEYS[naming])))
    assert qrels.to_dict() == EXPECTED
    assert qrels.query_ids == ("00123", "5")
    assert_ids_are_str(qrels)


def test_from_jsonl_int_query_ids_convert_with_one_warning(tmp_path):
    text = '{"query_id": 7, "doc_id": "d1", "grade": 1}\n{"query_id": 8, "doc_id": "d2", "grade": 0}\n'
    path = write(tmp_path, "qrels.jsonl", text)
    with pytest.warns(UserWarning) as caught:
        qrels = Qrels.from_jsonl(path)
    assert len(caught) == 1
    assert qrels.to_dict() == {"7": {"d1": 1}, "8": {"d2": 0}}


@pytest.mark.parametrize(
    "name, text, reader",
    [
        ("qrels.txt", TREC_TEXT, Qrels.from_trec),
        ("qrels.tsv", BEIR_TEXT, Qrels.from_beir),
        ("qrels.jsonl", jsonl_text(JSONL_KEYS["pyterrier"]), Qrels.from_jsonl),
    ],
)
def test_gz_is_read_transparently(tmp_path, name, text, reader):
    plain = write(tmp_path, name, text)
    packed = gzipped(plain)
    from_plain, from_gz = reader(plain), reader(packed)
    assert from_gz == from_plain
    assert from_gz.to_dict() == EXPECTED
    assert from_gz.query_ids == from_plain.query_ids
    assert Qrels.load(packed).to_dict() == EXPECTED
    # the card records the file as stored: the hash is of the compressed bytes
    assert from_gz.source.sha256 == hashlib.sha256(packed.read_bytes()).hexdigest()
    assert from_plain.source.sha256 == hashlib.sha256(plain.read_bytes()).hexdigest()
    assert from_gz.source.path == str(packed)


@pytest.mark.parametrize(
    "name, text",
    [
        ("a.txt", TREC_TEXT),
        ("b.tsv", BEIR_TEXT),
        ("c.jsonl", jsonl_text(JSONL_KEYS["ours"])),
        ("d.jsonl", jsonl_text(JSONL_KEYS["pyterrier"])),
        ("e.jsonl", jsonl_text(JSONL_KEYS["ir_measures"])),
        ("no_extension", BEIR_TEXT),
    ],
)
def test_load_detects_the_format_from_the_content(tmp_path, name, text):
    qrels = Qrels.load(write(tmp_path, name, text))
    assert qrels.to_dict() == EXPECTED
    assert_ids_are_str(qrels)


# ----- in-memory inputs ---------------------------------------------------------------------------------------


def test_from_dict_copies_and_keeps_string_ids():
    source = {"00123": {"5": 2, "d-7": 0, "007": 1}, "5": {"00123": 1, "x": -1}}
    qrels = Qrels.from_dict(source)
    assert qrels.to_dict() == EXPECTED
    source["5"]["x"] = 3  # the caller's dict is not shared
    assert qrels["5"]["x"] == -1
    assert Qrels(EXPECTED) == qrels


def test_qrels_views_are_read_only_and_to_dict_is_a_copy():
    qrels = Qrels.from_dict(EXPECTED)
    with pytest.raises(TypeError):
        qrels["5"]["x"] = 3  # type: ignore[index]
    copy = qrels.to_dict()
    copy["5"]["x"] = 3
    copy["new"] = {}
    assert qrels.to_dict() == EXPECTED


@pytest.mark.parametrize(
    "columns",
    [("query_id", "doc_id", "grade"), ("qid", "docno", "label"), ("query_id", "doc_id", "relevance")],
    ids=["ours", "pyterrier", "ir_measures"],
)
def test_from_frame_reads_each_column_naming(columns):
    frame = pd.DataFrame(ROWS, columns=list(columns))
    qrels = Qrels.from_frame(frame)
    assert qrels.to_dict() == EXPECTED
    assert_ids_are_str(qrels)


INT_ID_CASES = {
    "query-ids": ({7: {"d1": 1, "d2": 0}, 8: {"d1": 2}}, {"7": {"d1": 1, "d2": 0}, "8": {"d1": 2}}),
    "doc-ids": ({"q": {10: 1, 11: 0}}, {"q": {"10": 1, "11": 0}}),
    "both": ({7: {10: 1, 11: 0}, 8: {10: 2}}, {"7": {"10": 1, "11": 0}, "8": {"10": 2}}),
}


@pytest.mark.parametrize("case", sorted(INT_ID_CASES))
def test_int_ids_in_a_dict_convert_with_exactly_one_warning(case):
    given, expected = INT_ID_CASES[case]
    with pytest.warns(UserWarning) as caught:
        qrels = Qrels.from_dict(given)
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert qrels.to_dict() == expected
    assert_ids_are_str(qrels)


@pytest.mark.parametrize("case", sorted(INT_ID_CASES))
def test_int_ids_in_a_frame_convert_with_exactly_one_warning(case):
    given, expected = INT_ID_CASES[case]
    frame = pd.DataFrame(
        [(q, d, g) for q, judged in given.items() for d, g in judged.items()], columns=["qid", "docno", "label"]
    )
    with pytest.warns(UserWarning) as caught:
        qrels = Qrels.from_frame(frame)
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert qrels.to_dict() == expected
    assert_ids_are_str(qrels)


def test_string_ids_in_a_dict_or_frame_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Qrels.from_dict(EXPECTED)
        Qrels.from_frame(pd.DataFrame(ROWS, columns=["query_id", "doc_id", "grade"]))


@pytest.mark.parametrize("bad", [{1.5: {"d": 1}}, {"q": {2.0: 1}}, {"q": {None: 1}}, {b"q": {"d": 1}}])
def test_other_id_types_are_input_errors(bad):
    with pytest.raises(InputError):
        Qrels.from_dict(bad)


@pytest.mark.parametrize("grade", [1.5, "1_0", "1e2", " 1", None, True, float("nan")])
def test_non_integer_grade_in_a_dict_is_an_input_error(grade):
    with pytest.raises(InputError, match="grade"):
        Qrels.from_dict({"q": {"d": grade}})


def test_non_integer_grade_in_a_frame_is_an_input_error():
    frame = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "grade": [1.0, 1.5]})
    with pytest.raises(InputError, match="row 1"):
        Qrels.from_frame(frame)


def test_frame_without_a_grade_column_is_an_input_error():
    with pytest.raises(InputError, match="grade"):
        Qrels.from_frame(pd.DataFrame({"query_id": ["q"], "doc_id": ["a"]}))


# ----- bad files: an InputError naming the file and the line ------------------------------------------------


def test_missing_file_is_an_input_error_naming_it(tmp_path):
    path = tmp_path / "nope.txt"
    for reader in (Qrels.from_trec, Qrels.from_beir, Qrels.from_jsonl, Qrels.load):
        with pytest.raises(InputError) as info:
            reader(path)
        assert str(path) in str(info.value)


@pytest.mark.parametrize(
    "text, line",
    [
        pytest.param("q1 0 d1 1\nq1 0 d2 1 extra\nq1 0 d3 0\n", 2, id="five-fields"),
        pytest.param("q1 0 d1 1\nq1 0 d2 1\nq1 d3 0\n", 3, id="three-fields-late"),
        pytest.param("q1 d1 1\nq1 0 d2 1\n", 1, id="three-fields-first"),
        pytest.param("q1\t0\td1\t1\nq1\t0\td2\n", 2, id="three-fields-tabs"),
        pytest.param("q1 0 d1 1\nq2\t0 d2 1 7\n", 2, id="five-fields-one-tab"),
        pytest.param("q1 0 d1 1\n\n\nq1 0 d2\n", 4, id="after-blank-lines"),
    ],
)
def test_trec_wrong_field_count_names_file_and_line(tmp_path, text, line):
    path = write(tmp_path, "qrels.txt", text)
    with pytest.raises(InputError) as info:
        Qrels.from_trec(path)
    assert f"{path}:{line}:" in str(info.value)
    assert info.value.line == line


@pytest.mark.parametrize("grade", ["x", "1.5", "", "nan", "1e400"])
def test_trec_non_integer_grade_names_file_and_line(tmp_path, grade):
    path = write(tmp_path, "qrels.txt", f"q1 0 d1 1\nq1 0 d2 0\nq1 0 d3 {grade} \n".replace(" \n", "\n"))
    with pytest.raises(InputError) as info:
        Qrels.from_trec(path)
    assert f"{path}:3:" in str(info.value)


@pytest.mark.parametrize("grade", ["x", "1.5"])
def test_beir_non_integer_grade_names_file_and_line(tmp_path, grade):
    path = write(tmp_path, "qrels.tsv", f"query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t{grade}\n")
    with pytest.raises(InputError) as info:
        Qrels.from_beir(path)
    assert f"{path}:3:" in str(info.value)


def test_beir_wrong_field_count_names_file_and_line(tmp_path):
    path = write(tmp_path, "qrels.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\n")
    with pytest.raises(InputError) as info:
        Qrels.from_beir(path)
    assert f"{path}:3:" in str(info.value)


@pytest.mark.parametrize(
    "line2",
    [
        '{"query_id": "q1", "doc_id": "d2", "grade": 1.5}',
        '{"query_id": "q1", "doc_id": "d2", "grade": "x"}',
        '{"query_id": "q1", "doc_id": "d2"}',
        '{"query_id": "q1", "doc_id": "d2", "grade": 1',
        '["q1", "d2", 1]',
        '{"query_id": "q1", "doc_id": "d2", "grade": true}',
    ],
    ids=["float-grade", "str-grade", "no-grade", "bad-json", "not-an-object", "bool-grade"],
)
def test_jsonl_bad_line_names_file_and_line(tmp_path, line2):
    path = write(tmp_path, "qrels.jsonl", '{"query_id": "q1", "doc_id": "d1", "grade": 1}\n' + line2 + "\n")
    with pytest.raises(InputError) as info:
        Qrels.from_jsonl(path)
    assert f"{path}:2:" in str(info.value)


@pytest.mark.parametrize("content", ["", "\n  \n\t\n"], ids=["zero-bytes", "whitespace-only"])
def test_empty_file_is_an_input_error_naming_it(tmp_path, content):
    path = write(tmp_path, "qrels.txt", content)
    for reader in (Qrels.from_trec, Qrels.from_beir, Qrels.from_jsonl, Qrels.load):
        with pytest.raises(InputError) as info:
            reader(path)
        assert str(path) in str(info.value)
        assert "empty" in str(info.value)


def test_empty_gz_file_is_an_input_error(tmp_path):
    path = write(tmp_path, "qrels.txt.gz", gzip.compress(b""))
    with pytest.raises(InputError, match="empty"):
        Qrels.from_trec(path)


def test_non_utf8_bytes_name_file_and_line(tmp_path):
    path = write(tmp_path, "qrels.txt", b"q1 0 d1 1\nq1 0 d2 0\nq1 0 d\xff 1\n")
    with pytest.raises(InputError) as info:
        Qrels.from_trec(path)
    assert f"{path}:3:" in str(info.value)
    assert "UTF-8" in str(info.value)


def test_non_utf8_bytes_inside_a_gz_name_file_and_line(tmp_path):
    path = write(tmp_path, "qrels.txt.gz", gzip.compress(b"q1 0 d1 1\n\xff 0 d2 0\n"))
    with pytest.raises(InputError) as info:
        Qrels.load(path)
    assert f"{path}:2:" in str(info.value)


def test_corrupt_gz_is_an_input_error(tmp_path):
    path = write(tmp_path, "qrels.txt.gz", gzip.compress(TREC_TEXT.encode())[:-10])
    with pytest.raises(InputError) as info:
        Qrels.from_trec(path)
    assert str(path) in str(info.value)


# ----- duplicates ---------------------------------------------------------------------------------------------


DUPLICATED = "q1 0 d1 1\nq1 0 d2 2\nq1 0 d1 0\nq1 0 d3 0\nq2 0 d1 1\nq1 0 d2 1\n"


def test_duplicate_judgement_warns_once_and_keeps_the_first(tmp_path):
    path = write(tmp_path, "qrels.txt", DUPLICATED)
    with pytest.warns(UserWarning, match="duplicate") as caught:
        qrels = Qrels.from_trec(path)
    assert len(caught) == 1
    assert str(path) in str(caught[0].message)
    assert qrels.to_dict() == {"q1": {"d1": 1, "d2": 2, "d3": 0}, "q2": {"d1": 1}}
    assert qrels.num_judgements == 4


def test_duplicate_judgement_keeps_the_first_position(tmp_path):
    with pytest.warns(UserWarning, match="duplicate"):
        qrels = Qrels.from_trec(write(tmp_path, "qrels.txt", DUPLICATED))
    frame = qrels.to_frame()
    assert frame["doc_id"].tolist() == ["d1", "d2", "d3", "d1"]
    assert frame["grade"].tolist() == [1, 2, 0, 1]


def test_duplicate_judgement_in_a_frame_warns_once_and_keeps_the_first():
    frame = pd.DataFrame({"query_id": ["q", "q", "q"], "doc_id": ["a", "b", "a"], "grade": [2, 0, 1]})
    with pytest.warns(UserWarning) as caught:
        qrels = Qrels.from_frame(frame)
    assert len(caught) == 1
    assert qrels.to_dict() == {"q": {"a": 2, "b": 0}}


# ----- round trips --------------------------------------------------------------------------------------------


def test_to_dict_round_trip():
    qrels = Qrels.from_dict(EXPECTED)
    again = Qrels.from_dict(qrels.to_dict())
    assert again == qrels
    assert again.query_ids == qrels.query_ids


def test_to_frame_columns_and_round_trip():
    qrels = Qrels.from_dict(EXPECTED)
    frame = qrels.to_frame()
    assert list(frame.columns) == ["query_id", "doc_id", "grade"]
    assert list(frame.itertuples(index=False, name=None)) == [
        ("00123", "5", 2),
        ("00123", "d-7", 0),
        ("00123", "007", 1),
        ("5", "00123", 1),
        ("5", "x", -1),
    ]
    assert frame["grade"].dtype.kind == "i"
    assert Qrels.from_frame(frame) == qrels


def test_to_trec_round_trip_keeps_ids_exactly(tmp_path):
    qrels = Qrels.from_trec(write(tmp_path, "in.txt", TREC_TEXT))
    out = tmp_path / "out.txt"
    qrels.to_trec(out)
    assert out.read_text().splitlines() == [
        "00123 0 5 2",
        "00123 0 d-7 0",
        "00123 0 007 1",
        "5 0 00123 1",
        "5 0 x -1",
    ]
    again = Qrels.from_trec(out)
    assert again == qrels
    assert again.to_dict() == EXPECTED
    assert again.query_ids == qrels.query_ids


def test_in_memory_qrels_have_no_source():
    assert Qrels.from_dict(EXPECTED).source is None
    assert Qrels.from_frame(pd.DataFrame(ROWS, columns=["query_id", "doc_id", "grade"])).source is None


def test_qrels_is_exported_once():
    assert rag_eval.Qrels is Qrels


def test_rows_of_the_qrels_own_order_a_reordering_and_the_same_ids_again():
    qrels = Qrels.from_dict({"q1": {"d": 1}, "q2": {"d": 0}, "q3": {"d": 2}})
    assert qrels.rows_of(["q1", "q2", "q3"]).tolist() == [0, 1, 2]  # the qrels' own order
    asked = ("q3", "x", "q1", "q3")
    assert qrels.rows_of(asked).tolist() == [2, -1, 0, 2]
    assert qrels.rows_of(list(asked)).tolist() == [2, -1, 0, 2]  # asked again: the same rows
    assert qrels.rows_of(["q3", "x", "q1", "q2"]).tolist() == [2, -1, 0, 1]  # equal length, other ids
    assert qrels.rows_of(iter(["q2"])).tolist() == [1] and qrels.rows_of([]).tolist() == []


def test_an_evaluation_reads_the_columns_and_makes_no_per_query_dict(tmp_path):
    """Qrels keep columns: the per-query dicts are made only where asked (all at once, in one pass), and hold what
    the columns hold, from dicts, from a file (a doc judged twice kept once) and after a pickle."""
    import pickle

    from rag_eval import _accel

    judged = {"q1": {"a": 2, "b": 0, "c": 1}, "q2": {"b": 1}, "q3": {}}
    path = tmp_path / "judged.qrels"
    path.write_text("q1 0 a 2\nq2 0 b 1\nq1 0 b 0\nq1 0 c 1\nq1 0 a 1\nq3 0 z -1\n")
    run = rag_eval.Run.from_scores({"q1": {"a": 1.0, "c": 3.0, "x": 2.0}, "q2": {"b": 0.5, "a": 0.1}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from_file = Qrels.from_trec(path)
        given = Qrels.from_dict(judged)
        reports = [rag_eval.evaluate(q, run, ["ndcg@3", "P@2"]) for q in (given, from_file)]
    assert "_judgements" not in given.__dict__  # from dicts: columns only, in C or in its twin
    assert ("_judgements" in from_file.__dict__) == (_accel.speedups is None)  # the twin groups files into dicts
    values = [r.per_query.set_index(["query_id", "metric"])["value"] for r in reports]
    ndcg = values[0]["q1", "ndcg@3"]
    assert ndcg == pytest.approx((1 / np.log2(2) + 3 / np.log2(4)) / (3 + 1 / np.log2(3)))  # c (1), x, a (2)
    assert values[0]["q2", "precision@2"] == 0.5 and values[0]["q3", "ndcg@3"] == 0.0
    assert values[0].to_dict() == values[1].to_dict()  # the same judgements, from dicts and from the file
    assert given.to_dict() == judged and "_judgements" in given.__dict__  # made where asked, all at once
    assert dict(given["q1"]) == judged["q1"] and list(given["q1"]) == ["a", "b", "c"] and dict(given["q3"]) == {}
    assert from_file.to_dict() == {"q1": {"a": 2, "b": 0, "c": 1}, "q2": {"b": 1}, "q3": {"z": -1}}
    assert len(given) == 3 and list(given) == ["q1", "q2", "q3"] and "q3" in given and "q4" not in given
    assert given.num_judgements == 4 and from_file.num_judgements == 5
    again = pickle.loads(pickle.dumps(Qrels.from_dict(judged)))
    assert again == given and again.columns[0] == given.columns[0]
    assert again.doc_column.tolist() == given.doc_column.tolist()
