"""Huge trace exports (rag_eval.data.traces, rag_eval.stages.traced): streamed in bounded memory, and the problems of
a huge file (a line cut short, a line too long, a line that is not OTLP, a protobuf cut short) said with the file
and the line. The bound itself, at a million spans, is measured by benchmarks/bench_traces.py (RESULTS.md)."""

from __future__ import annotations

import gzip
import json
import random
import tracemalloc
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_eval.data.traces import content_id, read_spans
from rag_eval.errors import InputError, TraceProblems
from rag_eval.stages.traced import from_traces

from .test_traces import _otlp_span, _rerank_span


def _span(t: int, n: int, name: str, kind: str, attrs: dict[str, Any], parent: bool = True) -> dict[str, Any]:
    """Span ``n`` of trace ``t``: its ids, times and attributes as OTLP JSON writes them."""
    start = 1_700_000_000_000_000_000 + t * 10**9 + n * 1000
    attributes = {"openinference.span.kind": kind, "input.value": f"question {t} on topic {t % 13}", **attrs}
    return {
        "traceId": f"{t + 1:032x}",
        "spanId": f"{t * 8 + n + 1:016x}",
        "parentSpanId": f"{t * 8 + 1:016x}" if parent else "",
        "name": name,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 500 * (5 - n)),
        "attributes": [
            {"key": k, "value": {"doubleValue": v} if isinstance(v, float) else {"stringValue": v}}
            for k, v in attributes.items()
        ],
    }


def _spans(traces: int, docs: int = 10) -> list[dict[str, Any]]:
    """``traces`` traces of four spans (a root, a retriever of ``docs``, a reranker keeping 3, an LLM call), with
    the attributes an instrumented app records; scores with many digits, to see them read exactly."""
    out = []
    for t in range(traces):
        ids = [f"doc{(t * 7 + d) % 997}" for d in range(docs)]
        found: dict[str, Any] = {}
        for d, doc in enumerate(ids):
            found[f"retrieval.documents.{d}.document.id"] = doc
            found[f"retrieval.documents.{d}.document.score"] = (docs - d) / 7 + t * 1e-9
            found[f"retrieval.documents.{d}.document.content"] = f"the text of {doc} " * 8
            found[f"retrieval.documents.{d}.document.metadata"] = json.dumps({"page": d})
        kept: dict[str, Any] = {"reranker.query": f"question {t} on topic {t % 13}"}
        for d in range(3):
            kept[f"reranker.output_documents.{d}.document.id"] = ids[docs - 1 - d]
            kept[f"reranker.output_documents.{d}.document.score"] = (3 - d) / 3
        out += [
            _span(t, 0, "rag", "CHAIN", {"output.value": "an answer " * 20}, parent=False),
            _span(t, 1, "retrieve", "RETRIEVER", found),
            _span(t, 2, "rerank", "RERANKER", kept),
            _span(t, 3, "llm", "LLM", {"output.value": "an answer " * 20}),
        ]
    return out


def _lines(path: Path, spans: list[dict[str, Any]], per_line: int) -> Path:
    with open(path, "w", encoding="utf-8") as out:
        for at in range(0, len(spans), per_line):
            scope = {"scope": {}, "spans": spans[at : at + per_line]}
            out.write(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [scope]}]}) + "\n")
    return path


def _same_result(a: Any, b: Any) -> None:
    assert list(a.stages) == list(b.stages) and a.query_ids == b.query_ids and len(a.query_ids) > 0
    for name in a.stages:
        x, y = a.stages[name], b.stages[name]
        assert x.query_ids == y.query_ids
        for q in x.query_ids:
            hx, hy = x.outcomes[q].hits, y.outcomes[q].hits
            assert [h.doc_id for h in hx] == [h.doc_id for h in hy] and len(hx) > 0
            np.testing.assert_allclose([h.score for h in hx], [h.score for h in hy], rtol=0, atol=1e-12)
        np.testing.assert_array_equal(x.table.column("latency").to_numpy(), y.table.column("latency").to_numpy())


