# ruff: noqa: UP031
"""Issue 27, classes 7 and 8: reader fields outside their range, and near-miss ids.

Class 7: every field a reader takes from a file goes through one checked conversion (``rag_eval.data.fields``),
whose error names the file and line (or span, or row) and the field, never an OverflowError or a traceback.
Class 8: ids of two inputs that differ only in surrounding whitespace, leading zeros, Unicode normalisation or
case are kept distinct and announced, with the kind of difference (``rag_eval.data.near_miss``), at every join.
"""

from __future__ import annotations

import io
import json
import unicodedata
import warnings
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pandas as pd
import pytest

from rag_eval import InputError, Qrels, QuerySet, Run, evaluate
from rag_eval.cli import main
from rag_eval.data import near_miss as _near_miss
from rag_eval.data.fields import At, count, integer, number, time, unix_nanos
from rag_eval.data.spans import SpanLabels
from rag_eval.errors import NearMissIds
from rag_eval.ground_truth import JudgementLog, merge

NFD_CAFE = unicodedata.normalize("NFD", "café")
NFC_CAFE = unicodedata.normalize("NFC", "café")


def _write(path, text: str | bytes):
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def _error(call, *args, **kwargs) -> str:
    with pytest.raises(InputError) as info:
        call(*args, **kwargs)
    return str(info.value)


def _cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


def _near(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, NearMissIds)]


# ===== class 7: reader fields outside their range ================================================================


@pytest.mark.parametrize(
    "stamp, problem",
    [
        ("0001-01-01T00:00:00+01:00", "is out of range (times must lie within 0001-01-01 and 9999-12-31 UTC)"),
        ("9999-12-31T23:59:59-01:00", "is out of range (times must lie within 0001-01-01 and 9999-12-31 UTC)"),
        ("99999999999999", "is out of range (Unix seconds expected)"),
        ("-99999999999", "is out of range (Unix seconds expected)"),
        ("9" * 500, "is out of range (Unix seconds expected)"),
        ("nan", "is neither ISO 8601 nor Unix seconds"),
        ("1e400", "is neither ISO 8601 nor Unix seconds"),
    ],
)
def test_a_log_time_outside_years_1_to_9999_is_an_error_naming_file_line_and_field(tmp_path, stamp, problem):
    path = _write(tmp_path / "log.csv", f"query,ts\nfine,2026-03-02T09:00:00Z\nhello,{stamp}\n")
    message = _error(QuerySet.from_log, path, timestamp="ts")
    assert message.startswith(f"{path}:3: timestamp ")
    assert problem in message


def test_times_at_the_edges_of_the_range_are_read_as_given(tmp_path):
    path = _write(
        tmp_path / "log.csv",
        "query,ts\nearly,0001-01-01T00:00:00Z\nlate,9999-12-31T23:59:59+00:00\nlocal,0001-01-01T01:00:00+01:00\n",
    )
    seen = {
        p.columns.get("query") or q: p.first_seen for q, p in QuerySet.from_log(path, timestamp="ts").provenance.items()
    }
    assert sorted(seen.values()) == ["0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"]


def test_cli_queries_sample_on_a_year_1_time_is_one_line_and_status_2(tmp_path):
    path = _write(tmp_path / "log.csv", "query,ts\nhello,0001-01-01T00:00:00+01:00\n")
    status, out, err = _cli(
        "queries", "sample", path, "--timestamp", "ts", "-n", "1", "--no-near-duplicates", "-o", tmp_path / "q.jsonl"
    )
    assert status == 2 and out == ""
    assert err == (
        f"rag-eval: error: {path}:2: timestamp '0001-01-01T00:00:00+01:00' is out of range (times must lie within "
        "0001-01-01 and 9999-12-31 UTC)\n"
    )
    assert not (tmp_path / "q.jsonl").exists()


@pytest.mark.parametrize(
    "value, problem",
    [
        ("1.5e30", "timestamp 1.5e+30 is out of range (Unix seconds expected)"),
        ("-1e20", "timestamp -1e+20 is out of range (Unix seconds expected)"),
        ("NaN", "timestamp is NaN, not a time"),
        ("Infinity", "timestamp inf is out of range (Unix seconds expected)"),
        ("true", "timestamp True is not a time"),
        ("[1]", "timestamp [1] is not a time"),
    ],
)
def test_a_json_lines_time_out_of_range_names_file_and_line(tmp_path, value, problem):
    path = _write(tmp_path / "log.jsonl", '{"query": "fine", "ts": 0}\n{"query": "hello", "ts": %s}\n' % value)
    assert _error(QuerySet.from_log, path, timestamp="ts").startswith(f"{path}:2: {problem}")


