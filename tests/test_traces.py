"""Stages read from recorded traces (rag_eval.stages.traced): real OpenInference instrumentation of LangChain,
LlamaIndex and Haystack, recorded by the OpenTelemetry SDK's in-memory exporter, read from the SDK's spans, an OTLP
JSON file, an OTLP protobuf file and a Phoenix-style spans frame; the evaluation of the traced run equals the
evaluation of the same stages run through rag_eval, to 1e-12, on every metric."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("opentelemetry.sdk.trace")
pytest.importorskip("openinference.instrumentation")

from google.protobuf.json_format import MessageToJson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import rag_eval
from rag_eval.data.traces import content_id
from rag_eval.errors import InputError, TraceProblems
from rag_eval.stages import Pipeline
from rag_eval.stages.traced import from_traces

from .adapter_contract import CORPUS, QUERIES

QRELS = {
    "q1": {"doc1#c1": 2, "doc1#c3": 1, "doc1#c2": 1},
    "q2": {"doc3#c1": 2, "doc3#c2": 2},
    "q3": {"doc5#c2": 2, "doc5#c1": 1},
    "q4": {"doc6#c2": 2, "doc6#c1": 1, "doc6#c3": 1},
}
EXTRA = ["ndcg@3", "map", "recall@2", "mrr@5", "precision@3"]


@pytest.fixture(scope="module")
def tracing() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _instrumented(instrumentor: Any, provider: TracerProvider) -> Iterator[Any]:
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield instrumentor
    finally:
        instrumentor.uninstrument()


def _per_query(report: Any) -> pd.DataFrame:
    frame = report.per_query.sort_values(["run", "stage", "query_id", "metric"]).reset_index(drop=True)
    return frame


def _assert_same_evaluation(traced: Any, direct: Any, qrels: dict, traced_qrels: dict | None = None) -> None:
    for metrics in (None, EXTRA):
        a = _per_query(rag_eval.evaluate(rag_eval.Qrels.from_dict(traced_qrels or qrels), traced, metrics=metrics))
        b = _per_query(rag_eval.evaluate(rag_eval.Qrels.from_dict(qrels), direct, metrics=metrics))
        assert len(a) == len(b) > 0
        keys = ["run", "stage", "query_id", "metric"]
        assert a[keys].equals(b[keys])
        np.testing.assert_allclose(a["value"].to_numpy(float), b["value"].to_numpy(float), rtol=0, atol=1e-12)
        assert a["value"].notna().sum() > len(a) // 2  # real values, not NaN everywhere


# -- LangChain -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def langchain_spans(tracing):
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from openinference.instrumentation.langchain import LangChainInstrumentor

    from .test_adapters_langchain import HashEmbeddings, KeywordOverlapCompressor, _store

    provider, exporter = tracing
    store = _store(HashEmbeddings())
    compression = ContextualCompressionRetriever(
        base_compressor=KeywordOverlapCompressor(top_n=3), base_retriever=store.as_retriever(search_kwargs={"k": 6})
    )
    exporter.clear()
    for _ in _instrumented(LangChainInstrumentor(), provider):
        for text in QUERIES.values():
            compression.invoke(text)
    spans = exporter.get_finished_spans()
    exporter.clear()
    return spans, compression


def test_langchain_traced_equals_the_direct_run_with_ids_by_content_hash(langchain_spans):
    from rag_eval.adapters import langchain as lc

    spans, compression = langchain_spans
    direct = lc.pipeline(compression, depth=6, budget=2, name="cc").run(QUERIES)
    names = {
        "VectorStoreRetriever": "cc/VectorStoreRetriever",
        "ContextualCompressionRetriever": "cc/KeywordOverlapCompressor",
    }
    # LangChain's instrumentation records no Document.id: each document is named by the hash of its content
    with pytest.warns(TraceProblems, match=r"8 document\(s\) without an id|without an id: identified by the hash"):
        traced = from_traces(spans, queries=QUERIES, names=names, budget=2)
    assert (
        repr(traced.pipeline)
        == repr(direct.pipeline)
        == "cc/VectorStoreRetriever %6 >> cc/KeywordOverlapCompressor %budget(2)"
    )
    hashed = {q: {content_id(CORPUS[d]): g for d, g in judged.items()} for q, judged in QRELS.items()}
    first = traced.stages["cc/VectorStoreRetriever"].outcomes["q1"].hits
    assert [h.doc_id for h in first] == [
        content_id(CORPUS[h.doc_id]) for h in direct.stages["cc/VectorStoreRetriever"].outcomes["q1"].hits
    ]
    _assert_same_evaluation(traced, direct, QRELS, hashed)


def test_langchain_ids_from_metadata_with_id_key(tracing):
    from openinference.instrumentation.langchain import LangChainInstrumentor

    from rag_eval.adapters import langchain as lc

    from .test_adapters_langchain import KeywordOverlapCompressor, KeywordRetriever

    provider, exporter = tracing
    from langchain_classic.retrievers import ContextualCompressionRetriever

    compression = ContextualCompressionRetriever(
        base_compressor=KeywordOverlapCompressor(top_n=3), base_retriever=KeywordRetriever(k=4)
    )
    exporter.clear()
    for _ in _instrumented(LangChainInstrumentor(), provider):
        for text in QUERIES.values():
            compression.invoke(text)
    spans = exporter.get_finished_spans()
    exporter.clear()
    traced = from_traces(
        spans,
        queries=QUERIES,
        id_key="chunk_id",
        names={"KeywordRetriever": "kw", "ContextualCompressionRetriever": "overlap"},
        budget=3,
    )
    direct = Pipeline(
        lc.retriever(KeywordRetriever(k=4), name="kw", id_key="chunk_id"),
        lc.reranker(KeywordOverlapCompressor(top_n=3), name="overlap"),
        depth=4,
        budget=3,
    ).run(QUERIES)
    assert traced.stages["kw"].outcomes["q2"].hits[0].doc_id.startswith("doc3#")
    _assert_same_evaluation(traced, direct, QRELS)


# -- LlamaIndex ----------------------------------------------------------------------------------------------------


def _overlap_rerank():
    """A LlamaIndex reranker (a node postprocessor announcing its rerank through LlamaIndex's ReRank events, as
    its own rerankers do): by the share of query words, top 3, new nodes."""
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import NodeWithScore

    from .adapter_contract import overlap

    dispatcher = get_dispatcher("tests.test_traces")

    class OverlapRerank(BaseNodePostprocessor):
        top_n: int = 3

        def _postprocess_nodes(self, nodes, query_bundle=None):
            query = query_bundle.query_str
            dispatcher.event(ReRankStartEvent(query=query_bundle, nodes=nodes, top_n=self.top_n, model_name="overlap"))
            scored = [NodeWithScore(node=n.node, score=overlap(query, n.node.get_content())) for n in nodes]
            ranked = sorted(scored, key=lambda n: -n.score)[: self.top_n]
            dispatcher.event(ReRankEndEvent(nodes=ranked))
            return ranked

    return OverlapRerank()


def test_llamaindex_traced_equals_the_direct_run(tracing):
    from llama_index.retrievers.bm25 import BM25Retriever
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    from rag_eval.adapters import llamaindex as li

    from .test_adapters_llamaindex import _nodes

    provider, exporter = tracing
    bm25 = BM25Retriever.from_defaults(nodes=_nodes(), similarity_top_k=5)
    rerank = _overlap_rerank()
    tracer = provider.get_tracer("tests")
    exporter.clear()
    for _ in _instrumented(LlamaIndexInstrumentor(), provider):
        for text in QUERIES.values():
            with tracer.start_as_current_span("rag"):  # the application's request: one trace per query
                rerank.postprocess_nodes(bm25.retrieve(text), query_str=text)
    spans = exporter.get_finished_spans()
    exporter.clear()
    kinds = [s.attributes.get("openinference.span.kind") for s in spans]
    assert kinds.count("RERANKER") == 4 and kinds.count("RETRIEVER") == 8  # retrieve and its inner _retrieve
    with pytest.warns(TraceProblems, match=r"4 nested span\(s\) recording no documents"):
        traced = from_traces(
            spans,
            queries=QUERIES,
            names={"BM25Retriever.retrieve": "bm25", "OverlapRerank._postprocess_nodes": "overlap"},
            budget=3,
        )
    assert traced.pipeline.stages[1].kind == "reranker"
    direct = Pipeline(li.retriever(bm25, name="bm25"), li.reranker(rerank, name="overlap"), depth=5, budget=3).run(
        QUERIES
    )
    _assert_same_evaluation(traced, direct, QRELS)
    assert (traced.latency["n"] == 4).all() and (traced.latency["p50"] > 0).all()


# -- Haystack ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def haystack_spans(tracing):
    from haystack import Pipeline as HaystackPipeline
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from openinference.instrumentation.haystack import HaystackInstrumentor

    from .test_adapters_haystack import OverlapRanker, _store

    provider, exporter = tracing
    store = _store()
    pipe = HaystackPipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(store, top_k=5))
    pipe.add_component("ranker", OverlapRanker(top_k=3))
    pipe.connect("retriever.documents", "ranker.documents")
    exporter.clear()
    # the instrumentor wraps every registered component class by its import path: a class another test defined
    # inside a function (test_adapters_haystack's Reverse, in the same worker) has none its module can resolve,
    # and wrapt refuses it; set such classes aside while instrumenting
    import sys

    from haystack import component

    def resolvable(cls: Any) -> bool:
        return getattr(sys.modules.get(cls.__module__), cls.__name__, None) is cls

    local = {k: v for k, v in component.registry.items() if not resolvable(v)}
    for key in local:
        del component.registry[key]
    try:
        for _ in _instrumented(HaystackInstrumentor(), provider):
            for text in QUERIES.values():
                pipe.run({"retriever": {"query": text}, "ranker": {"query": text}})
    finally:
        component.registry.update(local)
    spans = exporter.get_finished_spans()
    exporter.clear()
    return spans, store


def _haystack_direct(store):
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever

    from rag_eval.adapters import haystack as hs

    from .test_adapters_haystack import OverlapRanker

    return Pipeline(
        hs.retriever(InMemoryBM25Retriever(store, top_k=5), name="InMemoryBM25Retriever.run"),
        hs.reranker(OverlapRanker(top_k=3), name="OverlapRanker.run"),
        depth=5,
        budget=3,
    ).run(QUERIES)


def test_haystack_traced_equals_the_direct_run_from_sdk_json_and_protobuf(haystack_spans, tmp_path):
    spans, store = haystack_spans
    direct = _haystack_direct(store)
    request = encode_spans(spans)
    pb = tmp_path / "spans.pb"
    pb.write_bytes(request.SerializeToString())
    lines = tmp_path / "spans.jsonl"  # protobuf's own JSON mapping (ids in base64), one request per line
    lines.write_text(MessageToJson(request, indent=None) + "\n")
    otlp = tmp_path / "otlp.json"  # the OTLP/JSON form (ids in hex), pretty-printed as one document
    otlp.write_text(json.dumps(_hex_ids(json.loads(MessageToJson(request))), indent=2))
    results = [from_traces(source, queries=QUERIES, budget=3) for source in (spans, pb, lines, otlp)]
    for traced in results:
        assert repr(traced.pipeline) == "InMemoryBM25Retriever.run %5 >> OverlapRanker.run %budget(3)"
        _assert_same_evaluation(traced, direct, QRELS)
    assert results[1].pipeline.source["format"] == "otlp-proto" and results[3].pipeline.source["spans"] == len(spans)


def _hex_ids(value: Any) -> Any:
    import base64

    if isinstance(value, dict):
        return {
            k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") and v else _hex_ids(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


def _phoenix_frame(spans) -> pd.DataFrame:
    """The spans as Phoenix's get_spans_dataframe gives them: documents as lists of ``document.*`` dicts."""
    rows = []
    for s in spans:
        attributes = dict(s.attributes)
        row = {
            "name": s.name,
            "span_kind": attributes.get("openinference.span.kind", "UNKNOWN"),
            "parent_id": f"{s.parent.span_id:016x}" if s.parent else None,
            "start_time": pd.Timestamp(s.start_time, unit="ns", tz="UTC"),
            "end_time": pd.Timestamp(s.end_time, unit="ns", tz="UTC"),
            "status_code": "OK",
            "context.span_id": f"{s.context.span_id:016x}",
            "context.trace_id": f"{s.context.trace_id:032x}",
        }
        lists: dict[str, dict[int, dict[str, Any]]] = {}
        for key, value in attributes.items():
            parts = key.split(".")
            if parts[0] in ("retrieval", "reranker") and len(parts) == 5 and parts[2].isdigit():
                lists.setdefault(f"{parts[0]}.{parts[1]}", {}).setdefault(int(parts[2]), {})[f"document.{parts[4]}"] = (
                    value
                )
            else:
                row[f"attributes.{key}"] = value
        for name, docs in lists.items():
            row[f"attributes.{name}"] = [docs[i] for i in sorted(docs)]
        rows.append(row)
    return pd.DataFrame(rows).set_index("context.span_id")


