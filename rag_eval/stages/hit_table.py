"""A stage's output as columns: one Arrow table with one row per query, its hits a list column of structs.
See docs/stores.md.

The columns and why: ``docs/runner.md``, "A stage's output as columns"."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from types import MappingProxyType
from typing import Any

import numpy as np
import pyarrow as pa

from .hits import _EMPTY, Hit

HIT_TYPE = pa.struct(
    [
        ("doc_id", pa.large_string()),
        ("score", pa.float64()),
        ("text", pa.large_string()),
        ("tokens", pa.int64()),
        ("metadata", pa.large_string()),
    ]
)
OPTIONAL_FIELDS = ("text", "tokens", "metadata")


def hit_type(fields: Iterable[str] = ()) -> pa.StructType:
    """The struct of a hit with ``doc_id``, ``score`` and those of :data:`OPTIONAL_FIELDS` named in ``fields``."""
    wanted = set(fields)
    return pa.struct([f for f in HIT_TYPE if f.name in ("doc_id", "score") or f.name in wanted])


def schema(fields: Iterable[str] = ()) -> pa.Schema:
    """:data:`SCHEMA` with the hit struct holding the optional ``fields`` (:func:`hit_type`)."""
    return SCHEMA.set(SCHEMA.get_field_index("hits"), pa.field("hits", pa.large_list(hit_type(fields))))


SCHEMA = pa.schema(
    [
        ("query_id", pa.large_string()),
        ("query_hash", pa.string()),
        ("hits", pa.large_list(HIT_TYPE)),  # the widest form: a table may leave out optional fields (hit_type)
        ("error", pa.large_string()),
        ("latency", pa.float64()),
        ("cached", pa.bool_()),
        ("skipped", pa.bool_()),
        ("beyond_depth", pa.large_list(pa.large_string())),
        ("issues", pa.large_list(pa.large_string())),
    ]
)


class TableBuilder:
    """Rows of :data:`SCHEMA`, added one query at a time (cheap appends), turned into a table in one go."""

    __slots__ = (
        "_beyond",
        "_cached",
        "_doc_ids",
        "_errors",
        "_issues",
        "_latency",
        "_lengths",
        "_metadata",
        "_qhashes",
        "_qids",
        "_scores",
        "_skipped",
        "_texts",
        "_tokens",
    )

    def __init__(self) -> None:
        self._qids: list[str] = []
        self._qhashes: list[str] = []
        self._lengths: list[int] = []  # -1: failed (a null hits list)
        self._errors: list[str | None] = []
        self._latency: list[float] = []
        self._cached: list[bool] = []
        self._skipped: list[bool] = []
        self._beyond: list[Sequence[str]] = []
        self._issues: list[Sequence[str]] = []
        self._doc_ids: list[str] = []
        self._scores: list[float | None] = []
        self._texts: list[str | None] = []
        self._tokens: list[int | None] = []
        self._metadata: list[str | None] = []

    def __len__(self) -> int:
        return len(self._qids)

    def add(
        self,
        query_id: str,
        query_hash: str,
        hits: Sequence[Hit] | None,
        *,
        error: str | None = None,
        latency: float = 0.0,
        cached: bool = False,
        skipped: bool = False,
        beyond_depth: Sequence[str] = (),
        issues: Sequence[str] = (),
    ) -> None:
        """One query's outcome: its checked hits (None: failed, with ``error``)."""
        self._qids.append(query_id)
        self._qhashes.append(query_hash)
        self._errors.append(error)
        self._latency.append(latency)
        self._cached.append(cached)
        self._skipped.append(skipped)
        self._beyond.append(beyond_depth)
        self._issues.append(issues)
        if hits is None:
            self._lengths.append(-1)
            return
        self._lengths.append(len(hits))
        if not hits:
            return
        doc_ids, scores, texts, tokens, metadata = zip(*hits, strict=True)  # Hit is a tuple: columns in C
        self._doc_ids.extend(doc_ids)
        self._scores.extend(scores)
        self._texts.extend(texts)
        self._tokens.extend(tokens)
        if any(metadata):
            self._metadata.extend(json.dumps(dict(m), ensure_ascii=False) if m else None for m in metadata)
        else:
            self._metadata.extend([None] * len(hits))

    def table(self) -> pa.Table:
        """The rows added so far as a table of :data:`SCHEMA`."""
        lengths = np.array(self._lengths, np.int64)
        failed = lengths < 0
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(np.where(failed, 0, lengths), out=offsets[1:])
        n = len(self._doc_ids)
        children = {"doc_id": pa.array(self._doc_ids, pa.large_string()), "score": pa.array(self._scores, pa.float64())}
        for name, values, kind in (
            ("text", self._texts, pa.large_string()),
            ("tokens", self._tokens, pa.int64()),
            ("metadata", self._metadata, pa.large_string()),
        ):
            if values.count(None) != n:
                children[name] = pa.array(values, kind)
        kind = hit_type(children)
        struct = pa.StructArray.from_arrays(list(children.values()), fields=list(kind))
        mask = pa.array(failed) if failed.any() else None
        hits = pa.LargeListArray.from_arrays(pa.array(offsets), struct, mask=mask)
        return pa.Table.from_arrays(
            [
                pa.array(self._qids, pa.large_string()),
                pa.array(self._qhashes, pa.string()),
                hits,
                pa.array(self._errors, pa.large_string()),
                pa.array(self._latency, pa.float64()),
                pa.array(self._cached, pa.bool_()),
                pa.array(self._skipped, pa.bool_()),
                pa.array(self._beyond, pa.large_list(pa.large_string())),
                pa.array(self._issues, pa.large_list(pa.large_string())),
            ],
            schema=schema(kind.names),
        )