@pytest.mark.parametrize(
    "value, problem",
    [
        ("1.5e30", "count 1.5e+30 is out of range (0 or more, within int64)"),
        (str(2**63), f"count {2**63} is out of range (0 or more, within int64)"),
        ('"%s"' % ("9" * 5000), f"count '{'9' * 39}...{'9' * 9}' (5002 characters) is out of range"),
        ("-1", "count -1 is negative"),
        ("1.5", "count 1.5 is not an integer of 0 or more"),
        ("NaN", "count nan is not an integer of 0 or more"),
        ("true", "count True is not an integer"),
        ('"\uff11\uff12"', "count '１２' is not an integer of 0 or more"),  # full-width digits: not ASCII
        ('"\u0661"', "count '١' is not an integer of 0 or more"),  # Arabic-Indic one
    ],
)
def test_a_bad_count_names_file_and_line(tmp_path, value, problem):
    path = _write(tmp_path / "log.jsonl", '{"query": "fine", "n": 2}\n{"query": "hello", "n": %s}\n' % value)
    assert _error(QuerySet.from_log, path, count="n").startswith(f"{path}:2: {problem}")


def test_good_counts_are_read_as_integers(tmp_path):
    path = _write(
        tmp_path / "log.jsonl",
        '{"query": "a", "n": 3}\n{"query": "a", "n": 2.0}\n{"query": "a", "n": "4"}\n{"query": "b", "n": 0}\n',
    )
    queries = QuerySet.from_log(path, count="n")
    assert list(queries.frequencies.values()) == [9] and queries.card.traffic == 9


def _otlp(tmp_path, start, attributes=()):
    attrs = [
        {"key": "openinference.span.kind", "value": {"stringValue": "RETRIEVER"}},
        {"key": "input.value", "value": {"stringValue": "hello"}},
        *attributes,
    ]
    span = {"name": "retrieve", "attributes": attrs}
    if start is not ...:
        span["startTimeUnixNano"] = start
    request = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    empty = {"resourceSpans": []}  # a first line of its own: the file is JSON lines, one request a line
    return _write(tmp_path / "traces.jsonl", json.dumps(empty) + "\n" + json.dumps(request) + "\n")


SPAN = "span resourceSpans[0].scopeSpans[0].spans[0]"


@pytest.mark.parametrize(
    "start, problem",
    [
        (1.5e30, "startTimeUnixNano 1.5e+30 is out of range (an unsigned 64-bit count of nanoseconds)"),
        ("1" * 40, "startTimeUnixNano '1111111111111111111111111111111111111111' is out of range"),
        ("9" * 5000, f"startTimeUnixNano '{'9' * 39}...{'9' * 9}' (5002 characters) is out of range"),
        (2**64, f"startTimeUnixNano {2**64} is out of range (an unsigned 64-bit count of nanoseconds)"),
        (-5, "startTimeUnixNano -5 is out of range (an unsigned 64-bit count of nanoseconds)"),
        (1.5, "startTimeUnixNano 1.5 is not an integer"),
        (True, "startTimeUnixNano True is not an integer"),
        ("soon", "startTimeUnixNano 'soon' is not an integer"),
    ],
)
def test_an_otlp_start_time_out_of_range_names_file_line_and_span(tmp_path, start, problem):
    path = _otlp(tmp_path, start)
    assert _error(QuerySet.from_log, path).startswith(f"{path}:2: {SPAN}: {problem}")


def test_otlp_start_times_in_range_are_read(tmp_path):
    queries = QuerySet.from_log(_otlp(tmp_path, "1772442000000000000"))
    assert [p.first_seen for p in queries.provenance.values()] == ["2026-03-02T09:00:00Z"]
    queries = QuerySet.from_log(_otlp(tmp_path, 2**64 - 1))  # the largest: 2554-07-21
    assert [p.first_seen[:10] for p in queries.provenance.values()] == ["2554-07-21"]
    for unset in (0, "0", ...):  # OTLP: 0 is unset
        assert [p.first_seen for p in QuerySet.from_log(_otlp(tmp_path, unset)).provenance.values()] == [None]


