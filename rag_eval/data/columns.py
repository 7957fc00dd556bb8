"""Whitespace-separated text tables (TREC runs and qrels) read into columns (docs/bad-input.md).

The C reader (``rag_eval._speedups.parse_columns``) takes every regular file; a line it finds unusual (too
few fields, a score that is not a number, ...) sends the whole file to the line reader here, which names the
line and the problem. Both split fields on ASCII whitespace only, as trec_eval does, end lines at LF, CRLF or a
lone CR, and read numbers by the one rule of :mod:`rag_eval.data.numeric`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from .. import _accel
from .input_files import InputFile
from .numeric import grade_text, is_nan_text, score_text
from .packed import PackedIds

Kind = Literal["run", "qrels"]
_LAYOUT = {"run": "qid Q0 docid rank score tag", "qrels": "qid iter docid grade"}


@dataclass
class Columns:
    """The fields rag_eval uses of every non-blank line, in file order."""

    query_codes: np.ndarray  # int64 index into query_ids, one per line
    query_ids: list[str]  # in order of first appearance
    doc_ids: np.ndarray | PackedIds  # object array of str, or packed
    values: np.ndarray  # float64 scores (run) or int64 grades (qrels)
    tag: str | None  # a run's tag on its last line (what trec_eval prints as runid)
    # query codes that repeat a doc id, or None when every query must be checked (queries interleaved, or the
    # line reader was used)
    repeats: list[int] | None

    def __len__(self) -> int:
        return len(self.query_codes)


GRADE_LIMIT = (
    2**29
)  # grades beyond +-GRADE_LIMIT are refused (no scale needs them; the grade matrix's sentinel lies past)


def read_table(file: InputFile, kind: Kind, *, packed: bool = False) -> Columns:
    """A TREC run (``qid Q0 docid rank score tag``, at least 6 fields, the rest ignored) or qrels file
    (``qid iter docid grade``, exactly 4 fields). With ``packed``, the C reader returns the doc ids as
    :class:`PackedIds` (no str object per id); the line reader always returns str objects."""
    if _accel.speedups is not None:
        native = _accel.speedups.parse_columns(file.data, 0 if kind == "run" else 1, file.ascii, packed)
        if native is not None:
            query_ids, codes, docs, values, n, tag, repeats, interleaved = native
            ids = PackedIds(docs[0], docs[1][: n + 1]) if packed else docs[:n]
            return Columns(codes[:n], query_ids, ids, values[:n], tag, None if interleaved else repeats)
    return _read_lines(file, kind)


def line_number(file: InputFile, row: int) -> int:
    """The line number of the ``row``-th non-blank line (for error messages)."""
    for index, (number, _) in enumerate(file.lines()):
        if index == row:
            return number
    raise IndexError(row)


def _read_lines(file: InputFile, kind: Kind) -> Columns:
    codes: list[int] = []
    index: dict[str, int] = {}
    docs: list[str] = []
    values: list[float | int] = []
    tag = None
    for number, line in file.lines():
        parts = [p.decode() for p in line.encode().split()]  # ASCII whitespace only, as trec_eval splits
        if kind == "run" and len(parts) < 6:
            raise file.error(f"expected at least 6 fields ({_LAYOUT[kind]}), found {len(parts)}", number)
        if kind == "qrels" and len(parts) != 4:
            raise file.error(f"expected 4 fields ({_LAYOUT[kind]}), found {len(parts)}", number)
        codes.append(index.setdefault(parts[0], len(index)))
        docs.append(parts[2])
        if kind == "run":
            values.append(_score(parts[4], file, number))
            tag = parts[5]
        else:
            grade = parse_int(parts[3])
            if grade is None:
                raise file.error(f"field 4 is {parts[3]!r}, not an integer grade", number)
            if abs(grade) >= GRADE_LIMIT:
                raise file.error(f"grade {grade} is out of range (grades must lie within +-{GRADE_LIMIT})", number)
            values.append(grade)
    dtype = np.float64 if kind == "run" else np.int64
    return Columns(
        np.array(codes, dtype=np.int64),
        list(index),
        np.array(docs, dtype=object) if docs else np.empty(0, object),
        np.array(values, dtype=dtype),
        tag,
        None,
    )


def _score(text: str, file: InputFile, number: int) -> float:
    value = score_text(text)
    if value is None:
        if is_nan_text(text):
            raise file.error("field 5 (the score) is NaN", number)
        raise file.error(f"field 5 is {text!r}, not a number", number)
    return value


def parse_int(text: str) -> int | None:
    """``text`` as an int: ASCII digits with an optional sign, or an integral decimal such as ``1.0`` (as trec_eval's
    ``atol`` reads it); else None (see :mod:`rag_eval.data.numeric`)."""
    return grade_text(text)
