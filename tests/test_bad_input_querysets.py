"""Bad input for query logs and query sets: ``QuerySet.from_log`` (CSV, TSV, JSON lines, Parquet, OTLP JSON trace
exports), ``QuerySet.load`` and ``rag-eval queries sample`` (docs/bad-input/ground-truth.md, "Query logs and query
sets"). Each test is a row of that table and asserts the whole message."""

from __future__ import annotations

import json

import pytest

from rag_eval import InputError, QuerySet
from rag_eval.cli import main


def _message(call, *args, **kwargs) -> str:
    with pytest.raises(InputError) as info:
        call(*args, **kwargs)
    return str(info.value)


def _write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def _attribute(key, value):
    kind = "stringValue" if isinstance(value, str) else "intValue"
    return {"key": key, "value": {kind: value if kind == "stringValue" else str(value)}}


def _span(kind, text=None, start="1772442000000000000"):
    attributes = [_attribute("openinference.span.kind", kind)]
    if text is not None:
        attributes.append(_attribute("input.value", text))
    return {
        "traceId": "0" * 32,
        "spanId": "1" * 16,
        "name": kind.lower(),
        "attributes": attributes,
        "startTimeUnixNano": start,
    }


def _otlp(path, spans):
    request = {
        "resourceSpans": [
            {
                "resource": {"attributes": [_attribute("service.name", "support-bot")]},
                "scopeSpans": [{"scope": {"name": "openinference"}, "spans": spans}],
            }
        ]
    }
    return _write(path, json.dumps(request))


