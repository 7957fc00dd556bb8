"""Run: per query, a ranked list of doc ids, each with an optional score; columnar.

A run knows how its ranking is decided: **by score** (score descending, ties broken by the tie rule of the
evaluation's conventions; what a TREC run file means) or **as given** (the order a retriever returned; scores
are data and are never used to re-sort). The two constructors, :meth:`Run.from_scores` and
:meth:`Run.from_ranking`, make that choice explicit.

Entries are stored in CSR form (query ``i`` owns entries ``offsets[i]:offsets[i+1]``): the doc ids (an object
array of str, or, for a run read from a file, :class:`~rag_eval.data.packed.PackedIds`: UTF-8 bytes end to end)
and a float array of scores; never a Python object per result beyond the id strings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain
from operator import itemgetter, methodcaller
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from .. import _accel
from .._files import write_output
from ..errors import DuplicateResult, InfiniteScore, InputError
from ._frames import MISSING, frame_column, record_key
from .columns import line_number, read_table
from .ids import IdCheck, check_writable, unwritable_reason
from .input_files import InputFile, PathLike, binary_input, decode_input, read_input, read_raw, warn
from .numeric import score_value
from .packed import PackedIds
from .ranking import ranked_permutation, strictly_decreasing_scores
from .source import Source

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Run"]

Order = Literal["score", "given"]
QUERY_COLUMNS = ("query_id", "qid")
DOC_COLUMNS = ("doc_id", "docno")
SCORE_COLUMNS = ("score",)


class Run:
    """Ranked results per query. Immutable; build it with one of the ``from_*`` constructors."""

    __slots__ = (
        "_by_score",
        "_doc_ids",
        "_memo",
        "_offsets",
        "_query_ids",
        "_scores",
        "name",
        "notes",
        "source",
        "tag",
    )
    name: str
    source: Source | None
    notes: tuple[str, ...]
    tag: str | None  # a TREC file's run tag (trec_eval's runid)
    _query_ids: list[str]
    _offsets: npt.NDArray[np.int64]
    _doc_ids: npt.NDArray[np.object_] | PackedIds
    _scores: npt.NDArray[np.float64] | None
    _by_score: bool
    _memo: dict[str | tuple[str, str], Any]  # derived, computed once: "doc_ids", "index", ("ranked", ties), "grades",
    # and "hashes" (the doc ids' str hashes, where from_scores had them)

    def __init__(self) -> None:
        raise TypeError("build a Run with Run.from_scores, Run.from_ranking, Run.from_trec, ... (see help(Run))")

    def __getstate__(self) -> dict[str, Any]:  # pickle and copy: the columns and names, not the derived caches
        return {name: getattr(self, name) for name in self.__slots__ if name != "_memo"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self._memo = {}
        _read_only(self._offsets, self._doc_ids, self._scores)  # a deep copy's arrays are writable

    # ----- constructors -------------------------------------------------------------------------------------
    @classmethod
    def from_scores(cls, scores: Mapping[str, Mapping[str, float]], *, name: str = "run") -> Run:
        """From ``{query_id: {doc_id: score}}`` (pytrec_eval's form): ranked by score descending, ties broken
        by the evaluation's tie rule. Int ids are converted to str with one warning; two keys that become the
        same id (``7`` and ``"7"``) are an InputError. A score is a number (not a boolean), or a str that is a
        plain ASCII decimal as a TREC file would hold it."""
        if not isinstance(scores, Mapping):
            raise TypeError(f"scores must be a mapping {{query_id: {{doc_id: score}}}}, not {type(scores).__name__}")
        native = _accel.speedups.score_columns(scores) if _accel.speedups is not None else None
        if native is None:
            query_ids, lengths, docs, values = _score_columns(scores, name)
            return cls._build(name, query_ids, lengths, docs, values, by_score=True, source=None, dedupe=False)
        query_ids, lengths, docs, values, hashes = native  # every id a str, every score a number: one pass in C
        run = cls._build(name, query_ids, lengths, docs, values, by_score=True, source=None, dedupe=False)
        hashes.flags.writeable = False
        run._memo["hashes"] = hashes  # the doc ids' str hashes, as the dicts held them: for the grade lookup
        return run

    @classmethod
    def from_ranking(
        cls,
        ranking: Mapping[str, Sequence[str] | Sequence[tuple[str, float]] | Mapping[str, float]],
        *,
        name: str = "run",
    ) -> Run:
        """From ``{query_id: [doc_id, ...]}`` in ranked order, what a retriever returned. Each item may also be a
        ``(doc_id, score)`` pair, or the value a ``{doc_id: score}`` mapping in ranked order; scores are kept as
        data and never used to re-sort. A doc id repeated within a query is kept once, at its first position."""
        if not isinstance(ranking, Mapping):
            raise TypeError(f"ranking must be a mapping {{query_id: [doc_id, ...]}}, not {type(ranking).__name__}")
        ids = IdCheck(name)
        query_ids = ids.keys(ranking.keys(), "query id")
        speedups = _accel.speedups
        native = speedups.ranking_columns(list(ranking.values())) if speedups is not None else None
        if native is not None:  # every ranking a list of strs (or of (str, number) pairs): one pass in C
            lengths, doc_array, score_array, repeats = native
            with ids:  # says once if query ids were converted
                suspects = np.array(repeats, np.int64)
            return cls._build(
                name,
                query_ids,
                lengths,
                doc_array,
                score_array,
                by_score=False,
                source=None,
                dedupe=True,
                suspects=suspects,
            )
        fast = _ranked_columns(ranking, query_ids, ids, name)
        if fast is not None:
            return cls._build(name, query_ids, *fast, by_score=False, source=None, dedupe=True)
        docs: list[Any] = []
        values: list[float] = []
        lengths = np.zeros(len(query_ids), np.int64)
        with_scores: bool | None = None
        for i, (qid, items) in enumerate(zip(query_ids, ranking.values(), strict=True)):
            if isinstance(items, Mapping):
                items = list(items.items())
            elif isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
                raise InputError(f"query {qid!r}: expected a list of doc ids in ranked order", source=name)
            for item in items:
                pair = isinstance(item, (tuple, list))
                if with_scores is None:
                    with_scores = pair
                if pair != with_scores:
                    raise InputError(f"query {qid!r}: mixes bare doc ids and (doc_id, score) pairs", source=name)
                if pair:
                    if len(item) != 2:
                        raise InputError(f"query {qid!r}: expected (doc_id, score), got {item!r}", source=name)
                    docs.append(item[0])
                    values.append(_as_score(item[1], qid, item[0], name))
                else:
                    docs.append(item)
            lengths[i] = len(items)
        with ids:
            owners = np.repeat(np.arange(len(query_ids)), lengths)
            doc_array = ids.array(_objects(docs), "doc id", groups=owners, group_names=query_ids)
        score_array = np.array(values, dtype=np.float64) if with_scores else None
        return cls._build(name, query_ids, lengths, doc_array, score_array, by_score=False, source=None, dedupe=True)

    @classmethod
    def from_trec(cls, path: PathLike, *, name: str | None = None) -> Run:
        """From a TREC run file: ``qid Q0 docid rank score tag`` per line, ranked by score.

        As in trec_eval: a line needs at least 6 whitespace-separated fields, fields after the 6th are ignored,
        and the rank column is not used. ``.gz`` files are read transparently. ``name`` defaults to the file name.
        ``tag`` is the last line's tag, which trec_eval prints as ``runid``.
        """
        return cls._from_trec(read_input(path), name)

    @classmethod
    def _from_trec(cls, file: InputFile, name: str | None) -> Run:
        cols = read_table(file, "run", packed=True)
        nan = np.isnan(cols.values)
        if nan.any():
            raise file.error("field 5 (the score) is NaN", line_number(file, int(np.flatnonzero(nan)[0])))
        run = cls._from_rows(
            name or file.name,
            cols.query_ids,
            cols.query_codes,
            cols.doc_ids,
            cols.values,
            by_score=True,
            file=file,
            repeats=cols.repeats,
        )
        run.tag = cols.tag
        return run

    @classmethod
    def from_jsonl(cls, path: PathLike, *, name: str | None = None, order: Order = "score") -> Run:
        """From JSON lines, one result each: ``{"query_id": ..., "doc_id": ..., "score": ...}`` (PyTerrier's
        ``qid, docno`` work too). ``order="score"`` ranks by score; ``order="given"`` keeps the file's order
        within each query (scores optional)."""
        return cls._from_jsonl(read_input(path), name, order)

    @classmethod
    def _from_jsonl(cls, file: InputFile, name: str | None, order: Order) -> Run:
        queries, docs, values, numbers = [], [], [], []
        unscored: int | None = None  # the first line without a score
        for number, record in file.json_objects():
            try:
                q = record_key(record, QUERY_COLUMNS, "key")
                d = record_key(record, DOC_COLUMNS, "key")
                value = record_key(record, SCORE_COLUMNS, "key", required=False)
            except InputError as exc:
                raise file.error(exc.problem, number) from None
            if value is MISSING and order == "score":
                raise file.error("no 'score' key (use order='given' for a ranking without scores)", number)
            queries.append(q)
            docs.append(d)
            numbers.append(number)
            if value is not MISSING:
                if unscored is not None:
                    raise file.error("has no 'score' and later lines do: give every line a score or none", unscored)
                score = score_value(value)
                if isinstance(score, str) or score != score:
                    reason = score if isinstance(score, str) else "is NaN"
                    raise file.error(f"score {value!r} {reason}", number)
                values.append(score)
            elif values:
                raise file.error("some lines have a 'score' and this one has none", number)
            elif unscored is None:
                unscored = number
        with IdCheck(file.path) as ids:
            qids = ids.array(_objects(queries), "query id", unit="line", labels=numbers, line=True)
            codes, uniq = _factorize(qids)
            docs_arr = ids.array(
                _objects(docs), "doc id", groups=codes, group_names=uniq, unit="line", labels=numbers, line=True
            )
        scores = np.array(values, dtype=np.float64) if values else None
        return cls._from_rows(name or file.name, uniq, codes, docs_arr, scores, by_score=order == "score", file=file)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, *, name: str = "run", order: Order = "score") -> Run:
        """From a DataFrame with columns ``query_id, doc_id, score`` (PyTerrier's ``qid, docno, score`` and
        ir_measures' names work too). ``order="score"`` ranks by score; ``order="given"`` keeps the row order
        within each query (a ``rank`` column, if present, is not used). One column per role: a column named
        twice, or two names for one role holding different values, is an InputError; so is a boolean score."""
        return cls._from_frame(frame, name, order, "DataFrame", None)

    @classmethod
    def from_parquet(cls, path: PathLike, *, name: str | None = None, order: Order = "score") -> Run:
        """From a Parquet file with the columns :meth:`from_frame` takes (read with pyarrow, once)."""
        return cls._from_parquet(binary_input(*read_raw(path)), name, order)

    @classmethod
    def _from_parquet(cls, file: InputFile, name: str | None, order: Order) -> Run:
        from ._frames import read_parquet

        return cls._from_frame(read_parquet(file), name or file.name, order, file.path, file)

    @classmethod
    def _from_frame(cls, frame: pd.DataFrame, name: str, order: Order, where: str, file: InputFile | None) -> Run:
        q = frame_column(frame, QUERY_COLUMNS, "column", where)
        d = frame_column(frame, DOC_COLUMNS, "column", where)
        s = frame_column(frame, SCORE_COLUMNS, "column", where, required=False)
        if s is None and order == "score":
            raise InputError("no 'score' column (use order='given' for a ranking without scores)", source=where)
        with IdCheck(where) as ids:
            qids = ids.array(frame[q].to_numpy(dtype=object), "query id", unit="row")
            codes, uniq = _factorize(qids)
            docs = ids.array(frame[d].to_numpy(dtype=object), "doc id", groups=codes, group_names=uniq, unit="row")
        scores = _frame_scores(frame[s], s, where) if s is not None else None
        return cls._from_rows(name, uniq, codes, docs, scores, by_score=order == "score", file=file)

    @classmethod
    def load(cls, path: PathLike, *, name: str | None = None) -> Run:
        """Read a run file once (a pipe or ``/dev/stdin`` too), telling Parquet (magic bytes ``PAR1``) and JSONL
        (first line starts with ``{``) from a TREC run."""
        spath, raw = read_raw(path)
        if raw[:4] == b"PAR1":
            return cls._from_parquet(binary_input(spath, raw), name, "score")
        file = decode_input(spath, raw)
        first = file.first_line().lstrip()
        return cls._from_jsonl(file, name, "score") if first.startswith("{") else cls._from_trec(file, name)

    @classmethod
    def _from_csr(
        cls,
        name: str,
        query_ids: list[str],
        offsets: npt.NDArray[np.int64],
        doc_ids: PackedIds | np.ndarray,
        scores: npt.NDArray[np.float64] | None,
    ) -> Run:
        """A ranking as given, from CSR columns the caller has checked (a stage's table: ids non-empty strs, each
        once per query; scores not NaN): query ``i`` owns entries ``offsets[i]:offsets[i+1]``. Doc ids stay packed
        (UTF-8 bytes) where the C extension can read them, else are unpacked once here."""
        if isinstance(doc_ids, PackedIds) and _accel.speedups is None:
            doc_ids = doc_ids.to_objects()  # the pure-Python grade lookup reads str objects
        lengths = np.diff(np.asarray(offsets, np.int64))
        return cls._build(name, query_ids, lengths, doc_ids, scores, by_score=False, source=None, dedupe=False)

    # ----- internal construction ----------------------------------------------------------------------------
    @classmethod
    def _from_rows(
        cls,
        name: str,
        query_ids: list[str],
        codes: np.ndarray,
        docs: np.ndarray | PackedIds,
        scores: np.ndarray | None,
        *,
        by_score: bool,
        file: InputFile | None,
        repeats: list[int] | None = None,
    ) -> Run:
        """Rows in any query order (stably grouped here, keeping each query's rows in file order).

        ``repeats``: the query codes known to repeat a doc id, when the reader knows (None: check them all).
        """
        if isinstance(docs, PackedIds) and (repeats is None or repeats):
            docs = docs.to_objects()  # rows will move or be dropped: the rare case, done on str objects
        source = Source.of(file) if file else None
        if repeats is not None:  # the reader saw each query in one block, in order of first appearance
            lengths = np.bincount(codes, minlength=len(query_ids)).astype(np.int64)
            suspects: np.ndarray | None = np.array(sorted(repeats), dtype=np.int64)
            return cls._build(
                name, query_ids, lengths, docs, scores, by_score=by_score, source=source, dedupe=True, suspects=suspects
            )
        if isinstance(docs, PackedIds):  # unpacked above unless the reader told its repeats (returned above)
            docs = docs.to_objects()
        if len(codes) > 1 and (np.diff(codes) < 0).any():
            order = np.argsort(codes, kind="stable")
            codes, docs = codes[order], docs[order]
            scores = scores[order] if scores is not None else None
        # queries may be interleaved but not revisited once grouped; the ids must follow group order
        starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if len(codes) else np.empty(0, np.int64)
        group_codes = codes[starts]
        lengths = np.diff(np.r_[starts, len(codes)])
        ordered_ids = [query_ids[c] for c in group_codes.tolist()]
        suspects = None
        return cls._build(
            name, ordered_ids, lengths, docs, scores, by_score=by_score, source=source, dedupe=True, suspects=suspects
        )

    @classmethod
    def _build(
        cls,
        name: str,
        query_ids: list[str],
        lengths: np.ndarray,
        docs: np.ndarray | PackedIds,
        scores: np.ndarray | None,
        *,
        by_score: bool,
        source: Source | None,
        dedupe: bool,
        suspects: np.ndarray | None = None,
    ) -> Run:
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if scores is not None and np.isnan(scores).any():
            i = int(np.flatnonzero(np.isnan(scores))[0])
            doc = docs.take(np.array([i]))[0] if isinstance(docs, PackedIds) else docs[i]
            qid = query_ids[int(np.searchsorted(offsets, i, side="right")) - 1]
            raise InputError(f"query {qid!r}, doc {doc!r}: score is NaN", source=name)
        notes: list[str] = []
        if scores is not None and len(scores) and not (np.isfinite(scores.max()) and np.isfinite(scores.min())):
            infinite = int(np.isinf(scores).sum())
            if infinite:  # ranked first (+inf) or last (-inf); ties among them broken as for any equal scores
                where = source.path if source else name
                note = (
                    f"{infinite} infinite score(s) kept: +inf ranks first, -inf last, "
                    "ties among them broken as for equal scores"
                )
                warn(f"{where}: {note}", InfiniteScore)
                notes.append(note)
        if dedupe and not (isinstance(docs, PackedIds) and suspects is not None and len(suspects) == 0):
            if isinstance(docs, PackedIds):
                docs = docs.to_objects()
            keep = _first_occurrences(offsets, docs, scores if by_score else None, suspects)
            if keep is not None:
                dropped = len(docs) - int(keep.sum())
                where = source.path if source else name
                warn(
                    f"{where}: {dropped} repeated doc id(s) within a query kept once, at the first position",
                    DuplicateResult,
                )
                notes.append(f"{dropped} repeated doc id(s) within a query kept once, at the first position")
                query = np.repeat(np.arange(len(lengths)), lengths)
                lengths = np.bincount(query[keep], minlength=len(lengths)).astype(np.int64)
                docs = docs[keep]
                scores = scores[keep] if scores is not None else None
                np.cumsum(lengths, out=offsets[1:])
        _read_only(offsets, docs, scores)
        run = object.__new__(cls)
        run.name = name
        run.source = source
        run.notes = tuple(notes)
        run.tag = None
        run._query_ids = list(query_ids)
        run._offsets = offsets
        run._doc_ids = docs
        run._scores = scores
        run._by_score = by_score
        run._memo = {}
        return run

    # ----- reading ------------------------------------------------------------------------------------------
    @property
    def query_ids(self) -> tuple[str, ...]:
        return tuple(self._query_ids)

    @property
    def ranked_by(self) -> Order:
        """``"score"`` (score descending, ties by the conventions' rule) or ``"given"`` (the stored order)."""
        return "score" if self._by_score else "given"

    @property
    def num_entries(self) -> int:
        return int(self._offsets[-1])

    @property
    def offsets(self) -> np.ndarray:
        """CSR row pointers: query ``i`` owns entries ``offsets[i]:offsets[i+1]`` (read-only view)."""
        view = self._offsets.view()
        view.flags.writeable = False
        return view

    @property
    def doc_ids(self) -> np.ndarray:
        """Doc ids of every entry in stored order, as an object array of str (read-only view)."""
        stored = self._doc_ids
        if isinstance(stored, PackedIds):
            unpacked: np.ndarray | None = self._memo.get("doc_ids")
            if unpacked is None:
                unpacked = self._memo["doc_ids"] = stored.to_objects()
            ids = unpacked
        else:
            ids = stored
        view = ids.view()
        view.flags.writeable = False
        return view

    @property
    def doc_id_column(self) -> np.ndarray | PackedIds:
        """The doc ids as stored: an object array, or :class:`PackedIds` for a run read from a file."""
        return self._doc_ids

    def doc_ids_at(self, indices: np.ndarray) -> np.ndarray:
        """The doc ids of the entries ``indices``, as strs, without unpacking the others."""
        if isinstance(self._doc_ids, PackedIds) and "doc_ids" not in self._memo:
            return self._doc_ids.take(indices)
        return self.doc_ids.take(indices)

    @property
    def scores(self) -> np.ndarray | None:
        """Scores of every entry in stored order, or None for a ranking given without scores (read-only)."""
        if self._scores is None:
            return None
        view = self._scores.view()
        view.flags.writeable = False
        return view

    def __len__(self) -> int:
        return len(self._query_ids)

    def __contains__(self, query_id: object) -> bool:
        return query_id in self._index

    def __repr__(self) -> str:
        return f"Run({self.name!r}, {len(self)} queries, {self.num_entries} results, ranked by {self.ranked_by})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Run):
            return NotImplemented
        return (
            self._by_score == other._by_score
            and self._query_ids == other._query_ids
            and np.array_equal(self._offsets, other._offsets)
            and np.array_equal(self.doc_ids, other.doc_ids)
            and (
                (self._scores is None and other._scores is None)
                or (
                    self._scores is not None
                    and other._scores is not None
                    and np.array_equal(self._scores, other._scores)
                )
            )
        )

    __hash__ = None  # type: ignore[assignment]

    @property
    def _index(self) -> dict[str, int]:
        index = self._memo.get("index")
        if index is None:
            index = self._memo["index"] = {q: i for i, q in enumerate(self._query_ids)}
        return index

    def ranking(self, query_id: str, *, ties: str = "trec_eval") -> list[tuple[str, float | None]]:
        """One query's results in ranked order, as ``(doc_id, score)`` pairs."""
        i = self._index[query_id]
        perm = self.ranked(ties)[self._offsets[i] : self._offsets[i + 1]]
        scores = self._scores[perm].tolist() if self._scores is not None else [None] * len(perm)
        return list(zip(self.doc_ids_at(perm).tolist(), scores, strict=True))

    def ranked(self, ties: str = "trec_eval") -> np.ndarray:
        """Entry indices in ranked order (grouped by query), every tie broken by the rule ``ties``."""
        if not self._by_score or self._scores is None:  # a run ranked by score always has scores
            return np.arange(self.num_entries)
        perm: np.ndarray | None = self._memo.get(("ranked", ties))
        if perm is None:
            perm = ranked_permutation(self._offsets, self._scores, self.doc_ids, ties)
            perm.flags.writeable = False
            self._memo[("ranked", ties)] = perm
        return perm

    # ----- writing ------------------------------------------------------------------------------------------
    def to_frame(self, *, ties: str = "trec_eval") -> pd.DataFrame:
        """A DataFrame ``query_id, doc_id, rank, score`` in ranked order (rank from 1)."""
        import pandas as pd

        perm = self.ranked(ties)
        lengths = np.diff(self._offsets)
        rank = np.arange(self.num_entries) - np.repeat(self._offsets[:-1], lengths) + 1
        scores = self._scores[perm] if self._scores is not None else np.full(len(perm), np.nan)
        return pd.DataFrame(
            {
                "query_id": np.repeat(np.array(self._query_ids, dtype=object), lengths),
                "doc_id": self.doc_ids[perm],
                "rank": rank,
                "score": scores,
            }
        )

    def _export_scores(self, ties: str) -> tuple[np.ndarray, np.ndarray]:
        perm = self.ranked(ties)
        ranked = self._scores[perm] if self._scores is not None else None
        return perm, strictly_decreasing_scores(self._offsets, ranked)

    def to_dict(self, *, ties: str = "trec_eval") -> dict[str, dict[str, float]]:
        """``{query_id: {doc_id: score}}`` in pytrec_eval's form, with scores strictly decreasing with rank so
        that a tool which re-sorts by score keeps this run's order."""
        perm, scores = self._export_scores(ties)
        docs = self.doc_ids[perm].tolist()
        values = scores.tolist()
        o = self._offsets.tolist()
        return {
            q: dict(zip(docs[o[i] : o[i + 1]], values[o[i] : o[i + 1]], strict=True))
            for i, q in enumerate(self._query_ids)
        }

    def to_trec(self, path: PathLike, *, tag: str | None = None, ties: str = "trec_eval") -> None:
        """Write a TREC run file, whole or not at all (:func:`rag_eval._files.write_output`: a full disk is an
        InputError naming it, and the file keeps its old content; a symlink is written through). Scores strictly
        decrease with rank (see :meth:`to_dict`), so trec_eval ranks exactly as this run does. An id or tag that
        would not read back as itself (a query id starting with ``#``, whitespace inside, empty) is an InputError,
        raised before anything is written."""
        perm, scores = self._export_scores(ties)
        docs = self.doc_ids[perm].tolist()
        values = scores.tolist()
        tag = tag or self.tag or self.name
        where = str(path)
        check_writable(self._query_ids, "query id", where)
        check_writable(dict.fromkeys(docs), "doc id", where, starts_line=False)
        reason = unwritable_reason(tag, starts_line=False)
        if reason is not None:
            raise InputError(
                f"run tag {tag!r} {reason}: it cannot be written to a trec file and read back", source=where
            )
        o = self._offsets.tolist()
        write_output(
            path,
            (
                "".join(f"{q} Q0 {docs[j]} {j - o[i] + 1} {values[j]!r} {tag}\n" for j in range(o[i], o[i + 1])).encode(
                    "utf-8"
                )
                for i, q in enumerate(self._query_ids)
            ),
        )


def _read_only(offsets: np.ndarray, docs: np.ndarray | PackedIds, scores: np.ndarray | None) -> None:
    """A run's columns, read-only from here on: a cache key or a content hash taken once stays true."""
    for column in (offsets, docs.starts if isinstance(docs, PackedIds) else docs, scores):
        if column is not None:
            column.flags.writeable = False


def _factorize(ids: np.ndarray) -> tuple[np.ndarray, list[str]]:
    uniq = list(dict.fromkeys(ids.tolist()))
    where = {q: i for i, q in enumerate(uniq)}
    return np.fromiter(map(where.__getitem__, ids.tolist()), np.int64, len(ids)), uniq


def _score_columns(
    scores: Mapping[Any, Any], name: str
) -> tuple[list[str], npt.NDArray[np.int64], np.ndarray, npt.NDArray[np.float64]]:
    """``(query_ids, lengths, doc_ids, scores)`` of ``{query_id: {doc_id: score}}``, each check done on whole columns
    (the pure-Python twin of ``_speedups.score_columns``): ids through :class:`IdCheck`, scores by
    :func:`_as_score` where one is not a float or an int."""
    per_query = list(scores.values())
    with IdCheck(name) as ids:
        query_ids = ids.keys(scores.keys(), "query id")
        if not set(map(type, per_query)) <= {dict}:
            for qid, value in zip(query_ids, per_query, strict=True):
                if not isinstance(value, Mapping):
                    raise InputError(f"query {qid!r}: expected a mapping doc_id -> score", source=name)
        lengths = np.fromiter(map(len, per_query), np.int64, len(per_query))
        total = int(lengths.sum())
        owners = np.repeat(np.arange(len(query_ids)), lengths)
        raw = np.fromiter(chain.from_iterable(per_query), object, total)
        if set(map(type, raw)) <= {str, int}:
            docs = ids.array(raw, "doc id", groups=owners, group_names=query_ids)
        else:  # other kinds of key (NumPy strs, floats): query by query, naming the query
            keys = [ids.keys(d.keys(), "doc id", f"query {q!r}: ") for q, d in zip(query_ids, per_query, strict=True)]
            docs = np.fromiter(chain.from_iterable(keys), object, total)
    values = list(chain.from_iterable(map(methodcaller("values"), per_query)))
    return query_ids, lengths, docs, _score_array(values, query_ids, owners, docs, name)


def _score_array(
    values: list[Any], query_ids: list[str], owners: np.ndarray, docs: np.ndarray, name: str
) -> np.ndarray:
    """``values`` as float64 scores: at once where each is a float or an int, else one by one (:func:`_as_score`
    names the query and doc of a value that is not a score)."""
    if set(map(type, values)) <= {float, int}:
        try:
            return np.array(values, dtype=np.float64) if values else np.empty(0, np.float64)
        except OverflowError:
            pass
    out = np.empty(len(values), np.float64)  # a score given otherwise (a str, a NumPy number, a boolean)
    for k, value in enumerate(values):
        out[k] = _as_score(value, query_ids[owners[k]], docs[k], name)
    return out


def _ranked_columns(
    ranking: Mapping[Any, Any], query_ids: list[str], ids: IdCheck, name: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
    """``(lengths, doc_ids, scores or None)`` of ``{query_id: [doc_id, ...]}`` (or of ``(doc_id, score)`` pairs) on
    whole columns, when every ranking is a list or tuple and every item an id (a str or an int) or every item a
    pair; None for anything else, which :meth:`Run.from_ranking` reads a query at a time, naming what is wrong."""
    per_query = list(ranking.values())
    if not set(map(type, per_query)) <= {list, tuple}:
        return None
    lengths = np.fromiter(map(len, per_query), np.int64, len(per_query))
    flat = list(chain.from_iterable(per_query))
    kinds = set(map(type, flat))
    pairs = bool(kinds) and kinds <= {tuple, list}
    if pairs and not set(map(len, flat)) <= {2}:
        return None
    if not pairs and not kinds <= {str, int}:
        return None
    raw = list(map(itemgetter(0), flat)) if pairs else flat
    owners = np.repeat(np.arange(len(query_ids)), lengths)
    if pairs and not set(map(type, raw)) <= {str, int}:
        return None
    with ids:
        docs = ids.array(_objects(raw), "doc id", groups=owners, group_names=query_ids)
    scores = _score_array(list(map(itemgetter(1), flat)), query_ids, owners, docs, name) if pairs else None
    return lengths, docs, scores


def _first_occurrences(
    offsets: np.ndarray, docs: np.ndarray, scores: np.ndarray | None, suspects: np.ndarray | None = None
) -> np.ndarray | None:
    """A keep-mask that drops repeated doc ids within a query (None when there are none).

    The kept copy is the first in ranked order: the highest-scoring one for a run ranked by score (the first
    given among equal scores), the first in the list otherwise. ``suspects``: the only queries to check.
    """
    o = offsets.tolist()
    candidates = range(len(o) - 1) if suspects is None else suspects.tolist()
    repeated = [i for i in candidates if len(set(docs[o[i] : o[i + 1]].tolist())) != o[i + 1] - o[i]]
    if not repeated:
        return None
    keep = np.ones(len(docs), dtype=bool)
    for i in repeated:
        a, b = o[i], o[i + 1]
        order = range(a, b) if scores is None else (a + np.argsort(-scores[a:b], kind="stable")).tolist()
        seen: set[str] = set()
        for j in order:
            if docs[j] in seen:
                keep[j] = False
            else:
                seen.add(docs[j])
    return keep


def _as_score(value: Any, qid: str, doc: Any, where: str) -> float:
    """A score given as a value (see :mod:`rag_eval.data.numeric`): a number, not a boolean and not NaN, or a
    str that is a plain ASCII decimal."""
    score = score_value(value)
    if isinstance(score, str):
        raise InputError(f"query {qid!r}, doc {doc!r}: score {value!r} {score}", source=where)
    if score != score:
        raise InputError(f"query {qid!r}, doc {doc!r}: score is NaN", source=where)
    return score


def _objects(values: Sequence[object]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _frame_scores(column: pd.Series, name: str, where: str) -> npt.NDArray[np.float64]:
    """A DataFrame's score column as float64: numbers, or strs that are plain ASCII decimals; never booleans."""
    values = column.to_numpy()
    kind = values.dtype.kind
    if kind == "b":
        raise InputError(f"column {name!r} holds booleans, not scores", source=where)
    if kind in "iuf":
        scores = values.astype(np.float64)
    else:
        scores = np.empty(len(values), np.float64)
        for i, value in enumerate(values.tolist()):
            score = score_value(value) if value is not None else "is missing"
            if isinstance(score, str):
                raise InputError(f"row {i}: score {value!r} {score}", source=where)
            scores[i] = score
    if np.isnan(scores).any():
        row = int(np.flatnonzero(np.isnan(scores))[0])
        raise InputError(f"row {row}: score is missing or NaN", source=where)
    return scores
