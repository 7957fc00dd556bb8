"""Column names: ours, and the ones PyTerrier, ir_measures and BEIR use for the same thing.

One column per role: a frame with a column named twice (``score`` and ``score``), or with two names for one role
(``query_id`` and ``qid``) that hold different values, is an InputError rather than a silent pick of one. Two names
for one role holding the very same values are harmless, and the first name is used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, overload

from ..errors import InputError

if TYPE_CHECKING:
    import pandas as pd

    from .input_files import InputFile


def pick_column(available: Iterable[object], candidates: tuple[str, ...], noun: str) -> str:
    """The first of ``candidates`` present in ``available``; an error listing them when none is."""
    names = [str(a) for a in available]
    for name in candidates:
        if name in names:
            return name
    raise InputError(f"no {noun} named {' or '.join(repr(c) for c in candidates)} (found {names})")


def find_column(available: Iterable[object], candidates: tuple[str, ...]) -> str | None:
    names = [str(a) for a in available]
    return next((c for c in candidates if c in names), None)


@overload
def frame_column(
    frame: pd.DataFrame, candidates: tuple[str, ...], noun: str, where: str, *, required: Literal[True] = True
) -> str: ...
@overload
def frame_column(
    frame: pd.DataFrame, candidates: tuple[str, ...], noun: str, where: str, *, required: bool
) -> str | None: ...
def frame_column(
    frame: pd.DataFrame, candidates: tuple[str, ...], noun: str, where: str, *, required: bool = True
) -> str | None:
    """The column of ``frame`` that plays the role ``candidates`` name (see the module's rule), or None when
    ``required`` is false and there is none."""
    labels = list(frame.columns)
    for name in candidates:
        count = sum(1 for label in labels if label == name)
        if count > 1:
            raise InputError(f"column {name!r} appears {count} times: which one to read is a guess", source=where)
    present = [name for name in candidates if name in labels]
    if not present:
        if not required:
            return None
        try:
            return pick_column(labels, candidates, noun)
        except InputError as exc:
            raise InputError(exc.problem, source=where) from None
    first = present[0]
    for other in present[1:]:
        if not frame[first].equals(frame[other]):
            raise InputError(
                f"columns {first!r} and {other!r} both name one field and hold different values: keep one of them",
                source=where,
            )
    return first


def record_key(record: Mapping[str, Any], candidates: tuple[str, ...], noun: str, *, required: bool = True) -> Any:
    """The value of the key of ``record`` (a JSON line) that plays the role ``candidates`` name; two such keys with
    different values are an InputError (the caller adds the line). Returns ``_MISSING`` when not ``required``
    and absent."""
    present = [name for name in candidates if name in record]
    if not present:
        if not required:
            return MISSING
        return record[pick_column(record, candidates, noun)]
    value = record[present[0]]
    for other in present[1:]:
        if record[other] != value or type(record[other]) is not type(value):
            raise InputError(
                f"keys {present[0]!r} and {other!r} both name one field and hold different values "
                f"({value!r} and {record[other]!r})"
            )
    return value


MISSING = object()


def read_parquet(file: InputFile) -> pd.DataFrame:
    """The DataFrame of a Parquet file's bytes (already read, once)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        raise ImportError("reading Parquet needs pyarrow: pip install pyarrow") from None
    try:
        table = pq.read_table(pa.BufferReader(file.data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise file.error(f"not a readable Parquet file ({exc})") from None
    frame: pd.DataFrame = table.to_pandas()
    return frame