def fields_of(table: pa.Table) -> tuple[str, ...]:
    """The optional hit fields a table holds."""
    kind = table.schema.field("hits").type.value_type
    return tuple(f.name for f in kind if f.name in OPTIONAL_FIELDS)


def conform(table: pa.Table, fields: Iterable[str]) -> pa.Table:
    """``table`` with the hit struct holding exactly ``fields`` of the optional ones (missing ones added as null;
    none is dropped: ``fields`` must include :func:`fields_of` ``table``)."""
    wanted = tuple(f for f in OPTIONAL_FIELDS if f in set(fields))
    if fields_of(table) == wanted:
        return table
    return table.cast(schema(wanted))


def empty_table(fields: Iterable[str] = ()) -> pa.Table:
    return pa.Table.from_batches([], schema=schema(fields))  # Schema.empty_table() imports pandas (~1 s)


def concat(tables: Iterable[pa.Table]) -> pa.Table:
    """Tables of :data:`SCHEMA` one after the other (one chunk per table: no hit is copied; tables that differ in
    optional fields are first given the same ones)."""
    parts = list(tables)
    if not parts:
        return empty_table()
    wanted = {f for t in parts for f in fields_of(t)}
    return pa.concat_tables([conform(t, wanted) for t in parts])


RELEASE_EVERY = 4  # parts copied by contiguous() between two returns of the Arrow pool's freed memory to the OS


def contiguous(parts: list[pa.Table]) -> pa.Table:
    """The tables of ``parts`` (of :data:`SCHEMA`, one after the other) as one table with one chunk per column,
    the same values; ``parts`` is emptied.

    Arrow's own ``combine_chunks`` needs every chunk and the whole copy at once (twice a stage's hits at the
    peak). Here the row columns (a few per query) are combined first, then each part's hits are copied into
    buffers made once for the whole and let go, part after part: where nothing else holds a part (the runner's
    block tables, a cache shard's memory-mapped rows), its memory is freed as soon as it is copied, so the peak is
    the new table plus the parts still to copy, never two copies of every hit."""
    if not parts:
        return empty_table()
    wanted = {f for t in parts for f in fields_of(t)}
    tables = [conform(t, wanted) for t in parts]
    parts.clear()
    if len(tables) == 1 and all(c.num_chunks == 1 for c in tables[0].columns):
        return tables[0]
    target = tables[0].schema
    rows = {
        name: pa.chunked_array(
            [c for t in tables for c in t.column(name).chunks], target.field(name).type
        ).combine_chunks()
        for name in target.names
        if name != "hits"
    }
    chunks: list[pa.LargeListArray | None] = [c for t in tables for c in t.column("hits").chunks]
    tables.clear()  # the hits chunks are now held by `chunks` alone (unless by the caller)
    hits = _combined_lists(chunks, target.field("hits").type)
    return pa.Table.from_arrays([hits if n == "hits" else rows[n] for n in target.names], schema=target)