@pytest.mark.parametrize(
    "value, problem",
    [
        ("9" * 30, "attribute 'n': intValue '999999999999999999999999999999' is out of range"),
        (True, "attribute 'n': intValue True is not an integer"),
        (1.5, "attribute 'n': intValue 1.5 is not an integer"),
        ("\uff17", "attribute 'n': intValue '７' is not an integer"),
    ],
)
def test_an_otlp_int_attribute_out_of_int64_names_the_span(tmp_path, value, problem):
    path = _otlp(tmp_path, "1", [{"key": "n", "value": {"intValue": value}}])
    assert _error(QuerySet.from_log, path).startswith(f"{path}:2: {SPAN}: {problem}")


def test_a_number_of_thousands_of_digits_in_json_names_file_and_line(tmp_path):
    huge = "9" * 5000  # Python's json refuses ints of over 4300 digits with a ValueError of its own
    log = _write(tmp_path / "log.jsonl", '{"query": "fine"}\n{"query": "hello", "n": %s}\n' % huge)
    assert (
        _error(QuerySet.from_log, log) == f"{log}:2: a number of more than 4300 digits (out of range for every field)"
    )
    qrels = _write(tmp_path / "qrels.jsonl", '{"query_id": "q", "doc_id": "d", "grade": %s}\n' % huge)
    assert _error(Qrels.from_jsonl, qrels).startswith(f"{qrels}:1: a number of more than 4300 digits")
    judged = _write(
        tmp_path / "log.judgements.jsonl",
        '{"query_id": "q", "doc_id": "d", "grade": %s, "assessor": "a", "time": "2026-01-01T00:00:00Z"}\n' % huge,
    )
    assert _error(JudgementLog.load, judged).startswith(f"{judged}:1: a number of more than 4300 digits")


@pytest.mark.parametrize("reader_kind", ["trec", "beir", "jsonl-text", "frame-text", "frame-int"])
def test_a_grade_of_thousands_of_digits_is_out_of_range_not_a_traceback(tmp_path, reader, reader_kind):
    huge = "9" * 5000
    shown = "99999999999999999999...99999 (5000 characters)"
    if reader_kind == "trec":
        path = _write(tmp_path / "qrels.txt", f"q1 0 d0 1\nq1 0 d1 {huge}\n")
        assert _error(Qrels.from_trec, path) == (
            f"{path}:2: grade {shown} is out of range (grades must lie within +-536870912)"
        )
    elif reader_kind == "beir":
        path = _write(tmp_path / "qrels.tsv", f"query-id\tcorpus-id\tscore\nq1\td1\t{huge}\n")
        assert _error(Qrels.from_beir, path) == (
            f"{path}:2: grade {shown} is out of range (grades must lie within +-536870912)"
        )
    elif reader_kind == "jsonl-text":
        path = _write(tmp_path / "qrels.jsonl", '{"query_id": "q1", "doc_id": "d1", "grade": "%s"}\n' % huge)
        assert _error(Qrels.from_jsonl, path).startswith(f"{path}:1: grade {shown} is out of range")
    else:
        grade = huge if reader_kind == "frame-text" else np.array([10**400], dtype=object)
        frame = pd.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "grade": grade})
        message = _error(Qrels.from_frame, frame)
        assert message.startswith("DataFrame: row 0: grade ") and "is out of range" in message


@pytest.mark.parametrize(
    "field, value, problem",
    [
        ("start", "1.5e30", "start 1.5e+30 is out of range"),
        ("start", str(2**63), f"start {2**63} is out of range"),
        ("start", "true", "start True is not an integer"),
        ("start", '"3"', "start '3' is not an integer"),
        ("end", "NaN", "end nan is not an integer"),
        ("start", "-1", "start -1 is negative"),
    ],
)
def test_span_offsets_out_of_range_name_file_and_line(tmp_path, field, value, problem):
    record = {"query_id": "q", "doc_id": "d", "start": 0, "end": 3, "grade": 1}
    line = json.dumps(record).replace(f'"{field}": {record[field]}', f'"{field}": {value}')
    path = _write(tmp_path / "labels.jsonl", json.dumps({**record, "doc_id": "ok"}) + "\n" + line + "\n")
    message = _error(SpanLabels.from_jsonl, path)
    assert message.startswith(f"{path}:2: ") and problem in message