def test_haystack_traced_from_a_phoenix_frame_and_its_parquet(haystack_spans, tmp_path):
    spans, store = haystack_spans
    direct = _haystack_direct(store)
    frame = _phoenix_frame(spans)
    path = tmp_path / "spans.parquet"
    frame.to_parquet(path)
    for source in (frame, path):
        traced = from_traces(source, queries=QUERIES, budget=3)
        _assert_same_evaluation(traced, direct, QRELS)


def test_the_card_and_result_folder_say_the_source_was_traces(haystack_spans, tmp_path):
    spans, _ = haystack_spans
    traced = from_traces(spans, queries=QUERIES, budget=3)
    report = rag_eval.evaluate(rag_eval.Qrels.from_dict(QRELS), traced)
    card = report.card.render()
    assert "source: traces, OpenTelemetry SDK spans in memory (otel-sdk), " in card
    assert f"{len(spans)} spans" in card and "8 stage spans used for 4 queries; window 20" in card
    report.save_folder(tmp_path / "out", qrels=QRELS, runs=traced, plots=False)
    loaded = rag_eval.Report.load_folder(tmp_path / "out")
    assert loaded.card.pipeline["source"]["spans_used"] == 8
    assert set(report.loss_items["fate"]) <= {"never_retrieved", "below_depth", "reranked_out", "delivered"}


