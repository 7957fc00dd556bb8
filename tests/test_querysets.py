"""Query sets from logs: the readers (CSV, TSV, JSON lines, Parquet, OTLP JSON traces made with the real
OpenTelemetry SDK), bad input, masking, the JSONL round trip, Pipeline.run on a QuerySet, near-duplicate merging,
sampling, the CLI; and the done-when test: a log made from SQuAD's questions with Zipf frequencies and planted
near-duplicate paraphrases."""

from __future__ import annotations

import base64
import csv
import datetime as dt
import gzip
import hashlib
import io
import itertools
import json
import random
from collections import Counter, defaultdict
from contextlib import redirect_stderr, redirect_stdout

import pytest

import rag_eval
from rag_eval import InputError, QuerySet
from rag_eval.cli import main
from rag_eval.data.queryset import QueryProvenance, mask_pii, normalise, query_id

from .conftest import DATASETS, need_shared

pytest.importorskip("datasketch", reason="near-duplicate merging needs the querysets extra (datasketch)")
from rag_eval.ground_truth import merge_near_duplicates, sample_queries
from rag_eval.ground_truth.querysets import frequency_strata

T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)


def _csv(path, rows, header=("ts", "query", "tenant")):
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(header)
        writer.writerows(rows)
    return path


LOG_ROWS = [
    ("2026-03-02T09:00:00Z", "What is RAG?", "acme"),
    ("2026-03-03T10:30:00+01:00", "what is  rag", "acme"),  # the same query after normalisation
    ("2026-03-04T08:00:00", "WHAT IS RAG!", "globex"),  # no offset: UTC
    ("2026-03-02T12:00:00Z", "How do I reset my password?", "globex"),
    ("1772442000", "Which plan includes SSO?", "acme"),  # Unix seconds: 2026-03-02T09:00:00Z
]


# ----- readers ---------------------------------------------------------------------------------------------------


def test_a_csv_log_is_read_merged_after_normalisation_with_its_provenance_and_card(tmp_path):
    path = _csv(tmp_path / "log.csv", LOG_ROWS)
    queries = QuerySet.from_log(path, timestamp="ts")
    rag = query_id(normalise("What is RAG?"))
    assert rag == query_id("what is rag") and rag.startswith("q") and len(rag) == 17
    assert len(queries) == 3
    assert queries[rag] == "What is RAG?"  # each form logged once: the first seen
    info = queries.provenance[rag]
    assert info.frequency == 3
    assert (info.first_seen, info.last_seen) == ("2026-03-02T09:00:00Z", "2026-03-04T08:00:00Z")
    assert info.columns == {"tenant": "acme"}  # two records of acme, one of globex: the most traffic
    assert info.source == str(path)
    sso = queries.provenance[query_id("which plan includes sso")]
    assert sso.first_seen == "2026-03-02T09:00:00Z"
    card = queries.card
    assert card.source == str(path) and card.format == "csv"
    assert card.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (card.records, card.traffic) == (5, 5)
    assert card.date_range == ("2026-03-02T09:00:00Z", "2026-03-04T08:00:00Z")
    assert card.deduplication["exact"]["merged"] == 2
    assert "NFKC" in card.normalisation and card.masking is None
    assert queries.frequencies == {
        rag: 3,
        query_id("how do i reset my password"): 1,
        query_id("which plan includes sso"): 1,
    }