def _cli(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


# ----- query logs ---------------------------------------------------------------------------------------------------


def test_a_query_log_without_the_column_named(tmp_path):
    log = _write(tmp_path / "log.csv", "ts,query,tenant\n2026-03-02T09:00:00Z,what is rag,acme\n")
    assert _message(QuerySet.from_log, log, text="question") == (
        f"{log}: no text column 'question' (its columns: ts, query, tenant)"
    )
    assert _message(QuerySet.from_log, log, timestamp="time") == (
        f"{log}: no timestamp column 'time' (its columns: ts, query, tenant)"
    )
    assert _message(QuerySet.from_log, log, count="n") == f"{log}: no count column 'n' (its columns: ts, query, tenant)"
    assert _message(QuerySet.from_log, log, columns=["lang"]) == (
        f"{log}: no column 'lang' to keep (its columns: ts, query, tenant)"
    )
    assert _message(QuerySet.from_log, log, where={"lang": "en"}) == (
        f"{log}: no column 'lang' to filter on (its columns: ts, query, tenant)"
    )
    # a JSON lines log names the line whose object lacks the key
    lines = _write(tmp_path / "log.jsonl", '{"query": "fine"}\n{"text": "wrong key"}\n')
    assert _message(QuerySet.from_log, lines) == f"{lines}:2: no text key 'query' (its keys: text)"
    assert len(QuerySet.from_log(log)) == 1  # the same log reads with its own column names


def test_an_empty_query_log(tmp_path):
    empty = _write(tmp_path / "empty.csv", "")
    assert _message(QuerySet.from_log, empty) == f"{empty}: empty file"
    header = _write(tmp_path / "header.csv", "query\n")
    assert _message(QuerySet.from_log, header) == (
        f"{header}: no query to keep (every record was dropped: the log holds no record)"
    )
    blank = _write(tmp_path / "blank.csv", "query\n?\n  \n")
    assert _message(QuerySet.from_log, blank) == f"{blank}: no query to keep (every record was dropped: 1 empty text)"
    nulls = _write(tmp_path / "nulls.jsonl", '{"query": null}\n{"query": null}\n')
    assert _message(QuerySet.from_log, nulls) == f"{nulls}: no query to keep (every record was dropped: 2 no text)"
    zero = _write(tmp_path / "zero.csv", "query,n\na,0\n")
    assert _message(QuerySet.from_log, zero, count="n") == (
        f"{zero}: no query to keep (every record was dropped: 1 count 0)"
    )
    other = _write(tmp_path / "other.csv", "query,tenant\na,acme\n")
    assert _message(QuerySet.from_log, other, where={"tenant": "globex"}) == (
        f"{other}: no query to keep (every record was dropped: 1 where)"
    )


def test_an_otlp_export_without_a_retriever_span(tmp_path):
    path = _otlp(tmp_path / "traces.json", [_span("CHAIN", "what is rag"), _span("LLM", "what is rag")])
    assert _message(QuerySet.from_log, path) == (
        f"{path}: no query to keep (every record was dropped: the log holds no record)"
    )
    nothing = _write(tmp_path / "nothing.json", '{"resourceSpans": []}')
    assert _message(QuerySet.from_log, nothing) == (
        f"{nothing}: no query to keep (every record was dropped: the log holds no record)"
    )
    # with one RETRIEVER span the same export reads, and counts the spans of other kinds it skipped
    read = QuerySet.from_log(
        _otlp(tmp_path / "one.json", [_span("CHAIN", "x"), _span("RETRIEVER", "what is rag"), _span("LLM", "y")])
    )
    assert list(read.values()) == ["what is rag"]
    assert read.card.filters["spans of other kinds"] == 2


def test_a_retriever_span_without_its_input(tmp_path):
    path = _otlp(tmp_path / "traces.json", [_span("RETRIEVER", "what is rag"), _span("RETRIEVER")])
    assert _message(QuerySet.from_log, path) == (
        f"{path}: span resourceSpans[0].scopeSpans[0].spans[1]: a RETRIEVER span without 'input.value'"
    )
    assert _message(QuerySet.from_log, path, text="query.text") == (
        f"{path}: span resourceSpans[0].scopeSpans[0].spans[0]: a RETRIEVER span without 'query.text'"
    )


def test_a_malformed_otlp_export(tmp_path):
    start = _otlp(tmp_path / "start.json", [_span("RETRIEVER", "what is rag", start="soon")])
    assert _message(QuerySet.from_log, start) == (
        f"{start}: span resourceSpans[0].scopeSpans[0].spans[0]: startTimeUnixNano 'soon' is not an integer"
    )
    attributes = _otlp(tmp_path / "attributes.json", [{"name": "r", "attributes": {"input.value": "x"}}])
    assert _message(QuerySet.from_log, attributes) == (
        f"{attributes}: span resourceSpans[0].scopeSpans[0].spans[0]: 'attributes' is not a list"
    )
    number = _otlp(
        tmp_path / "number.json", [{"name": "r", "attributes": [{"key": "n", "value": {"intValue": "many"}}]}]
    )
    assert _message(QuerySet.from_log, number) == (
        f"{number}: span resourceSpans[0].scopeSpans[0].spans[0]: attribute 'n': intValue 'many' is not an integer"
    )
    listless = _write(tmp_path / "listless.json", '{"resourceSpans": 5}')
    assert _message(QuerySet.from_log, listless) == (
        f"{listless}: not an OTLP trace export: 'resourceSpans' is not a list"
    )
    collector = _write(
        tmp_path / "collector.jsonl",
        json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [_span("RETRIEVER", "a")]}]}]}) + '\n{"spans": []}\n',
    )
    assert _message(QuerySet.from_log, collector) == (
        f"{collector}:2: not an OTLP trace export: a line without 'resourceSpans'"
    )
    with pytest.raises(ValueError) as info:
        QuerySet.from_log(_otlp(tmp_path / "ok.json", [_span("RETRIEVER", "a")]), timestamp="ts")
    assert str(info.value) == (
        "an OTLP export has its own timestamps (startTimeUnixNano) and one query per span: "
        "give neither timestamp= nor count="
    )