# -- what-if: other depths and budgets, within what was recorded ---------------------------------------------------


def test_what_if_budget_within_the_recording_and_refused_beyond_it(haystack_spans):
    spans, _ = haystack_spans
    qrels = rag_eval.Qrels.from_dict(QRELS)
    at3 = from_traces(spans, queries=QUERIES)  # the budget recorded: the most the ranker delivered
    assert str(at3.pipeline.budget) == "budget(3)"
    at1 = from_traces(spans, queries=QUERIES, budget=1)
    values = rag_eval.evaluate(qrels, at1, metrics=["recall@budget"]).values(
        repr(at1.pipeline), "recall@budget", "OverlapRanker.run"
    )
    top1 = {q: at3.stages["OverlapRanker.run"].outcomes[q].hits[0].doc_id for q in QUERIES}
    expected = {q: (1 / len(QRELS[q]) if top1[q] in QRELS[q] else 0.0) for q in QUERIES}
    assert values.to_dict() == pytest.approx(expected, abs=1e-12)
    cut = sum(
        len(at3.stages["OverlapRanker.run"].outcomes[q].hits)
        < min(4, len(at3.stages["InMemoryBM25Retriever.run"].outcomes[q].hits))
        for q in QUERIES
    )
    assert cut >= 1
    with pytest.raises(InputError, match=rf"budget\(4\): on {cut} queries .* kept fewer hits than it was given"):
        from_traces(spans, queries=QUERIES, budget=4)
    with pytest.raises(InputError, match="depth 6: the traces recorded at most 5 candidates"):
        from_traces(spans, queries=QUERIES, depth=6)
    over = sum(len(at3.stages["InMemoryBM25Retriever.run"].outcomes[q].hits) > 3 for q in QUERIES)
    with pytest.raises(InputError, match=f"depth 3: on {over} queries stage 'OverlapRanker.run' was given more"):
        from_traces(spans, queries=QUERIES, depth=3)


