"""Qrels: graded relevance judgements, per query ``doc_id -> int grade``.

A grade of 0 or below means judged non-relevant; which positive grades count as relevant is a convention
(:class:`rag_eval.Conventions.relevance_threshold`), not a property of the data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from itertools import chain, pairwise, repeat
from operator import methodcaller
from types import MappingProxyType
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import numpy.typing as npt

from .. import _accel
from .._files import write_output
from ..errors import DuplicateJudgement, InputError
from ._frames import frame_column, pick_column, record_key
from .columns import GRADE_LIMIT, line_number, parse_int, read_table
from .graded_by import GradedBy, read_sidecar, write_sidecar
from .ids import IdCheck, check_writable
from .input_files import InputFile, PathLike, binary_input, decode_input, read_input, read_raw, warn
from .numeric import grade_value
from .packed import PackedIds
from .source import Source

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Qrels"]

T = TypeVar("T")

QUERY_COLUMNS = ("query_id", "qid", "query-id")
DOC_COLUMNS = ("doc_id", "docno", "corpus-id", "docid")
GRADE_COLUMNS = ("grade", "relevance", "label", "score")


class Qrels:
    """Graded judgements per query. Immutable (attributes cannot be set, every view is read-only: what a cache key
    or a content hash computed once stays true); build it with one of the ``from_*`` constructors."""

    __slots__ = ("__dict__", "graded_by", "source")
    source: Source | None
    graded_by: GradedBy | None

    def __init__(
        self,
        judgements: Mapping[str, Mapping[str, int]],
        *,
        source: Source | None = None,
        graded_by: GradedBy | None = None,
    ) -> None:
        """Judgements as ``{query_id: {doc_id: grade}}`` (the form pytrec_eval takes); validated, kept as columns.
        ``graded_by``: how many judgements people and each model judge decided (:mod:`rag_eval.data.graded_by`),
        where known; a merge of logs holding a judge's grades sets it, and every card made with these qrels says
        so."""
        self.__dict__.update(_validated(judgements, "qrels"))  # the columns (cached properties): no dict is copied
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "graded_by", graded_by)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Qrels are immutable: {name!r} cannot be set (build new qrels with Qrels.from_dict)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Qrels are immutable: {name!r} cannot be deleted")

    def __getstate__(self) -> dict[str, object]:  # pickle and copy: the judgements and provenance, not the caches
        return {"_judgements": self._judgements, "source": self.source, "graded_by": self.graded_by}

    def __setstate__(self, state: dict[str, object]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)

    # ----- constructors -------------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, judgements: Mapping[str, Mapping[str, int]]) -> Qrels:
        """From ``{query_id: {doc_id: grade}}``. Int ids are converted to str with one warning; two keys that
        become the same id (``1`` and ``"1"``) are an InputError. A grade is an int (or an integral float such as
        ``1.0``), or a str of ASCII digits as a file would hold it; never a boolean."""
        return cls(judgements)

    @classmethod
    def from_trec(cls, path: PathLike) -> Qrels:
        """From a TREC qrels file: ``qid iter docid grade`` per line (``.gz`` read transparently)."""
        return cls._from_trec(read_input(path))

    @classmethod
    def _from_trec(cls, file: InputFile) -> Qrels:
        cols = read_table(file, "qrels")
        _check_grades(file, cols.values)
        docs = cols.doc_ids
        if isinstance(docs, PackedIds):  # read_table packs only when asked
            docs = docs.to_objects()
        return cls._from_columns(file, cols.query_ids, cols.query_codes, docs, cols.values)

    @classmethod
    def from_beir(cls, path: PathLike) -> Qrels:
        """From a BEIR qrels TSV: a header line, then ``query-id  corpus-id  score`` per line."""
        return cls._from_beir(read_input(path))

    @classmethod
    def _from_beir(cls, file: InputFile) -> Qrels:
        lines = iter(file.lines())
        try:
            _, header = next(lines)
        except StopIteration:
            raise file.error("empty file") from None
        names = header.strip().split("\t")
        try:
            q, d, g = (pick_column(names, c, "column") for c in (QUERY_COLUMNS, DOC_COLUMNS, GRADE_COLUMNS))
        except InputError as exc:
            raise file.error(f"header: {exc.problem}", 1) from None
        for candidates in (QUERY_COLUMNS, DOC_COLUMNS, GRADE_COLUMNS):  # one column per role, or it is a guess
            named = [n for n in names if n in candidates]
            if len(named) > 1:
                raise file.error(f"header: columns {' and '.join(map(repr, named))} name the same field", 1)
        queries: list[str] = []
        docs: list[str] = []
        grades: list[int] = []
        for number, line in lines:
            parts = line.split("\t")
            if len(parts) != len(names):
                raise file.error(f"expected {len(names)} tab-separated fields, found {len(parts)}", number)
            queries.append(parts[names.index(q)])
            docs.append(parts[names.index(d)])
            grades.append(_parse_grade(parts[names.index(g)], file, number))
        uniq = list(dict.fromkeys(queries))
        where = {qid: i for i, qid in enumerate(uniq)}
        codes = np.fromiter((where[x] for x in queries), dtype=np.int64, count=len(queries))
        return cls._from_columns(file, uniq, codes, np.array(docs, dtype=object), np.array(grades, np.int64))

    @classmethod
    def from_jsonl(cls, path: PathLike) -> Qrels:
        """From JSON lines, one judgement each: ``{"query_id": ..., "doc_id": ..., "grade": ...}``.

        The PyTerrier (``qid, docno, label``) and ir_measures (``query_id, doc_id, relevance``) keys work too.
        """
        return cls._from_jsonl(read_input(path))

    @classmethod
    def _from_jsonl(cls, file: InputFile) -> Qrels:
        queries, docs, grades, numbers = [], [], [], []
        for number, record in file.json_objects():
            try:
                q, d, g = (record_key(record, c, "key") for c in (QUERY_COLUMNS, DOC_COLUMNS, GRADE_COLUMNS))
            except InputError as exc:
                raise file.error(exc.problem, number) from None
            queries.append(q)
            docs.append(d)
            grade = grade_value(g)
            if isinstance(grade, str):
                raise file.error(f"grade {g!r} {grade}", number)
            grades.append(grade)
            numbers.append(number)
        _check_grades(file, np.array(grades, dtype=object))
        with IdCheck(file.path) as ids:
            qids = ids.array(_objects(queries), "query id", unit="line", labels=numbers, line=True)
            uniq, codes = _factorize(qids)
            docs_arr = ids.array(
                _objects(docs), "doc id", groups=codes, group_names=uniq, unit="line", labels=numbers, line=True
            )
        return cls._from_columns(file, uniq, codes, docs_arr, np.array(grades, np.int64))

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> Qrels:
        """From a DataFrame with columns ``query_id, doc_id, grade`` (or PyTerrier's ``qid, docno, label``,
        or ir_measures' ``query_id, doc_id, relevance``). One column per role: a column named twice, or two
        names for one role (``query_id`` and ``qid``) holding different values, is an InputError."""
        return cls._from_frame(frame, "DataFrame", None)

    @classmethod
    def from_parquet(cls, path: PathLike) -> Qrels:
        """From a Parquet file with the columns :meth:`from_frame` takes (read with pyarrow, once)."""
        return cls._from_parquet(binary_input(*read_raw(path)))

    @classmethod
    def _from_parquet(cls, file: InputFile) -> Qrels:
        from ._frames import read_parquet

        return cls._from_frame(read_parquet(file), file.path, file)

    @classmethod
    def _from_frame(cls, frame: pd.DataFrame, where: str, file: InputFile | None) -> Qrels:
        q, d, g = (frame_column(frame, c, "column", where) for c in (QUERY_COLUMNS, DOC_COLUMNS, GRADE_COLUMNS))
        grades = _frame_grades(frame[g], g, where)
        with IdCheck(where) as ids:
            qids = ids.array(frame[q].to_numpy(dtype=object), "query id", unit="row")
            uniq, codes = _factorize(qids)
            docs = ids.array(frame[d].to_numpy(dtype=object), "doc id", groups=codes, group_names=uniq, unit="row")
        return cls._from_columns(file, uniq, codes, docs, grades, where=where)

    @classmethod
    def load(cls, path: PathLike) -> Qrels:
        """Read a qrels file once (a pipe or ``/dev/stdin`` too), telling the format from its content: Parquet
        (magic bytes ``PAR1``), JSONL, a BEIR TSV with a header, or TREC."""
        return cls.load_with_format(path)[0]

    @classmethod
    def load_with_format(cls, path: PathLike) -> tuple[Qrels, str]:
        """:meth:`load`, and the format it read: ``"parquet"``, ``"jsonl"``, ``"beir"`` (a TSV with a header) or
        ``"trec"`` (so that a file rewritten in place, as ``rag-eval label -o`` does, keeps its format)."""
        spath, raw = read_raw(path)
        if raw[:4] == b"PAR1":
            return cls._from_parquet(binary_input(spath, raw)), "parquet"
        file = decode_input(spath, raw)
        first = file.first_line().strip()
        if first.startswith("{"):
            return cls._from_jsonl(file), "jsonl"
        names = first.split("\t")
        if any(n in QUERY_COLUMNS for n in names) and any(n in GRADE_COLUMNS for n in names):
            return cls._from_beir(file), "beir"
        return cls._from_trec(file), "trec"

    @classmethod
    def _from_columns(
        cls,
        file: InputFile | None,
        query_ids: list[str],
        codes: np.ndarray,
        docs: np.ndarray,
        grades: np.ndarray,
        *,
        where: str | None = None,
    ) -> Qrels:
        judgements, duplicates, conflicts, derived = _grouped(query_ids, codes, docs, grades)
        where = where or (file.path if file else "DataFrame")
        if duplicates:
            detail = f"; {conflicts[0]} with conflicting grades, e.g. {conflicts[1]}" if conflicts[0] else ""
            warn(
                f"{where}: {duplicates} duplicate judgement(s) of the same document for a query; "
                f"kept the first{detail}",
                DuplicateJudgement,
            )
        qrels = cls.__new__(cls)
        qrels.__dict__.update(derived)  # the columns (cached properties), made on the way
        if judgements is not None:  # the dicts too, where the twin made them
            qrels.__dict__["_judgements"] = judgements
        object.__setattr__(qrels, "source", Source.of(file) if file else None)
        # a graded-by record beside the file, written by write_qrels for these very bytes (graded_by.py)
        object.__setattr__(qrels, "graded_by", read_sidecar(file.path, file.sha256) if file else None)
        return qrels

    # ----- reading ------------------------------------------------------------------------------------------
    @property
    def query_ids(self) -> tuple[str, ...]:
        return self.columns[0]

    def __len__(self) -> int:
        return len(self.columns[0])

    def __contains__(self, query_id: object) -> bool:
        return query_id in self._row_of

    def __getitem__(self, query_id: str) -> Mapping[str, int]:
        return MappingProxyType(self._judgements[query_id])  # every query's dict, made at the first ask (one C pass)

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns[0])

    def __repr__(self) -> str:
        origin = f" from {self.source.path!r}" if self.source and self.source.path else ""
        return f"Qrels({len(self)} queries, {self.num_judgements} judgements{origin})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Qrels) and self._judgements == other._judgements

    __hash__ = None  # type: ignore[assignment]

    @property
    def num_judgements(self) -> int:
        return int(self.columns[1][-1])

    def to_dict(self) -> dict[str, dict[str, int]]:
        """``{query_id: {doc_id: grade}}``, a copy (the form pytrec_eval takes)."""
        return {q: dict(j) for q, j in self._judgements.items()}

    def to_frame(self) -> pd.DataFrame:
        """A DataFrame with columns ``query_id, doc_id, grade``."""
        import pandas as pd

        queries, offsets, grades = self.columns
        lengths = np.diff(offsets)
        docs = [d for j in self._judgements.values() for d in j]
        return pd.DataFrame(
            {"query_id": np.repeat(np.array(queries, dtype=object), lengths), "doc_id": docs, "grade": grades}
        )

    def to_trec(self, path: PathLike) -> None:
        """Write a TREC qrels file, whole or not at all (:func:`rag_eval._files.write_output`: a full disk is an
        InputError naming it, and the file keeps its old content; a symlink is written through). An id that would
        not read back as itself (a query id starting with ``#``, an id holding whitespace, an empty id) is an
        InputError, raised before anything is written. Qrels graded in part by model judges (:attr:`graded_by`) get
        their graded-by record beside the file (``QRELS.graded-by.json``, :mod:`rag_eval.data.graded_by`); a stale
        one is removed where these qrels have none."""
        self._write(path, "trec")

    def to_beir(self, path: PathLike) -> None:
        """Write a BEIR qrels TSV (a header ``query-id  corpus-id  score``, then one judgement a line), as
        :meth:`to_trec` writes (whole or not at all, ids checked first, the graded-by record beside it)."""
        self._write(path, "beir")

    def _write(self, path: PathLike, form: str) -> None:
        where = str(path)
        check_writable(self._judgements, "query id", where)
        for q, judged in self._judgements.items():
            check_writable(judged, f"query {q!r}: doc id", where, starts_line=False)
        line = "{q} 0 {d} {g}\n" if form == "trec" else "{q}\t{d}\t{g}\n"
        header = [b"query-id\tcorpus-id\tscore\n"] if form == "beir" else []
        write_output(
            path,
            header
            + [
                "".join(line.format(q=q, d=d, g=g) for d, g in judged.items()).encode("utf-8")
                for q, judged in self._judgements.items()
            ],
        )
        write_sidecar(path, self.graded_by)

    # ----- for the metric engine ----------------------------------------------------------------------------
    @cached_property
    def judgements(self) -> Mapping[str, Mapping[str, int]]:
        """``{query_id: {doc_id: grade}}``, read-only at both levels (a write is a TypeError)."""
        return MappingProxyType({q: MappingProxyType(j) for q, j in self._judgements.items()})

    @cached_property
    def _judgements(self) -> dict[str, dict[str, int]]:
        """``{query_id: {doc_id: grade}}``, made from the columns where first asked (an evaluation reads the columns
        only): one C pass (``group_judgements``), or its twin. Never written."""
        queries, offsets, grades = self.columns
        if _accel.speedups is not None:
            rows = np.ascontiguousarray(self._judgement_rows)
            found = _accel.speedups.group_judgements(len(queries), rows, self.doc_column, grades)
            return dict(zip(queries, found[0], strict=True))
        docs, values, bounds = self.doc_column.tolist(), grades.tolist(), pairwise(offsets.tolist())
        return {q: dict(zip(docs[a:b], values[a:b], strict=True)) for q, (a, b) in zip(queries, bounds, strict=True)}

    @cached_property
    def _doc_hashes(self) -> np.ndarray | None:
        """Each judged doc id's str hash, in :attr:`doc_column`'s order, where a constructor had them on the way
        (the C grade lookup then reads no doc id object); None otherwise (it reads them)."""
        return None

    @cached_property
    def columns(self) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
        """``(query_ids, offsets, grades)``: every grade, grouped by query; query ``i`` owns
        ``grades[offsets[i]:offsets[i+1]]`` (read-only arrays)."""
        lengths = np.fromiter(map(len, self._judgements.values()), np.int64, len(self._judgements))
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = chain.from_iterable(map(methodcaller("values"), self._judgements.values()))
        grades = np.fromiter(values, np.int64, int(offsets[-1]))
        offsets.flags.writeable = grades.flags.writeable = False
        return tuple(self._judgements), offsets, grades

    @cached_property
    def _judgement_rows(self) -> np.ndarray:
        """The row in :attr:`columns` of each judgement's query (read-only int64, one per grade)."""
        offsets = self.columns[1]
        rows = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
        rows.flags.writeable = False
        return rows

    def _num_relevant(self, threshold: int) -> np.ndarray:
        """How many judgements of each query in :attr:`columns` reach ``threshold`` (read-only int64, kept)."""

        def count() -> np.ndarray:
            grades = self.columns[2]
            counts = np.bincount(self._judgement_rows, weights=grades >= threshold, minlength=len(self.columns[0]))
            counts = counts.astype(np.int64)
            counts.flags.writeable = False
            return counts

        return self._derived(f"num_relevant@{threshold}", count)

    def num_judged(self, query_ids: Iterable[str]) -> np.ndarray:
        """How many documents the qrels judge for each of ``query_ids`` (0 for a query they lack): one pass in C
        over the row index kept with the qrels (:meth:`rows_of`)."""
        rows = self.rows_of(query_ids)
        lengths: np.ndarray = np.append(np.diff(self.columns[1]), 0)  # row -1 (absent) reads the trailing 0
        counts: np.ndarray = lengths[rows]
        return counts

    def rows_of(self, query_ids: Iterable[str]) -> np.ndarray:
        """The row of each of ``query_ids`` in :attr:`columns` (int64; -1 for a query the qrels lack), looked up in
        C in one dict kept with the qrels."""
        ids = query_ids if isinstance(query_ids, tuple) else tuple(query_ids)
        if len(ids) == len(self) and ids == self._query_tuple:  # the qrels' own order: no lookup
            return np.arange(len(ids), dtype=np.int64)
        last = self.__dict__.get("_last_rows")  # the same ids asked again (a run's, by each check): looked up once
        if last is not None and last[0] == ids:
            rows: np.ndarray = last[1]
            return rows
        rows = np.fromiter(map(self._row_of.get, ids, repeat(-1)), np.int64, len(ids))
        rows.flags.writeable = False
        self.__dict__["_last_rows"] = (ids, rows)
        return rows

    @property
    def _query_tuple(self) -> tuple[str, ...]:
        return self.columns[0]

    @cached_property
    def _row_of(self) -> dict[str, int]:
        return dict(zip(self.columns[0], range(len(self.columns[0])), strict=True))

    def _derived(self, key: str, compute: Callable[[], T]) -> T:
        """``compute()``, kept with these qrels under ``key`` (they cannot change): a derived fact made once, such
        as the content hash of :func:`rag_eval.reports.hashes.qrels_sha256`."""
        if key not in self.__dict__:
            self.__dict__[key] = compute()
        value: T = self.__dict__[key]
        return value

    @cached_property
    def doc_column(self) -> np.ndarray:
        """Every judged doc id, in the order of :attr:`columns`' grades (a read-only object array)."""
        docs = np.fromiter(chain.from_iterable(self._judgements.values()), object, int(self.columns[1][-1]))
        docs.flags.writeable = False
        return docs


def _grouped(
    query_ids: list[str], codes: np.ndarray, docs: np.ndarray, grades: np.ndarray
) -> tuple[dict[str, dict[str, int]] | None, int, tuple[int, str], dict[str, object]]:
    """Rows grouped by query in row order (a doc judged twice for a query keeps its first grade): the judgements
    ``{query_id: {doc_id: grade}}`` (None where only the columns were made), how many rows were dropped, ``(how many
    of those had another grade, the first, named)`` and the columns (cached properties). One pass in C
    (``_speedups.dedupe_judgements``: no dict made), or its twin below."""
    codes = np.ascontiguousarray(codes, np.int64)
    grades = np.ascontiguousarray(grades, np.int64)
    native = _accel.speedups
    if native is not None and docs.dtype == object:
        if len(codes) > 1 and not bool((codes[1:] >= codes[:-1]).all()):  # not in a file's first order: sorted
            order = np.argsort(codes, kind="stable")
            codes, docs, grades = codes[order], docs[order], grades[order]
        kept, duplicates, conflicts, first, first_kept, hashes = native.dedupe_judgements(
            codes, np.ascontiguousarray(docs), grades
        )
        example = ""
        if conflicts:
            qid, doc = query_ids[codes[first]], docs[first]
            example = f"query {qid!r} doc {doc!r}: {grades[first_kept]} kept, {grades[first]} dropped"
        if duplicates:
            codes, docs, grades, hashes = codes[kept], docs[kept], grades[kept], hashes[kept]
        lengths = np.bincount(codes, minlength=len(query_ids)).astype(np.int64)
        offsets = np.zeros(len(query_ids) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        for array in (offsets, docs, grades, hashes):
            array.flags.writeable = False
        derived = {"columns": (tuple(query_ids), offsets, grades), "doc_column": docs, "_doc_hashes": hashes}
        return None, int(duplicates), (int(conflicts), example), derived
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(query_ids) + 1))
    docs = docs[order]
    grades_list = grades[order].tolist()
    judgements = {}
    duplicates = 0
    examples: list[str] = []
    for i, qid in enumerate(query_ids):
        a, b = bounds[i], bounds[i + 1]
        per_query = dict(zip(docs[a:b].tolist(), grades_list[a:b], strict=True))
        if len(per_query) < b - a:  # a document judged twice: the first judgement wins, in its place
            duplicates += (b - a) - len(per_query)
            per_query = {}
            for doc, grade in zip(docs[a:b].tolist(), grades_list[a:b], strict=True):
                kept_grade = per_query.setdefault(doc, grade)
                if kept_grade != grade:
                    examples.append(f"query {qid!r} doc {doc!r}: {kept_grade} kept, {grade} dropped")
        judgements[qid] = per_query
    return judgements, duplicates, (len(examples), examples[0] if examples else ""), {}


def _check_grades(file: InputFile, grades: np.ndarray, first_row: int = 0) -> None:
    """Refuse a grade beyond +-GRADE_LIMIT, naming its line (``first_row``: data rows before the first grade)."""
    out = np.flatnonzero(np.abs(grades) >= GRADE_LIMIT) if len(grades) else np.empty(0, np.int64)
    if len(out):
        raise file.error(
            f"grade {grades[out[0]]} is out of range (grades must lie within +-{GRADE_LIMIT})",
            line_number(file, int(out[0]) + first_row),
        )


def _parse_grade(text: str, file: InputFile, number: int) -> int:
    grade = parse_int(text)
    if grade is None:
        raise file.error(f"grade {text!r} is not an integer", number)
    if abs(grade) >= GRADE_LIMIT:
        raise file.error(f"grade {grade} is out of range (grades must lie within +-{GRADE_LIMIT})", number)
    return grade


def _validated(judgements: Mapping[str, Mapping[str, int]], where: str) -> dict[str, object]:
    """The judgements as columns (the cached properties of :class:`Qrels`), ids as strs and grades as ints,
    checked on whole columns (in C where the mapping is plain: every id a str, every grade an int within range)."""
    if not isinstance(judgements, Mapping):
        raise TypeError(f"qrels must be a mapping {{query_id: {{doc_id: grade}}}}, not {type(judgements).__name__}")
    native = _accel.speedups.judgement_columns(judgements) if _accel.speedups is not None else None
    if native is not None:
        lengths, docs, grades, hashes = native
        query_ids = tuple(judgements)
    else:
        query_ids, lengths, docs, grades = _judgement_columns(judgements, where)
        hashes = None
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    for array in (offsets, docs, grades, hashes):
        if array is not None:
            array.flags.writeable = False
    return {"columns": (query_ids, offsets, grades), "doc_column": docs, "_doc_hashes": hashes}


def _judgement_columns(
    judgements: Mapping[str, Mapping[str, int]], where: str
) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray]:
    """The pure-Python twin of ``_speedups.judgement_columns``: ``(query_ids, lengths, doc_ids, grades)`` (no
    hashes), every check on whole columns (a query at a time only for keys that are neither str nor int)."""
    per_query = list(judgements.values())
    with IdCheck(where) as ids:
        qids = ids.keys(judgements.keys(), "query id")
        if not set(map(type, per_query)) <= {dict}:
            for qid, judged in zip(qids, per_query, strict=True):
                if not isinstance(judged, Mapping):
                    raise InputError(f"query {qid!r}: judgements must be a mapping doc_id -> grade", source=where)
        lengths = np.fromiter(map(len, per_query), np.int64, len(per_query))
        total = int(lengths.sum())
        owners = np.repeat(np.arange(len(qids)), lengths)
        raw = np.fromiter(chain.from_iterable(per_query), object, total)
        if set(map(type, raw)) <= {str, int}:
            docs = ids.array(raw, "doc id", groups=owners, group_names=qids)
        else:  # other kinds of key (NumPy strs, floats): query by query, naming the query
            keys = [ids.keys(d.keys(), "doc id", f"query {q!r}: ") for q, d in zip(qids, per_query, strict=True)]
            docs = np.fromiter(chain.from_iterable(keys), object, total)
    values = list(chain.from_iterable(map(methodcaller("values"), per_query)))
    grades = None
    if set(map(type, values)) <= {int}:
        try:
            grades = np.array(values, dtype=np.int64) if values else np.empty(0, np.int64)
        except OverflowError:
            grades = None
    if grades is None:  # a grade given otherwise (a str, a float, a NumPy number, a boolean, a huge int)
        grades = np.empty(total, np.int64)
        for k, g in enumerate(values):
            grade = grade_value(g)
            if isinstance(grade, str):
                raise InputError(f"query {qids[owners[k]]!r}, doc {docs[k]!r}: grade {g!r} {grade}", source=where)
            grades[k] = grade if abs(grade) < GRADE_LIMIT else GRADE_LIMIT  # out of range: named below
    out_of_range = np.flatnonzero(np.abs(grades) >= GRADE_LIMIT)
    if len(out_of_range):
        k = int(out_of_range[0])
        raise InputError(
            f"query {qids[owners[k]]!r}, doc {docs[k]!r}: grade {grade_value(values[k])} is out of range (grades "
            f"must lie within +-{GRADE_LIMIT})",
            source=where,
        )
    return tuple(qids), lengths, docs, grades


