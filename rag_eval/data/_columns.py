"""Whitespace-separated text tables (TREC runs and qrels) read into columns.

A fast path hands regular files (one tab or one space between fields, as nearly every tool writes them) to
Arrow's multi-threaded CSV reader; anything else, and every file with an error, goes through a line-by-line
reader that names the line and the problem.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ._io import InputFile

Kind = Literal["str", "float", "int"]


@dataclass
class Columns:
    """The requested fields of every non-blank line, in file order."""

    query_codes: np.ndarray  # int64 index into query_ids, one per line
    query_ids: list[str]  # in order of first appearance
    fields: dict[int, np.ndarray]  # field number -> column (object array of str, float64 or int64)

    def __len__(self) -> int:
        return len(self.query_codes)


def read_columns(
    file: InputFile, *, fields: dict[int, Kind], min_fields: int, max_fields: int | None, layout: str
) -> Columns:
    """Read field 0 (the query id) and the requested ``fields`` of a whitespace-separated file.

    ``layout`` describes the expected line for error messages, e.g. ``"qid iter docid grade"``.
    """
    fast = _read_with_arrow(file, fields, min_fields, max_fields)
    if fast is not None:
        return fast
    return _read_lines(file, fields, min_fields, max_fields, layout)


def line_number(file: InputFile, row: int) -> int:
    """The line number of the ``row``-th non-blank line (for error messages after a fast read)."""
    for index, (number, _) in enumerate(file.lines()):
        if index == row:
            return number
    raise IndexError(row)


def _sniff_delimiter(file: InputFile) -> str | None:
    """The single separator of a regular file: tab or space, if the file uses exactly one of them between
    fields and no other ASCII whitespace (which the line reader would also split on, as trec_eval does)."""
    end = file.data.find(b"\n", 0, 1 << 16)
    first = file.data[: end if end >= 0 else 1 << 16].rstrip(b"\r").decode("utf-8", "replace")
    for delimiter, other in (("\t", b" "), (" ", b"\t")):
        parts = first.split(delimiter)
        if len(parts) > 1 and all(p and p == p.strip() for p in parts):
            if any(c in file.data for c in (other, b"\x0b", b"\x0c")):
                return None
            return delimiter
    return None


def _read_with_arrow(
    file: InputFile, fields: dict[int, Kind], min_fields: int, max_fields: int | None
) -> Columns | None:
    delimiter = _sniff_delimiter(file)
    if delimiter is None:
        return None
    end = file.data.find(b"\n")
    width = len(file.data[: end if end >= 0 else None].rstrip(b"\r").split(delimiter.encode()))
    if width < min_fields or (max_fields is not None and width > max_fields):
        return None
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    names = [f"f{i}" for i in range(width)]
    types = {"str": pa.string(), "float": pa.float64(), "int": pa.int64()}
    column_types = {"f0": pa.string()} | {f"f{i}": types[k] for i, k in fields.items()}
    try:
        table = pacsv.read_csv(
            pa.BufferReader(file.data),
            read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 24),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter, quote_char=False, escape_char=False, ignore_empty_lines=True
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=column_types,
                include_columns=["f0", *(f"f{i}" for i in fields)],
                null_values=[],
                strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None  # irregular or bad: the line reader says exactly where
    if table.num_rows == 0:
        return None
    encoded = pc.dictionary_encode(table.column("f0")).combine_chunks()
    codes = encoded.indices.to_numpy().astype(np.int64)
    query_ids = encoded.dictionary.to_pylist()
    columns: dict[int, np.ndarray] = {}
    for i, kind in fields.items():
        column = table.column(f"f{i}")
        columns[i] = column.to_numpy() if kind != "str" else np.asarray(column.to_numpy(), dtype=object)
    return Columns(codes, query_ids, columns)


def _read_lines(
    file: InputFile, fields: dict[int, Kind], min_fields: int, max_fields: int | None, layout: str
) -> Columns:
    codes: list[int] = []
    index: dict[str, int] = {}
    values: dict[int, list] = {i: [] for i in fields}
    for number, line in file.lines():
        parts = line.encode().split()  # ASCII whitespace only, as trec_eval splits
        parts = [p.decode() for p in parts]
        if len(parts) < min_fields or (max_fields is not None and len(parts) > max_fields):
            expected = f"{min_fields}" if max_fields == min_fields else f"at least {min_fields}"
            raise file.error(f"expected {expected} fields ({layout}), found {len(parts)}", number)
        codes.append(index.setdefault(parts[0], len(index)))
        for i, kind in fields.items():
            values[i].append(_convert(parts[i], kind, file, number, i))
    columns: dict[int, np.ndarray] = {}
    for i, kind in fields.items():
        dtype = {"str": object, "float": np.float64, "int": np.int64}[kind]
        columns[i] = np.array(values[i], dtype=dtype) if values[i] else np.empty(0, dtype=dtype)
    return Columns(np.array(codes, dtype=np.int64), list(index), columns)


def _convert(text: str, kind: Kind, file: InputFile, number: int, field: int) -> object:
    if kind == "str":
        return text
    if kind == "int":
        grade = parse_int(text)
        if grade is None:
            raise file.error(f"field {field + 1} is {text!r}, not an integer", number)
        return grade
    try:
        value = float(text)
    except ValueError:
        raise file.error(f"field {field + 1} is {text!r}, not a number", number) from None
    if math.isnan(value):
        raise file.error(f"field {field + 1} is NaN", number)
    return value


def parse_int(text: str) -> int | None:
    """``text`` as an int, accepting an integral float such as ``1.0`` (as trec_eval's ``atol`` does); else None."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if math.isfinite(value) and value.is_integer() else None