def test_what_if_depth_of_a_one_stage_pipeline(haystack_spans):
    spans, _ = haystack_spans
    retriever_only = [s for s in spans if s.name != "OverlapRanker.run"]
    full = from_traces(retriever_only, queries=QUERIES)
    cut = from_traces(retriever_only, queries=QUERIES, depth=2, budget=2)
    for q in QUERIES:
        ids = [h.doc_id for h in full.stages["InMemoryBM25Retriever.run"].outcomes[q].hits]
        outcome = cut.stages["InMemoryBM25Retriever.run"].outcomes[q]
        assert [h.doc_id for h in outcome.hits] == ids[:2] and outcome.beyond_depth == tuple(ids[2:])


# -- queries: matched by text or by id -----------------------------------------------------------------------------


def test_traced_queries_matched_by_text_unmatched_counted(haystack_spans):
    spans, _ = haystack_spans
    fewer = {"q1": QUERIES["q1"], "q3": "  roman   roads across europe ", "qX": "a question never asked"}
    with pytest.warns(TraceProblems) as caught:
        traced = from_traces(spans, queries=fewer, budget=3)
    message = str(caught[0].message)
    assert "2 traced queries matching no query of the set by text: left out" in message
    assert "1 queries of the set with no trace: absent from the result (first: query 'qX')" in message
    assert traced.query_ids == ["q1", "q3"]
    untold = from_traces(spans, budget=3)
    assert sorted(untold.queries.values()) == sorted(QUERIES.values())
    assert all(q == "q" + content_id(t) for q, t in untold.queries.items())