def _combined_lists(chunks: list[pa.LargeListArray | None], kind: pa.LargeListType) -> pa.LargeListArray:
    """The ``large_list<struct<...>>`` chunks as one array, each chunk set to None once copied (see
    :func:`contiguous`). Every leaf of the struct is a large_string or a fixed-width number."""
    spans = []  # per chunk: (rows, first value, end value) in its struct child
    for chunk in chunks:
        assert chunk is not None
        offsets = chunk.offsets.to_numpy()  # (a sliced chunk's own rows)
        spans.append((len(chunk), int(offsets[0]), int(offsets[-1])))
    n_rows = sum(r for r, _, _ in spans)
    n_values = sum(end - first for _, first, end in spans)
    struct_type: pa.StructType = kind.value_type
    leaves = [_Leaf(field.type, n_values) for field in struct_type]
    for at, chunk in enumerate(chunks):  # the string leaves' sizes first: their data buffers are made once
        assert chunk is not None
        _, first, end = spans[at]
        values = chunk.values.slice(first, end - first)
        for i, leaf in enumerate(leaves):
            leaf.size(values.field(i))
    for leaf in leaves:
        leaf.allocate()
    list_offsets = np.zeros(n_rows + 1, np.int64)
    list_valid: np.ndarray | None = None
    struct_valid: np.ndarray | None = None
    row = value = 0
    pool = pa.default_memory_pool()
    for at, (n, first, end) in enumerate(spans):
        chunk = chunks[at]
        assert chunk is not None
        chunks[at] = None
        list_offsets[row + 1 : row + n + 1] = chunk.offsets.to_numpy()[1:] - first + value
        if chunk.null_count:
            if list_valid is None:
                list_valid = np.ones(n_rows, bool)
            list_valid[row : row + n] = chunk.is_valid().to_numpy(zero_copy_only=False)
        values = chunk.values.slice(first, end - first)
        del chunk
        if values.null_count:
            if struct_valid is None:
                struct_valid = np.ones(n_values, bool)
            struct_valid[value : value + len(values)] = values.is_valid().to_numpy(zero_copy_only=False)
        for i, leaf in enumerate(leaves):
            leaf.copy(values.field(i), value)
        del values
        row, value = row + n, value + end - first
        if (at + 1) % RELEASE_EVERY == 0:
            pool.release_unused()  # the parts let go: back to the OS, not kept by the allocator for later
    pool.release_unused()
    struct = pa.Array.from_buffers(
        struct_type,
        n_values,
        [_bitmap(struct_valid)],
        null_count=_nulls(struct_valid),
        children=[leaf.array() for leaf in leaves],
    )
    combined: pa.LargeListArray = pa.Array.from_buffers(
        kind,
        n_rows,
        [_bitmap(list_valid), pa.py_buffer(list_offsets)],
        null_count=_nulls(list_valid),
        children=[struct],
    )
    return combined