def test_spans_of_a_trace_scattered_across_lines_read_as_one_line(tmp_path):
    spans = _spans(200)
    whole = from_traces(_lines(tmp_path / "one.jsonl", spans, len(spans)))
    scattered = spans[:]
    random.Random(7).shuffle(scattered)  # a trace's spans on different lines, in any order
    shuffled = from_traces(_lines(tmp_path / "scattered.jsonl", scattered, 37))
    assert sorted(shuffled.query_ids) == sorted(whole.query_ids)
    ordered = from_traces(_lines(tmp_path / "ordered.jsonl", spans, 37))
    _same_result(whole, ordered)
    for q in whole.query_ids:  # the same ranking, scores and latency per query, whatever the order of the lines
        for name in whole.stages:
            a, b = whole.stages[name].outcomes[q], shuffled.stages[name].outcomes[q]
            assert [(h.doc_id, h.score) for h in a.hits] == [(h.doc_id, h.score) for h in b.hits]
            assert a.latency == b.latency > 0
    first = whole.stages["retrieve"].outcomes["q" + content_id("question 5 on topic 5")].hits
    assert [h.doc_id for h in first[:2]] == ["doc35", "doc36"]
    assert first[0].score == 10 / 7 + 5e-9 and first[0].text is None  # contents read to hash, then let go
    assert whole.pipeline.source["spans"] == 800 and whole.pipeline.source["spans_used"] == 400


def test_contents_kept_when_asked(tmp_path):
    path = _lines(tmp_path / "t.jsonl", _spans(3), 12)
    kept = from_traces(path, contents=True)
    hit = kept.stages["retrieve"].outcomes[kept.query_ids[0]].hits[0]
    assert hit.text == "the text of doc0 " * 8 and dict(hit.metadata) == {"page": 0}
    _same_result(kept, from_traces(path))


def test_a_large_export_is_read_in_bounded_memory(tmp_path):
    """20,000 spans (5,000 traces, 37 MiB): the read's peak of traced allocations stays under 24 MiB (12 MiB when
    written), below the export's own size, which a whole-file read holds at the least (parsing every line of it at
    once peaked at 163 MiB): per query a few hundred bytes of columns are kept, and one line of 512 spans is
    parsed at a time."""
    path = _lines(tmp_path / "big.jsonl", _spans(5000), 512)
    size = path.stat().st_size
    assert size > 30 * 2**20
    tracemalloc.start()
    try:
        result = from_traces(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(result.query_ids) == 5000
    assert sum(len(o.hits) for o in result.stages["retrieve"].outcomes.values()) == 50_000
    assert peak < 24 * 2**20 < size, (peak / 2**20, size / 2**20)


# -- the problems of a huge file, each said with the file and the line ---------------------------------------------


def test_a_last_line_cut_short_names_the_line_and_how_to_read_the_rest(tmp_path):
    path = _lines(tmp_path / "cut.jsonl", _spans(20), 16)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 5000])  # a collector killed while writing its last batch
    with pytest.raises(InputError) as caught:
        from_traces(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:5: the last line is cut short (")
    assert "the 4 lines before it are whole: remove it to read them (head -n 4)" in message
    zipped = tmp_path / "cut.jsonl.gz"
    zipped.write_bytes(gzip.compress(data)[:-200])
    with pytest.raises(InputError, match=r"cut\.jsonl\.gz:\d: the compressed file is cut short or damaged"):
        from_traces(zipped)


def test_a_line_over_the_limit_is_refused_with_its_number(tmp_path):
    spans = _spans(11)
    path = _lines(tmp_path / "long.jsonl", spans[:4], 4)
    with open(path, "a", encoding="utf-8") as out:  # a long second line (a huge batch)
        out.write(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans[4:]}]}]}) + "\n")
    longest = len(path.read_bytes().splitlines(keepends=True)[1])
    stats, read = read_spans(path, max_line_bytes=longest - 1)
    with pytest.raises(InputError) as caught:
        list(read)
    assert str(caught.value).startswith(f"{path}:2: a line over {longest - 1:,} bytes (max_line_bytes)")
    assert stats.spans == 4  # the first line was read
    assert len(list(read_spans(path, max_line_bytes=longest)[1])) == 2 * 11
    document = tmp_path / "doc.json"
    document.write_text(json.dumps(json.loads(path.read_text().splitlines()[0]), indent=2))
    with pytest.raises(InputError, match=r"a single JSON document over 100 bytes .* export one request per line"):
        list(read_spans(document, max_line_bytes=100)[1])


