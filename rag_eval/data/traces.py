"""Reading recorded retrieval and rerank spans (OpenInference over OpenTelemetry) into plain records, one per
stage span, streamed. See docs/traces.md.

Sources: an OTLP JSON export (``resourceSpans -> scopeSpans -> spans``, one request per line as a collector's file
exporter writes it, read a line at a time, or one request as a whole document), an OTLP protobuf export (one
serialised ``ExportTraceServiceRequest``, read a span at a time; needs ``opentelemetry-proto``), the spans
DataFrame Phoenix gives (``get_spans_dataframe``) or that frame saved as Parquet (read in row batches), or spans of
the OpenTelemetry SDK (``InMemorySpanExporter.get_finished_spans()``). Only ``RETRIEVER`` and ``RERANKER`` spans
are read whole; of the others only their ids (to find orphans) and times (the window) are counted.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import json
import os
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from ..errors import InputError

__all__ = [
    "MAX_LINE_BYTES",
    "STAGE_KINDS",
    "SpanStats",
    "TracedDoc",
    "TracedSpan",
    "content_id",
    "id64",
    "read_spans",
]

SPAN_KIND = "openinference.span.kind"
STAGE_KINDS = ("RETRIEVER", "RERANKER")
MAX_LINE_BYTES = 256 * 2**20  # the longest line of JSON lines (or whole JSON document) read: 256 MiB
_LISTS = {
    "retrieval.documents": "documents",
    "reranker.output_documents": "documents",
    "reranker.input_documents": "inputs",
}


def id64(span_id: str) -> int:
    """A span id as an unsigned 64-bit number (8 bytes kept per span instead of a string): the id itself where it
    is 16 hex digits (OTLP's), else the first 8 bytes of its BLAKE2b digest."""
    if len(span_id) == 16:
        try:
            return int(span_id, 16)
        except ValueError:
            pass
    return int.from_bytes(hashlib.blake2b(span_id.encode(), digest_size=8).digest(), "big")


def content_id(text: str) -> str:
    """The id of a document recorded without one: the first 16 hex digits of the SHA-256 of its UTF-8 text, the
    rule the labels of the built-in demo keep (``text_hash``), so that labels given by content match."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class TracedDoc(NamedTuple):
    """One recorded document: its id, score, content and metadata as the span gave them (None: not recorded).
    (A named tuple: a retriever span records tens of them, and tuples are cheap to make.)"""

    id: str | None
    score: float | None
    content: str | None
    metadata: Mapping[str, Any] | None


@dataclass
class TracedSpan:
    """One RETRIEVER or RERANKER span: ids in hex, times in Unix nanoseconds, the query it was asked, the documents
    it returned (None: the span records no document list at all) and, for a reranker, those it was given."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: str
    start_ns: int | None
    end_ns: int | None
    error: str | None  # the status message of a span whose status is ERROR
    query: str | None
    documents: tuple[TracedDoc, ...] | None
    inputs: tuple[TracedDoc, ...] | None = None
    top_k: int | None = None
    model_name: str | None = None
    query_id: str | None = None
    where: str = ""
    problems: tuple[str, ...] = ()  # what the span lacks or holds badly, in words (summarised by the caller)
    broken: str | None = None  # why its ranking cannot be read (a document index skipped): its query is left out

    def same_as(self, other: TracedSpan) -> bool:
        """Whether ``other`` records the same span (every field but where it was read): a duplicate."""
        return replace(self, where="") == replace(other, where="")


@dataclass
class SpanStats:
    """What a read saw: spans in all, by kind, the id of every span as 64 bits (:func:`id64`, 8 bytes a span: to
    tell orphans), the time window."""

    source: str
    format: str
    spans: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    span_ids: array[int] = field(default_factory=lambda: array("Q"))
    first_ns: int | None = None
    last_ns: int | None = None

    def saw(self, span_id: str, kind: str, start: int | None, end: int | None) -> None:
        self.spans += 1
        self.kinds[kind or "(none)"] += 1
        self.span_ids.append(id64(span_id))
        for t in (start, end):
            if t is not None:
                self.first_ns = t if self.first_ns is None else min(self.first_ns, t)
                self.last_ns = t if self.last_ns is None else max(self.last_ns, t)


def read_spans(
    source: Any,
    *,
    stats: SpanStats | None = None,
    query_id_attribute: str | None = None,
    format: str | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> tuple[SpanStats, Iterator[TracedSpan]]:
    """``(stats, spans)``: the stage spans of ``source`` as they are read (``stats`` fills as the iterator runs).

    ``source``: a path (``.json``/``.jsonl``, ``.pb``, ``.parquet``; ``.gz`` read transparently; ``format`` one of
    ``"otlp-json"``, ``"otlp-proto"``, ``"phoenix"`` to say it), a pandas DataFrame of Phoenix's spans, or an
    iterable of OpenTelemetry SDK spans. ``query_id_attribute``: an attribute holding the query's id, kept.
    ``max_line_bytes``: the longest line of OTLP JSON lines (and the largest single JSON document) read; a longer
    one is an InputError naming its line, not a read of unbounded memory."""
    if format is not None and format not in ("otlp-json", "otlp-proto", "phoenix"):
        raise InputError(f"format must be 'otlp-json', 'otlp-proto' or 'phoenix', not {format!r}")
    if _is_frame(source):
        stats = stats or SpanStats("a DataFrame in memory", "phoenix")
        return stats, _phoenix_frame(source, stats, query_id_attribute, "row")
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise InputError("no such file", source=path)
        fmt = format or _sniff(path)
        stats = stats or SpanStats(path, fmt)
        if fmt == "otlp-json":
            return stats, _otlp_json_file(path, stats, query_id_attribute, max_line_bytes)
        readers = {"otlp-proto": _otlp_proto_file, "phoenix": _parquet_file}
        return stats, readers[fmt](path, stats, query_id_attribute)
    if isinstance(source, Iterable):
        stats = stats or SpanStats("OpenTelemetry SDK spans in memory", "otel-sdk")
        return stats, _sdk_spans(source, stats, query_id_attribute)
    raise TypeError(f"cannot read spans from a {type(source).__name__}: give a path, a DataFrame or SDK spans")


def _is_frame(value: Any) -> bool:
    return type(value).__name__ == "DataFrame" and hasattr(value, "columns")


def _open(path: str) -> Any:
    with open(path, "rb") as probe:
        zipped = probe.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if zipped else open(path, "rb")


def _sniff(path: str) -> str:
    with _open(path) as stream:
        head = stream.read(4096)
    if head[:4] == b"PAR1":
        return "phoenix"
    if head.lstrip()[:1] in (b"{", b"["):
        return "otlp-json"
    if not head.strip():
        raise InputError("empty file", source=path)
    return "otlp-proto"


# ----- flat attributes (OTLP and the SDK) -------------------------------------------------------------------------


def _from_flat(
    attributes: Mapping[str, Any],
    *,
    trace_id: str,
    span_id: str,
    parent_id: str | None,
    name: str,
    start: int | None,
    end: int | None,
    error: str | None,
    stats: SpanStats,
    query_id_attribute: str | None,
    where: str,
) -> TracedSpan | None:
    kind = attributes.get(SPAN_KIND)
    kind = kind if isinstance(kind, str) else ""
    stats.saw(span_id, kind, start, end)
    if kind not in STAGE_KINDS:
        return None
    lists: dict[str, dict[int, dict[str, Any]]] = {}
    for key, value in attributes.items():
        head, dot, part = key.partition(".document.")  # <list>.<N>.document.<field>
        if not dot:
            continue
        prefix, _, index = head.rpartition(".")
        if prefix in _LISTS and index.isdigit() and index.isascii() and part.isidentifier():
            items = lists.get(prefix)
            if items is None:
                items = lists[prefix] = {}
            fields = items.get(int(index))
            if fields is None:
                fields = items[int(index)] = {}
            fields[part] = value
    docs: dict[str, list[Mapping[str, Any]] | None] = {"documents": None, "inputs": None}
    problems: list[str] = []
    broken = None
    for prefix, items in lists.items():
        if sorted(items) != list(range(len(items))):
            broken = f"{prefix} that skip an index (a document missing: its place in the ranking unknown)"
        docs[_LISTS[prefix]] = [items[i] for i in sorted(items)]
    return _span(
        kind,
        attributes.get,
        docs,
        prefix="",
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=name,
        start=start,
        end=end,
        error=error,
        query_id_attribute=query_id_attribute,
        where=where,
        problems=problems,
        broken=broken,
    )


def _span(
    kind: str,
    get: Any,
    docs: Mapping[str, list[Mapping[str, Any]] | None],
    *,
    prefix: str,
    trace_id: str,
    span_id: str,
    parent_id: str | None,
    name: str,
    start: int | None,
    end: int | None,
    error: str | None,
    query_id_attribute: str | None,
    where: str,
    problems: list[str],
    broken: str | None = None,
) -> TracedSpan:
    query = get("reranker.query") if kind == "RERANKER" else None
    if not isinstance(query, str):
        query = _query_of(get("input.value"))
    output = docs["documents"]
    if kind == "RERANKER" and output is None and docs.get("inputs") is not None and get("reranker.top_k") is None:
        problems.append("a reranker span without reranker.output_documents")
    top_k = get("reranker.top_k")
    model = get("reranker.model_name")
    query_id = get(query_id_attribute) if query_id_attribute else None
    keys = (f"{prefix}id", f"{prefix}score", f"{prefix}content", f"{prefix}metadata")
    documents = None if output is None else tuple(_doc(d, keys, problems) for d in output)
    inputs = None if docs.get("inputs") is None else tuple(_doc(d, keys, problems) for d in docs["inputs"] or ())
    return TracedSpan(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=name,
        kind=kind,
        start_ns=start,
        end_ns=end,
        error=error,
        query=query,
        documents=documents,
        inputs=inputs,
        top_k=_int_or_none(top_k),
        model_name=model if isinstance(model, str) else None,
        query_id=None if query_id is None else str(query_id),
        where=where,
        problems=tuple(problems),
        broken=broken,
    )


def _int_or_none(value: Any) -> int | None:
    try:
        return None if value is None or value != value else int(value)
    except (TypeError, ValueError):
        return None


def _query_of(value: Any) -> str | None:
    """The query of ``input.value``: the text itself, or (a JSON object, as LlamaIndex's inner calls and Haystack
    record it) its ``query``, ``query_str`` or ``query_bundle.query_str``."""
    if not isinstance(value, str):
        return None
    stripped = value.lstrip()
    if stripped.startswith("{"):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        if isinstance(parsed, dict):
            for candidate in (parsed.get("query"), parsed.get("query_str"), (parsed.get("query_bundle") or {})):
                if isinstance(candidate, dict):
                    candidate = candidate.get("query_str")
                if isinstance(candidate, str):
                    return candidate
            return None
    return value


def _doc(raw: Mapping[str, Any], keys: tuple[str, str, str, str], problems: list[str]) -> TracedDoc:
    """A document of its fields (``keys``: their names, with or without the ``document.`` of Phoenix's form)."""
    get = raw.get
    doc_id, score, content, metadata = get(keys[0]), get(keys[1]), get(keys[2]), get(keys[3])
    if doc_id is not None and type(doc_id) is not str:
        doc_id = str(doc_id) if isinstance(doc_id, int) else None
    if type(score) is float and score == score:
        pass
    elif isinstance(score, bool) or not isinstance(score, (int, float)) or score != score:
        if score is not None:
            problems.append("a document score that is not a number (left out)")
        score = None
    if content is not None and type(content) is not str:
        content = None
    if metadata is None:
        pass
    elif isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except ValueError:
            problems.append("a document metadata that is not JSON (left out)")
            metadata = None
    if metadata is not None and not isinstance(metadata, Mapping):
        metadata = None
    return TracedDoc(doc_id or None, None if score is None else float(score), content, metadata)


# ----- OTLP JSON --------------------------------------------------------------------------------------------------


def _hex_id(value: Any, size: int) -> str | None:
    """An OTLP id: hex in OTLP JSON, base64 in protobuf's own JSON mapping; None when empty or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    if len(value) == 2 * size and all(c in "0123456789abcdefABCDEF" for c in value):
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw.hex() if len(raw) == size else None


def _any_value(value: Any) -> Any:
    if type(value) is not dict:
        return None
    if "stringValue" in value:
        return value["stringValue"]
    for kind in ("stringValue", "boolValue", "doubleValue"):
        if kind in value:
            return value[kind]
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return None
    if "arrayValue" in value:
        return [_any_value(v) for v in (value["arrayValue"] or {}).get("values", [])]
    return None


def _otlp_json_file(
    path: str, stats: SpanStats, query_id_attribute: str | None, limit: int = MAX_LINE_BYTES
) -> Iterator[TracedSpan]:
    """JSON lines are streamed a line at a time (none longer than ``limit`` bytes); a file whose first line is not
    a whole JSON object is one request (pretty-printed, say), read whole if it is at most ``limit`` bytes."""
    with _open(path) as stream:
        first = _line(stream, path, 1, limit)
        try:
            json.loads(first)
        except ValueError:
            rest = stream.read(limit + 1 - len(first))
            if len(first) + len(rest) > limit:
                raise InputError(
                    f"a single JSON document over {_mib(limit)} (not JSON lines, whose first line would be a whole "
                    "request): too large to read whole; export one request per line (a collector's file exporter "
                    "does) to stream it",
                    source=path,
                ) from None
            try:
                request = json.loads(first + rest)
            except ValueError as exc:
                raise InputError(f"not valid JSON ({exc})", source=path) from None
            del first, rest
            yield from _otlp_request(request, path, None, stats, query_id_attribute)
            return
        number, line = 1, first
        while line:
            if line.strip():
                try:
                    request = json.loads(line)
                except ValueError as exc:
                    if not line.endswith(b"\n"):  # (only the last line can end without one)
                        raise InputError(
                            f"the last line is cut short ({len(line):,} bytes without an end: a truncated export?); "
                            f"the {number - 1:,} lines before it are whole: remove it to read them "
                            f"(head -n {number - 1})",
                            source=path,
                            line=number,
                        ) from None
                    raise InputError(f"not valid JSON ({exc})", source=path, line=number) from None
                del line  # the parsed request alone is held while its spans are read
                yield from _otlp_request(request, path, number, stats, query_id_attribute)
                del request
            number += 1
            line = _line(stream, path, number, limit)


def _line(stream: Any, path: str, number: int, limit: int) -> bytes:
    try:
        line: bytes = stream.readline(limit + 1)
    except (EOFError, gzip.BadGzipFile, OSError) as exc:
        raise InputError(f"the compressed file is cut short or damaged ({exc})", source=path, line=number) from None
    if len(line) > limit:
        raise InputError(
            f"a line over {_mib(limit)} (max_line_bytes): one OTLP request too large to read; export smaller "
            "batches (the batch span processor's max_export_batch_size)",
            source=path,
            line=number,
        )
    return line


def _mib(size: int) -> str:
    return f"{size / 2**20:,.0f} MiB" if size >= 2**20 else f"{size:,} bytes"


def _otlp_request(
    request: Any, path: str, line: int | None, stats: SpanStats, query_id_attribute: str | None
) -> Iterator[TracedSpan]:
    if not isinstance(request, dict) or not isinstance(request.get("resourceSpans"), list):
        raise InputError("not an OTLP trace export: no 'resourceSpans' list", source=path, line=line)
    for r, item in enumerate(request["resourceSpans"]):
        scopes = (item or {}).get("scopeSpans", (item or {}).get("instrumentationLibrarySpans", []))
        for s, scope in enumerate(scopes or []):
            for i, span in enumerate((scope or {}).get("spans") or []):
                found = _otlp_span(
                    span, f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]", path, line, stats, query_id_attribute
                )
                if found is not None:
                    yield found


def _otlp_span(
    span: Any, where: str, path: str, line: int | None, stats: SpanStats, query_id_attribute: str | None
) -> TracedSpan | None:
    if not isinstance(span, dict):
        raise InputError(f"{where} is not an object", source=path, line=line)
    listed = span.get("attributes") or []
    kind = next((a.get("value") for a in listed if type(a) is dict and a.get("key") == SPAN_KIND), None)
    kind = _any_value(kind)
    if kind not in STAGE_KINDS:  # a span that is no stage: its id, kind and times alone are read
        stats.saw(
            _hex_id(span.get("spanId"), 8) or f"{line}:{where}",
            kind if isinstance(kind, str) else "",
            _int_or_none(span.get("startTimeUnixNano")),
            _int_or_none(span.get("endTimeUnixNano")),
        )
        return None
    attributes: dict[str, Any] = {
        a["key"]: _any_value(a.get("value")) for a in listed if type(a) is dict and isinstance(a.get("key"), str)
    }
    status = span.get("status") or {}
    error = None
    if status.get("code") in (2, "STATUS_CODE_ERROR"):
        error = status.get("message") or "the span's status is ERROR"
    return _from_flat(
        attributes,
        trace_id=_hex_id(span.get("traceId"), 16) or "",
        span_id=_hex_id(span.get("spanId"), 8) or f"{line}:{where}",
        parent_id=_hex_id(span.get("parentSpanId"), 8),
        name=str(span.get("name") or ""),
        start=_int_or_none(span.get("startTimeUnixNano")),
        end=_int_or_none(span.get("endTimeUnixNano")),
        error=error,
        stats=stats,
        query_id_attribute=query_id_attribute,
        where=f"{path}{'' if line is None else f':{line}'} {where}",
    )


# ----- OTLP protobuf ----------------------------------------------------------------------------------------------


def _otlp_proto_file(path: str, stats: SpanStats, query_id_attribute: str | None) -> Iterator[TracedSpan]:
    """One span at a time: the request's wire format is walked (``resource_spans`` 1 > ``scope_spans`` 2 >
    ``spans`` 2, each length-delimited) and each span's bytes alone decoded, so memory holds one span."""
    from .._optional import require

    feature = "reading an OTLP protobuf export"
    trace_pb2 = require("opentelemetry.proto.trace.v1.trace_pb2", extra="traces", feature=feature)
    MessageToDict = require("google.protobuf.json_format", extra="traces", feature=feature).MessageToDict
    seen = 0
    with _open(path) as stream:
        for where, data in _wire_spans(stream, path):
            try:
                message = trace_pb2.Span.FromString(data)
            except Exception as exc:  # noqa: BLE001 (protobuf's DecodeError, among others)
                raise InputError(f"not an OTLP protobuf export: {where} is not a Span ({exc})", source=path) from None
            seen += 1
            # the JSON form (ids in base64: _hex_id reads both)
            found = _otlp_span(MessageToDict(message), where, path, None, stats, query_id_attribute)
            if found is not None:
                yield found
    if not seen:
        raise InputError("an OTLP protobuf export without spans (or not one at all)", source=path)


def _wire_spans(stream: Any, path: str) -> Iterator[tuple[str, bytes]]:
    """``(where, bytes)`` of each span of an ``ExportTraceServiceRequest`` read from ``stream``."""
    r = 0
    for number, end in _fields(stream, path, None):
        if number != 1:
            continue
        s = 0
        for inner, scope_end in _fields(stream, path, end):
            if inner != 2:
                continue
            i = 0
            for leaf, span_end in _fields(stream, path, scope_end):
                if leaf == 2:
                    data = stream.read(span_end - stream.tell())
                    if stream.tell() < span_end:
                        raise InputError(f"the protobuf export is cut short (at byte {stream.tell():,})", source=path)
                    yield f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]", data
                    i += 1
            s += 1
        r += 1


