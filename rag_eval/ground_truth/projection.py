"""Projection: labels given on documents and answer spans, turned into relevance for a ranked list of chunks.

The seven rules (units, spans, documents, chunks, crediting, judged-ness, positions) and evaluating projections:
``docs/projection.md``, "The projection rules"."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np

from .._checks import check_int, check_share
from ..data.input_files import warn
from ..data.qrels import Qrels
from ..data.run import Run
from ..data.spans import ChunkRef, SpanLabels
from ..errors import InputError, UnmappedChunks

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ChunkRef", "Projection", "ProjectionRules", "QueryCounts", "project"]

Status = Literal["unit", "wasted", "nonrelevant", "unjudged"]
STATUSES: tuple[Status, ...] = ("unjudged", "unit", "wasted", "nonrelevant")
_UNJUDGED, _UNIT, _WASTED, _NONRELEVANT = range(4)


@dataclass(frozen=True)
class ProjectionRules:
    """The choices of a projection (see the module's docstring). Without a threshold: ``min_overlap_share=1.0``."""

    min_overlap_chars: int | None = None
    min_overlap_share: float | None = None
    ties: Literal["trec_eval", "doc_id", "input_order"] = "trec_eval"

    def __post_init__(self) -> None:
        chars, share = self.min_overlap_chars, self.min_overlap_share
        if chars is not None and share is not None:
            raise ValueError("give min_overlap_chars or min_overlap_share, not both")
        if chars is not None:
            check_int(chars, "min_overlap_chars", high=None)
        if share is not None:
            check_share(share, "min_overlap_share", closed="right")
        if chars is None and share is None:
            object.__setattr__(self, "min_overlap_share", 1.0)
        if self.ties not in ("trec_eval", "doc_id", "input_order"):
            raise ValueError(f"ties must be 'trec_eval', 'doc_id' or 'input_order', not {self.ties!r}")

    def needed(self, length: int) -> int:
        """Characters of overlap a chunk needs with a span of ``length`` characters to cover it."""
        if self.min_overlap_chars is not None:
            return min(self.min_overlap_chars, length)
        share = 1.0 if self.min_overlap_share is None else self.min_overlap_share  # None only before __post_init__
        return max(1, math.ceil(share * length - 1e-9))

    @property
    def threshold(self) -> str:
        if self.min_overlap_chars is not None:
            return f"min_overlap_chars={self.min_overlap_chars}"
        return f"min_overlap_share={self.min_overlap_share:g}"

    def describe(self) -> str:
        """The rules in one line (what the metric card shows)."""
        if self.min_overlap_chars is not None:
            cover = f"overlaps it by >= {self.min_overlap_chars} characters (capped at the span's length)"
        else:
            cover = f"holds >= {self.min_overlap_share:.0%} of it"
        return (
            f"projected onto chunks: a chunk covers an answer span when it {cover} ({self.threshold}); each answer "
            f"unit, document label and chunk label is credited once, to the best-ranked chunk matching it (one "
            f"unit per chunk); later chunks matching only credited units are wasted, judged non-relevant; "
            f"ties={self.ties}"
        )


class QueryCounts(NamedTuple):
    """One query's projection: relevant units (grade > 0), those credited to a position, wasted positions,
    positions."""

    units: int
    covered: int
    wasted: int
    positions: int


@dataclass(frozen=True, eq=False)
class Projection:
    """What :func:`project` returns: the projected ``run`` and ``qrels`` (ids are units; evaluate them with any
    metric), the ``rules`` used, and per query ``counts``. ``chunk_ids`` and ``status`` are aligned with
    ``run.doc_ids`` (the chunk at each position, and what it became: see :data:`STATUSES`)."""

    run: Run
    qrels: Qrels
    rules: ProjectionRules
    counts: Mapping[str, QueryCounts]
    labels: SpanLabels = field(repr=False)
    chunk_ids: np.ndarray = field(repr=False)
    status: np.ndarray = field(repr=False)

    @property
    def name(self) -> str:
        return self.run.name

    def totals(self) -> QueryCounts:
        """The counts summed over queries."""
        return QueryCounts(*(int(sum(c[i] for c in self.counts.values())) for i in range(4)))

    @property
    def wasted_share(self) -> float:
        """Wasted positions / positions, over every query (0.0 for an empty ranking)."""
        total = self.totals()
        return total.wasted / total.positions if total.positions else 0.0

    def describe(self) -> str:
        t = self.totals()
        share = f"{t.covered / t.units:.1%}" if t.units else "n/a"
        return (
            f"projection: {t.units} relevant units, {t.covered} credited in the ranking ({share}), "
            f"{t.wasted} wasted positions of {t.positions}"
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per position: ``query_id, rank, chunk_id, id`` (in the projected run), ``status``."""
        import pandas as pd

        lengths = np.diff(self.run.offsets)
        starts = np.repeat(self.run.offsets[:-1], lengths)
        return pd.DataFrame(
            {
                "query_id": np.repeat(np.array(self.run.query_ids, dtype=object), lengths),
                "rank": np.arange(self.run.num_entries) - starts + 1,
                "chunk_id": self.chunk_ids,
                "id": self.run.doc_ids,
                "status": np.array(STATUSES, dtype=object)[self.status],
            }
        )

    def __repr__(self) -> str:
        return f"Projection({self.run.name!r}, {self.rules.threshold}, {self.describe().removeprefix('projection: ')})"


def project(
    ranking: Run | Mapping[str, Sequence[str] | Sequence[tuple[str, float]]],
    chunks: Mapping[str, ChunkRef | tuple[Any, ...] | str] | None,
    labels: SpanLabels,
    *,
    min_overlap_chars: int | None = None,
    min_overlap_share: float | None = None,
    ties: Literal["trec_eval", "doc_id", "input_order"] = "trec_eval",
    name: str | None = None,
) -> Projection:
    """Project ``labels`` onto the chunks of ``ranking`` (see the module's docstring for the rules).

    ``ranking``: a :class:`Run` of chunk ids, or ``{query_id: [chunk_id, ...]}`` in ranked order (items may be
    ``(chunk_id, score)`` pairs; a chunk repeated in a list keeps every position). ``chunks``: ``{chunk_id:
    ChunkRef}`` (or ``(doc_id, start, end)`` tuples, or a bare doc id); None when the labels are chunk-level only.
    ``labels``: :class:`SpanLabels`, with every answer string located (:meth:`SpanLabels.locate`).
    ``name``: the projected run's name (default: the Run's name, or ``"projection"``).
    """
    rules = ProjectionRules(min_overlap_chars, min_overlap_share, ties)
    if not isinstance(labels, SpanLabels):
        raise TypeError(f"labels must be SpanLabels (SpanLabels.from_qrels reads a Qrels), not {type(labels).__name__}")
    if not labels.located:
        raise ValueError("some answer strings are not located yet: call labels.locate(texts) first")
    refs = _chunk_refs(chunks)
    rankings, run_name = _rankings(ranking, ties)
    run_name = name or run_name
    if len(labels):  # the ranking's queries and the labels': matched k of n, none an error (nothing to project)
        from ..data.joins import join

        join(
            list(rankings),
            set(labels.query_ids),
            what=f"{run_name}: the ranking's query ids",
            where=f"the span labels ({len(labels)} queries)",
            required=True,
            consequence="the queries not matched have no label: their chunks count as unjudged",
        )

    out_ranking: dict[str, list[str] | list[tuple[str, float]]] = {}
    judgements: dict[str, dict[str, int]] = {}
    counts: dict[str, QueryCounts] = {}
    chunk_column: list[str] = []
    status_column: list[int] = []
    missing = no_offsets = 0
    for qid in list(rankings) + [q for q in labels if q not in rankings]:
        units, by_doc, kinds = _units(labels, qid, rules)
        judged_docs = {s.doc_id for s in labels.spans(qid)} | set(labels.docs(qid))
        chunk_labels, doc_labels = labels.chunks(qid), labels.docs(qid)
        items = rankings.get(qid, [])
        used = set(units)
        credited: set[str] = set()
        extra: dict[str, int] = {}
        positions: list[str] = []
        scores: list[float] = []  # all or none (_rankings refuses a mix)
        wasted = 0
        for rank, (chunk, score) in enumerate(items, start=1):
            matched: list[str] = []
            if chunk in chunk_labels:
                matched.append(chunk)
            ref = refs.get(chunk)
            if ref is not None:
                if ref.doc_id in doc_labels:
                    matched.append(ref.doc_id)
                spans = by_doc.get(ref.doc_id)
                if spans:
                    if ref.start is None or ref.end is None:
                        no_offsets += 1
                    else:
                        for unit, start, end, need in spans:
                            if min(end, ref.end) - max(start, ref.start) >= need and unit not in matched:
                                matched.append(unit)
            elif judged_docs:
                missing += 1
            new = [u for u in matched if u not in credited]
            if new:
                unit = min(new, key=lambda u: (-units[u], kinds[u]))
                credited.add(unit)
                position, status = unit, _UNIT
            else:
                if any(units[u] > 0 for u in matched):
                    status = _WASTED
                    wasted += 1
                elif matched or (ref is not None and ref.doc_id in judged_docs):
                    status = _NONRELEVANT
                else:
                    status = _UNJUDGED
                position = chunk
                while position in used:
                    position = f"{position}#{rank}"
                used.add(position)
                if status != _UNJUDGED:
                    extra[position] = 0
            positions.append(position)
            if score is not None:
                scores.append(score)
            chunk_column.append(chunk)
            status_column.append(status)
        if qid in rankings:
            out_ranking[qid] = list(zip(positions, scores, strict=True)) if scores else positions
        if qid in labels:
            judgements[qid] = units | extra
        positive = [u for u, g in units.items() if g > 0]
        counts[qid] = QueryCounts(len(positive), sum(u in credited for u in positive), wasted, len(items))
    if missing:
        warn(
            f"{run_name}: {missing} position(s) hold a chunk that is not in the chunk map, for queries with document "
            f"or span labels: they match no document or span and count as unjudged",
            UnmappedChunks,
        )
    if no_offsets:
        warn(
            f"{run_name}: {no_offsets} position(s) hold a chunk without character offsets from a document with answer "
            f"spans: it cannot cover a span (give the chunk map start and end)",
            UnmappedChunks,
        )
    run = Run.from_ranking(out_ranking, name=run_name)
    if len(chunk_column) != run.num_entries:  # cannot happen: every position has its own id
        raise AssertionError("projection lost a position")
    projection = Projection(
        run=run,
        qrels=Qrels.from_dict(judgements),
        rules=rules,
        counts=counts,
        labels=labels,
        chunk_ids=np.array(chunk_column, dtype=object) if chunk_column else np.empty(0, object),
        status=np.array(status_column, dtype=np.int8),
    )
    run.notes = (*run.notes, rules.describe(), projection.describe())
    return projection


def _units(
    labels: SpanLabels, qid: str, rules: ProjectionRules
) -> tuple[dict[str, int], dict[str, list[tuple[str, int, int, int]]], dict[str, tuple[int, int]]]:
    """``units`` {id: grade}, spans by document ``{doc: [(unit, start, end, overlap needed)]}``, and each unit's
    kind order (0 span, 1 chunk label, 2 document label, then label order) for tie-breaking."""
    units: dict[str, int] = {}
    kinds: dict[str, tuple[int, int]] = {}
    by_doc: dict[str, list[tuple[str, int, int, int]]] = {}
    for i, (unit, spans) in enumerate(labels.units(qid).items()):
        units[unit] = max(s.grade for s in spans)
        kinds[unit] = (0, i)
        for s in spans:
            if s.start is None or s.end is None:  # project() refuses labels not located first
                raise ValueError(f"query {qid!r}: answer {unit!r} is not located: call labels.locate(texts) first")
            by_doc.setdefault(s.doc_id, []).append((unit, s.start, s.end, rules.needed(s.end - s.start)))
    for kind, given in ((1, labels.chunks(qid)), (2, labels.docs(qid))):
        for i, (item, grade) in enumerate(given.items()):
            if item in units:
                raise InputError(
                    f"query {qid!r}: {item!r} names two labels (a {'chunk' if kind == 1 else 'document'} and an answer "
                    f"unit or chunk): ids must be distinct within a query to be projected",
                    source="SpanLabels",
                )
            units[item] = grade
            kinds[item] = (kind, i)
    return units, by_doc, kinds


def _chunk_refs(chunks: Mapping[str, Any] | None) -> dict[str, ChunkRef]:
    if chunks is None:
        return {}
    if not isinstance(chunks, Mapping):
        raise TypeError(
            f"chunks must be a mapping {{chunk_id: ChunkRef(doc_id, start, end)}}, not {type(chunks).__name__}"
        )
    out: dict[str, ChunkRef] = {}
    for chunk, ref in chunks.items():
        if not isinstance(chunk, str):
            raise InputError(f"chunk id {chunk!r} is a {type(chunk).__name__}, not a str", source="chunk map")
        if isinstance(ref, ChunkRef):
            out[chunk] = ref
            continue
        try:
            if isinstance(ref, str):
                out[chunk] = ChunkRef(ref)
            elif isinstance(ref, (tuple, list)) and len(ref) in (1, 3):
                out[chunk] = ChunkRef(*ref)
            else:
                raise InputError(
                    f"expected ChunkRef(doc_id, start, end), (doc_id, start, end) or a doc id, got {ref!r}"
                )
        except InputError as exc:
            raise InputError(f"chunk {chunk!r}: {exc.problem}", source="chunk map") from None
    return out


def _rankings(ranking: Any, ties: str) -> tuple[dict[str, list[tuple[str, float | None]]], str]:
    """Every query's ``[(chunk_id, score or None), ...]`` in ranked order, and the run's name."""
    if isinstance(ranking, Run):
        out = {}
        for qid in ranking.query_ids:
            out[qid] = ranking.ranking(qid, ties=ties)  # (chunk_id, score), score None without scores
        return out, ranking.name
    if not isinstance(ranking, Mapping):
        raise TypeError(
            f"ranking must be a Run or a mapping {{query_id: [chunk_id, ...]}}, not {type(ranking).__name__}"
        )
    out = {}
    for qid, items in ranking.items():
        if not isinstance(qid, str):
            raise InputError(f"query id {qid!r} is a {type(qid).__name__}, not a str", source="ranking")
        if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
            raise InputError(f"query {qid!r}: expected a list of chunk ids in ranked order", source="ranking")
        pairs = []
        for item in items:
            if isinstance(item, (tuple, list)) and len(item) == 2:
                chunk, score = item[0], float(item[1])
            else:
                chunk, score = item, None
            if not isinstance(chunk, str):
                raise InputError(
                    f"query {qid!r}: chunk id {chunk!r} is a {type(chunk).__name__}, not a str", source="ranking"
                )
            pairs.append((chunk, score))
        out[qid] = pairs
    if len({s is None for pairs in out.values() for _, s in pairs}) > 1:
        raise InputError(
            "mixes bare chunk ids and (chunk_id, score) pairs: give scores for every chunk or none", source="ranking"
        )
    return out, "projection"