def test_a_line_that_is_not_otlp_names_its_line(tmp_path):
    path = _lines(tmp_path / "mixed.jsonl", _spans(4), 8)
    with open(path, "a", encoding="utf-8") as out:
        out.write('{"resourceLogs": []}\n')
    with pytest.raises(InputError, match=r"mixed\.jsonl:3: not an OTLP trace export: no 'resourceSpans' list"):
        from_traces(path)
    path.write_text(path.read_text().replace('{"resourceLogs": []}', "{not json"))
    with pytest.raises(InputError, match=r"mixed\.jsonl:3: not valid JSON"):
        from_traces(path)


def test_what_spans_lack_across_a_scattered_export_is_said_once_with_the_count(tmp_path):
    spans = [_otlp_span(i, f"{i + 1:032x}") for i in range(30)]
    reranks = [_rerank_span(i, f"{i + 1:032x}", parentSpanId=f"{7777:016x}") for i in range(30)]  # orphans
    skewed = [_otlp_span(200 + i, f"{200 + i:032x}", endTimeUnixNano="1") for i in range(5)]
    everything = spans + reranks + skewed + spans[:4]  # four duplicated spans, on the last line
    path = _lines(tmp_path / "lacking.jsonl", everything, 9)
    with pytest.warns(TraceProblems) as caught:
        traced = from_traces(path)
    assert len(caught) == 1
    message = str(caught[0].message)
    for said in (
        "30 orphan span(s) (their parent is not in the export): grouped by their trace (first: ",
        "5 span(s) ending before they start (clock skew): latency unknown",
        "4 duplicated span(s) (the same span id and content twice): read once (first: ",
        "5 traced queries whose stages differ from search >> rerank: left out",  # the skewed: retrieval alone
        "30 document(s) without an id: identified by the hash of their content",  # (of the queries kept)
    ):
        assert said in message, (said, message.split("; "))
    assert f"{path}:8 resourceSpans[0].scopeSpans[0].spans[" in message  # the first duplicate's place
    assert len(traced.query_ids) == 30 and list(traced.stages) == ["search", "rerank"]


# -- protobuf, read span by span -----------------------------------------------------------------------------------


@pytest.fixture
def protobuf_export(tmp_path) -> Path:
    pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
    import base64

    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    spans = _spans(40)
    for span in spans:  # protobuf's own JSON mapping: ids in base64
        for key in ("traceId", "spanId", "parentSpanId"):
            span[key] = base64.b64encode(bytes.fromhex(span[key])).decode() if span[key] else ""
    resources = [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans[at : at + 60]}]} for at in (0, 60, 120)]
    resources.append({"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans[180:]}]})
    request = ParseDict({"resourceSpans": resources}, ExportTraceServiceRequest())
    path = tmp_path / "spans.pb"
    path.write_bytes(request.SerializeToString())
    return path


def test_protobuf_read_span_by_span_equals_json_lines(protobuf_export, tmp_path):
    from_pb = from_traces(protobuf_export)
    assert from_pb.pipeline.source["format"] == "otlp-proto" and from_pb.pipeline.source["spans"] == 160
    _same_result(from_pb, from_traces(_lines(tmp_path / "same.jsonl", _spans(40), 50)))


def test_a_protobuf_export_cut_short_or_not_protobuf_is_said(protobuf_export, tmp_path):
    data = protobuf_export.read_bytes()
    cut = tmp_path / "cut.pb"
    cut.write_bytes(data[:-100])
    with pytest.raises(InputError, match=r"cut\.pb: the protobuf export is cut short \(at byte [\d,]+\)"):
        from_traces(cut)
    junk = tmp_path / "junk.pb"
    junk.write_bytes(b"\x0f" + data[1:200])
    with pytest.raises(InputError, match=r"junk\.pb: not an OTLP protobuf export .*wire type 7 of field 1"):
        from_traces(junk, format="otlp-proto")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(from_traces(protobuf_export).query_ids) == 40  # the whole one reads without a caveat