def test_a_csv_log_that_does_not_parse(tmp_path):
    twice = _write(tmp_path / "twice.csv", "query,query\na,b\n")
    assert _message(QuerySet.from_log, twice) == f"{twice}:1: column 'query' appears twice in the header"
    ragged = _write(tmp_path / "ragged.csv", "query,tenant\nfirst,acme\nsecond,acme,extra\n")
    assert _message(QuerySet.from_log, ragged) == f"{ragged}:3: 3 fields where the header has 2"
    ragged_tsv = _write(tmp_path / "ragged.tsv", "query\ttenant\nfirst\n")
    assert _message(QuerySet.from_log, ragged_tsv) == f"{ragged_tsv}:2: 1 fields where the header has 2"
    quote = _write(tmp_path / "quote.csv", 'query\nfine\n"never closed\n')
    assert _message(QuerySet.from_log, quote) == f"{quote}:3: not readable as CSV (unexpected end of data)"


def test_a_jsonl_log_line_that_is_not_json(tmp_path):
    torn = _write(tmp_path / "log.jsonl", '{"query": "fine"}\n{"query": "torn\n')
    message = _message(QuerySet.from_log, torn)
    assert message.startswith(f"{torn}:2: not valid JSON (")
    listed = _write(tmp_path / "listed.jsonl", '{"query": "fine"}\n["a list"]\n')
    assert _message(QuerySet.from_log, listed) == f"{listed}:2: expected a JSON object"


def test_a_query_text_that_is_not_a_string(tmp_path):
    lines = _write(tmp_path / "log.jsonl", '{"query": "fine"}\n{"query": 42}\n')
    assert _message(QuerySet.from_log, lines) == f"{lines}:2: the text ('query') is an int, not a string"
    listed = _write(tmp_path / "listed.jsonl", '{"q": ["a", "b"]}\n')
    assert _message(QuerySet.from_log, listed, text="q") == f"{listed}:1: the text ('q') is a list, not a string"


def test_a_count_that_is_not_a_whole_number(tmp_path):
    csv_counts = _write(tmp_path / "counts.csv", "query,n\nfine,3\nbad,-1\nworse,many\n")
    assert (
        _message(QuerySet.from_log, csv_counts, count="n")
        == f"{csv_counts}:3: count '-1' is not an integer of 0 or more"
    )
    for value, problem in (
        ("1.5", "count 1.5 is not an integer of 0 or more"),
        ("-2", "count -2 is negative"),
        ("true", "count True is not an integer"),
        ('"many"', "count 'many' is not an integer of 0 or more"),
    ):
        path = _write(tmp_path / "counts.jsonl", f'{{"query": "fine", "n": 2}}\n{{"query": "bad", "n": {value}}}\n')
        assert _message(QuerySet.from_log, path, count="n") == f"{path}:2: {problem}"
    fine = _write(tmp_path / "fine.jsonl", '{"query": "a", "n": 2.0}\n{"query": "b", "n": " 3 "}\n')
    assert sorted(p.frequency for p in QuerySet.from_log(fine, count="n").provenance.values()) == [2, 3]


def test_a_timestamp_that_is_not_a_time(tmp_path):
    csv_times = _write(tmp_path / "when.csv", "ts,query\n2026-03-02T09:00:00Z,fine\nyesterday,bad\n")
    assert _message(QuerySet.from_log, csv_times, timestamp="ts") == (
        f"{csv_times}:3: timestamp 'yesterday' is neither ISO 8601 nor Unix seconds"
    )
    month = _write(tmp_path / "month.csv", "ts,query\n2026-13-45,bad\n")
    assert _message(QuerySet.from_log, month, timestamp="ts") == (
        f"{month}:2: timestamp '2026-13-45' is neither ISO 8601 nor Unix seconds"
    )
    for value, problem in (
        ("1e20", "timestamp 1e+20 is out of range (Unix seconds expected)"),
        ("true", "timestamp True is not a time"),
        ('{"at": 1}', "timestamp {'at': 1} is not a time"),
    ):
        path = _write(tmp_path / "when.jsonl", f'{{"query": "bad", "ts": {value}}}\n')
        assert _message(QuerySet.from_log, path, timestamp="ts") == f"{path}:1: {problem}"
    blank = _write(tmp_path / "blank.jsonl", '{"query": "a", "ts": null}\n{"query": "b", "ts": "  "}\n')
    assert QuerySet.from_log(blank, timestamp="ts").card.date_range is None  # a blank or null time is no time