class _Leaf:
    """One leaf column of the hits (a large_string or a fixed-width number), filled chunk by chunk."""

    def __init__(self, kind: pa.DataType, n: int) -> None:
        self.kind = kind
        self.n = n
        self.strings = kind == pa.large_string()
        if not self.strings and (not pa.types.is_primitive(kind) or pa.types.is_boolean(kind)):  # pragma: no cover
            raise TypeError(f"a hits leaf of type {kind} cannot be combined")
        self.bytes = 0
        self.valid: np.ndarray | None = None

    def size(self, part: pa.Array) -> None:
        if self.strings and len(part):
            offsets = np.frombuffer(part.buffers()[1], np.int64, len(part) + 1, part.offset * 8)
            self.bytes += int(offsets[-1] - offsets[0])

    def allocate(self) -> None:
        if self.strings:
            self.offsets = np.zeros(self.n + 1, np.int64)
            self.data = np.empty(self.bytes, np.uint8)
            self.at_byte = 0
        else:
            self.values = np.empty(self.n, self.kind.to_pandas_dtype())

    def copy(self, part: pa.Array, at: int) -> None:
        n = len(part)
        if not n:
            return
        if part.null_count:
            if self.valid is None:
                self.valid = np.ones(self.n, bool)
            self.valid[at : at + n] = part.is_valid().to_numpy(zero_copy_only=False)
        if self.strings:
            starts, data = string_buffers(part)
            self.offsets[at + 1 : at + n + 1] = starts[1:] + self.at_byte
            size = len(data)
            self.data[self.at_byte : self.at_byte + size] = np.frombuffer(data, np.uint8)
            self.at_byte += size
        else:
            width = self.values.itemsize
            self.values[at : at + n] = np.frombuffer(part.buffers()[1], self.values.dtype, n, part.offset * width)

    def array(self) -> pa.Array:
        validity = _bitmap(self.valid)
        if self.strings:
            buffers = [validity, pa.py_buffer(self.offsets), pa.py_buffer(self.data)]
        else:
            buffers = [validity, pa.py_buffer(self.values)]
        return pa.Array.from_buffers(self.kind, self.n, buffers, null_count=_nulls(self.valid))


def _bitmap(valid: np.ndarray | None) -> pa.Buffer | None:
    return None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))


def _nulls(valid: np.ndarray | None) -> int:
    return 0 if valid is None else int(valid.size - np.count_nonzero(valid))


def hit_lists(table: pa.Table, rows: Sequence[int] | np.ndarray | None = None) -> list[tuple[Hit, ...] | None]:
    """The hits of ``rows`` (every row by default) as Hit tuples (None where the stage failed): built from whole
    columns, with the per-hit checks skipped (every value in a table was checked when the hit was made, or when
    the cache shard was read)."""
    part = table if rows is None else table.take(pa.array(np.asarray(rows, np.int64)))
    column = part.column("hits").combine_chunks()
    if isinstance(column, pa.ChunkedArray):  # no rows
        return []
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    offsets = column.offsets.to_numpy()
    flat = column.flatten()  # the hits of the valid rows, in row order (a null row holds none)
    start = int(offsets[0])
    doc_ids = flat.field("doc_id").to_pylist()
    scores = flat.field("score").to_pylist()
    names = {f.name for f in flat.type}
    texts = _column_values(flat.field("text")) if "text" in names else [None] * len(flat)
    tokens = _column_values(flat.field("tokens")) if "tokens" in names else [None] * len(flat)
    raw = flat.field("metadata") if "metadata" in names else pa.nulls(len(flat), pa.large_string())
    if raw.null_count == len(raw):
        metadata: Any = [_EMPTY] * len(raw)
    else:
        metadata = [MappingProxyType(json.loads(m)) if m else _EMPTY for m in raw.to_pylist()]
    everything = list(map(partial(tuple.__new__, Hit), zip(doc_ids, scores, texts, tokens, metadata, strict=True)))
    out: list[tuple[Hit, ...] | None] = []
    bounds = (offsets - start).tolist()
    for i, ok in enumerate(valid.tolist()):
        out.append(tuple(everything[bounds[i] : bounds[i + 1]]) if ok else None)
    return out


def _column_values(array: pa.Array) -> list[Any]:
    if array.null_count == len(array):
        return [None] * len(array)
    return array.to_pylist()


