"""Reading query logs: CSV (or TSV), JSON lines, Parquet and OTLP JSON trace exports, one record per logged query.

Each reader yields :class:`LogRecord` values (where in the file, the text, when, how many times, the other columns),
and names the file and line (or row, or span) of anything it cannot use. What a query set keeps of them, and how
texts are normalised and masked, is :mod:`rag_eval.data.queryset`'s.

An OTLP JSON trace export is what an OpenTelemetry collector's file exporter writes (one
``ExportTraceServiceRequest`` per line) or a single such request as one JSON document:
``resourceSpans[] -> scopeSpans[] -> spans[]`` (``instrumentationLibrarySpans`` in exports older than OTLP 0.15),
each span with ``attributes: [{"key": ..., "value": {"stringValue": ...}}]`` and ``startTimeUnixNano``. The query
of a retrieval is the ``input.value`` of a span whose ``openinference.span.kind`` is ``RETRIEVER`` (OpenInference's
semantic conventions, which Arize Phoenix and the OpenInference instrumentations of LangChain and LlamaIndex write).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from . import fields as checked
from .fields import At
from .input_files import InputFile, binary_input, decode_input, read_raw

LogFormat = Literal["csv", "tsv", "jsonl", "parquet", "otlp"]
LOG_FORMATS: tuple[LogFormat, ...] = ("csv", "tsv", "jsonl", "parquet", "otlp")

#: OpenInference's attribute that names a span's kind, the kind of a retrieval, and the attribute with its query
SPAN_KIND = "openinference.span.kind"
RETRIEVER = "RETRIEVER"
INPUT_VALUE = "input.value"

#: a JSON scalar (what a kept column holds)
Scalar = str | int | float | bool | None


@dataclass(frozen=True)
class LogRecord:
    """One logged query: where it is (``line 12``, ``row 3``, ``span resourceSpans[0].scopeSpans[0].spans[2]``),
    its text, when (UTC, or None), how many times it counts, and the other columns kept."""

    where: int | str
    text: Any
    timestamp: Any = None
    count: Any = 1
    columns: dict[str, Scalar] = field(default_factory=dict)


@dataclass
class LogTable:
    """The records of one log, with the file (path, SHA-256), its format, the columns it has, and the filter that
    the reader applied itself (an OTLP export's spans that are not retrievals)."""

    file: InputFile
    format: LogFormat
    columns: list[str]
    records: Iterator[LogRecord]
    filters: dict[str, Any] = field(default_factory=dict)


def read_log(
    path: Any,
    *,
    text: str | None,
    timestamp: str | None,
    count: str | None,
    columns: Sequence[str] | None,
    format: LogFormat | None,
    need: Sequence[str] = (),
) -> LogTable:
    """Read a query log once and give its records; ``format`` None tells it from the content (Parquet by its
    magic bytes ``PAR1``; an OTLP export by a first JSON object holding ``resourceSpans``; other JSON objects as
    JSON lines; anything else as CSV, TSV where the name ends in ``.tsv`` or ``.tsv.gz``)."""
    if format is not None and format not in LOG_FORMATS:
        raise ValueError(
            f"format must be one of {', '.join(LOG_FORMATS)} (or None: told from the content), not {format!r}"
        )
    spath, raw = read_raw(path)
    if format == "parquet" or (format is None and raw[:4] == b"PAR1"):
        return _parquet(binary_input(spath, raw), text or "query", timestamp, count, columns)
    file = decode_input(spath, raw)
    if format is None:
        first = file.first_line().strip()
        if first.startswith("{"):
            format = "otlp" if _is_otlp(file, first) else "jsonl"
        else:
            format = "tsv" if file.name.endswith(".tsv") else "csv"
    if format == "otlp":
        if timestamp is not None or count is not None:
            raise ValueError(
                "an OTLP export has its own timestamps (startTimeUnixNano) and one query per span: "
                "give neither timestamp= nor count="
            )
        return _otlp(file, text or INPUT_VALUE, None if columns is None and not need else [*(columns or ()), *need])
    if format == "jsonl":
        return _jsonl(file, text or "query", timestamp, count, columns)
    return _csv(file, text or "query", timestamp, count, columns, delimiter="\t" if format == "tsv" else ",")


def _is_otlp(file: InputFile, first: str) -> bool:
    try:
        record = json.loads(first)
    except ValueError:  # (an integer of over 4300 digits is a ValueError of its own: json_objects names its line)
        # a whole request pretty-printed over many lines: its first line alone is not JSON
        return '"resourceSpans"' in file.data[:4096].decode("utf-8", "replace")
    return isinstance(record, dict) and "resourceSpans" in record


def _kept(available: Sequence[str], own: set[str], columns: Sequence[str] | None, file: InputFile) -> list[str]:
    """The columns to keep: those asked (each must exist), or every column that is not the text, timestamp or
    count."""
    if columns is None:
        return [c for c in available if c not in own]
    if isinstance(columns, str):
        raise TypeError("columns must be a list of column names, not a str")
    missing = [c for c in columns if c not in available]
    if missing:
        raise file.error(f"no column {missing[0]!r} to keep (its columns: {', '.join(available)})")
    return list(dict.fromkeys(columns))


def _need(name: str | None, role: str, available: Sequence[str], file: InputFile) -> None:
    if name is not None and name not in available:
        raise file.error(f"no {role} column {name!r} (its columns: {', '.join(available) or 'none'})")


# ----- CSV and TSV ----------------------------------------------------------------------------------------------


def _csv(
    file: InputFile,
    text: str,
    timestamp: str | None,
    count: str | None,
    columns: Sequence[str] | None,
    *,
    delimiter: str,
) -> LogTable:
    reader = csv.reader(io.StringIO(file.text(), newline=""), delimiter=delimiter, strict=True)
    try:
        header = next(reader)
    except csv.Error as exc:
        raise file.error(f"not readable as {'TSV' if delimiter == chr(9) else 'CSV'} ({exc})", 1) from None
    header = [h.strip() for h in header]
    if len(set(header)) != len(header):
        twice = next(h for h in header if header.count(h) > 1)
        raise file.error(f"column {twice!r} appears twice in the header", 1)
    _need(text, "text", header, file)
    _need(timestamp, "timestamp", header, file)
    _need(count, "count", header, file)
    kept = _kept(header, {text, timestamp or "", count or ""}, columns, file)
    index = {name: i for i, name in enumerate(header)}

    def records() -> Iterator[LogRecord]:
        while True:
            start = reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise file.error(f"not readable as CSV ({exc})", start) from None
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # a blank line
            if len(row) != len(header):
                raise file.error(f"{len(row)} fields where the header has {len(header)}", start)
            yield LogRecord(
                start,
                row[index[text]],
                row[index[timestamp]] if timestamp is not None else None,
                row[index[count]] if count is not None else 1,
                {c: row[index[c]] for c in kept},
            )

    return LogTable(file, "tsv" if delimiter == "\t" else "csv", header, records())


# ----- JSON lines -----------------------------------------------------------------------------------------------


def _jsonl(
    file: InputFile, text: str, timestamp: str | None, count: str | None, columns: Sequence[str] | None
) -> LogTable:
    objects = file.json_objects()
    first_line, first = next(objects)
    own = {text, timestamp or "", count or ""}

    def records() -> Iterator[LogRecord]:
        for number, record in _chain(first_line, first, objects):
            for name, role in ((text, "text"), (timestamp, "timestamp"), (count, "count")):
                if name is not None and name not in record:
                    raise file.error(f"no {role} key {name!r} (its keys: {', '.join(record) or 'none'})", number)
            if columns is None:
                kept = {k: v for k, v in record.items() if k not in own}
            else:
                kept = {c: record.get(c) for c in columns}
            yield LogRecord(
                number,
                record[text],
                record[timestamp] if timestamp is not None else None,
                record[count] if count is not None else 1,
                {k: _scalar(v, k, file, number) for k, v in kept.items()},
            )

    if isinstance(columns, str):
        raise TypeError("columns must be a list of column names, not a str")
    return LogTable(file, "jsonl", list(first), records())


def _chain(
    line: int, record: dict[str, Any], rest: Iterator[tuple[int, dict[str, Any]]]
) -> Iterator[tuple[int, dict[str, Any]]]:
    yield line, record
    yield from rest


def _scalar(value: Any, column: str, file: InputFile, where: int | str) -> Scalar:
    """A kept column's value as a JSON scalar (dates and times as ISO 8601 text)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise file.error(f"column {column!r}{_at(where)} holds {value!r}, not a finite number", _line(where))
    if isinstance(value, (float, Decimal)):
        return checked.number(
            value, f"column {column!r}", At(file.path, _line(where), where if isinstance(where, str) else None)
        )
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    kind = "list" if isinstance(value, (list, tuple)) else "object" if isinstance(value, dict) else type(value).__name__
    raise file.error(
        f"column {column!r}{_at(where)} holds {'an' if kind[:1] in 'aeiou' else 'a'} {kind}: a kept column must hold "
        "text, numbers or booleans "
        "(name the columns to keep with columns=[...])",
        _line(where),
    )


def _line(where: int | str) -> int | None:
    return where if isinstance(where, int) else None


def _at(where: int | str) -> str:
    return "" if isinstance(where, int) else f" ({where})"


# ----- Parquet --------------------------------------------------------------------------------------------------


def _parquet(
    file: InputFile, text: str, timestamp: str | None, count: str | None, columns: Sequence[str] | None
) -> LogTable:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(file.data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise file.error(f"not a readable Parquet file ({exc})") from None
    names = list(table.column_names)
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise file.error(f"column {twice!r} appears twice")
    _need(text, "text", names, file)
    _need(timestamp, "timestamp", names, file)
    _need(count, "count", names, file)
    kept = _kept(names, {text, timestamp or "", count or ""}, columns, file)

    def records() -> Iterator[LogRecord]:
        offset = 0
        for batch in table.to_batches(max_chunksize=1 << 16):
            data = {
                name: _pylist(batch.column(name), name, offset, file)
                for name in {text, timestamp, count, *kept}
                if name
            }
            for i in range(batch.num_rows):
                row = f"row {offset + i + 1}"
                yield LogRecord(
                    row,
                    data[text][i],
                    data[timestamp][i] if timestamp is not None else None,
                    data[count][i] if count is not None else 1,
                    {c: _scalar(data[c][i], c, file, row) for c in kept},
                )
            offset += batch.num_rows

    return LogTable(file, "parquet", names, records())


def _pylist(column: Any, name: str, offset: int, file: InputFile) -> list[Any]:
    """A Parquet column's values as Python's; a value Python cannot hold (a timestamp or date outside years 1 to
    9999 in its time zone) is an InputError naming its row, found by halving the column (no Python call per row)."""
    try:
        return list(column.to_pylist())
    except (OverflowError, ValueError) as exc:
        low, high = 0, len(column)  # the first bad row lies in [low, high)
        while high - low > 1:
            middle = (low + high) // 2
            try:
                column.slice(low, middle - low).to_pylist()
            except (OverflowError, ValueError):
                high = middle
            else:
                low = middle
        raise file.error(
            f"row {offset + low + 1}: column {name!r} holds a {column.type} Python cannot hold ({exc}; "
            "times must lie within 0001-01-01 and 9999-12-31)"
        ) from None


# ----- OTLP JSON trace exports ----------------------------------------------------------------------------------


def _otlp(file: InputFile, text: str, columns: Sequence[str] | None) -> LogTable:
    requests = list(_otlp_requests(file))
    if columns is not None and isinstance(columns, str):
        raise TypeError("columns must be a list of attribute names, not a str")
    filters: dict[str, Any] = {SPAN_KIND: RETRIEVER}
    skipped = 0
    found: set[str] = set()
    out: list[LogRecord] = []
    for line, request in requests:
        for where, resource, span in _spans(file, line, request):
            attributes = _attributes(span.get("attributes"), file, line, where)
            if attributes.get(SPAN_KIND) != RETRIEVER:
                skipped += 1
                continue
            resource_attributes = _attributes(resource.get("attributes"), file, line, f"{where} (its resource)")
            available = {**resource_attributes, **attributes}
            found |= set(available)
            if text not in attributes:
                raise file.error(f"{where}: a {RETRIEVER} span without {text!r}", line)
            kept: dict[str, Scalar] = {}
            for name in columns or ():
                kept[name] = _scalar(available.get(name), name, file, where)
            out.append(
                LogRecord(where if line is None else line, attributes[text], _nanos(span, file, line, where), 1, kept)
            )
    missing = [c for c in columns or () if c not in found]
    if missing and out:
        raise file.error(
            f"no {RETRIEVER} span or its resource has the attribute {missing[0]!r} to keep "
            f"(theirs: {', '.join(sorted(found))})"
        )
    filters["spans of other kinds"] = skipped
    return LogTable(file, "otlp", sorted(found), iter(out), filters)


def _otlp_requests(file: InputFile) -> Iterator[tuple[int | None, dict[str, Any]]]:
    """``(line, request)``: each line's request in a file of JSON lines, or the file's one request (line None)."""
    try:
        whole = json.loads(file.text())
    except ValueError:  # JSON lines (or an integer of over 4300 digits: json_objects names its line)
        whole = None
    if isinstance(whole, dict):
        yield None, whole
        return
    for number, record in file.json_objects():
        if "resourceSpans" not in record:
            raise file.error("not an OTLP trace export: a line without 'resourceSpans'", number)
        yield number, record


def _spans(
    file: InputFile, line: int | None, request: dict[str, Any]
) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    resource_spans = request.get("resourceSpans")
    if not isinstance(resource_spans, list):
        raise file.error("not an OTLP trace export: 'resourceSpans' is not a list", line)
    for r, item in enumerate(resource_spans):
        if not isinstance(item, dict):
            raise file.error(f"resourceSpans[{r}] is not an object", line)
        resource = item.get("resource") or {}
        scopes = item.get("scopeSpans", item.get("instrumentationLibrarySpans", []))
        if not isinstance(scopes, list) or not isinstance(resource, dict):
            raise file.error(f"resourceSpans[{r}]: 'scopeSpans' is not a list, or 'resource' not an object", line)
        key = "scopeSpans" if "scopeSpans" in item else "instrumentationLibrarySpans"
        for s, scope in enumerate(scopes):
            spans = scope.get("spans", []) if isinstance(scope, dict) else None
            if not isinstance(spans, list):
                raise file.error(f"resourceSpans[{r}].{key}[{s}]: 'spans' is not a list", line)
            for i, span in enumerate(spans):
                where = f"span resourceSpans[{r}].{key}[{s}].spans[{i}]"
                if not isinstance(span, dict):
                    raise file.error(f"{where} is not an object", line)
                yield where, resource, span


_VALUE_KINDS = ("stringValue", "boolValue", "intValue", "doubleValue")


def _attributes(items: Any, file: InputFile, line: int | None, where: str) -> dict[str, Scalar]:
    """OTLP's ``[{"key": k, "value": {"stringValue": v}}]`` as ``{k: v}`` (``intValue`` is a string in OTLP JSON:
    read as an int; arrays, maps and bytes are left out: no column holds them)."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise file.error(f"{where}: 'attributes' is not a list", line)
    out: dict[str, Scalar] = {}
    for item in items:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("key"), str)
            or not isinstance(item.get("value", {}), dict)
        ):
            raise file.error(f"{where}: an attribute that is not {{'key': ..., 'value': {{...}}}}", line)
        value = item.get("value", {})
        for kind in _VALUE_KINDS:
            if kind in value:
                raw = value[kind]
                if kind == "intValue":  # an int64, as text in OTLP JSON (a number from some exporters)
                    raw = checked.integer(raw, f"attribute {item['key']!r}: intValue", At(file.path, line, where))
                out[item["key"]] = raw
                break
    return out


def _nanos(span: Mapping[str, Any], file: InputFile, line: int | None, where: str) -> dt.datetime | None:
    return checked.unix_nanos(span.get("startTimeUnixNano"), "startTimeUnixNano", At(file.path, line, where))