def test_a_query_id_attribute_matches_by_id(tracing):
    provider, exporter = tracing
    tracer = provider.get_tracer("tests")
    exporter.clear()
    for qid, text in QUERIES.items():
        with tracer.start_as_current_span("retrieve") as span:
            span.set_attribute("openinference.span.kind", "RETRIEVER")
            span.set_attribute("input.value", text.upper())  # a text that would not match
            span.set_attribute("app.query_id", qid)
            span.set_attribute("retrieval.documents.0.document.id", "doc1#c1")
    spans = exporter.get_finished_spans()
    exporter.clear()
    traced = from_traces(spans, queries=QUERIES, query_id_attribute="app.query_id")
    assert traced.query_ids == list(QUERIES)


# -- bad input: each said once, with its count ---------------------------------------------------------------------


def _otlp_span(i: int, trace: str, **over: Any) -> dict[str, Any]:
    attributes = {
        "openinference.span.kind": "RETRIEVER",
        "input.value": f"question {i}",
        "retrieval.documents.0.document.id": f"d{i}",
        "retrieval.documents.0.document.score": 1.5,
        "retrieval.documents.1.document.content": f"text of e{i}",
    }
    attributes.update(over.pop("attributes", {}))
    span = {
        "traceId": trace,
        "spanId": f"{i + 1:016x}",
        "name": "search",
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + i * 1_000_000),
        "endTimeUnixNano": str(1_700_000_000_000_000_000 + i * 1_000_000 + 500_000),
        "attributes": [
            {"key": k, "value": {"doubleValue": v} if isinstance(v, float) else {"stringValue": v}}
            for k, v in attributes.items()
            if v is not None
        ],
    }
    span.update(over)
    return span


def _write(path, spans: list[dict[str, Any]]) -> Any:
    request = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}
    path.write_text(json.dumps(request) + "\n")
    return path


def test_bad_spans_are_each_said_once_with_their_counts(tmp_path):
    spans = [_otlp_span(i, f"{i + 1:032x}") for i in range(6)]
    spans[1] = _otlp_span(1, f"{2:032x}", parentSpanId=f"{999:016x}")  # orphan
    spans.append(dict(spans[2]))  # duplicated, the same content
    spans.append(_otlp_span(2, f"{3:032x}", attributes={"input.value": "other"}))  # same id, other content
    spans[3] = _otlp_span(3, f"{4:032x}", endTimeUnixNano=str(1_000))  # clock skew
    spans[4] = _otlp_span(4, f"{5:032x}", attributes={"input.value": None})  # no query
    spans[5] = _otlp_span(5, f"{6:032x}", attributes={"retrieval.documents.3.document.id": "gap"})
    path = _write(tmp_path / "bad.jsonl", spans)
    with pytest.warns(TraceProblems) as caught:
        traced = from_traces(path)
    assert len(caught) == 1
    message = str(caught[0].message)
    for said in (
        "1 orphan span(s) (their parent is not in the export): grouped by their trace",
        "1 duplicated span(s) (the same span id and content twice): read once",
        "1 span id(s) seen twice with different content: the first kept",
        "1 span(s) ending before they start (clock skew): latency unknown",
        "1 span(s) without a query (input.value or reranker.query) in a trace of no other queries: left out",
        "1 traced queries with retrieval.documents that skip an index (a document missing: its place in the "
        "ranking unknown): left out",
        "4 document(s) without an id: identified by the hash of their content",
    ):
        assert said in message, (said, message.split("; "))
    assert str(path) in message
    assert len(traced.query_ids) == 4
    latency = traced.latency
    assert latency.loc[0, "n"] == 3  # the skewed span's latency is unknown, not negative
    assert traced.pipeline.source["problems"] and traced.pipeline.source["spans"] == 8
    skewed = traced.stages["search"].outcomes["q" + content_id("question 3")]
    assert np.isnan(skewed.latency) and next(h.doc_id for h in skewed.hits) == "d3"