def test_a_kept_column_that_holds_no_scalar(tmp_path):
    lines = _write(tmp_path / "log.jsonl", '{"query": "fine", "meta": {"a": 1}}\n')
    assert _message(QuerySet.from_log, lines) == (
        f"{lines}:1: column 'meta' holds an object: a kept column must hold text, numbers or booleans "
        "(name the columns to keep with columns=[...])"
    )
    nan = _write(tmp_path / "nan.jsonl", '{"query": "fine", "score": NaN}\n')
    assert _message(QuerySet.from_log, nan) == f"{nan}:1: column 'score' holds nan, not a finite number"
    assert [p.columns for p in QuerySet.from_log(lines, columns=[]).provenance.values()] == [{}]  # left out, it reads


def test_an_unreadable_parquet_log(tmp_path):
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really")
    message = _message(QuerySet.from_log, broken)
    assert message.startswith(f"{broken}: not a readable Parquet file (")
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    good = tmp_path / "log.parquet"
    pq.write_table(pa.table({"question": ["what is rag"]}), good)
    assert _message(QuerySet.from_log, good) == f"{good}: no text column 'query' (its columns: question)"
    pq.write_table(pa.table({"query": ["what is rag", "reset"], "meta": [[1], [2]]}), good)
    assert _message(QuerySet.from_log, good) == (
        f"{good}: column 'meta' (row 1) holds a list: a kept column must hold text, numbers or booleans "
        "(name the columns to keep with columns=[...])"
    )


# ----- query sets (QuerySet.load) -----------------------------------------------------------------------------------


def _saved(tmp_path):
    path = tmp_path / "set.jsonl"
    QuerySet.from_dict({"q1": "one", "q2": "two"}).save(path)
    return path.read_text(encoding="utf-8").splitlines()


def test_loading_a_file_that_is_not_a_query_set(tmp_path):
    log = _write(tmp_path / "log.jsonl", '{"query": "a log, not a query set"}\n')
    assert _message(QuerySet.load, log) == (
        f'{log}:1: not a query set (QuerySet.save\'s JSON lines open with {{"query_set": 1, "card": {{...}}}}); '
        "to read a query log, use QuerySet.from_log"
    )
    header, *queries = _saved(tmp_path)
    newer = _write(tmp_path / "newer.jsonl", "\n".join([header.replace('"query_set": 1', '"query_set": 2'), *queries]))
    assert _message(QuerySet.load, newer).startswith(f"{newer}:1: not a query set (")
    card = _write(tmp_path / "card.jsonl", "\n".join(['{"query_set": 1, "card": {"bogus": 1}}', *queries]))
    assert _message(QuerySet.load, card) == f"{card}:1: the card: unknown field(s) of a query set card: bogus"
    assert _message(QuerySet.load, _write(tmp_path / "empty.jsonl", "")) == f"{tmp_path / 'empty.jsonl'}: empty file"
    assert _message(QuerySet.load, tmp_path / "nope.jsonl") == f"{tmp_path / 'nope.jsonl'}: no such file"


def test_a_query_set_line_with_a_missing_or_unknown_field(tmp_path):
    header, first, _ = _saved(tmp_path)
    record = json.loads(first)
    for dropped in ("id", "text", "source"):
        path = _write(
            tmp_path / f"no-{dropped}.jsonl",
            "\n".join([header, json.dumps({k: v for k, v in record.items() if k != dropped})]) + "\n",
        )
        assert _message(QuerySet.load, path) == f"{path}:2: a query needs 'id', 'text' and 'source'"
    extra = _write(tmp_path / "extra.jsonl", "\n".join([header, json.dumps(record | {"lang": "en"})]) + "\n")
    assert _message(QuerySet.load, extra) == f"{extra}:2: unknown key 'lang'"
    torn = _write(tmp_path / "torn.jsonl", "\n".join([header, '{"id": "q1", ']) + "\n")
    assert _message(QuerySet.load, torn).startswith(f"{torn}:2: not valid JSON (")