def test_tsv_jsonl_gzip_and_parquet_logs_read_alike(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    csv_set = QuerySet.from_log(_csv(tmp_path / "log.csv", LOG_ROWS), timestamp="ts")
    tsv = tmp_path / "log.tsv"
    tsv.write_text("ts\tquery\ttenant\n" + "".join("\t".join(r) + "\n" for r in LOG_ROWS), encoding="utf-8")
    jsonl = tmp_path / "log.jsonl"
    jsonl.write_text("".join(json.dumps(dict(zip(("ts", "query", "tenant"), r))) + "\n" for r in LOG_ROWS))
    gz = tmp_path / "log.jsonl.gz"
    gz.write_bytes(gzip.compress(jsonl.read_bytes()))
    parquet = tmp_path / "log.parquet"
    pq.write_table(
        pa.table({name: [r[i] for r in LOG_ROWS] for i, name in enumerate(("ts", "query", "tenant"))}), parquet
    )
    for path, kind in ((tsv, "tsv"), (jsonl, "jsonl"), (gz, "jsonl"), (parquet, "parquet")):
        other = QuerySet.from_log(path, timestamp="ts")
        assert other.card.format == kind
        assert dict(other) == dict(csv_set)
        assert dict(other.provenance) == {
            q: p.__class__(**{**p.to_dict(), "source": str(path)}) for q, p in csv_set.provenance.items()
        }


def test_parquet_timestamps_counts_and_chosen_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "log.parquet"
    table = pa.table(
        {
            "q": ["refund policy", "Refund policy?", "opening hours"],
            "at": pa.array([T0, T0 + dt.timedelta(days=2), T0 + dt.timedelta(hours=1)], pa.timestamp("us", tz="UTC")),
            "n": [4, 1, 2],
            "lang": ["en", "en", "de"],
            "area": ["billing", "billing", "stores"],
        }
    )
    pq.write_table(table, path)
    queries = QuerySet.from_log(path, text="q", timestamp="at", count="n", columns=["lang"])
    refund = queries.provenance[query_id("refund policy")]
    assert (refund.frequency, refund.first_seen, refund.last_seen) == (
        5,
        "2026-03-02T09:00:00Z",
        "2026-03-04T09:00:00Z",
    )
    assert refund.columns == {"lang": "en"}  # area not asked for
    assert queries.card.traffic == 7 and queries.card.records == 3


def test_where_keeps_only_the_records_asked_and_the_card_says_so(tmp_path):
    queries = QuerySet.from_log(_csv(tmp_path / "log.csv", LOG_ROWS), timestamp="ts", where={"tenant": "globex"})
    assert sorted(queries.values()) == ["How do I reset my password?", "WHAT IS RAG!"]
    assert queries.card.filters == {"where": {"tenant": ["globex"]}, "dropped (where)": 3}


# ----- OTLP JSON trace exports, made with the real OpenTelemetry SDK and OpenInference's conventions ---------------


def _otlp_export(path, spans, *, json_lines=False):
    """Spans recorded by the OpenTelemetry SDK (in-memory exporter), encoded by the OTLP exporter's own encoder
    (``encode_spans``: the ExportTraceServiceRequest an OTLP exporter sends) and written in OTLP's JSON mapping
    (protobuf's JSON mapping with integer enums; trace and span ids as hex, as OTLP/JSON specifies)."""
    sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="needs opentelemetry-sdk (dev extra)")
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    encoder = pytest.importorskip(
        "opentelemetry.exporter.otlp.proto.common.trace_encoder",
        reason="needs opentelemetry-exporter-otlp-proto-common (dev extra)",
    )
    semconv = pytest.importorskip("openinference.semconv.trace", reason="needs openinference-semantic-conventions")
    from google.protobuf.json_format import MessageToDict

    kind_key = semconv.SpanAttributes.OPENINFERENCE_SPAN_KIND
    input_key = semconv.SpanAttributes.INPUT_VALUE
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider(resource=Resource.create({"service.name": "support-bot", "tenant": "acme"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("rag-app")
    for kind, text, when, attributes in spans:
        nanos = int(when.timestamp()) * 1_000_000_000
        attrs = {kind_key: getattr(semconv.OpenInferenceSpanKindValues, kind).value, **attributes}
        if text is not None:
            attrs[input_key] = text
        span = tracer.start_span(kind.lower(), start_time=nanos, attributes=attrs)
        span.end(end_time=nanos + 5_000_000)
    requests = []
    finished = exporter.get_finished_spans()
    batches = [finished[i : i + 2] for i in range(0, len(finished), 2)] if json_lines else [finished]
    for batch in batches:
        request = MessageToDict(encoder.encode_spans(batch), use_integers_for_enums=True)
        for resource in request["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = base64.b64decode(span[key]).hex()
        requests.append(request)
    if json_lines:
        path.write_text("".join(json.dumps(r) + "\n" for r in requests))
    else:
        path.write_text(json.dumps(requests[0], indent=2))
    return path


TRACES = [
    ("CHAIN", "What is RAG?", T0, {}),
    ("RETRIEVER", "What is RAG?", T0 + dt.timedelta(seconds=1), {"user.id": "u1"}),
    ("LLM", "What is RAG?", T0 + dt.timedelta(seconds=2), {}),
    ("RETRIEVER", "what is rag", T0 + dt.timedelta(days=1), {"user.id": "u2"}),
    ("RETRIEVER", "Where is my invoice?", T0 + dt.timedelta(days=3), {"user.id": "u1"}),
]


@pytest.mark.parametrize("json_lines", [False, True], ids=["one-request", "collector-json-lines"])
def test_an_otlp_export_gives_the_input_of_its_retriever_spans(tmp_path, json_lines):
    path = _otlp_export(tmp_path / "traces.json", TRACES, json_lines=json_lines)
    queries = QuerySet.from_log(path, columns=["user.id", "service.name"])
    assert queries.card.format == "otlp"
    assert sorted(queries.values()) == ["What is RAG?", "Where is my invoice?"]
    rag = queries.provenance[query_id("what is rag")]
    assert rag.frequency == 2  # the CHAIN and LLM spans are not retrievals
    assert (rag.first_seen, rag.last_seen) == ("2026-03-02T09:00:01Z", "2026-03-03T09:00:00Z")
    assert rag.columns == {"user.id": "u1", "service.name": "support-bot"}  # span, then resource attributes
    assert queries.card.filters == {"openinference.span.kind": "RETRIEVER", "spans of other kinds": 2}
    assert queries.card.date_range == ("2026-03-02T09:00:01Z", "2026-03-05T09:00:00Z")
    assert QuerySet.from_log(path).provenance[query_id("what is rag")].columns == {}  # none kept unless named


def test_a_retriever_span_without_input_is_named(tmp_path):
    path = _otlp_export(tmp_path / "traces.json", [*TRACES, ("RETRIEVER", None, T0, {})])
    with pytest.raises(
        InputError,
        match=r"traces\.json: span resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[5\]: a "
        r"RETRIEVER span without 'input.value'",
    ):
        QuerySet.from_log(path)
    with pytest.raises(InputError, match=r"attribute 'tenant\.id' to keep"):
        QuerySet.from_log(_otlp_export(tmp_path / "t2.json", TRACES), columns=["tenant.id"])


# ----- bad input ---------------------------------------------------------------------------------------------------


def test_bad_logs_are_errors_naming_the_file_and_line(tmp_path):
    path = _csv(tmp_path / "log.csv", LOG_ROWS)
    with pytest.raises(InputError, match=r"log\.csv: no text column 'question' \(its columns: ts, query, tenant\)"):
        QuerySet.from_log(path, text="question")
    with pytest.raises(InputError, match=r"log\.csv: no timestamp column 'time'"):
        QuerySet.from_log(path, timestamp="time")
    with pytest.raises(InputError, match=r"log\.csv: no column 'lang' to keep"):
        QuerySet.from_log(path, columns=["lang"])
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("query,tenant\nfirst,acme\nsecond,acme,extra\n")
    with pytest.raises(InputError, match=r"ragged\.csv:3: 3 fields where the header has 2"):
        QuerySet.from_log(ragged)
    when = _csv(tmp_path / "when.csv", [("yesterday", "a query", "acme")])
    with pytest.raises(InputError, match=r"when\.csv:2: timestamp 'yesterday' is neither ISO 8601 nor Unix seconds"):
        QuerySet.from_log(when, timestamp="ts")
    counts = tmp_path / "counts.csv"
    counts.write_text("query,n\nfine,3\nbad,-1\n")
    with pytest.raises(InputError, match=r"counts\.csv:3: count '-1' is not an integer of 0 or more"):
        QuerySet.from_log(counts, count="n")
    lines = tmp_path / "log.jsonl"
    lines.write_text('{"query": "fine"}\n{"query": "torn\n')
    with pytest.raises(InputError, match=r"log\.jsonl:2: not valid JSON"):
        QuerySet.from_log(lines)
    lines.write_text('{"query": "fine"}\n{"text": "wrong key"}\n')
    with pytest.raises(InputError, match=r"log\.jsonl:2: no text key 'query' \(its keys: text\)"):
        QuerySet.from_log(lines)
    lines.write_text('{"query": "fine"}\n{"query": 42}\n')
    with pytest.raises(InputError, match=r"log\.jsonl:2: the text \('query'\) is an int, not a string"):
        QuerySet.from_log(lines)
    lines.write_text('{"query": "fine", "meta": {"a": 1}}\n')
    with pytest.raises(InputError, match=r"log\.jsonl:1: column 'meta' holds an object"):
        QuerySet.from_log(lines)
    assert QuerySet.from_log(lines, columns=[]).provenance[query_id("fine")].columns == {}
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match=r"broken\.parquet: not a readable Parquet file"):
        QuerySet.from_log(broken)
    with pytest.raises(InputError, match=r"missing\.csv: no such file"):
        QuerySet.from_log(tmp_path / "missing.csv")
    empty = tmp_path / "blank.csv"
    empty.write_text("query\n?\n  \n")
    with pytest.raises(InputError, match=r"blank\.csv: no query to keep"):
        QuerySet.from_log(empty)


def test_load_refuses_what_save_did_not_write(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text('{"query": "a log, not a query set"}\n')
    with pytest.raises(InputError, match=r"log\.jsonl:1: not a query set .*QuerySet\.from_log"):
        QuerySet.load(log)
    saved = tmp_path / "set.jsonl"
    QuerySet.from_dict({"q1": "one", "q2": "two"}).save(saved)
    lines = saved.read_text().splitlines()
    saved.write_text("\n".join([*lines, lines[1]]) + "\n")
    with pytest.raises(InputError, match=r"set\.jsonl:4: query id 'q1' appears twice"):
        QuerySet.load(saved)
    record = json.loads(lines[1]) | {"frequency": 0}
    saved.write_text("\n".join([lines[0], json.dumps(record)]) + "\n")
    with pytest.raises(InputError, match=r"set\.jsonl:2: query 'q1': frequency must be 1 or more"):
        QuerySet.load(saved)


# ----- masking -----------------------------------------------------------------------------------------------------


def test_masking_replaces_emails_and_phone_numbers_and_leaves_years_and_counts():
    assert mask_pii("mail jane.doe+rag@example.co.uk about it") == "mail <email> about it"
    for phone in (
        "+1 415 555 0123",
        "(415) 555-0123",
        "415-555-0123",
        "020 7946 0958",
        "+44 20 7946 0958",
        "4155550123",
    ):
        assert mask_pii(f"call {phone} now") == "call <phone> now", phone
    for kept in ("the 1995-2005 season", "555-0123", "10,570 questions", "Super Bowl 50", "in 2026", "3.14159"):
        assert mask_pii(kept) == kept


def test_mask_pii_masks_before_anything_is_kept_or_hashed(tmp_path):
    rows = [
        (T0.isoformat(), "reset for bob@example.com", "bob@example.com"),
        (T0.isoformat(), "Reset for alice@example.org", "alice@example.org"),
        (T0.isoformat(), "call me on +49 30 1234 5678", "acme"),
    ]
    path = _csv(tmp_path / "log.csv", rows)
    queries = QuerySet.from_log(path, timestamp="ts", mask_pii=True)
    assert sorted(queries.values()) == ["call me on <phone>", "reset for <email>"]
    assert queries.provenance[query_id("reset for <email>")].frequency == 2  # one query once masked
    out = tmp_path / "set.jsonl"
    queries.save(out)
    saved = out.read_text()
    assert "example" not in saved and "1234" not in saved and "<email>" in saved
    assert queries.card.masking.startswith("e-mail addresses -> <email>")


# ----- the set itself: a mapping, its file, Pipeline.run -----------------------------------------------------------


def test_a_queryset_is_a_read_only_mapping_and_round_trips_through_jsonl(tmp_path):
    queries = QuerySet.from_log(_csv(tmp_path / "log.csv", LOG_ROWS), timestamp="ts")
    assert isinstance(queries, rag_eval.QuerySet) and dict(queries) == {q: queries[q] for q in queries}
    with pytest.raises(TypeError):
        queries["x"] = "y"  # type: ignore[index]
    sample = sample_queries(merge_near_duplicates(queries), 2, stratify="frequency,tenant", seed=4)
    for each in (queries, sample):
        path = tmp_path / "set.jsonl"
        each.save(path)
        back = QuerySet.load(path)
        assert back == each and back.card == each.card and dict(back.provenance) == dict(each.provenance)
        assert list(back) == list(each)
    assert queries == dict(queries)  # with a plain mapping: the texts
    assert QuerySet.from_dict({"a": "x"}) != QuerySet.from_dict({"a": "x"}, source="elsewhere")


def test_pipeline_run_takes_a_queryset():
    from rag_eval import Pipeline
    from rag_eval.adapters.functions import retriever

    queries = QuerySet.from_dict({"q1": "first question", "q2": "second question"})
    seen = []

    def search(text, k):
        seen.append(text)
        return [(f"d-{text.split()[0]}", 1.0)]

    result = Pipeline(retriever(search, name="fn"), depth=5).run(queries, progress=False)
    assert sorted(seen) == ["first question", "second question"]
    assert result.queries == {"q1": "first question", "q2": "second question"}


# ----- near-duplicates and sampling ----------------------------------------------------------------------------------


def _set(frequencies: dict[str, int], columns: dict[str, dict] | None = None) -> QuerySet:
    return QuerySet(
        {q: f"query {q}" for q in frequencies},
        {
            q: QueryProvenance(source="t", frequency=f, columns=(columns or {}).get(q, {}))
            for q, f in frequencies.items()
        },
    )


def test_near_duplicates_fold_into_the_most_frequent_with_their_traffic(tmp_path):
    rows = [
        (f"2026-03-0{d}T10:00:00Z", t, "acme")
        for d, t in [
            (2, "How many points did the Broncos score in the final three minutes?"),
            (2, "How many points did the Broncos score in the final three minutes?"),
            (3, "How many points did the Broncos score in the final three minutes?"),
            (4, "How many points did the Broncos score in the last three minutes?"),  # one word edited
            (5, "how many points did Broncos score in final three minutes"),  # two words dropped
            (2, "Who won Super Bowl 50?"),
        ]
    ]
    queries = QuerySet.from_log(_csv(tmp_path / "log.csv", rows), timestamp="ts")
    assert len(queries) == 4
    merged = merge_near_duplicates(queries)
    assert len(merged) == 2
    head = merged.provenance[query_id(normalise(rows[0][1]))]
    assert head.frequency == 5 and (head.first_seen, head.last_seen) == ("2026-03-02T10:00:00Z", "2026-03-05T10:00:00Z")
    assert sorted(head.merged) == sorted([rows[3][1], rows[4][1]])
    near = merged.card.deduplication["near"]
    assert near["merged"] == 2 and near["threshold"] == 0.5 and "4 characters" in near["shingle"]
    assert sum(merged.frequencies.values()) == sum(queries.frequencies.values())


def test_frequency_strata_split_the_cumulative_traffic_50_30_20():
    queries = _set({"a": 50, "b": 20, "c": 10, "d": 8, "e": 6, "f": 4, "g": 2})  # 100 in all
    assert frequency_strata(queries) == {
        "a": "head",  # starts at 0%
        "b": "torso",  # 50%
        "c": "torso",  # 70%
        "d": "tail",  # 80%
        "e": "tail",
        "f": "tail",
        "g": "tail",
    }


def test_sampling_is_seeded_stratified_and_records_inclusion_probabilities():
    frequencies = {f"q{i:03d}": max(1, 1000 // (i + 1)) for i in range(300)}
    columns = {q: {"lang": "en" if i % 3 else "de"} for i, q in enumerate(frequencies)}
    queries = _set(frequencies, columns)
    sample = sample_queries(queries, 30, seed=7)
    assert sample == sample_queries(queries, 30, seed=7) and dict(sample) != dict(sample_queries(queries, 30, seed=8))
    strata = frequency_strata(queries)
    sizes = Counter(strata.values())
    card = sample.card
    assert list(card.strata) == ["head", "torso", "tail"]
    assert {s: card.strata[s]["queries"] for s in card.strata} == dict(sizes)
    assert sum(card.strata[s]["sampled"] for s in card.strata) == 30 == len(sample) == card.sample_size
    for stratum, row in card.strata.items():
        assert row["sampled"] >= 1
        assert abs(row["sampled"] - 30 * sizes[stratum] / 300) <= 1  # proportional
        assert row["inclusion_probability"] == row["sampled"] / row["queries"]
        assert row["traffic"] == sum(frequencies[q] for q, s in strata.items() if s == stratum)
    for qid, info in sample.provenance.items():
        assert info.stratum == strata[qid]
        assert info.inclusion_probability == card.strata[info.stratum]["inclusion_probability"]
    weights = sample.weights()
    assert (
        weights[next(iter(sample))]
        == sample.provenance[next(iter(sample))].frequency / sample.provenance[next(iter(sample))].inclusion_probability
    )
    assert card.seed == 7 and card.allocation == "proportional" and card.stratify == ("frequency",)

    equal = sample_queries(queries, 30, stratify=["frequency", "lang"], allocation="equal", seed=1)
    assert len(equal.card.strata) == 6 and all("/lang=" in s for s in equal.card.strata)
    for row in equal.card.strata.values():
        assert row["sampled"] == min(5, row["queries"]) or row["sampled"] > 5  # 5 each, what a small one lacks goes on
    assert sum(r["sampled"] for r in equal.card.strata.values()) == 30

    everything = sample_queries(queries, 1000)
    assert len(everything) == 300 and set(everything.inclusion_probabilities.values()) == {1.0}
    with pytest.raises(ValueError, match="no query holds a column 'tenant'"):
        sample_queries(queries, 10, stratify="frequency,tenant")
    with pytest.raises(ValueError, match="already a sample"):
        sample_queries(sample, 5)


# ----- the CLI -------------------------------------------------------------------------------------------------------


def _cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


def test_cli_bad_input_is_one_line_and_status_2(tmp_path):
    path = _csv(tmp_path / "log.csv", LOG_ROWS)
    status, out, err = _cli("queries", "sample", path, "-n", "5", "--text", "question", "-o", tmp_path / "q.jsonl")
    assert status == 2 and out == ""
    assert err == f"rag-eval: error: {path}: no text column 'question' (its columns: ts, query, tenant)\n"
    status, _, err = _cli("queries", "sample", path, "-n", "0", "-o", tmp_path / "q.jsonl")
    assert status == 2 and err.startswith("rag-eval: error: -n") and err.count("\n") == 1
    status, _, err = _cli(
        "queries", "sample", path, "-n", "2", "--stratify", "frequency,lang", "-o", tmp_path / "q.jsonl"
    )
    assert status == 2 and "no query holds a column 'lang'" in err and not (tmp_path / "q.jsonl").exists()


# ----- done when: a real-looking log from SQuAD's questions -----------------------------------------------------

FILLERS = ["exactly", "actually", "please", "really", "roughly", "main", "first", "the"]
SWAPS = {
    "what": "which",
    "which": "what",
    "did": "does",
    "does": "did",
    "is": "was",
    "was": "is",
    "the": "a",
    "a": "the",
    "of": "for",
    "in": "within",
    "many": "much",
    "year": "date",
    "name": "call",
}


def _edit(text: str, edits: int, rng: random.Random) -> str:
    """``text`` with ``edits`` words edited: one dropped, one inserted, one replaced, or one with two letters
    swapped (a typo)."""
    words = text.split()
    for _ in range(edits):
        op = rng.choice(["drop", "insert", "replace", "typo"])
        i = rng.randrange(len(words))
        word = words[i]
        if op == "drop" and len(words) > 4:
            del words[i]
        elif op == "replace":
            words[i] = SWAPS.get(word.lower(), rng.choice(FILLERS))
        elif op == "typo" and len(word) > 3:
            j = rng.randrange(1, len(word) - 2)
            words[i] = word[:j] + word[j + 1] + word[j] + word[j + 2 :]
        else:
            words.insert(i, rng.choice(FILLERS))
    return " ".join(words)


def _squad_log(path, *, base_size=1500, seed=11):
    """A query log of SQuAD dev questions, one question per paragraph (so that two base questions are about
    different passages), with Zipf frequencies (the r-th most asked 400 / r**1.1 times, at least once), and for one
    base question in five 1 to 3 planted paraphrases, each made by editing one or two words, asked a quarter as
    often as their question (at least once); a fifth of each query's records logged lower-cased or without its
    question mark. One CSV row per record, with a time within March 2026 and a tenant. Returns the planted truth:
    each logged normalised text -> its base question's normalised text, and the expected frequency of each group."""
    source = need_shared(DATASETS / "squad-dev-v1.1" / "queries.jsonl")
    rng = random.Random(seed)
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    rng.shuffle(rows)
    per_paragraph: dict[str, str] = {}
    for row in rows:
        per_paragraph.setdefault(row["metadata"]["paragraph_id"], " ".join(row["text"].split()))
    base, seen = [], set()
    for text in per_paragraph.values():
        key = normalise(text)
        if len(key.split()) >= 4 and key not in seen:
            seen.add(key)
            base.append(text)
        if len(base) == base_size:
            break
    origin: dict[str, str] = {}
    frequency: dict[str, int] = {}
    tenant: dict[str, str] = {}
    for rank, text in enumerate(base, start=1):
        key = normalise(text)
        origin[key] = key
        frequency[text] = max(1, round(400 / rank**1.1))
        tenant[text] = rng.choice(["acme", "globex", "initech"])
    planted = []
    for text in base[::5]:
        for _ in range(rng.randint(1, 3)):
            paraphrase = _edit(text, rng.randint(1, 2), rng)
            key = normalise(paraphrase)
            if key in seen:
                continue
            seen.add(key)
            origin[key] = normalise(text)
            frequency[paraphrase] = max(1, frequency[text] // 4)
            tenant[paraphrase] = tenant[text]
            planted.append(paraphrase)
    records = []
    for text, times in frequency.items():
        for _ in range(times):
            form = text
            if rng.random() < 0.2:
                form = rng.choice([text.lower(), text.rstrip("?") + " ", text.upper()])
            when = dt.datetime(2026, 3, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=rng.randrange(31 * 86400))
            records.append((when.isoformat().replace("+00:00", "Z"), form, tenant[text]))
    rng.shuffle(records)
    _csv(path, records)
    group_frequency: dict[str, int] = defaultdict(int)
    for text, times in frequency.items():
        group_frequency[origin[normalise(text)]] += times
    return origin, dict(group_frequency), records, len(planted)


def _pairs(groups):
    return {frozenset(p) for group in groups for p in itertools.combinations(sorted(group), 2)}


def test_done_when_a_squad_log_samples_with_right_strata_frequencies_card_and_near_duplicate_merge(tmp_path):
    log = tmp_path / "log.csv"
    origin, group_frequency, records, planted = _squad_log(log)
    assert planted > 400 and len(records) > 3000

    # the near-duplicate merge against the planted paraphrases, pair by pair
    population = QuerySet.from_log(log, timestamp="ts")
    assert len(population) == len(origin)  # the case and punctuation variants merged exactly
    assert population.frequencies == {query_id(k): n for k, n in _exact_frequencies(records).items()}
    merged = merge_near_duplicates(population)
    found = [[normalise(merged[q]), *(normalise(t) for t in merged.provenance[q].merged)] for q in merged]
    truth: dict[str, list[str]] = defaultdict(list)
    for key, base in origin.items():
        truth[base].append(key)
    predicted, true = _pairs(found), _pairs(truth.values())
    precision = len(predicted & true) / len(predicted)
    recall = len(predicted & true) / len(true)
    assert precision >= 0.95, (precision, recall)
    assert recall >= 0.8, (precision, recall)
    # the traffic is kept: each query's frequency is what was merged into it, and a group found whole has its own
    assert sum(merged.frequencies.values()) == len(records)
    exact = 0
    for group, qid in zip(found, merged, strict=True):
        bases = {origin[k] for k in group}
        if len(bases) == 1 and sorted(group) == sorted(truth[next(iter(bases))]):
            assert merged.provenance[qid].frequency == group_frequency[next(iter(bases))]
            exact += 1
    assert exact >= 0.95 * len(truth)

    # the command: a sample of 50, stratified by frequency
    out = tmp_path / "queries.jsonl"
    status, stdout, stderr = _cli(
        "queries", "sample", log, "-n", "50", "--stratify", "frequency", "--timestamp", "ts", "--seed", "3", "-o", out
    )
    assert status == 0, stderr
    sample = QuerySet.load(out)
    assert sample == sample_queries(merged, 50, seed=3)
    card = sample.card
    strata = frequency_strata(merged)  # every query's stratum, from the merged traffic
    order = sorted(merged, key=lambda q: (-merged.provenance[q].frequency, q))
    total = len(records)
    cumulative = list(itertools.accumulate(merged.provenance[q].frequency for q in order))
    head_end = next(i for i, c in enumerate(cumulative) if c > total * 0.5)  # the query that crosses 50%
    assert all(strata[q] == "head" for q in order[: head_end + 1]) and strata[order[head_end + 1]] == "torso"
    assert {s: card.strata[s]["queries"] for s in card.strata} == dict(Counter(strata.values()))
    assert sum(card.strata[s]["traffic"] for s in card.strata) == total
    assert abs(card.strata["head"]["traffic_share"] - 0.5) < 0.1 and card.strata["tail"]["traffic_share"] <= 0.2 + 1e-9
    assert sum(card.strata[s]["sampled"] for s in card.strata) == 50 == len(sample)
    for qid, info in sample.provenance.items():
        assert info.stratum == strata[qid]
        assert info.inclusion_probability == card.strata[info.stratum]["sampled"] / card.strata[info.stratum]["queries"]
        assert info.frequency == merged.provenance[qid].frequency
    # the card
    times = sorted(r[0] for r in records)
    assert card.source == str(log) and card.sha256 == hashlib.sha256(log.read_bytes()).hexdigest()
    assert card.format == "csv" and card.records == card.traffic == len(records)
    assert card.date_range == (times[0], times[-1])
    assert card.deduplication["near"]["merged"] == len(population) - len(merged)
    assert card.stratify == ("frequency",) and card.seed == 3 and card.sample_size == 50
    assert card.allocation == "proportional"
    # what it printed: the strata table, then the summary
    lines = stdout.splitlines()
    assert lines[0].split() == ["stratum", "queries", "traffic", "share", "sampled", "probability"]
    for line, (name, row) in zip(lines[1:], card.strata.items(), strict=True):
        assert line.split()[:2] == [name, f"{row['queries']:,}"] and line.split()[4] == str(row["sampled"])
    assert f"{len(records):,} log records" in stderr and "-> " + str(out) in stderr


def _exact_frequencies(records) -> dict[str, int]:
    return dict(Counter(normalise(r[1]) for r in records))


def test_columns_named_as_one_str_is_refused_not_read_letter_by_letter(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("query,tenant\nhello,a\n", encoding="utf-8")
    with pytest.raises(TypeError, match=r"columns must be a list of column names, not a str \('tenant'"):
        QuerySet.from_log(log, text="query", columns="tenant")
    kept = QuerySet.from_log(log, text="query", columns=["tenant"])
    assert [p.columns["tenant"] for p in kept.provenance.values()] == ["a"]
