"""Labels that survive re-chunking: answer spans, document-level and chunk-level judgements, per query.

The label kinds, answer units, readers and offsets: ``docs/projection.md``, "Labels"; how labels become relevance:
:mod:`rag_eval.ground_truth.projection`."""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from ..errors import AmbiguousAnswer, DuplicateJudgement, InputError
from . import fields as checked
from .columns import GRADE_LIMIT
from .fields import At
from .input_files import InputFile, PathLike, read_input, warn
from .qrels import Qrels
from .source import Source

__all__ = ["ChunkRef", "Span", "SpanLabels"]


@dataclass(frozen=True)
class Span:
    """One judged answer span: ``doc_id`` with ``[start, end)`` character offsets, for query ``query_id``.

    ``answer``: the exact answer text. A span given by its text alone has ``start`` and ``end`` None until
    :meth:`SpanLabels.locate` finds it; a span given with both is checked against the text there.
    ``unit``: spans of one query with the same ``unit`` are alternative answers to one need (any one of them
    answers it); None makes the span a unit of its own. ``grade``: 1 or more (a span is an answer).
    """

    doc_id: str
    start: int | None
    end: int | None
    grade: int
    query_id: str
    answer: str | None = None
    unit: str | None = None

    def __post_init__(self) -> None:
        problem = _span_problem(self.doc_id, self.start, self.end, self.grade, self.query_id, self.answer, self.unit)
        if problem:
            raise InputError(problem, source="Span")

    @property
    def located(self) -> bool:
        return self.start is not None

    @property
    def unit_id(self) -> str:
        """The answer unit's id: ``unit``, or ``doc_id[start:end]`` for a span of its own."""
        if self.unit is not None:
            return self.unit
        if self.start is None:
            return f"{self.doc_id}[{self.answer!r}]"
        return f"{self.doc_id}[{self.start}:{self.end}]"

    @property
    def length(self) -> int | None:
        """``end - start``, or None while not located."""
        return None if self.start is None or self.end is None else self.end - self.start


def _span_problem(doc_id: Any, start: Any, end: Any, grade: Any, query_id: Any, answer: Any, unit: Any) -> str | None:
    for what, value in (("query id", query_id), ("doc id", doc_id)):
        if not isinstance(value, str) or not value:
            return f"{what} {value!r} is not a non-empty str"
    if isinstance(grade, bool) or not isinstance(grade, int):
        return f"query {query_id!r}, doc {doc_id!r}: grade {grade!r} is not an integer"
    if grade < 1 or grade >= GRADE_LIMIT:
        return (
            f"query {query_id!r}, doc {doc_id!r}: a span's grade must be 1 or more (and below {GRADE_LIMIT}), "
            f"not {grade}"
        )
    if answer is not None and (not isinstance(answer, str) or not answer.strip()):
        return f"query {query_id!r}, doc {doc_id!r}: answer {answer!r} is not a non-empty str"
    if unit is not None and (not isinstance(unit, str) or not unit):
        return f"query {query_id!r}, doc {doc_id!r}: unit {unit!r} is not a non-empty str"
    if start is None and end is None:
        return (
            None
            if answer is not None
            else f"query {query_id!r}, doc {doc_id!r}: a span needs start and end, or an answer"
        )
    for what, value in (("start", start), ("end", end)):
        if value is None:
            return f"query {query_id!r}, doc {doc_id!r}: {what} is missing (give both start and end)"
        if isinstance(value, bool) or not isinstance(value, int):
            return f"query {query_id!r}, doc {doc_id!r}: {what} {value!r} is not an integer"
    if start < 0:
        return f"query {query_id!r}, doc {doc_id!r}: start {start} is negative"
    if end <= start:
        return f"query {query_id!r}, doc {doc_id!r}: end {end} is not after start {start} (offsets are [start, end))"
    if answer is not None and len(answer) != end - start:
        return (
            f"query {query_id!r}, doc {doc_id!r}: answer {answer!r} has {len(answer)} characters but "
            f"[{start}, {end}) spans {end - start}"
        )
    return None