@pytest.mark.parametrize(
    "changes, problem",
    [
        ({"time": "0001-01-01T00:00:00+01:00"}, "time '0001-01-01T00:00:00+01:00' is out of range"),
        ({"time": "9999-12-31T23:30:00-01:00"}, "time '9999-12-31T23:30:00-01:00' is out of range"),
        ({"time": "1772442000"}, "time '1772442000' is not an ISO 8601 time"),
        (
            {"scale": [0, 2**40], "grade": 2**35},
            "scale [0, 1099511627776] is out of range (grades must lie within +-536870912)",
        ),
        ({"scale": [-(2**29), 3]}, "scale [-536870912, 3] is out of range"),
    ],
)
def test_a_judgement_log_field_out_of_range_names_file_and_line(tmp_path, changes, problem):
    good = {"query_id": "q", "doc_id": "d", "grade": 1, "assessor": "a", "time": "2026-01-01T00:00:00Z"}
    path = _write(tmp_path / "log.jsonl", json.dumps(good) + "\n" + json.dumps({**good, **changes}) + "\n")
    message = _error(JudgementLog.load, path)
    assert message.startswith(f"{path}:2: ") and problem in message


def test_a_saved_query_set_with_fields_out_of_range_names_file_and_line(tmp_path):
    log = _write(tmp_path / "log.csv", "query,ts\nhello,2026-03-02T09:00:00Z\n")
    saved = tmp_path / "set.jsonl"
    QuerySet.from_log(log, timestamp="ts").save(saved)
    header, line = saved.read_text().splitlines()
    assert QuerySet.load(saved) == QuerySet.from_log(log, timestamp="ts")
    for key, value, problem in [
        ("first_seen", "0001-01-01T00:00:00+01:00", "first_seen '0001-01-01T00:00:00+01:00' is out of range"),
        ("last_seen", "yesterday", "last_seen 'yesterday' is not an ISO 8601 time"),
        ("frequency", 2**70, f"frequency {2**70} is out of range (1 or more, within int64)"),
    ]:
        record = json.loads(line)
        record[key] = value
        saved.write_text(header + "\n" + json.dumps(record) + "\n")
        qid = record["id"]
        assert _error(QuerySet.load, saved).startswith(f"{saved}:2: query {qid!r}: {problem}")
    card = json.loads(header)
    card["card"]["traffic"] = -3
    saved.write_text(json.dumps(card) + "\n" + line + "\n")
    assert _error(QuerySet.load, saved).startswith(f"{saved}:1: the card: traffic -3 is negative")