def _objects(values: Sequence[object]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _factorize(ids: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The distinct ids in order of first appearance, and each id's index among them."""
    uniq = list(dict.fromkeys(ids.tolist()))
    where = {qid: i for i, qid in enumerate(uniq)}
    return uniq, np.fromiter((where[x] for x in ids.tolist()), dtype=np.int64, count=len(ids))


def _frame_grades(column: pd.Series, name: str, where: str) -> npt.NDArray[np.int64]:
    """A DataFrame's grade column as int64: integers, integral floats, or strs of ASCII digits; never booleans."""
    grades = column.to_numpy()
    kind = grades.dtype.kind
    if kind == "b":
        raise InputError(f"column {name!r} holds booleans, not integer grades", source=where)
    if kind == "f":
        bad = ~np.isfinite(grades) | (grades != np.round(grades))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"row {i}: grade {grades[i]!r} is not an integer", source=where)
    elif kind not in "iu":
        out = np.empty(len(grades), dtype=object)
        for i, value in enumerate(grades.tolist()):
            grade = grade_value(value)
            if isinstance(grade, str):
                raise InputError(f"row {i}: grade {value!r} {grade}", source=where)
            if abs(grade) >= GRADE_LIMIT:  # here, before an int beyond float's range reaches astype(float64)
                raise InputError(
                    f"row {i}: grade {grade} is out of range (grades must lie within +-{GRADE_LIMIT})", source=where
                )
            out[i] = grade
        grades = out
    if len(grades):
        big = np.flatnonzero(np.abs(grades.astype(np.float64)) >= GRADE_LIMIT)
        if len(big):
            i = int(big[0])
            raise InputError(
                f"row {i}: grade {grades[i]} is out of range (grades must lie within +-{GRADE_LIMIT})", source=where
            )
    return grades.astype(np.int64)