@dataclass(frozen=True)
class ChunkRef:
    """Where a chunk comes from: its source document and its ``[start, end)`` character offsets in that
    document's text (None when unknown: the chunk can then match document-level labels but no span)."""

    doc_id: str
    start: int | None = None
    end: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.doc_id, str) or not self.doc_id:
            raise InputError(f"a chunk's source doc id {self.doc_id!r} is not a non-empty str", source="chunk map")
        if (self.start is None) != (self.end is None):
            raise InputError(f"document {self.doc_id!r}: give both start and end, or neither", source="chunk map")
        if self.start is not None and self.end is not None:
            for what, value in (("start", self.start), ("end", self.end)):
                if isinstance(value, bool) or not isinstance(value, int):
                    raise InputError(f"{what} {value!r} is not an integer", source="chunk map")
            if self.start < 0 or self.end <= self.start:
                raise InputError(
                    f"offsets [{self.start}, {self.end}) in document {self.doc_id!r} are not a range 0 <= start < end",
                    source="chunk map",
                )


@dataclass(frozen=True)
class _QueryLabels:
    spans: tuple[Span, ...]
    docs: Mapping[str, int]
    chunks: Mapping[str, int]


class SpanLabels:
    """Answer spans, document-level and chunk-level labels per query. Immutable.

    Build it from spans and mappings, or with :meth:`from_jsonl`, :meth:`from_squad` or :meth:`from_qrels`.
    A span repeated within a query (same document and offsets, or same answer string) is kept once; a repeat
    with another grade or unit keeps the first, with a warning.
    """

    __slots__ = ("_queries", "source")

    def __init__(
        self,
        spans: Iterable[Span] = (),
        *,
        docs: Mapping[str, Mapping[str, int]] | None = None,
        chunks: Mapping[str, Mapping[str, int]] | None = None,
        source: Source | None = None,
    ) -> None:
        """``spans``: :class:`Span` objects; ``docs``: ``{query_id: {doc_id: grade}}``; ``chunks``:
        ``{query_id: {chunk_id: grade}}``."""
        builder = _Builder("SpanLabels")
        for span in spans:
            if not isinstance(span, Span):
                raise TypeError(f"spans must be Span objects, not {type(span).__name__}")
            builder.span(span, None)
        for kind, given in (("doc", docs), ("chunk", chunks)):
            if given is None:
                continue
            if not isinstance(given, Mapping):
                raise TypeError(f"{kind}s must be a mapping {{query_id: {{{kind}_id: grade}}}}")
            for qid, judged in given.items():
                if not isinstance(judged, Mapping):
                    raise InputError(
                        f"query {qid!r}: {kind} labels must be a mapping {kind}_id -> grade", source="SpanLabels"
                    )
                for item, grade in judged.items():
                    builder.label(kind, qid, item, grade, None)
        self._queries = builder.build()
        self.source = source

    # ----- constructors -------------------------------------------------------------------------------------
    @classmethod
    def from_jsonl(cls, path: PathLike) -> SpanLabels:
        """From JSON lines, one label each:

        - a span: ``{"query_id", "doc_id", "start", "end", "grade"}`` (optionally ``"answer"``, checked against
          the text when located, and ``"unit"``);
        - an answer string to locate: ``{"query_id", "doc_id", "answer", "grade"}`` (optionally ``"unit"``);
        - a document-level label: ``{"query_id", "doc_id", "grade"}``;
        - a chunk-level label: ``{"query_id", "chunk_id", "grade"}``.

        Every problem is an :class:`InputError` naming the file and line.
        """
        file = read_input(path)
        builder = _Builder(file.path)
        for number, record in file.json_objects():
            _read_record(builder, file, number, record)
        labels = cls.__new__(cls)
        labels._queries = builder.build()
        labels.source = Source.of(file)
        return labels

    @classmethod
    def from_squad(cls, folder: PathLike) -> SpanLabels:
        """The answer spans of a SQuAD folder's ``answers.jsonl`` (as in ``../shared/datasets/squad-dev-v1.1``).

        Doc id = the article id (``aNN``, the ids of ``articles.jsonl``); offsets = ``article_start`` and
        ``article_start + len(text)`` into that article's text; grade 1. A question's answers are alternatives (as
        in SQuAD's own scoring, any one of them answers the question), so they form one answer unit, named after
        the question's first answer; annotators' identical answers are one span, kept once.
        """
        path = Path(os.fspath(folder))
        file = read_input(path / "answers.jsonl" if path.is_dir() else path)
        builder = _Builder(file.path)
        for number, record in file.json_objects():
            try:
                qid, doc, answers = record["query_id"], record["article_id"], record["answers"]
            except KeyError as exc:
                raise file.error(f"missing key {exc.args[0]!r}", number) from None
            if not isinstance(answers, list) or not answers:
                raise file.error("'answers' is not a non-empty list", number)
            unit = None
            for answer in answers:
                if not isinstance(answer, dict) or "text" not in answer or "article_start" not in answer:
                    raise file.error("an answer needs 'text' and 'article_start'", number)
                text, start = answer["text"], _offset(file, number, "article_start", answer["article_start"])
                if not isinstance(text, str) or not text:
                    raise file.error(f"answer text {text!r} is not a non-empty str", number)
                if unit is None:
                    unit = f"{doc}[{start}:{start + len(text)}]"
                builder.span(_span(file, number, doc, start, start + len(text), 1, qid, text, unit), number)
        labels = cls.__new__(cls)
        labels._queries = builder.build()
        labels.source = Source.of(file)
        return labels

    @classmethod
    def from_qrels(cls, qrels: Qrels, *, level: Literal["doc", "chunk"]) -> SpanLabels:
        """A Qrels read as document-level (``level="doc"``: its ids are source documents, to be projected onto
        their chunks) or chunk-level labels (``level="chunk"``: its ids are chunk ids, used as they are)."""
        if level not in ("doc", "chunk"):
            raise ValueError(f"level must be 'doc' or 'chunk', not {level!r}")
        given = qrels.to_dict()
        labels = cls(docs=given) if level == "doc" else cls(chunks=given)
        labels.source = qrels.source
        return labels

    # ----- reading ------------------------------------------------------------------------------------------
    @property
    def query_ids(self) -> tuple[str, ...]:
        return tuple(self._queries)

    def __len__(self) -> int:
        return len(self._queries)

    def __contains__(self, query_id: object) -> bool:
        return query_id in self._queries

    def __iter__(self) -> Iterator[str]:
        return iter(self._queries)

    def spans(self, query_id: str) -> tuple[Span, ...]:
        """The query's answer spans (empty when it has none)."""
        q = self._queries.get(query_id)
        return q.spans if q else ()

    def docs(self, query_id: str) -> Mapping[str, int]:
        """The query's document-level labels ``{doc_id: grade}``."""
        q = self._queries.get(query_id)
        return q.docs if q else MappingProxyType({})

    def chunks(self, query_id: str) -> Mapping[str, int]:
        """The query's chunk-level labels ``{chunk_id: grade}``."""
        q = self._queries.get(query_id)
        return q.chunks if q else MappingProxyType({})

    def units(self, query_id: str) -> dict[str, tuple[Span, ...]]:
        """The query's answer units: ``{unit_id: (alternative spans, ...)}``, in order of first appearance."""
        out: dict[str, list[Span]] = {}
        for span in self.spans(query_id):
            out.setdefault(span.unit_id, []).append(span)
        return {u: tuple(s) for u, s in out.items()}

    @property
    def num_spans(self) -> int:
        return sum(len(q.spans) for q in self._queries.values())

    @property
    def num_units(self) -> int:
        return sum(len({s.unit_id for s in q.spans}) for q in self._queries.values())

    @property
    def located(self) -> bool:
        """Whether every span has offsets (answer strings given alone need :meth:`locate` first)."""
        return all(s.start is not None for q in self._queries.values() for s in q.spans)

    def describe(self) -> str:
        """One line of counts, for the metric card."""
        docs = sum(len(q.docs) for q in self._queries.values())
        chunks = sum(len(q.chunks) for q in self._queries.values())
        return (
            f"{len(self)} queries: {self.num_spans} answer spans in {self.num_units} answer units, "
            f"{docs} document-level and {chunks} chunk-level labels"
        )

    def __repr__(self) -> str:
        origin = f" from {self.source.path!r}" if self.source and self.source.path else ""
        return f"SpanLabels({self.describe()}{origin})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SpanLabels) and self._queries == other._queries

    __hash__ = None  # type: ignore[assignment]

    def subset(self, query_ids: Iterable[str]) -> SpanLabels:
        """The labels of ``query_ids`` only (ids without labels are ignored), e.g. for a sample of the queries."""
        labels = SpanLabels.__new__(SpanLabels)
        labels._queries = {q: self._queries[q] for q in query_ids if q in self._queries}
        labels.source = self.source
        return labels

    # ----- locating answer strings --------------------------------------------------------------------------
    def locate(self, texts: Mapping[str, str]) -> SpanLabels:
        """These labels with every answer string given alone located in its document's text (``texts``:
        ``{doc_id: text}``); spans given with offsets and an answer are checked against the text.

        An answer string not found in its document is an :class:`InputError` naming the query and the string.
        One found more than once takes its **first** occurrence, with one warning for all such strings: give
        offsets where the first occurrence is not the answer. Returns a new SpanLabels (this one is unchanged).
        """
        where = self.source.path if self.source else "SpanLabels"
        repeated: list[str] = []
        queries: dict[str, _QueryLabels] = {}
        for qid, q in self._queries.items():
            spans = []
            for span in q.spans:
                if span.answer is None:
                    spans.append(span)
                    continue
                text = texts.get(span.doc_id)
                if text is None:
                    raise InputError(
                        f"query {qid!r}: document {span.doc_id!r} is not among the texts given", source=where
                    )
                if span.start is not None:
                    if text[span.start : span.end] != span.answer:
                        raise InputError(
                            f"query {qid!r}: answer {span.answer!r} is not at [{span.start}, {span.end}) of document "
                            f"{span.doc_id!r} (found {text[span.start : span.end]!r})",
                            source=where,
                        )
                    spans.append(span)
                    continue
                first = text.find(span.answer)
                if first < 0:
                    raise InputError(
                        f"query {qid!r}: answer {span.answer!r} not found in document {span.doc_id!r}", source=where
                    )
                if text.find(span.answer, first + 1) >= 0:
                    repeated.append(
                        f"query {qid!r}: {span.answer!r} occurs {text.count(span.answer)} times in {span.doc_id!r}"
                    )
                spans.append(
                    Span(span.doc_id, first, first + len(span.answer), span.grade, qid, span.answer, span.unit)
                )
            queries[qid] = _QueryLabels(tuple(_unique(spans)), q.docs, q.chunks)
        if repeated:
            warn(
                f"{where}: {len(repeated)} answer string(s) occur more than once in their document; the first "
                f"occurrence was used (e.g. {repeated[0]}); give offsets where it is not the answer",
                AmbiguousAnswer,
            )
        labels = SpanLabels.__new__(SpanLabels)
        labels._queries = queries
        labels.source = self.source
        return labels