def test_a_parquet_timestamp_python_cannot_hold_names_its_row(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    seconds = [1772442000] * 5 + [10**15]  # the sixth: year 31 million
    table = pa.table({"query": [f"q{i}" for i in range(6)], "ts": pa.array(seconds, pa.timestamp("s"))})
    path = tmp_path / "log.parquet"
    pq.write_table(table, path)
    message = _error(QuerySet.from_log, path, timestamp="ts")
    assert message.startswith(f"{path}: row 6: column 'ts' holds a timestamp[") and "Python cannot hold" in message
    aware = pa.table({"query": ["a"], "ts": pa.array([253402300799], pa.timestamp("s", tz="+05:00"))})
    pq.write_table(aware, path)
    assert _error(QuerySet.from_log, path, timestamp="ts").startswith(f"{path}: row 1: column 'ts'")


@pytest.mark.parametrize(
    "convert, value, result",
    [
        (integer, "12", 12),
        (integer, " -3 ", -3),
        (integer, 2.0, 2),
        (integer, np.int64(7), 7),
        (count, "0", 0),
        (number, "1.5", 1.5),
        (number, np.float32(0.5), 0.5),
        (unix_nanos, "1000000000", pd.Timestamp("1970-01-01T00:00:01Z").to_pydatetime()),
    ],
)
def test_checked_conversions_read_good_values(convert, value, result):
    assert convert(value, "f", At("x", 1)) == result


@pytest.mark.parametrize(
    "convert, value, problem",
    [
        (integer, True, "f True is not an integer"),
        (integer, np.bool_(False), "is not an integer"),
        (integer, float("nan"), "f nan is not an integer"),
        (integer, float("inf"), "f inf is not an integer"),
        (integer, 2**63, f"f {2**63} is out of range"),
        (integer, "1_0", "f '1_0' is not an integer"),
        (number, float("nan"), "f is NaN"),
        (number, "-inf", "f '-inf' is not finite"),
        (number, 10**400, "is out of range (too large for a float)"),
        (number, False, "f False is not a number"),
        (time, float("nan"), "f is NaN, not a time"),
        (time, 1e30, "f 1e+30 is out of range (Unix seconds expected)"),
    ],
)
def test_checked_conversions_refuse_naming_file_line_and_field(convert, value, problem):
    with pytest.raises(InputError) as info:
        convert(value, "f", At("data.txt", 4, "span s"))
    assert str(info.value).startswith("data.txt:4: span s: ") and problem in str(info.value)


# ===== class 8: near-miss ids =====================================================================================


QRELS_NEAR = {"2": {"d2": 1}}


@pytest.mark.parametrize(
    "run_id, qrels_id, kind",
    [
        (NFD_CAFE, NFC_CAFE, "Unicode normalisation (NFD vs NFC)"),
        (NFC_CAFE, NFD_CAFE, "Unicode normalisation (NFC vs NFD)"),
        ("D7", "d7", "case"),
        ("STRASSE", "straße", "case"),  # Unicode case folding: ß folds to ss
        ("\ufb01le", "file", "Unicode compatibility forms (NFKC)"),  # the ligature ﬁ
        ("\uff11\uff12", "12", "Unicode compatibility forms (NFKC)"),  # full-width digits
        ("\uff10\uff10\uff17", "7", "Unicode compatibility forms (NFKC) and leading zeros"),
        (" Q1", "q1", "surrounding whitespace and case"),
        ("007", "7", "leading zeros"),
    ],
)
def test_query_ids_that_differ_only_in_normalisation_or_case_are_announced_and_kept_apart(run_id, qrels_id, kind):
    qrels = {qrels_id: {"d1": 1}, **QRELS_NEAR}
    run = Run.from_scores({run_id: {"d1": 1.0}, "2": {"d2": 1.0}})
    with pytest.warns(NearMissIds) as caught:
        report = evaluate(qrels, run, ["P@1"])
    assert _near(caught) == [
        f"run 'run': 1 query id(s) differ from a qrels id only in {kind} (e.g. run {run_id!r} vs qrels "
        f"{qrels_id!r}); they are different ids, so those queries score 0"
    ]
    assert report.values("run", "precision@1").to_dict() == {qrels_id: 0.0, "2": 1.0}  # never merged
    assert report.card.queries[0].left_out == {"run_only": [run_id]}


@pytest.mark.parametrize(
    "run_id, qrels_id",
    [("d\u0131s", "dis"), ("\u0130d", "id"), ("DIS", "d\u0131s"), ("cafe", NFC_CAFE), ("q1", "q2"), ("1", "1.0")],
)
def test_ids_that_differ_in_letters_are_no_near_miss(run_id, qrels_id):
    # Turkish dotless ı is another letter than i (Unicode case folding is the same for every language); an accent is
    # a letter's; these score 0 without a near-miss warning (they may be LowQueryOverlap's to say)
    run = Run.from_scores({run_id: {"d1": 1.0}, "2": {"d2": 1.0}})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = evaluate({qrels_id: {"d1": 1}, **QRELS_NEAR}, run, ["P@1"])
    assert _near(caught) == []
    assert report.values("run", "precision@1").to_dict() == {qrels_id: 0.0, "2": 1.0}


def test_several_kinds_of_near_miss_are_counted_each():
    qrels = {NFC_CAFE: {"d1": 1}, "d7": {"d1": 1}, "Q9": {"d1": 1}, **QRELS_NEAR}
    run = Run.from_scores({NFD_CAFE: {"d1": 1.0}, "D7": {"d1": 1.0}, "q9": {"d1": 1.0}, "2": {"d2": 1.0}})
    with pytest.warns(NearMissIds) as caught:
        evaluate(qrels, run, ["P@1"])
    (message,) = _near(caught)
    assert message.startswith(
        "run 'run': 3 query id(s) differ from a qrels id only in case, or in Unicode normalisation"
    )
    assert "(2 in case, 1 in Unicode normalisation (NFD vs NFC); e.g. run " in message


@pytest.mark.parametrize(
    "run_doc, judged_doc, kind",
    [
        (NFD_CAFE, NFC_CAFE, "Unicode normalisation (NFD vs NFC)"),
        ("D7", "d7", "case"),
        ("doc-\ufb01", "doc-fi", "Unicode compatibility forms (NFKC)"),
    ],
)
def test_doc_ids_that_differ_only_in_normalisation_or_case_are_announced(run_doc, judged_doc, kind):
    with pytest.warns(NearMissIds) as caught:
        report = evaluate({"1": {judged_doc: 1}}, Run.from_scores({"1": {run_doc: 1.0}}), ["P@1"])
    assert _near(caught) == [
        f"run 'run': on 1 query(ies) with no judged result, doc ids differ from judged ones only in {kind} (e.g. "
        f"query '1': run {run_doc!r} vs qrels {judged_doc!r}); they are different ids, so those results are unjudged"
    ]
    assert report.values("run", "precision@1").to_dict() == {"1": 0.0}


def test_near_miss_check_looks_only_at_unmatched_ids(monkeypatch):
    calls = []
    real = _near_miss.loose_forms
    monkeypatch.setattr(_near_miss, "loose_forms", lambda ids: calls.extend(ids) or real(ids))
    qrels = {f"q{i}": {"d1": 1} for i in range(2000)}
    run = Run.from_scores({**{f"q{i}": {"d1": 1.0} for i in range(1999)}, "Q1999": {"d1": 1.0}})
    with pytest.warns(NearMissIds, match=r"1 query id\(s\) differ from a qrels id only in case"):
        evaluate(qrels, run, ["P@1"])
    assert sorted(calls) == ["Q1999", "q1999"]  # the 1999 matched ids are never looked at


def test_loose_forms_of_many_ids_at_once_equal_each_ids_own():
    """The ids joined by line breaks and made loose in whole-text passes give each id's :func:`loose` form: edge
    whitespace of every kind, NFD, compatibility forms, case, zeros; an id holding a line break goes id by id."""
    import random

    rng = random.Random(7)
    pieces = [*"0 \t\r\x0b\x0c\x1cAaZz9éÉﬁ１Ｄıİßς", "e\u0301", "\u00a0", "\u3000", "\u2028", "\u0085", "00"]
    for _ in range(2000):
        ids = ["".join(rng.choices(pieces, k=rng.randint(0, 6))) for _ in range(rng.randint(1, 8))]
        assert _near_miss.loose_forms(ids) == [_near_miss.loose(i) for i in ids], ids
    assert _near_miss.loose_forms([" 007 ", "a\nb", "０"]) == ["7", "a\nb", "0"]  # id by id: a line break
    assert _near_miss.loose_forms([]) == []


def test_merging_a_log_into_qrels_announces_ids_written_alike(tmp_path):
    log = JudgementLog(tmp_path / "log.jsonl")
    log.append("Q1", "D1", 2, assessor="ann")
    log.append(NFD_CAFE, "d2", 1, assessor="ann")
    with pytest.warns(NearMissIds) as caught:
        merged = merge({"q1": {"d1": 1}, NFC_CAFE: {"d3": 0}}, log)
    assert _near(caught) == [
        "judgement logs: 2 query id(s) differ from one of the qrels only in case, or in Unicode normalisation (NFD vs "
        "NFC) (1 in case, 1 in Unicode normalisation (NFD vs NFC); e.g. log 'Q1' vs qrels 'q1': case); they are "
        "different ids, so their judgements are merged as pairs of their own",
        "judgement logs: 1 doc id(s) differ from one of the qrels only in case (e.g. log 'D1' vs qrels 'd1'); they are "
        "different ids, so their judgements are merged as pairs of their own",
    ]
    assert merged.qrels.to_dict() == {"q1": {"d1": 1}, NFC_CAFE: {"d3": 0}, "Q1": {"D1": 2}, NFD_CAFE: {"d2": 1}}


def test_a_join_of_two_inputs_announces_keys_written_alike():
    from rag_eval.data.joins import join

    # the join every pairing of user inputs goes through (a pool's doc ids and a corpus, its queries and their texts)
    with warnings.catch_warnings(record=True) as caught:  # (and LowJoinMatch's own line where 2 of 4 is short)
        warnings.simplefilter("always")
        made = join(
            ["D1", "d2", "d3", NFD_CAFE], ["d1", "d2", "d3", NFC_CAFE], what="pooled doc ids", where="the corpus"
        )
    assert _near(caught) == [
        "pooled doc ids: 2 of them differ from a key of the corpus only in case, or in Unicode normalisation (NFD vs "
        "NFC) (1 in case, 1 in Unicode normalisation (NFD vs NFC); e.g. 'D1' vs 'd1': case); they are different ids, "
        "kept distinct"
    ]
    assert (made.matched, made.total) == (2, 4)  # never merged
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        join(["d1", "x9"], ["d1", "y9"], what="pooled doc ids", where="the corpus")
    assert _near(caught) == []


def test_a_query_set_weight_missing_for_an_id_written_alike_says_so():
    from rag_eval.reports.weighted import QueryWeights

    weights = QueryWeights({"q1": 2.0, NFC_CAFE: 1.0}, {"q1": None, NFC_CAFE: None})
    weights.check(["q1", NFC_CAFE], "run 'r'")
    message = _error(weights.check, ["q1", NFD_CAFE], "run 'r'")
    assert message == (
        f"queries: run 'r': query {NFD_CAFE!r} was evaluated but is not in the query set, so it has no traffic "
        f"weight (e.g. {NFD_CAFE!r} is written like the query set's {NFC_CAFE!r}, differing only in Unicode "
        "normalisation (NFD vs NFC))"
    )
    assert "written like" not in _error(weights.check, ["zzz"], "run 'r'")


def test_labelling_a_pool_into_qrels_with_ids_written_alike_announces_them(tmp_path):
    from rag_eval.ground_truth import pool
    from rag_eval.labelling.session import LabellingSession

    out = _write(tmp_path / "qrels.txt", "q1 0 d1 1\n")
    made = pool([Run.from_scores({"Q1": {"d1": 1.0, "d9": 0.5}})], depth=2)
    with pytest.warns(NearMissIds) as caught:
        session = LabellingSession(made, out, assessor="ann")
    assert _near(caught) == [
        "the pool: 1 query id(s) differ from one of qrels.txt only in case (e.g. pool 'Q1' vs qrels 'q1'); they are "
        "different ids, so their items are labelled as pairs of their own"
    ]
    assert len(session.pool.items) == 2


def test_a_paired_comparison_announces_query_ids_written_alike():
    from rag_eval.statistics.paired import UnpairedQueries, pair

    # the one pairing every gate, compare, HTML diff and tune goes through
    candidate = pd.Series({"Q1": 1.0, NFD_CAFE: 0.5, "q3": 0.25, "q4": 0.0})
    baseline = pd.Series({"q1": 0.0, NFC_CAFE: 0.5, "q3": 0.25, "q5": 1.0})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        paired = pair(candidate, baseline, allow_unpaired=True, what="precision@10")
    assert _near(caught) == [
        "precision@10: 2 query id(s) of the candidate differ from one of the baseline only in case, or in Unicode "
        "normalisation (NFD vs NFC) (1 in case, 1 in Unicode normalisation (NFD vs NFC); e.g. the candidate 'Q1' vs "
        "the baseline 'q1': case); they are different ids, so those queries are not paired"
    ]
    assert paired.ids.tolist() == ["q3"] and paired.n_unpaired == 6  # never paired by a guess
    with pytest.warns(NearMissIds), pytest.raises(UnpairedQueries):
        pair(candidate, baseline, allow_unpaired=False)


def test_a_graded_by_record_with_people_out_of_range_is_refused(tmp_path):
    from rag_eval.data.graded_by import GradedBy

    for people in (True, 1.5, -1, 2**70, "many", None):
        message = _error(GradedBy.from_dict, {"people": people, "judges": []}, "qrels.txt.graded-by.json")
        assert message.startswith("qrels.txt.graded-by.json: not a graded-by record (InputError: people ")
    assert GradedBy.from_dict({"people": 3, "judges": []}, "x").people == 3


def test_merging_near_duplicates_compares_times_in_utc():
    pytest.importorskip("datasketch")
    from rag_eval.data.queryset import QueryProvenance
    from rag_eval.ground_truth.querysets import merge_near_duplicates

    texts = {"a": "how do I reset my password", "b": "how do I reset my password?!"}
    seen = {"a": ("2026-03-02T09:00:00+01:00", "2026-03-02T09:00:00"), "b": ("2026-03-02T08:30:00Z", "2026-03-02")}
    provenance = {q: QueryProvenance("log", 1, first_seen=f, last_seen=last) for q, (f, last) in seen.items()}
    merged = merge_near_duplicates(QuerySet(texts, provenance))
    (kept,) = merged.provenance.values()  # naive times are UTC, so they compare with aware ones
    assert (kept.first_seen, kept.last_seen) == ("2026-03-02T09:00:00+01:00", "2026-03-02T09:00:00")
    provenance["b"] = QueryProvenance("log", 1, first_seen="0001-01-01T00:00:00+01:00")
    message = _error(merge_near_duplicates, QuerySet(texts, provenance))
    assert message == (
        "queries: first or last seen time '0001-01-01T00:00:00+01:00' is out of range (times must lie within "
        "0001-01-01 and 9999-12-31 UTC)"
    )


def test_errors_about_ids_missing_from_another_input_name_the_id_written_alike():
    from rag_eval.ground_truth.human_sample import HumanSample

    message = _error(HumanSample, ("Q1", "q2", "zz"), ("q1", "q2", "q3"))
    assert message == (
        "sample: queries 'Q1', 'zz' are not in the population (e.g. 'Q1' is written like the population's 'q1', "
        "differing only in case)"
    ) or message == (
        "sample: queries 'zz', 'Q1' are not in the population (e.g. 'Q1' is written like the population's 'q1', "
        "differing only in case)"
    )
    assert "written like" not in _error(HumanSample, ("zz", "q2"), ("q1", "q2", "q3"))
    assert _near_miss.near_miss_hint(["D7", "x", "Ｄ８"], ["d7", "d8"], "the qrels'") == (
        " (e.g. 'D7' is written like the qrels' 'd7', differing only in case; 2 such ids)"
    )


def test_judge_assisted_names_a_human_query_written_like_a_judged_one():
    import rag_eval
    from rag_eval.statistics import prediction_powered as P

    ids = [f"q{i:02d}" for i in range(12)]
    run = rag_eval.Run.from_ranking({q: ["a", "b"] for q in ids}, name="bm25")
    judge_report = rag_eval.evaluate({q: {"a": 1} for q in ids}, [run], ["mrr"])
    human = ["Q01", *ids[2:12]]  # one human-graded query spelled in capitals
    human_run = rag_eval.Run.from_ranking({q: ["a", "b"] for q in human}, name="bm25")
    human_report = rag_eval.evaluate({q: {"b": 1} for q in human}, [human_run], ["mrr"])
    message = _error(P.judge_assisted, judge_report, human_report)
    assert message.startswith("human_report: system 'bm25': human-graded queries 'Q01' are not in the judge report")
    assert message.endswith("(e.g. 'Q01' is written like the judge report's 'q01', differing only in case)")


def test_pooling_runs_against_qrels_announces_ids_written_alike():
    from rag_eval.ground_truth import pool

    run = Run.from_scores({"Q1": {"d1": 2.0, "d2": 1.0}, "q2": {"D3": 1.0, "d4": 0.5}})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        made = pool([run], depth=2, qrels={"q1": {"d1": 1}, "q2": {"d3": 0}})
    assert _near(caught) == [
        "pool: 1 query id(s) differ from one of the qrels only in case (e.g. run 'Q1' vs qrels 'q1'); they are "
        "different ids, so those pairs are pooled as unjudged",
        "pool: 1 doc id(s) differ from one of the qrels only in case (e.g. run 'D3' vs qrels 'd3'); they are "
        "different ids, so those pairs are pooled as unjudged",
    ]
    assert sorted((i.query_id, i.doc_id) for i in made.items) == [
        ("Q1", "d1"),
        ("Q1", "d2"),
        ("q2", "D3"),
        ("q2", "d4"),
    ]