def test_a_query_set_line_with_a_bad_value(tmp_path):
    header, first, second = _saved(tmp_path)
    record = json.loads(first)
    for change, problem in (
        ({"id": 7}, "query id 7 is not a non-empty string"),
        ({"id": " "}, "query id ' ' is not a non-empty string"),
        ({"text": ""}, "query 'q1': the text must be a non-empty string, not ''"),
        ({"text": 5}, "query 'q1': the text must be a non-empty string, not 5"),
        ({"columns": []}, "query 'q1': 'columns' must be an object and 'merged' a list"),
        ({"first_seen": 5}, "query 'q1': 'first_seen' must be a string or null"),
        ({"frequency": 0}, "query 'q1': frequency must be 1 or more, not 0"),
    ):
        path = _write(tmp_path / "bad.jsonl", "\n".join([header, json.dumps(record | change)]) + "\n")
        assert _message(QuerySet.load, path) == f"{path}:2: {problem}"
    twice = _write(tmp_path / "twice.jsonl", "\n".join([header, first, second, first]) + "\n")
    assert _message(QuerySet.load, twice) == f"{twice}:4: query id 'q1' appears twice"
    assert len(QuerySet.load(_write(tmp_path / "good.jsonl", "\n".join([header, first, second])))) == 2


# ----- rag-eval queries sample --------------------------------------------------------------------------------------


def test_queries_sample_on_a_missing_or_bad_log(tmp_path, capsys):
    out = tmp_path / "sample.jsonl"
    missing = tmp_path / "nope.csv"
    assert _cli(capsys, "queries", "sample", missing, "-n", "5", "-o", out) == (
        2,
        "",
        f"rag-eval: error: {missing}: no such file\n",
    )
    empty = _write(tmp_path / "empty.csv", "")
    assert _cli(capsys, "queries", "sample", empty, "-n", "5", "-o", out, "--no-near-duplicates") == (
        2,
        "",
        f"rag-eval: error: {empty}: empty file\n",
    )
    log = _write(tmp_path / "log.csv", "query\nwhat is rag\nreset my password\n")
    assert _cli(capsys, "queries", "sample", log, "-n", "2", "--timestamp", "ts", "-o", out) == (
        2,
        "",
        f"rag-eval: error: {log}: no timestamp column 'ts' (its columns: query)\n",
    )
    assert not out.exists()


def test_queries_sample_n_that_is_not_a_positive_count(tmp_path, capsys):
    out = tmp_path / "sample.jsonl"
    log = _write(tmp_path / "log.csv", "query\nwhat is rag\nreset my password\n")
    for value, problem in (
        ("0", "-n must be 1 or more, not 0"),
        ("-3", "-n must be 1 or more, not -3"),
        ("abc", "-n 'abc' is not a plain decimal integer (ASCII digits 0-9 only)"),
        ("1_0", "-n '1_0' is not a plain decimal integer (ASCII digits 0-9 only)"),
        ("٣", "-n '٣' is not a plain decimal integer (ASCII digits 0-9 only)"),
    ):
        assert _cli(capsys, "queries", "sample", log, "-n", value, "-o", out) == (
            2,
            "",
            f"rag-eval: error: {problem}\n",
        )
    assert not out.exists()
    # -n is checked before the log is read: a missing log is not what is reported
    missing = tmp_path / "nope.csv"
    assert _cli(capsys, "queries", "sample", missing, "-n", "0", "-o", out) == (
        2,
        "",
        "rag-eval: error: -n must be 1 or more, not 0\n",
    )