def _unique(spans: list[Span]) -> list[Span]:
    """Spans located onto the same offsets as another of the same query: kept once."""
    seen: dict[tuple[str | int | None, ...], Span] = {}
    for span in spans:
        seen.setdefault((span.doc_id, span.start, span.end, span.unit), span)
    return list(seen.values())


class _Builder:
    """Collects labels, query by query, keeping the first of repeated ones."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.spans: dict[str, dict[tuple[str | int | None, ...], Span]] = {}
        self.labels: dict[str, dict[str, dict[str, int]]] = {}
        self.conflicts: list[str] = []
        self.unit_grades: dict[tuple[str, str], int] = {}

    def _query(self, qid: str) -> None:
        if qid not in self.spans:
            self.spans[qid] = {}
            self.labels[qid] = {"doc": {}, "chunk": {}}

    def span(self, span: Span, line: int | None) -> None:
        self._query(span.query_id)
        key = (span.doc_id, span.start, span.end) if span.start is not None else (span.doc_id, span.answer)
        kept = self.spans[span.query_id].setdefault(key, span)
        if kept is not span and (kept.grade != span.grade or kept.unit != span.unit):
            self.conflicts.append(
                f"query {span.query_id!r} span {span.unit_id}: the first kept" + (f" (line {line})" if line else "")
            )
        if span.unit is not None:
            grade = self.unit_grades.setdefault((span.query_id, span.unit), span.grade)
            if grade != span.grade:
                raise InputError(
                    f"query {span.query_id!r}: the spans of unit {span.unit!r} have grades {grade} and {span.grade} "
                    f"(alternatives of one unit share a grade)",
                    source=self.where,
                    line=line,
                )

    def label(self, kind: str, qid: Any, item: Any, grade: Any, line: int | None) -> None:
        for what, value in (("query id", qid), (f"{kind} id", item)):
            if not isinstance(value, str) or not value:
                raise InputError(f"{what} {value!r} is not a non-empty str", source=self.where, line=line)
        if isinstance(grade, bool) or not (
            isinstance(grade, numbers.Integral) or (isinstance(grade, float) and grade.is_integer())
        ):
            raise InputError(
                f"query {qid!r}, {kind} {item!r}: grade {grade!r} is not an integer", source=self.where, line=line
            )
        grade = int(grade)
        if abs(grade) >= GRADE_LIMIT:
            raise InputError(
                f"query {qid!r}, {kind} {item!r}: grade {grade} is out of range (grades must lie within "
                f"+-{GRADE_LIMIT})",
                source=self.where,
                line=line,
            )
        self._query(qid)
        kept = self.labels[qid][kind].setdefault(item, grade)
        if kept != grade:
            self.conflicts.append(
                f"query {qid!r} {kind} {item!r}: {kept} kept, {grade} dropped" + (f" (line {line})" if line else "")
            )

    def build(self) -> dict[str, _QueryLabels]:
        if self.conflicts:
            warn(
                f"{self.where}: {len(self.conflicts)} repeated label(s) with another grade or unit; kept the first "
                f"(e.g. {self.conflicts[0]})",
                DuplicateJudgement,
            )
        return {
            q: _QueryLabels(
                tuple(self.spans[q].values()),
                MappingProxyType(self.labels[q]["doc"]),
                MappingProxyType(self.labels[q]["chunk"]),
            )
            for q in self.spans
        }


def _offset(file: InputFile, number: int, key: str, value: Any) -> int:
    """A character offset: an integer (an integral float too) within int64, never a bool (a negative one is
    refused by :func:`_span_problem`)."""
    if isinstance(value, str):  # JSON holds offsets as numbers: "12" is refused, as it was before
        raise file.error(f"{key} {value!r} is not an integer", number)
    return checked.integer(value, key, At(file.path, number))


def _span(
    file: InputFile, number: int, doc: Any, start: Any, end: Any, grade: Any, qid: Any, answer: Any, unit: Any
) -> Span:
    problem = _span_problem(doc, start, end, grade, qid, answer, unit)
    if problem:
        raise file.error(problem, number)
    return Span(doc, start, end, grade, qid, answer, unit)


def _read_record(builder: _Builder, file: InputFile, number: int, record: dict[str, Any]) -> None:
    def need(key: str) -> Any:
        if key not in record:
            raise file.error(f"missing key {key!r}", number)
        return record[key]

    qid = need("query_id")
    grade = need("grade")
    if "chunk_id" in record:
        builder.label("chunk", qid, record["chunk_id"], grade, number)
        return
    doc = need("doc_id")
    start: int | None
    end: int | None
    if "start" in record or "end" in record:
        start = _offset(file, number, "start", need("start"))
        end = _offset(file, number, "end", need("end"))
    elif "answer" in record:
        start = end = None
    else:
        builder.label("doc", qid, doc, grade, number)
        return
    if isinstance(grade, float) and grade.is_integer():
        grade = int(grade)
    builder.span(_span(file, number, doc, start, end, grade, qid, record.get("answer"), record.get("unit")), number)