def _fields(stream: Any, path: str, end: int | None) -> Iterator[tuple[int, int]]:
    """The length-delimited fields of a message ending at byte ``end`` (None: the end of the file), as ``(field
    number, its end)``; the caller reads what it wants of each, the rest is skipped (as are fields of other wire
    types)."""
    while end is None or stream.tell() < end:
        key = _varint(stream, path, end is None)
        if key is None:
            return
        field, wire = key >> 3, key & 7
        if wire == 0:
            _varint(stream, path, False)
            continue
        size = {1: 8, 5: 4}.get(wire)
        if size is None and wire == 2:
            size = _varint(stream, path, False)
            assert size is not None
            stop = stream.tell() + size
            yield field, stop
            size = stop - stream.tell()
        if size is None or size < 0 or field == 0:
            raise InputError(
                f"not an OTLP protobuf export (ExportTraceServiceRequest): wire type {wire} of field {field} at byte "
                f"{stream.tell():,}",
                source=path,
            )
        if size and len(stream.read(size)) < size:
            raise InputError(f"the protobuf export is cut short (at byte {stream.tell():,})", source=path)
    if stream.tell() != end:
        raise InputError(f"not an OTLP protobuf export: a field runs past its message (at byte {end:,})", source=path)


def _varint(stream: Any, path: str, eof_ok: bool) -> int | None:
    value = shift = 0
    while True:
        byte: bytes = stream.read(1)
        if not byte:
            if eof_ok and shift == 0:
                return None
            raise InputError(f"the protobuf export is cut short (at byte {stream.tell():,})", source=path)
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
        shift += 7
        if shift > 63:
            raise InputError(f"not an OTLP protobuf export (a bad varint at byte {stream.tell():,})", source=path)


