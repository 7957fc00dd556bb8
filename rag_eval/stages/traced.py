"""A pipeline run read from recorded traces: OpenInference RETRIEVER and RERANKER spans made into the same
:class:`~rag_eval.stages.PipelineResult` a :meth:`Pipeline.run` gives, so that ``rag_eval.evaluate``, the
stage-aware views, loss attribution and result folders read it unchanged. See docs/traces.md.

>>> result = from_traces("spans.jsonl", queries=queries, budget=5)
>>> rag_eval.evaluate(qrels, result)
"""

from __future__ import annotations

import datetime as dt
import gc
import hashlib
import json
import math
import warnings
from array import array
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from ..data.queryset import QuerySet
from ..data.traces import SpanStats, TracedDoc, TracedSpan, content_id, id64, read_spans
from ..errors import InputError, TraceProblems
from .budget import Budget, count_tokens
from .result import PipelineResult, PipelineSpec, StageOutput, StageSpec

__all__ = ["from_traces"]


class _Problems:
    """What the read met, counted by kind with the first place it was seen: said once, summarised."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.first: dict[str, str] = {}

    def add(self, kind: str, where: str, n: int = 1) -> None:
        self.counts[kind] += n
        self.first.setdefault(kind, where)

    def lines(self) -> list[str]:
        return [f"{n} {kind} (first: {self.first[kind]})" for kind, n in self.counts.items()]


def from_traces(
    source: Any,
    *,
    queries: Mapping[str, str] | None = None,
    names: Mapping[str, str] | None = None,
    depth: int | None = None,
    budget: int | str | Budget | None = None,
    id_key: str | None = None,
    query_id_attribute: str | None = None,
    tokenizer: Callable[[str], int] = count_tokens,
    format: str | None = None,
    contents: bool = False,
) -> PipelineResult:
    """The stages recorded in ``source`` (a path to an OTLP JSON or protobuf export or a Phoenix spans Parquet
    file, Phoenix's spans DataFrame, or OpenTelemetry SDK spans) as a :class:`PipelineResult`.

    Spans are grouped into one pipeline per trace and query, ordered by their end (a retriever nested in another
    ends first); a stage is named by its span name, or by ``names`` (``{span name: stage name}``). ``queries``
    (ids to texts, or a QuerySet): traced queries are matched to it by text (whitespace runs read as one space),
    or by the attribute ``query_id_attribute`` where given; the unmatched are left out and counted. Without it,
    each traced text is its own query, its id the hash of its text. A document without an id takes
    ``metadata[id_key]`` (where given), else the hash of its content (:func:`~rag_eval.data.traces.content_id`).

    ``depth``/``budget`` default to what was recorded (the most candidates the first stage returned, the most
    hits the last stage delivered); other values recompute the stages from the recorded rankings, and a value
    that needs more than was recorded is an InputError saying so. Everything left out or read with a caveat is
    warned once (:class:`~rag_eval.errors.TraceProblems`) and kept on the card (``source``).

    The export is streamed and each stage span kept compact (docs/traces.md, "Memory"): documents' contents and
    metadata are read to name a document without an id and let go, unless ``contents`` (for pooling to label
    with texts; a budget in tokens keeps them too, to count them)."""
    names = dict(names or {})
    problems = _Problems()
    if budget is not None and Budget.parse(budget).tokens is not None:
        contents = True
    stats, spans = read_spans(source, query_id_attribute=query_id_attribute, format=format)
    read = _Read(stats.source, id_key, contents)
    collecting = gc.isenabled()
    gc.disable()  # the records hold no cycle; collecting while millions of them are made took a third of the read
    try:
        kept = _read(spans, read, problems)
    finally:
        if collecting:
            gc.enable()
    groups = _groups(read, kept, stats, problems, names)
    if not groups:
        raise InputError(
            f"no usable RETRIEVER or RERANKER span ({stats.spans} spans read: {_kinds(stats)})", source=stats.source
        )
    order = _sequence(groups, problems)
    chosen = _queries(read, groups, queries, problems)
    if not chosen:
        raise InputError(
            "no traced query matches a query of the set (by text or id): " + "; ".join(problems.lines()),
            source=stats.source,
        )
    _usable(read, chosen, problems)
    depth, budget_value = _depth_budget(read, chosen, order, depth, budget)
    outputs = _outputs(read, chosen, order, depth)
    spec_budget = Budget.parse(budget_value)
    _check_budget(outputs, order, spec_budget, tokenizer, budget is None)
    source_record = _record(read, stats, int(kept.sum()), chosen, problems)
    lines = problems.lines()
    if lines:
        warnings.warn(f"{stats.source}: traces read with caveats: " + "; ".join(lines), TraceProblems, stacklevel=2)
    structure = f"{order[0]} %{depth}" + "".join(f" >> {n}" for n in order[1:]) + f" %{spec_budget}"
    spec = PipelineSpec(
        structure=structure,
        depth=depth,
        budget=spec_budget,
        stages=tuple(
            StageSpec(
                name=o.name,
                role=o.role,
                kind=_kind_of(chosen, i),
                cls="recorded span",
                fingerprint=o.fingerprint,
                covers=o.covers,
            )
            for i, o in enumerate(outputs.values())
        ),
        tokenizer=tokenizer,
        source=source_record,
    )
    texts = {qid: group[0].query or "" for qid, group in chosen.items()}
    query_set = queries if isinstance(queries, QuerySet) and set(queries) == set(texts) else None
    return PipelineResult(spec, texts, outputs, query_set)


# ----- reading: each stage span made compact as it comes -------------------------------------------------------

_NONE = -(2**63)  # a time not recorded, in the int64 time columns


class _Stage:
    """One stage span as kept: its strings (interned: a trace's spans share them) and its row in the read's
    columns; its documents are a range of the read's document columns (ids interned as int32, scores)."""

    __slots__ = (
        "broken",
        "error",
        "hashed",
        "issues",
        "kind",
        "model_name",
        "name",
        "nameless",
        "place",
        "query",
        "query_id",
        "row",
        "trace_id",
    )

    def __init__(self, span: TracedSpan, row: int, place: str, strings: dict[str, str]) -> None:
        self.row = row
        self.trace_id = strings.setdefault(span.trace_id, span.trace_id)
        self.name = strings.setdefault(span.name, span.name)
        self.kind = strings.setdefault(span.kind, span.kind)
        self.query = None if span.query is None else strings.setdefault(span.query, span.query)
        self.query_id = span.query_id
        self.error = span.error
        self.model_name = None if span.model_name is None else strings.setdefault(span.model_name, span.model_name)
        self.place = place
        self.broken = span.broken
        self.issues: tuple[str, ...] = ()
        self.hashed = 0
        self.nameless = False


class _Read:
    """The compact form of a read (docs/traces.md, "Memory"): per stage span a :class:`_Stage` and a row of
    int64/uint64 columns (span and parent ids as 64 bits, times, a digest of its content to tell duplicates, where
    its documents start and how many: -1 for none recorded); per document an int32 id (interned) and a float64
    score (NaN: none), and its content and metadata only where ``contents``. A document's content is otherwise
    read only to name a document without an id (its hash) and let go."""

    def __init__(self, source: str, id_key: str | None, contents: bool) -> None:
        self.source, self.id_key, self.contents = source, id_key, contents
        self.stages: list[_Stage] = []
        self.span64, self.parent64 = array("Q"), array("Q")
        self.start, self.end, self.digest = array("q"), array("q"), array("q")
        self.doc_start, self.doc_count = array("q"), array("i")
        self.doc_ids: dict[str, int] = {}
        self.doc_index, self.scores = array("i"), array("d")
        self.texts: list[str | None] = []
        self.metadata: list[str | None] = []
        self.strings: dict[str, str] = {}

    def add(self, span: TracedSpan, problems: _Problems) -> None:
        for problem in span.problems:
            problems.add(f"span(s) with {problem}", span.where)
        place = span.where[len(self.source) :] if span.where.startswith(self.source) else span.where
        stage = _Stage(span, len(self.stages), place, self.strings)
        self.stages.append(stage)
        self.span64.append(id64(span.span_id))
        self.parent64.append(0 if span.parent_id is None else id64(span.parent_id))
        self.start.append(_NONE if span.start_ns is None else span.start_ns)
        self.end.append(_NONE if span.end_ns is None else span.end_ns)
        self.digest.append(hash(_content_key(span)))
        self.doc_start.append(len(self.doc_index))
        self.doc_count.append(-1 if span.documents is None else self._documents(stage, span.documents))

    def _documents(self, stage: _Stage, documents: tuple[TracedDoc, ...]) -> int:
        seen: set[str] = set()
        issues: list[str] = []
        id_key = self.id_key
        for doc in documents:
            doc_id = None
            if id_key is not None and doc.metadata is not None and doc.metadata.get(id_key) not in (None, ""):
                doc_id = str(doc.metadata[id_key])
            elif doc.id is not None:
                doc_id = doc.id
            elif doc.content is not None:
                stage.hashed += 1
                doc_id = content_id(doc.content)
            if doc_id is None:
                stage.nameless = True
                break
            if doc_id in seen:
                issues.append(f"doc id {doc_id!r} recorded twice: kept once, at its first place")
                continue
            seen.add(doc_id)
            self.doc_index.append(self.doc_ids.setdefault(doc_id, len(self.doc_ids)))
            self.scores.append(math.nan if doc.score is None else doc.score)
            if self.contents:
                self.texts.append(doc.content)
                self.metadata.append(json.dumps(dict(doc.metadata), ensure_ascii=False) if doc.metadata else None)
        stage.issues = tuple(issues)
        return len(seen)

    def where(self, stage: _Stage) -> str:
        return self.source + stage.place if stage.place.startswith((":", " ")) else stage.place

    def times(self, stage: _Stage) -> tuple[int | None, int | None]:
        start, end = self.start[stage.row], self.end[stage.row]
        return (None if start == _NONE else start), (None if end == _NONE else end)


def _content_key(span: TracedSpan) -> tuple[Any, ...]:
    """Every field of a span but where it was read: two spans of one id with equal keys are duplicates."""
    return (
        span.trace_id,
        span.parent_id,
        span.name,
        span.kind,
        span.start_ns,
        span.end_ns,
        span.error,
        span.query,
        _docs_key(span.documents),
        _docs_key(span.inputs),
        span.top_k,
        span.model_name,
        span.query_id,
        span.problems,
        span.broken,
    )


def _docs_key(docs: tuple[TracedDoc, ...] | None) -> tuple[Any, ...] | None:
    if docs is None:
        return None
    return tuple((d.id, d.score, d.content, _metadata_key(d.metadata)) for d in docs)


def _metadata_key(metadata: Mapping[str, Any] | None) -> Any:
    if not metadata:
        return None
    try:
        return hash(tuple(metadata.items()))
    except TypeError:  # a nested value
        return json.dumps(metadata, sort_keys=True, default=str)


def _read(spans: Any, read: _Read, problems: _Problems) -> np.ndarray:
    """Reads ``spans`` into ``read``; the rows kept: the first of each span id (whole-column: a sort of the ids)."""
    for span in spans:
        read.add(span, problems)
    ids = np.frombuffer(read.span64, np.uint64) if len(read.span64) else np.zeros(0, np.uint64)
    order = np.argsort(ids, kind="stable")
    ranked = ids[order]
    again = np.zeros(len(ids), bool)
    first = np.arange(len(ids))
    if len(ids) > 1:
        repeat = ranked[1:] == ranked[:-1]
        starts = np.flatnonzero(np.r_[True, ~repeat])
        group = np.cumsum(np.r_[True, ~repeat]) - 1
        again[order[1:][repeat]] = True
        first[order] = order[starts[group]]
    if again.any():
        digest = np.frombuffer(read.digest, np.int64)
        rows = np.flatnonzero(again)
        same = digest[rows] == digest[first[rows]]
        for mask, kind in (
            (same, "duplicated span(s) (the same span id and content twice): read once"),
            (~same, "span id(s) seen twice with different content: the first kept"),
        ):
            if mask.any():
                problems.add(kind, read.where(read.stages[int(rows[mask][0])]), int(mask.sum()))
    return ~again


def _groups(
    read: _Read, kept: np.ndarray, stats: SpanStats, problems: _Problems, names: Mapping[str, str]
) -> dict[tuple[str, str], list[_Stage]]:
    n = len(read.stages)
    parents = np.frombuffer(read.parent64, np.uint64) if n else np.zeros(0, np.uint64)
    has_parent = parents != 0
    everyone = np.frombuffer(stats.span_ids, np.uint64) if len(stats.span_ids) else np.zeros(0, np.uint64)
    spans64 = np.frombuffer(read.span64, np.uint64) if n else np.zeros(0, np.uint64)
    no_docs = np.frombuffer(read.doc_count, np.int32) < 0 if n else np.zeros(0, bool)
    start = np.frombuffer(read.start, np.int64) if n else np.zeros(0, np.int64)
    end = np.frombuffer(read.end, np.int64) if n else np.zeros(0, np.int64)
    orphan = kept & has_parent & ~np.isin(parents, everyone)
    nested = kept & no_docs & has_parent & np.isin(parents, spans64[kept])
    used = kept & ~nested
    untimed = used & ((start == _NONE) | (end == _NONE))
    skewed = used & ~untimed & (end < start)
    for mask, kind in (
        (orphan, "orphan span(s) (their parent is not in the export): grouped by their trace"),
        (
            nested,
            "nested span(s) recording no documents inside another stage span (the same call seen twice): left out",
        ),
        (untimed, "span(s) without a start or end time: latency unknown"),
        (skewed, "span(s) ending before they start (clock skew): latency unknown"),
    ):
        if mask.any():
            problems.add(kind, read.where(read.stages[int(np.argmax(mask))]), int(mask.sum()))
    by_trace: dict[str, list[_Stage]] = {}
    stages = read.stages
    for row in np.flatnonzero(used).tolist():
        stage = stages[row]
        by_trace.setdefault(stage.trace_id, []).append(stage)
    count = read.doc_count
    groups: dict[tuple[str, str], list[_Stage]] = {}
    for trace, spans in by_trace.items():
        texts = {_norm(s.query) for s in spans if s.query is not None}
        for span in spans:
            query = span.query
            if query is None:
                if len(texts) != 1:
                    problems.add(
                        "span(s) without a query (input.value or reranker.query) in a trace of "
                        f"{len(texts) or 'no'} other queries: left out",
                        read.where(span),
                    )
                    continue
                problems.add("span(s) without a query: given their trace's one query", read.where(span))
                span.query = next(s.query for s in spans if s.query is not None)
                query = span.query
            if count[span.row] < 0:
                problems.add("stage span(s) recording no document list: read as an empty result", read.where(span))
            span.name = names.get(span.name, span.name)
            groups.setdefault((trace, _norm(query or "")), []).append(span)
    for group in groups.values():
        group.sort(key=lambda s: _when(read, s))
    return groups


def _when(read: _Read, span: _Stage) -> tuple[int, int]:
    start, end = read.times(span)
    end = end if end is not None else start
    if start is not None and end is not None and end < start:
        end = start  # clock skew: ordered by its start
    return (end or 0, start or 0)


def _norm(text: str) -> str:
    return " ".join(text.split())


def _kinds(stats: SpanStats) -> str:
    return ", ".join(f"{n} {k}" for k, n in stats.kinds.most_common()) or "none"


def _sequence(groups: dict[tuple[str, str], list[_Stage]], problems: _Problems) -> tuple[str, ...]:
    """The stages of the pipeline: the most common sequence of stage names; a group with another one is left
    out (a prefix of it ending in a failed span is kept: the later stages were not run)."""
    sequences = Counter(tuple(s.name for s in g) for g in groups.values())
    order = max(sequences, key=lambda seq: (sequences[seq], len(seq)))
    if len(set(order)) != len(order):
        raise InputError(
            f"the traces' most common pipeline names a stage twice ({' >> '.join(order)}): give the spans distinct "
            "stage names (names=)"
        )
    for key in list(groups):
        seq = tuple(s.name for s in groups[key])
        if seq == order:
            continue
        if seq == order[: len(seq)] and seq and groups[key][-1].error is not None:
            continue
        problems.add(
            f"traced queries whose stages differ from {' >> '.join(order)}: left out",
            f"trace {key[0]} ({' >> '.join(seq)})",
        )
        del groups[key]
    return order


def _queries(
    read: _Read,
    groups: dict[tuple[str, str], list[_Stage]],
    queries: Mapping[str, str] | None,
    problems: _Problems,
) -> dict[str, list[_Stage]]:
    """``{query id: spans}``, in the query set's order (else first traced first); a query traced more than once
    keeps its first trace (by start time)."""
    by_text: dict[str, str] = {}
    if queries is not None:
        for qid, text in queries.items():
            key = _norm(text)
            if key in by_text:
                raise InputError(
                    f"queries {by_text[key]!r} and {qid!r} have the same text: traces cannot be matched by text",
                    source="queries",
                )
            by_text[key] = qid
    chosen: dict[str, list[_Stage]] = {}
    start = read.start

    def first_start(item: tuple[tuple[str, str], list[_Stage]]) -> int:
        return min(max(start[s.row], 0) for s in item[1])  # (an unrecorded start counts as 0)

    for (trace, text), spans in sorted(groups.items(), key=first_start):
        ids = {s.query_id for s in spans if s.query_id is not None}
        if queries is None:
            qid = next(iter(ids)) if len(ids) == 1 else "q" + content_id(text)
        elif ids:
            qid = next(iter(ids))
            if qid not in queries:
                problems.add("traced queries whose id is not in the query set: left out", f"trace {trace} ({qid!r})")
                continue
        else:
            found = by_text.get(text)
            if found is None:
                problems.add(
                    "traced queries matching no query of the set by text: left out", f"trace {trace} ({text[:60]!r})"
                )
                continue
            qid = found
        if qid in chosen:
            problems.add("queries traced more than once: the first trace kept", f"trace {trace} (query {qid!r})")
            continue
        chosen[qid] = spans
    if queries is not None:
        missing = [q for q in queries if q not in chosen]
        if missing:
            problems.add(
                "queries of the set with no trace: absent from the result", f"query {missing[0]!r}", len(missing)
            )
        chosen = {q: chosen[q] for q in queries if q in chosen}
    return chosen


# ----- hits, depth and budget -------------------------------------------------------------------------------------


def _usable(read: _Read, chosen: dict[str, list[_Stage]], problems: _Problems) -> None:
    """Leaves out of ``chosen`` the queries whose ranking cannot be read (an index skipped, a document of neither
    id nor content), and counts the documents named by their content's hash."""
    for qid in list(chosen):
        for span in chosen[qid]:
            if span.broken is not None:
                problems.add(f"traced queries with {span.broken}: left out", read.where(span))
                del chosen[qid]
                break
            if span.error is not None:
                continue
            if span.hashed:
                problems.add(
                    "document(s) without an id: identified by the hash of their content", read.where(span), span.hashed
                )
            if span.nameless:
                problems.add("traced queries with a document of neither id nor content: left out", read.where(span))
                del chosen[qid]
                break
    if not chosen:
        raise InputError("no traced query is left to evaluate: " + "; ".join(problems.lines()))


def _rows(chosen: dict[str, list[_Stage]], i: int) -> tuple[np.ndarray, np.ndarray]:
    """Per query, the read's row of its stage ``i`` span (-1 where not run: an earlier stage failed), and whether
    that span failed."""
    rows = np.array([s[i].row if i < len(s) else -1 for s in chosen.values()], np.int64)
    failed = np.array([i < len(s) and s[i].error is not None for s in chosen.values()], bool)
    return rows, failed


def _lengths(read: _Read, rows: np.ndarray, failed: np.ndarray) -> np.ndarray:
    count = np.frombuffer(read.doc_count, np.int32)
    return np.where((rows >= 0) & ~failed, np.maximum(count[np.maximum(rows, 0)], 0), 0)


def _depth_budget(
    read: _Read,
    chosen: dict[str, list[_Stage]],
    order: tuple[str, ...],
    depth: int | None,
    budget: int | str | Budget | None,
) -> tuple[int, int | str | Budget]:
    first = _lengths(read, *_rows(chosen, 0))
    recorded = int(first.max()) if len(first) else 0
    last = _lengths(read, *_rows(chosen, len(order) - 1))
    if depth is None:
        depth = max(recorded, 1)
    elif depth > recorded:
        raise InputError(
            f"depth {depth}: the traces recorded at most {recorded} candidates of stage {order[0]!r} per query; a "
            "larger depth needs more than was recorded"
        )
    elif len(order) > 1 and depth < recorded:
        over = int(np.count_nonzero(first > depth))
        raise InputError(
            f"depth {depth}: on {over} queries stage {order[1]!r} was given more than {depth} candidates, and what it "
            "would return from fewer was not recorded (a depth below the recorded one can be asked of a one-stage "
            "pipeline only)"
        )
    if budget is None:
        budget = max(int(last.max()) if len(last) else 1, 1)
    return depth, budget


def _outputs(
    read: _Read, chosen: dict[str, list[_Stage]], order: tuple[str, ...], depth: int
) -> dict[str, StageOutput]:
    from . import hit_table
    from ._cache import text_hash

    qids = list(chosen)
    texts = [spans[0].query or "" for spans in chosen.values()]
    query_ids = pa.array(qids, pa.large_string())
    query_hashes = pa.array([text_hash(t) for t in texts], pa.string())
    doc_names = pa.array(list(read.doc_ids), pa.large_string())
    doc_index = np.frombuffer(read.doc_index, np.int32) if len(read.doc_index) else np.zeros(0, np.int32)
    scores = np.frombuffer(read.scores, np.float64) if len(read.scores) else np.zeros(0)
    doc_start = np.frombuffer(read.doc_start, np.int64)
    start = np.frombuffer(read.start, np.int64)
    end = np.frombuffer(read.end, np.int64)
    outputs: dict[str, StageOutput] = {}
    for i, name in enumerate(order):
        rows, failed = _rows(chosen, i)
        at = np.maximum(rows, 0)
        ran = rows >= 0
        spans = [s[i] if i < len(s) else None for s in chosen.values()]
        models = {s.model_name for s in spans if s is not None and s.model_name}
        timed = ran & (start[at] != _NONE) & (end[at] != _NONE) & (end[at] >= start[at])
        latency = np.where(timed, (end[at] - start[at]) / 1e9, np.nan)
        latency[~ran] = 0.0
        errors = [
            "not run: an earlier stage failed"
            if s is None
            else None
            if s.error is None
            else f"{s.error} (recorded, {read.where(s)})"
            for s in spans
        ]
        has_hits = ran & ~failed
        lengths = _lengths(read, rows, failed)
        beyond: list[list[str]] = [[] for _ in qids]
        if i == 0 and (lengths > depth).any():
            for j in np.flatnonzero(lengths > depth).tolist():
                s0 = int(doc_start[at[j]])
                cut = doc_index[s0 + depth : s0 + lengths[j]]
                beyond[j] = doc_names.take(pa.array(cut)).to_pylist()
            lengths = np.minimum(lengths, depth)
        offsets = np.zeros(len(qids) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        total = int(offsets[-1])
        picks = np.repeat(doc_start[at] - offsets[:-1], lengths) + np.arange(total)
        children = {
            "doc_id": doc_names.take(pa.array(doc_index[picks])),
            "score": pa.array(scores[picks], pa.float64(), mask=np.isnan(scores[picks])),
        }
        if read.contents and total:
            text = [read.texts[p] for p in picks.tolist()]
            metadata = [read.metadata[p] for p in picks.tolist()]
            if text.count(None) != total:
                children["text"] = pa.array(text, pa.large_string())
            if metadata.count(None) != total:
                children["metadata"] = pa.array(metadata, pa.large_string())
        kind = hit_table.hit_type(children)
        struct = pa.StructArray.from_arrays(list(children.values()), fields=list(kind))
        mask = pa.array(~has_hits) if not has_hits.all() else None
        hits = pa.LargeListArray.from_arrays(pa.array(offsets), struct, mask=mask)
        issues = [s.issues if s is not None and s.error is None else () for s in spans]
        table = pa.Table.from_arrays(
            [
                query_ids,
                query_hashes,
                hits,
                pa.array(errors, pa.large_string()),
                pa.array(latency, pa.float64()),
                pa.array(np.zeros(len(qids), bool)),
                pa.array(~ran),
                pa.array(beyond, pa.large_list(pa.large_string())),
                pa.array(issues, pa.large_list(pa.large_string())),
            ],
            schema=hit_table.schema(kind.names),
        )
        described = json.dumps([name, sorted(models)])
        fingerprint = hashlib.sha256(described.encode()).hexdigest()[:20]
        covers = "the span name" + (" and the reranker's model name as recorded" if models else "")
        role = "first" if i == 0 else "reranker"
        outputs[name] = StageOutput(name, role, fingerprint, table, covers=covers)
    return outputs


def _check_budget(
    outputs: dict[str, StageOutput],
    order: tuple[str, ...],
    budget: Budget,
    tokenizer: Callable[[str], int],
    default: bool,
) -> None:
    """A budget that would deliver more than the last stage returned, where that stage cut its candidates, needs
    what was not recorded: refused, with the count and the largest budget the traces answer."""
    if default or len(order) < 2:
        return
    last, before = outputs[order[-1]], outputs[order[-2]]
    lengths, given = last.lengths, before.lengths
    cut = (lengths < given) & ~last.failed
    recorded = int(lengths.max()) if len(lengths) else 0
    if budget.chunks is not None:
        if budget.chunks <= recorded:
            return
        short = cut & (lengths < budget.chunks)
    else:
        short = cut & (last.delivered(budget, tokenizer) == lengths)
    if short.any():
        first = last.query_ids[int(np.flatnonzero(short)[0])]
        raise InputError(
            f"{budget}: on {int(short.sum())} queries (e.g. {first!r}) stage {order[-1]!r} kept fewer hits than it was "
            f"given and all of them fit the budget: what it would deliver with more room was not recorded (the "
            f"traces answer budgets up to {recorded} chunks)"
        )


# ----- the card's record ------------------------------------------------------------------------------------------


def _kind_of(chosen: dict[str, list[_Stage]], i: int) -> str:
    for spans in chosen.values():
        if i < len(spans):
            return spans[i].kind.lower()
    return "retriever" if i == 0 else "reranker"


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _record(
    read: _Read, stats: SpanStats, kept: int, chosen: dict[str, list[_Stage]], problems: _Problems
) -> dict[str, Any]:
    rows = np.array([s.row for spans in chosen.values() for s in spans], np.int64)
    start = np.frombuffer(read.start, np.int64)[rows]
    end = np.frombuffer(read.end, np.int64)[rows]
    start, end = start[start != _NONE], end[end != _NONE]
    return {
        "kind": "traces",
        "path": stats.source,
        "format": stats.format,
        "spans": stats.spans,
        "stage_spans": kept,
        "spans_used": len(rows),
        "kinds": dict(stats.kinds.most_common()),
        "window": [_iso(stats.first_ns), _iso(stats.last_ns)],
        "window_used": [
            _iso(int(start.min()) if len(start) else None),
            _iso(int(end.max()) if len(end) else None),
        ],
        "queries": len(chosen),
        "problems": problems.lines(),
    }
