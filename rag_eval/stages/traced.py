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
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..data.queryset import QuerySet
from ..data.traces import SpanStats, TracedSpan, content_id, read_spans
from ..errors import InputError, TraceProblems
from .budget import Budget, count_tokens
from .hits import Hit
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
    warned once (:class:`~rag_eval.errors.TraceProblems`) and kept on the card (``source``)."""
    names = dict(names or {})
    problems = _Problems()
    stats, spans = read_spans(source, query_id_attribute=query_id_attribute, format=format)
    collecting = gc.isenabled()
    gc.disable()  # the records hold no cycle; collecting while millions of them are made took a third of the read
    try:
        kept = _unique(spans, problems)
    finally:
        if collecting:
            gc.enable()
    groups = _groups(kept, stats, problems, names)
    if not groups:
        raise InputError(
            f"no usable RETRIEVER or RERANKER span ({stats.spans} spans read: {_kinds(stats)})", source=stats.source
        )
    order = _sequence(groups, problems)
    chosen = _queries(groups, order, queries, problems)
    if not chosen:
        raise InputError(
            "no traced query matches a query of the set (by text or id): " + "; ".join(problems.lines()),
            source=stats.source,
        )
    hits = _hits(chosen, id_key, problems)
    depth, budget_value = _depth_budget(hits, order, depth, budget)
    outputs = _outputs(chosen, hits, order, depth)
    spec_budget = Budget.parse(budget_value)
    _check_budget(outputs, order, spec_budget, tokenizer, budget is None)
    source_record = _record(stats, kept, chosen, problems)
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


# ----- reading and grouping ---------------------------------------------------------------------------------------


def _unique(spans: Any, problems: _Problems) -> dict[str, TracedSpan]:
    kept: dict[str, TracedSpan] = {}
    for span in spans:
        for problem in span.problems:
            problems.add(f"span(s) with {problem}", span.where)
        earlier = kept.get(span.span_id)
        if earlier is not None:
            if earlier.same_as(span):
                problems.add("duplicated span(s) (the same span id and content twice): read once", span.where)
            else:
                problems.add("span id(s) seen twice with different content: the first kept", span.where)
            continue
        kept[span.span_id] = span
    return kept


def _groups(
    kept: dict[str, TracedSpan], stats: SpanStats, problems: _Problems, names: Mapping[str, str]
) -> dict[tuple[str, str], list[TracedSpan]]:
    by_trace: dict[str, list[TracedSpan]] = {}
    for span in kept.values():
        if span.parent_id is not None and span.parent_id not in stats.span_ids:
            problems.add("orphan span(s) (their parent is not in the export): grouped by their trace", span.where)
        if span.documents is None and span.parent_id in kept:
            problems.add(
                "nested span(s) recording no documents inside another stage span (the same call seen twice): left out",
                span.where,
            )
            continue
        if span.start_ns is None or span.end_ns is None:
            problems.add("span(s) without a start or end time: latency unknown", span.where)
        elif span.end_ns < span.start_ns:
            problems.add("span(s) ending before they start (clock skew): latency unknown", span.where)
        by_trace.setdefault(span.trace_id, []).append(span)
    groups: dict[tuple[str, str], list[TracedSpan]] = {}
    for trace, spans in by_trace.items():
        texts = {_norm(s.query) for s in spans if s.query is not None}
        for span in spans:
            query = span.query
            if query is None:
                if len(texts) != 1:
                    problems.add(
                        "span(s) without a query (input.value or reranker.query) in a trace of "
                        f"{len(texts) or 'no'} other queries: left out",
                        span.where,
                    )
                    continue
                problems.add("span(s) without a query: given their trace's one query", span.where)
                span.query = next(s.query for s in spans if s.query is not None)
                query = span.query
            if span.documents is None:
                problems.add("stage span(s) recording no document list: read as an empty result", span.where)
            span.name = names.get(span.name, span.name)
            groups.setdefault((trace, _norm(query or "")), []).append(span)
    for group in groups.values():
        group.sort(key=_when)
    return groups


def _when(span: TracedSpan) -> tuple[int, int]:
    end = span.end_ns if span.end_ns is not None else span.start_ns
    if span.start_ns is not None and end is not None and end < span.start_ns:
        end = span.start_ns  # clock skew: ordered by its start
    return (end or 0, span.start_ns or 0)


def _norm(text: str) -> str:
    return " ".join(text.split())


def _kinds(stats: SpanStats) -> str:
    return ", ".join(f"{n} {k}" for k, n in stats.kinds.most_common()) or "none"


def _sequence(groups: dict[tuple[str, str], list[TracedSpan]], problems: _Problems) -> tuple[str, ...]:
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
    groups: dict[tuple[str, str], list[TracedSpan]],
    order: tuple[str, ...],
    queries: Mapping[str, str] | None,
    problems: _Problems,
) -> dict[str, list[TracedSpan]]:
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
    chosen: dict[str, list[TracedSpan]] = {}
    starts: dict[str, int] = {}
    for (trace, text), spans in sorted(groups.items(), key=lambda kv: min(s.start_ns or 0 for s in kv[1])):
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
        starts[qid] = min(s.start_ns or 0 for s in spans)
    if queries is not None:
        missing = [q for q in queries if q not in chosen]
        if missing:
            problems.add(
                "queries of the set with no trace: absent from the result", f"query {missing[0]!r}", len(missing)
            )
        chosen = {q: chosen[q] for q in queries if q in chosen}
    return chosen


# ----- hits, depth and budget -------------------------------------------------------------------------------------


def _hits(
    chosen: dict[str, list[TracedSpan]], id_key: str | None, problems: _Problems
) -> dict[str, list[tuple[tuple[Hit, ...], tuple[str, ...]] | None]]:
    """Per query, per span: its hits (each doc id once) and the issues; None where the span failed."""
    out: dict[str, list[tuple[tuple[Hit, ...], tuple[str, ...]] | None]] = {}
    for qid in list(chosen):
        rows: list[tuple[tuple[Hit, ...], tuple[str, ...]] | None] = []
        unusable = False
        for span in chosen[qid]:
            if span.broken is not None:
                problems.add(f"traced queries with {span.broken}: left out", span.where)
                unusable = True
                break
            if span.error is not None:
                rows.append(None)
                continue
            hits: list[Hit] = []
            seen: set[str] = set()
            issues: list[str] = []
            for doc in span.documents or ():
                doc_id = None
                if id_key is not None and doc.metadata is not None and doc.metadata.get(id_key) not in (None, ""):
                    doc_id = str(doc.metadata[id_key])
                elif doc.id is not None:
                    doc_id = doc.id
                elif doc.content is not None:
                    problems.add("document(s) without an id: identified by the hash of their content", span.where)
                    doc_id = content_id(doc.content)
                if doc_id is None:
                    problems.add("traced queries with a document of neither id nor content: left out", span.where)
                    unusable = True
                    break
                if doc_id in seen:
                    issues.append(f"doc id {doc_id!r} recorded twice: kept once, at its first place")
                    continue
                seen.add(doc_id)
                try:
                    hits.append(Hit(doc_id, doc.score, doc.content, None, dict(doc.metadata or {})))
                except InputError as exc:
                    raise InputError(f"{span.where}: {exc}") from None
            rows.append((tuple(hits), tuple(issues)))
        if unusable:
            del chosen[qid]
            continue
        out[qid] = rows
    if not out:
        raise InputError("no traced query is left to evaluate: " + "; ".join(problems.lines()))
    return out


def _depth_budget(
    hits: dict[str, list[tuple[tuple[Hit, ...], tuple[str, ...]] | None]],
    order: tuple[str, ...],
    depth: int | None,
    budget: int | str | Budget | None,
) -> tuple[int, int | str | Budget]:
    first = np.array([len(r[0][0]) if r and r[0] is not None else 0 for r in hits.values()], np.int64)
    recorded = int(first.max()) if len(first) else 0
    last = np.array([len(r[-1][0]) if len(r) == len(order) and r[-1] is not None else 0 for r in hits.values()])
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
    chosen: dict[str, list[TracedSpan]],
    hits: dict[str, list[tuple[tuple[Hit, ...], tuple[str, ...]] | None]],
    order: tuple[str, ...],
    depth: int,
) -> dict[str, StageOutput]:
    from . import hit_table
    from ._cache import text_hash

    outputs: dict[str, StageOutput] = {}
    for i, name in enumerate(order):
        builder = hit_table.TableBuilder()
        models: set[str] = set()
        for qid, rows in hits.items():
            spans = chosen[qid]
            text = spans[0].query or ""
            if i >= len(rows):  # an earlier stage failed: this one was not run
                builder.add(qid, text_hash(text), None, error="not run: an earlier stage failed", skipped=True)
                continue
            span = spans[i]
            if span.model_name:
                models.add(span.model_name)
            latency = _latency(span)
            row = rows[i]
            if row is None:
                builder.add(qid, text_hash(text), None, error=f"{span.error} (recorded, {span.where})", latency=latency)
                continue
            found, issues = row
            beyond: tuple[str, ...] = ()
            if i == 0 and len(found) > depth:
                beyond = tuple(h.doc_id for h in found[depth:])
                found = found[:depth]
            builder.add(qid, text_hash(text), found, latency=latency, beyond_depth=beyond, issues=issues)
        described = json.dumps([name, sorted(models)])
        fingerprint = hashlib.sha256(described.encode()).hexdigest()[:20]
        covers = "the span name" + (" and the reranker's model name as recorded" if models else "")
        role = "first" if i == 0 else "reranker"
        outputs[name] = StageOutput(name, role, fingerprint, hit_table.contiguous([builder.table()]), covers=covers)
    return outputs


def _latency(span: TracedSpan) -> float:
    if span.start_ns is None or span.end_ns is None or span.end_ns < span.start_ns:
        return math.nan
    return (span.end_ns - span.start_ns) / 1e9


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


def _kind_of(chosen: dict[str, list[TracedSpan]], i: int) -> str:
    for spans in chosen.values():
        if i < len(spans):
            return spans[i].kind.lower()
    return "retriever" if i == 0 else "reranker"


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _record(
    stats: SpanStats, kept: dict[str, TracedSpan], chosen: dict[str, list[TracedSpan]], problems: _Problems
) -> dict[str, Any]:
    used = [s for spans in chosen.values() for s in spans]
    return {
        "kind": "traces",
        "path": stats.source,
        "format": stats.format,
        "spans": stats.spans,
        "stage_spans": len(kept),
        "spans_used": len(used),
        "kinds": dict(stats.kinds.most_common()),
        "window": [_iso(stats.first_ns), _iso(stats.last_ns)],
        "window_used": [
            _iso(min((s.start_ns for s in used if s.start_ns is not None), default=None)),
            _iso(max((s.end_ns for s in used if s.end_ns is not None), default=None)),
        ],
        "queries": len(chosen),
        "problems": problems.lines(),
    }