def test_a_document_of_neither_id_nor_content_leaves_its_query_out(tmp_path):
    spans = [
        _otlp_span(0, f"{1:032x}"),
        _otlp_span(1, f"{2:032x}", attributes={"retrieval.documents.2.document.score": 0.5}),
    ]
    with pytest.warns(TraceProblems, match="1 traced queries with a document of neither id nor content: left out"):
        traced = from_traces(_write(tmp_path / "t.jsonl", spans))
    assert list(traced.queries.values()) == ["question 0"]


def _rerank_span(i: int, trace: str, **over: Any) -> dict[str, Any]:
    span = _otlp_span(
        100 + i,
        trace,
        name="rerank",
        attributes={
            "openinference.span.kind": "RERANKER",
            "input.value": None,
            "retrieval.documents.0.document.id": None,
            "retrieval.documents.0.document.score": None,
            "retrieval.documents.1.document.content": None,
            "reranker.query": f"question {i}",
            "reranker.output_documents.0.document.id": f"d{i}",
        },
    )
    for key in ("startTimeUnixNano", "endTimeUnixNano"):  # after the retrieval
        span[key] = str(int(span[key]) + 10**9)
    span.update(over)
    return span


def test_a_failed_span_fails_its_stage_and_the_next_is_skipped(tmp_path):
    error = {"code": 2, "message": "store unreachable"}
    spans = [
        _otlp_span(0, f"{1:032x}"),
        _rerank_span(0, f"{1:032x}"),
        _otlp_span(1, f"{2:032x}", status=error),  # no rerank span: the pipeline stopped there
        _otlp_span(2, f"{3:032x}"),
        _rerank_span(2, f"{3:032x}", status={"code": "STATUS_CODE_ERROR", "message": "the reranker timed out"}),
    ]
    with pytest.warns(TraceProblems, match="without an id"):
        traced = from_traces(_write(tmp_path / "f.jsonl", spans))
    assert list(traced.stages) == ["search", "rerank"]
    q0, q1, q2 = ("q" + content_id(f"question {i}") for i in range(3))
    assert "store unreachable" in traced.stages["search"].failures[q1]
    assert traced.stages["rerank"].outcomes[q1].skipped
    assert "the reranker timed out" in traced.stages["rerank"].failures[q2]
    assert [h.doc_id for h in traced.stages["rerank"].outcomes[q0].hits] == ["d0"]


def test_not_a_trace_export_is_a_clear_error(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}\n')
    with pytest.raises(InputError, match="not an OTLP trace export"):
        from_traces(path)
    empty = _write(tmp_path / "none.jsonl", [replace_kind(_otlp_span(0, f"{1:032x}"))])
    with pytest.raises(InputError, match=r"no usable RETRIEVER or RERANKER span \(1 spans read: 1 CHAIN\)"):
        from_traces(empty)


def replace_kind(span: dict[str, Any]) -> dict[str, Any]:
    span["attributes"][0] = {"key": "openinference.span.kind", "value": {"stringValue": "CHAIN"}}
    return span


def test_traced_results_pool_for_labelling_with_their_texts(langchain_spans):
    from rag_eval.ground_truth.pooling import pool

    spans, _ = langchain_spans
    with pytest.warns(TraceProblems, match="identified by the hash of their content"):
        bare = from_traces(spans, queries=QUERIES, budget=2)  # contents read to hash them, then let go
    assert "text" not in bare.stages["VectorStoreRetriever"].table.schema.field("hits").type.value_type.names
    with pytest.warns(TraceProblems, match="identified by the hash of their content"):
        traced = from_traces(spans, queries=QUERIES, budget=2, contents=True)
    frame = pool(traced, depth=2).to_frame()
    assert len(frame) > 0 and set(frame["query_id"]) == set(QUERIES)
    by_hash = {content_id(text): text for text in CORPUS.values()}
    assert all(by_hash[d] == t for d, t in zip(frame["doc_id"], frame["text"]))  # each pooled chunk with its text
    assert (frame["query"] == frame["query_id"].map(QUERIES)).all()


def test_nothing_left_says_why(tmp_path):
    path = _write(tmp_path / "t.jsonl", [_otlp_span(0, f"{1:032x}")])
    with pytest.raises(InputError, match=r"no traced query matches .* 1 traced queries matching no query of the set"):
        from_traces(path, queries={"q": "another question"})