def row_index(table: pa.Table) -> dict[str, int]:
    """``{query_id: row}`` of a table (the first row of a query id that appears twice)."""
    ids = table.column("query_id").to_pylist()
    return dict(zip(reversed(ids), range(len(ids) - 1, -1, -1), strict=True))  # the first row written last: kept


def to_mapping(value: str | None) -> Mapping[str, Any]:
    """A hit's metadata cell back as a read-only mapping."""
    return MappingProxyType(json.loads(value)) if value else _EMPTY


# ----- reading whole columns (no Python object per hit) ---------------------------------------------------------
def hits_array(table: pa.Table) -> pa.LargeListArray:
    """The ``hits`` column as one array (chunks combined: list offsets then index one child)."""
    column = table.column("hits")
    if column.num_chunks == 1:
        array: pa.LargeListArray = column.chunk(0)
        return array
    if column.num_chunks == 0:
        empty: pa.LargeListArray = pa.array([], column.type)
        return empty
    combined: pa.LargeListArray = column.combine_chunks()
    return combined


def failed_mask(table: pa.Table) -> np.ndarray:
    """bool per row: the stage failed on the query (its hits are null)."""
    column = table.column("hits")
    if column.null_count == 0:
        return np.zeros(len(table), bool)
    return np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def lengths_of(table: pa.Table) -> np.ndarray:
    """int64 per row: the number of hits (0 for a failed row)."""
    array = hits_array(table)
    offsets = array.offsets.to_numpy()
    lengths = np.diff(offsets).astype(np.int64)
    if array.null_count:
        lengths[np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)] = 0
    return lengths


def flat_hits(table: pa.Table) -> tuple[np.ndarray, pa.StructArray]:
    """``(offsets, hits)``: every non-failed row's hits one after the other (a failed row owns none), with CSR
    offsets per row starting at 0: row ``i`` owns ``hits[offsets[i]:offsets[i + 1]]``."""
    array = hits_array(table)
    lengths = lengths_of(table)
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    raw = array.offsets.to_numpy()
    if array.null_count and (np.diff(raw) != lengths).any():  # a null row owning values: rebuild without them
        valid = pa.array(~np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool))
        array = array.filter(valid)
    flat: pa.StructArray = array.flatten()
    if len(flat) != offsets[-1]:  # pragma: no cover - flatten drops exactly the null rows' values
        raise ValueError("hits table: the list offsets do not match the hits")
    return offsets, flat


def string_buffers(array: pa.Array) -> tuple[np.ndarray, pa.Buffer]:
    """``(starts, data)`` of a large_string array without copying: string ``i`` is ``data[starts[i]:starts[i+1]]``
    with ``starts[0] == 0`` (the array's own slice offset and first offset taken out)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if array.type != pa.large_string():
        array = array.cast(pa.large_string())
    n = len(array)
    buffers = array.buffers()
    if n == 0 or buffers[1] is None:
        return np.zeros(1, np.int64), pa.py_buffer(b"")
    offsets = np.frombuffer(buffers[1], np.int64, n + 1, array.offset * 8)
    first = int(offsets[0])
    data = buffers[2] if buffers[2] is not None else pa.py_buffer(b"")
    if first == 0:  # (a contiguous table's: the offsets themselves, read-only, no copy of 8 bytes a string)
        return offsets, data.slice(0, int(offsets[-1]))
    return offsets - first, data.slice(first, int(offsets[-1]) - first)


def field_or_none(hits: pa.StructArray, name: str) -> pa.Array | None:
    """The hit field ``name`` (None when the table does not hold it)."""
    if hits.type.get_field_index(name) < 0:
        return None
    return hits.field(name)


def lengths_of_list(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """int64 per row: the length of each list of a list column (0 for a null)."""
    import pyarrow.compute as pc

    return np.asarray(pc.fill_null(pc.list_value_length(column), 0).to_numpy(), np.int64)
