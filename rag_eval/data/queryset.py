"""Query sets: the queries an evaluation asks, with where each came from, and a card for the set (layer 1).

A :class:`QuerySet` is a read-only mapping ``{query_id: text}``, so it goes wherever such a mapping goes
(``Pipeline.run(queries)``), and holds per query its :class:`QueryProvenance` (the source, first and last seen,
frequency, stratum, inclusion probability, the log's other columns) and for the whole set a
:class:`QuerySetCard` (the source file and its SHA-256, the date range, the filters, the normalisation,
deduplication and masking rules, the strata and their sizes, the sampling seed).

:meth:`QuerySet.from_log` reads a query log (CSV, TSV, JSON lines, Parquet, or an OTLP JSON trace export) and merges
the queries that are equal after :func:`normalise`; near-duplicate merging and sampling are in layer 4
(:mod:`rag_eval.ground_truth.querysets`). :meth:`QuerySet.save` writes JSON lines that :meth:`QuerySet.load` reads
back equal.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal

from .._checks import check_int
from .._files import write_output
from ..errors import InputError
from . import fields as checked
from ._query_logs import LogFormat, Scalar, read_log
from .fields import At
from .input_files import read_input
from .records import body_of, sample_card_problem, saved_sha256

PathLike = str | os.PathLike[str]

#: the version of the JSON lines :meth:`QuerySet.save` writes (on the header line, ``{"query_set": 1, ...}``)
FORMAT_VERSION = 1

#: what :func:`normalise` does, as the card records it
NORMALISATION = (
    "Unicode NFKC, casefold, whitespace runs collapsed to one space and trimmed, trailing . ? ! and their "
    "full-width and ellipsis forms removed"
)
#: what :func:`mask_pii` does, as the card records it
MASKING = (
    "e-mail addresses -> <email>; phone numbers -> <phone> (a + and 8-15 digits; or 3 or more groups of digits "
    "separated by a space, '-' or '.', the first may be an area code in parentheses, 9-15 digits in all; or a run "
    "of 10-15 digits)"
)

_TRAILING = re.compile(r"[\s.?!\u3002\uff1f\uff01\u2026]+$")
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_PHONE = re.compile(
    r"(?<![\w+])(?:"
    r"\+\d[\d\s().-]{6,}\d"  # international: + and digits
    r"|\(\d{1,5}\)[\s.-]?\d{1,5}(?:[\s.-]\d{1,5})+"  # an area code in parentheses, then groups
    r"|\d{1,5}(?:[\s.-]\d{1,5}){2,}"  # three or more groups
    r"|\d{10,15}"  # one run
    r")(?![\w])"
)


def normalise(text: str) -> str:
    """The form in which two logged queries are the same query: Unicode NFKC, casefolded, every run of whitespace
    one space, trimmed, and trailing ``.``, ``?``, ``!`` (and ``。？！…``) removed. ``"What is  RAG?"`` and
    ``"what is rag"`` are one query."""
    folded = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return _TRAILING.sub("", folded)


def mask_pii(text: str) -> str:
    """``text`` with e-mail addresses replaced by ``<email>`` and phone numbers by ``<phone>`` (the rules:
    :data:`MASKING`). Years, counts and short numbers stay: ``"1995-2005"`` and ``"555-0123"`` are not phone
    numbers here, ``"+1 415 555 0123"``, ``"(415) 555-0123"`` and ``"020 7946 0958"`` are."""
    text = _EMAIL.sub("<email>", text)

    def phone(match: re.Match[str]) -> str:
        found = match.group(0)
        digits = sum(c.isdigit() for c in found)
        if found.startswith("+"):
            return "<phone>" if 8 <= digits <= 15 else found
        if found.isdigit():
            return "<phone>"
        return "<phone>" if 9 <= digits <= 15 else found

    return _PHONE.sub(phone, text)


def query_id(key: str) -> str:
    """The id of the query whose normalised text is ``key``: ``q`` and the first 16 hex digits of its SHA-256
    (the same text gives the same id in every log, and the id holds no text)."""
    return "q" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class QueryProvenance:
    """Where one query of a set came from.

    ``frequency`` is the traffic it stands for (log records, or their counts, of every form merged into it);
    ``first_seen`` and ``last_seen`` are ISO 8601 UTC times (None where the log has none); ``stratum`` and
    ``inclusion_probability`` are set by sampling (the probability that the query was drawn: ``n_h / N_h`` within
    its stratum); ``columns`` are the log's other columns (for a query logged with several values of a column, the
    value with the most traffic, the first seen on a tie); ``merged`` are the texts of the near-duplicates merged
    into it.
    """

    source: str
    frequency: int = 1
    first_seen: str | None = None
    last_seen: str | None = None
    stratum: str | None = None
    inclusion_probability: float | None = None
    columns: Mapping[str, Scalar] = field(default_factory=lambda: MappingProxyType({}))
    merged: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.columns, MappingProxyType):
            object.__setattr__(self, "columns", MappingProxyType(dict(self.columns)))
        object.__setattr__(self, "merged", tuple(self.merged))
        check_int(self.frequency, "frequency", high=None)
        p = self.inclusion_probability
        if p is not None and (isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 < p <= 1.0):
            raise ValueError(f"inclusion_probability must be in (0, 1] or None, not {p!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "frequency": self.frequency,
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "stratum": self.stratum,
            "inclusion_probability": self.inclusion_probability,
            "columns": dict(self.columns),
            "merged": list(self.merged),
        }


@dataclass(frozen=True)
class QuerySetCard:
    """What a query set is: where it came from and what was done to it (every report made with it carries it).

    ``strata`` maps each stratum to ``{"queries": N_h, "traffic": T_h, "sampled": n_h, "inclusion_probability":
    n_h / N_h}`` (``sampled`` and the probability once sampled); ``deduplication`` holds ``exact`` (the
    normalisation) and, once near-duplicates are merged, ``near`` (method, shingles, threshold, how many merged).
    """

    source: str | None = None
    sha256: str | None = None
    format: str | None = None
    records: int | None = None  # log records read (after the filters)
    traffic: int | None = None  # their summed counts
    date_range: tuple[str, str] | None = None
    filters: Mapping[str, Any] = field(default_factory=dict)
    normalisation: str | None = None
    masking: str | None = None
    deduplication: Mapping[str, Any] = field(default_factory=dict)
    stratify: tuple[str, ...] = ()
    allocation: str | None = None
    strata: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    sample_size: int | None = None
    seed: int | None = None
    clustering: Mapping[str, Any] = field(default_factory=dict)  # cluster strata: method, model, k, seed, sizes

    def __post_init__(self) -> None:
        if self.date_range is not None:
            object.__setattr__(self, "date_range", tuple(self.date_range))
        object.__setattr__(self, "stratify", tuple(self.stratify))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["date_range"] = list(self.date_range) if self.date_range else None
        out["stratify"] = list(self.stratify)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QuerySetCard:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown field(s) of a query set card: {', '.join(unknown)}")
        return cls(**data)

    def render(self) -> str:
        """The card as lines of text (what the CLI prints)."""
        lines = ["query set card:"]
        if self.source is not None:
            lines.append(f"  source: {self.source} ({self.format}, sha256 {self.sha256})")
        if self.records is not None:
            lines.append(f"  records: {self.records:,} (traffic {self.traffic:,})")
        if self.date_range is not None:
            lines.append(f"  dates: {self.date_range[0]} to {self.date_range[1]}")
        if self.filters:
            lines.append("  filters: " + ", ".join(f"{k}: {v}" for k, v in self.filters.items()))
        if self.masking:
            lines.append(f"  masking: {self.masking}")
        if self.normalisation:
            lines.append(f"  normalisation: {self.normalisation}")
        for kind, rule in self.deduplication.items():
            lines.append(
                f"  deduplication ({kind}): {json.dumps(rule, sort_keys=True) if isinstance(rule, dict) else rule}"
            )
        if self.stratify:
            lines.append(
                f"  sample: {self.sample_size} queries, stratified by {', '.join(self.stratify)}, "
                f"{self.allocation} allocation, seed {self.seed}"
            )
        if self.clustering:
            c = self.clustering
            lines.append(
                f"  clusters: k-means, k={c.get('k')} ({c.get('k_rule')}), seed {c.get('seed')}, "
                f"n_init {c.get('n_init')}, over {c.get('model')} embeddings"
            )
        return "\n".join(lines)


class QuerySet(Mapping[str, str]):
    """A read-only ``{query_id: text}`` mapping with each query's :class:`QueryProvenance` and the set's
    :class:`QuerySetCard`.

    Build one with :meth:`from_log` (a query log), :meth:`from_dict` (a mapping you have) or :meth:`load` (what
    :meth:`save` wrote). Equality with another QuerySet compares texts, provenance and card; with a plain mapping,
    the texts alone.
    """

    __slots__ = ("_card", "_provenance", "_texts")

    def __init__(
        self,
        texts: Mapping[str, str],
        provenance: Mapping[str, QueryProvenance] | None = None,
        card: QuerySetCard | None = None,
    ) -> None:
        checked: dict[str, str] = {}
        for qid, text in texts.items():
            if not isinstance(qid, str) or not qid.strip():
                raise InputError(f"query id {qid!r} is not a non-empty str", source="queries")
            if not isinstance(text, str) or not text.strip():
                raise InputError(f"query {qid!r}: the text must be a non-empty str, not {text!r}", source="queries")
            checked[qid] = text
        given = dict(provenance) if provenance is not None else {}
        if set(given) - set(checked):
            extra = sorted(set(given) - set(checked))[0]
            raise ValueError(f"provenance for query {extra!r}, which the set does not hold")
        for qid in checked:
            if qid not in given:
                given[qid] = QueryProvenance(source="dict")
            elif not isinstance(given[qid], QueryProvenance):
                raise TypeError(f"provenance of {qid!r} must be a QueryProvenance, not {type(given[qid]).__name__}")
        self._texts = MappingProxyType(checked)
        self._provenance = MappingProxyType({qid: given[qid] for qid in checked})
        self._card = card if card is not None else QuerySetCard()

    # ----- the mapping ------------------------------------------------------------------------------------------

    def __getitem__(self, qid: str) -> str:
        return self._texts[qid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, QuerySet):
            return (
                dict(self._texts) == dict(other._texts)
                and dict(self._provenance) == dict(other._provenance)
                and self._card == other._card
            )
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        source = f" from {self._card.source}" if self._card.source else ""
        sampled = f", {len(self._card.strata)} strata" if self._card.strata else ""
        return f"QuerySet({len(self)} queries{source}, traffic {sum(self.frequencies.values()):,}{sampled})"

    # ----- what it holds ----------------------------------------------------------------------------------------

    @property
    def card(self) -> QuerySetCard:
        return self._card

    @property
    def provenance(self) -> Mapping[str, QueryProvenance]:
        """``{query_id: QueryProvenance}``."""
        return self._provenance

    @property
    def frequencies(self) -> dict[str, int]:
        return {qid: p.frequency for qid, p in self._provenance.items()}

    @property
    def strata(self) -> dict[str, str | None]:
        return {qid: p.stratum for qid, p in self._provenance.items()}

    @property
    def inclusion_probabilities(self) -> dict[str, float | None]:
        return {qid: p.inclusion_probability for qid, p in self._provenance.items()}

    def weights(self, by: Literal["traffic", "query"] = "traffic") -> dict[str, float]:
        """Each query's weight in an estimate of the population it was drawn from: ``frequency / p`` (``by=
        "traffic"``: the Hajek estimator of what users experience is ``sum(w * x) / sum(w)``) or ``1 / p``
        (``by="query"``: the mean over distinct queries), where ``p`` is the inclusion probability (1 for a set
        that was not sampled)."""
        if by not in ("traffic", "query"):
            raise ValueError(f"by must be 'traffic' or 'query', not {by!r}")
        out = {}
        for qid, p in self._provenance.items():
            probability = 1.0 if p.inclusion_probability is None else p.inclusion_probability
            out[qid] = (p.frequency if by == "traffic" else 1) / probability
        return out

    def replaced(
        self,
        texts: Mapping[str, str] | None = None,
        provenance: Mapping[str, QueryProvenance] | None = None,
        **card: Any,
    ) -> QuerySet:
        """A new set with other texts and provenance (both or neither) and card fields changed."""
        if (texts is None) != (provenance is None):
            raise ValueError("give texts and provenance together, or neither")
        return QuerySet(
            self._texts if texts is None else texts,
            self._provenance if provenance is None else provenance,
            replace(self._card, **card) if card else self._card,
        )

    # ----- building ---------------------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, queries: Mapping[str, str], *, source: str = "dict") -> QuerySet:
        """From ``{query_id: text}``, each query of frequency 1."""
        return cls(queries, {qid: QueryProvenance(source=source) for qid in queries}, QuerySetCard(source=source))

    @classmethod
    def from_log(
        cls,
        path: PathLike,
        *,
        text: str | None = None,
        timestamp: str | None = None,
        count: str | None = None,
        columns: Sequence[str] | None = None,
        where: Mapping[str, Scalar | Iterable[Scalar]] | None = None,
        format: LogFormat | None = None,
        mask_pii: bool = False,
    ) -> QuerySet:
        """Read a query log and merge the records whose texts are equal after :func:`normalise`.

        ``path`` is CSV (a header line; TSV where the name ends in ``.tsv``), JSON lines, Parquet, or an OTLP JSON
        trace export (the ``input.value`` of each span whose ``openinference.span.kind`` is ``RETRIEVER``, at its
        ``startTimeUnixNano``); ``format`` says which, or None to tell it from the content.

        - ``text``: the column of the query texts (default ``query``; ``input.value`` in an OTLP export, whose
          ``columns`` are span attributes, then resource attributes).
        - ``timestamp``: a column of ISO 8601 times (UTC where no offset is given), Unix seconds, or Parquet
          timestamps; None: no dates.
        - ``count``: a column of how many times each record's query was asked (an integer, 0 or more; records of
          0 are dropped); None: each record counts once.
        - ``columns``: the other columns to keep (each must exist); None keeps every other column (none of an OTLP
          export's attributes).
        - ``where``: keep only the records whose column equals the value (or one of the values) given.
        - ``mask_pii``: replace e-mail addresses and phone numbers (:func:`mask_pii`) in the texts and kept
          columns before anything is kept or hashed.

        A query's id is :func:`query_id` of its normalised text; its text is the form logged most often (the first
        seen on a tie); its frequency the records' summed counts; its first and last seen their earliest and latest
        times. Records whose text is empty after normalisation are dropped (and counted on the card). A missing
        column, an unreadable line, a text that is not a string, a bad count or time is an InputError naming the
        file and line (or row, or span).
        """
        if isinstance(columns, str):  # (a str is a sequence of its letters: name the columns in a list)
            raise TypeError(f"columns must be a list of column names, not a str ({columns!r}: columns=[{columns!r}])")
        wanted = _where(where)
        reading = None if columns is None else list(dict.fromkeys([*columns, *wanted]))
        table = read_log(
            path, text=text, timestamp=timestamp, count=count, columns=reading, format=format, need=list(wanted)
        )
        file = table.file
        missing = [c for c in wanted if c not in table.columns]
        if missing:
            raise file.error(f"no column {missing[0]!r} to filter on (its columns: {', '.join(table.columns)})")
        text_name = text or ("input.value" if table.format == "otlp" else "query")
        records = 0
        dropped = Counter[str]()
        keys: dict[str, _Aggregate] = {}
        for record in table.records:
            line = record.where if isinstance(record.where, int) else None
            at = "" if line is not None else f"{record.where}: "
            if wanted and not all(_matches(record.columns.get(c), values) for c, values in wanted.items()):
                dropped["where"] += 1
                continue
            raw = record.text
            if not isinstance(raw, str):
                if raw is None:
                    dropped["no text"] += 1
                    continue
                raise file.error(f"{at}the text ({text_name!r}) is {_article(type(raw).__name__)}, not a string", line)
            plain = record.timestamp is None and record.count.__class__ is int and record.count == 1  # (not True)
            place = None if plain else At(file.path, line, at[:-2] or None)
            amount = 1 if place is None else checked.count(record.count, "count", place)
            if amount == 0:
                dropped["count 0"] += 1
                continue
            when = None if place is None else checked.time(record.timestamp, "timestamp", place)
            if columns is not None:
                kept = {c: record.columns.get(c) for c in columns}
            else:  # every other column of a table; no attribute of an OTLP export
                kept = {} if table.format == "otlp" else dict(record.columns)
            if mask_pii:
                raw = _mask(raw)
                kept = {k: _mask(v) if isinstance(v, str) else v for k, v in kept.items()}
            key = normalise(raw)
            if not key:
                dropped["empty text"] += 1
                continue
            records += 1
            aggregate = keys.get(key)
            if aggregate is None:
                aggregate = keys[key] = _Aggregate()
            aggregate.add(raw.strip(), amount, when, kept)
        if not keys:
            raise file.error("no query to keep (every record was dropped: " + _dropped_text(dropped) + ")")
        texts: dict[str, str] = {}
        provenance: dict[str, QueryProvenance] = {}
        for key, aggregate in keys.items():
            qid = query_id(key)
            texts[qid] = aggregate.text()
            provenance[qid] = QueryProvenance(
                source=file.path,
                frequency=aggregate.frequency,
                first_seen=_iso(aggregate.first),
                last_seen=_iso(aggregate.last),
                columns=aggregate.columns(),
            )
        firsts = [a.first for a in keys.values() if a.first is not None]
        lasts = [a.last for a in keys.values() if a.last is not None]
        filters: dict[str, Any] = dict(table.filters)
        if wanted:
            filters["where"] = {c: sorted(v, key=repr) for c, v in wanted.items()}
        filters.update({f"dropped ({reason})": n for reason, n in sorted(dropped.items())})
        card = QuerySetCard(
            source=file.path,
            sha256=file.sha256,
            format=table.format,
            records=records,
            traffic=sum(a.frequency for a in keys.values()),
            date_range=(_iso(min(firsts)) or "", _iso(max(lasts)) or "") if firsts else None,
            filters=filters,
            normalisation=NORMALISATION,
            masking=MASKING if mask_pii else None,
            deduplication={"exact": {"rule": "texts equal after the normalisation", "merged": records - len(keys)}},
        )
        return cls(texts, provenance, card)

    # ----- reading and writing ----------------------------------------------------------------------------------

    def save(self, path: PathLike) -> None:
        """JSON lines: a header ``{"query_set": 1, "card": {...}}``, then one line per query ``{"id", "text",
        "source", "frequency", "first_seen", "last_seen", "stratum", "inclusion_probability", "columns",
        "merged"}``. :meth:`load` reads it back equal."""
        lines = [
            json.dumps({"id": q, "text": t, **self._provenance[q].to_dict()}, ensure_ascii=False)
            for q, t in self._texts.items()
        ]
        body = "".join(line + "\n" for line in lines).encode("utf-8")
        # the header records the SHA-256 of the card and the lines after it, checked by load (an edited sample is
        # refused)
        card = self._card.to_dict()
        header = {"query_set": FORMAT_VERSION, "card": card, "sha256": saved_sha256(card, body)}
        write_output(path, (json.dumps(header, ensure_ascii=False) + "\n").encode("utf-8") + body)

    @classmethod
    def load(cls, path: PathLike) -> QuerySet:
        """Read what :meth:`save` wrote (``.gz`` too). A file that is not one (a query log: read it with
        :meth:`from_log`), a bad field or an id given twice is an InputError naming the file and line."""
        file = read_input(path)
        objects = file.json_objects()
        number, header = next(objects)
        if header.get("query_set") != FORMAT_VERSION or not isinstance(header.get("card"), dict):
            raise file.error(
                f'not a query set (QuerySet.save\'s JSON lines open with {{"query_set": {FORMAT_VERSION}, '
                '"card": {...}}); to read a query log, use QuerySet.from_log',
                number,
            )
        try:
            card = QuerySetCard.from_dict(header["card"])
        except (TypeError, ValueError) as exc:
            raise file.error(f"the card: {exc}", number) from None
        place = At(file.path, number, "the card")
        for name in ("records", "traffic", "sample_size", "seed"):
            if getattr(card, name) is not None:
                checked.count(getattr(card, name), name, place)
        if card.date_range is not None:
            if len(card.date_range) != 2:
                raise place.error(f"date_range {list(card.date_range)!r} is not two times")
            for value in card.date_range:
                checked.iso_time(value, "date_range", place)
        texts: dict[str, str] = {}
        provenance: dict[str, QueryProvenance] = {}
        fields = {"id", "text"} | set(QueryProvenance.__dataclass_fields__)
        for number, record in objects:
            unknown = sorted(set(record) - fields)
            if unknown or "id" not in record or "text" not in record or "source" not in record:
                problem = f"unknown key {unknown[0]!r}" if unknown else "a query needs 'id', 'text' and 'source'"
                raise file.error(problem, number)
            qid, text = record.pop("id"), record.pop("text")
            if not isinstance(qid, str) or not qid.strip():
                raise file.error(f"query id {qid!r} is not a non-empty string", number)
            if qid in texts:
                raise file.error(f"query id {qid!r} appears twice", number)
            if not isinstance(text, str) or not text.strip():
                raise file.error(f"query {qid!r}: the text must be a non-empty string, not {text!r}", number)
            if not isinstance(record.get("columns", {}), dict) or not isinstance(record.get("merged", []), list):
                raise file.error(f"query {qid!r}: 'columns' must be an object and 'merged' a list", number)
            for name in ("source", "first_seen", "last_seen", "stratum"):
                if record.get(name) is not None and not isinstance(record[name], str):
                    raise file.error(f"query {qid!r}: {name!r} must be a string or null", number)
            place = At(file.path, number, f"query {qid!r}")
            for name in ("first_seen", "last_seen"):
                if record.get(name) is not None:
                    checked.iso_time(record[name], name, place)
            try:
                provenance[qid] = QueryProvenance(**record)
            except (TypeError, ValueError) as exc:
                raise file.error(f"query {qid!r}: {exc}", number) from None
            checked.integer(provenance[qid].frequency, "frequency", place, low=1, what="1 or more, within int64")
            texts[qid] = text
        _check_record(file, header, card, provenance)
        return cls(texts, provenance, card)


def _check_record(file: Any, header: Mapping[str, Any], card: QuerySetCard, provenance: Mapping[str, Any]) -> None:
    """A saved set must hold what its header records: the SHA-256 of its queries' lines, and for a sample the
    sizes, strata and inclusion probabilities of its card (an InputError naming the file and what differs)."""
    recorded = header.get("sha256")
    sample = card.sample_size is not None or bool(card.strata)
    if recorded is not None and recorded != saved_sha256(header["card"], body_of(file.data)):
        raise file.error(
            "its card or queries are not those it was saved with (the SHA-256 its header records differs from "
            "theirs): it was edited after QuerySet.save"
            + (
                "; a sample edited by hand is no longer the draw its card records: draw it again"
                if sample
                else "; to take the edits as they are, remove 'sha256' from the header"
            ),
            1,
        )
    if not sample:
        return
    if recorded is None:
        raise file.error(
            f"a sample (seed {card.seed}) whose header records no SHA-256 of its queries: nothing shows it is the "
            "draw its card records; draw it again (rag-eval queries sample)",
            1,
        )
    problem = sample_card_problem(
        card,
        {q: p.stratum for q, p in provenance.items()},
        {q: p.inclusion_probability for q, p in provenance.items()},
    )
    if problem:
        raise file.error(f"not the sample its card records: {problem}", 1)


class _Aggregate:
    """What the records of one normalised text add up to."""

    __slots__ = ("_columns", "_forms", "first", "frequency", "last")

    def __init__(self) -> None:
        self.frequency = 0
        self.first: dt.datetime | None = None
        self.last: dt.datetime | None = None
        self._forms: Counter[str] = Counter()
        self._columns: dict[str, Counter[Scalar]] = {}

    def add(self, form: str, amount: int, when: dt.datetime | None, columns: Mapping[str, Scalar]) -> None:
        self.frequency += amount
        self._forms[form] += amount
        if when is not None:
            self.first = when if self.first is None or when < self.first else self.first
            self.last = when if self.last is None or when > self.last else self.last
        for name, value in columns.items():
            self._columns.setdefault(name, Counter())[value] += amount

    def text(self) -> str:
        return self._forms.most_common(1)[0][0]  # Counter keeps first-seen order among equal counts

    def columns(self) -> dict[str, Scalar]:
        return {name: counts.most_common(1)[0][0] for name, counts in self._columns.items()}


def _mask(value: str) -> str:
    return mask_pii(value)


def _where(where: Mapping[str, Any] | None) -> dict[str, set[Scalar]]:
    if not where:
        return {}
    if not isinstance(where, Mapping):
        raise TypeError(f"where must be a mapping {{column: value or values}}, not {type(where).__name__}")
    out: dict[str, set[Scalar]] = {}
    for column, values in where.items():
        if isinstance(values, (str, int, float, bool)) or values is None:
            values = [values]
        out[column] = set(values)
    return out


def _matches(value: Scalar, values: set[Scalar]) -> bool:
    return value in values or (value is not None and str(value) in {str(v) for v in values})


def _dropped_text(dropped: Counter[str]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in sorted(dropped.items())) or "the log holds no record"


def _iso(when: dt.datetime | None) -> str | None:
    if when is None:
        return None
    return when.isoformat().replace("+00:00", "Z")


def _article(noun: str) -> str:
    """``noun`` with "a" or "an" before it ("an int", "a list")."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"