# ----- Phoenix's spans DataFrame (and Parquet) -------------------------------------------------------------------


def _parquet_file(path: str, stats: SpanStats, query_id_attribute: str | None) -> Iterator[TracedSpan]:
    import pyarrow.parquet as pq

    try:
        reader = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 (pyarrow's ArrowInvalid, OSError)
        raise InputError(f"not a readable Parquet file ({exc})", source=path) from None
    offset = 0
    for batch in reader.iter_batches(batch_size=10_000):
        frame = batch.to_pandas()
        yield from _phoenix_frame(frame, stats, query_id_attribute, f"{path} row", offset)
        offset += len(frame)


def _nanos(value: Any) -> int | None:
    if value is None:
        return None
    if hasattr(value, "value") and hasattr(value, "tzinfo"):  # a pandas Timestamp (NaT has no value to give)
        return None if value != value else int(value.value)
    if isinstance(value, (int, float)) and value == value:
        return int(value)
    return None


def _phoenix_frame(
    frame: Any, stats: SpanStats, query_id_attribute: str | None, label: str, offset: int = 0
) -> Iterator[TracedSpan]:
    columns = set(frame.columns)
    if "context.span_id" not in columns and frame.index.name == "context.span_id":
        frame = frame.reset_index()
        columns = set(frame.columns)
    missing = [c for c in ("name", "context.trace_id", "context.span_id") if c not in columns]
    if missing:
        raise InputError(
            f"not Phoenix's spans frame: no column {', '.join(map(repr, missing))} "
            "(get_spans_dataframe gives name, span_kind, parent_id, context.trace_id, context.span_id, ...)",
            source=stats.source,
        )
    kind_column = "span_kind" if "span_kind" in columns else f"attributes.{SPAN_KIND}"
    for i, row in enumerate(frame.to_dict("records")):

        def get(key: str, row: dict[str, Any] = row) -> Any:
            value = row.get(f"attributes.{key}")
            return None if value is None or (isinstance(value, float) and value != value) else value

        kind = row.get(kind_column)
        kind = kind if isinstance(kind, str) else ""
        span_id = str(row["context.span_id"])
        start, end = _nanos(row.get("start_time")), _nanos(row.get("end_time"))
        stats.saw(span_id, kind, start, end)
        if kind not in STAGE_KINDS:
            continue
        parent = row.get("parent_id")
        status = row.get("status_code")
        error = (row.get("status_message") or "the span's status is ERROR") if status == "ERROR" else None
        docs = {
            "documents": _records(get("retrieval.documents" if kind == "RETRIEVER" else "reranker.output_documents")),
            "inputs": _records(get("reranker.input_documents")),
        }
        yield _span(
            kind,
            get,
            docs,
            prefix="document.",
            trace_id=str(row["context.trace_id"]),
            span_id=span_id,
            parent_id=parent if isinstance(parent, str) and parent else None,
            name=str(row["name"]),
            start=start,
            end=end,
            error=error,
            query_id_attribute=query_id_attribute,
            where=f"{label} {offset + i + 1}",
            problems=[],
        )


def _records(value: Any) -> list[Mapping[str, Any]] | None:
    if value is None:
        return None
    items = value.tolist() if hasattr(value, "tolist") else value
    return [v if isinstance(v, Mapping) else {} for v in items]


# ----- OpenTelemetry SDK spans ------------------------------------------------------------------------------------


def _sdk_spans(spans: Iterable[Any], stats: SpanStats, query_id_attribute: str | None) -> Iterator[TracedSpan]:
    for i, span in enumerate(spans):
        context = span.context
        status = getattr(span, "status", None)
        error = None
        if status is not None and getattr(status.status_code, "name", "") == "ERROR":
            error = status.description or "the span's status is ERROR"
        found = _from_flat(
            dict(span.attributes or {}),
            trace_id=f"{context.trace_id:032x}",
            span_id=f"{context.span_id:016x}",
            parent_id=f"{span.parent.span_id:016x}" if span.parent is not None else None,
            name=span.name,
            start=span.start_time,
            end=span.end_time,
            error=error,
            stats=stats,
            query_id_attribute=query_id_attribute,
            where=f"span {i}",
        )
        if found is not None:
            yield found
