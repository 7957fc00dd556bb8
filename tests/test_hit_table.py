"""The hit table's column readers: offsets, flattened hits and packed strings, whatever the chunks and slices."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rag_eval.stages import Hit
from rag_eval.stages.hit_table import (
    TableBuilder,
    concat,
    contiguous,
    failed_mask,
    field_or_none,
    flat_hits,
    hit_lists,
    lengths_of,
    lengths_of_list,
    schema,
    string_buffers,
)


def _table() -> pa.Table:
    builder = TableBuilder()
    builder.add("q0", "h0", [Hit("a", 1.0), Hit("bb", 0.5, text="t")])
    builder.add("q1", "h1", None, error="boom")
    builder.add("q2", "h2", [])
    builder.add("q3", "h3", [Hit("ccc", None, tokens=4)], beyond_depth=("x", "y"))
    return builder.table()


def test_lengths_failures_and_flat_hits_of_a_table():
    table = _table()
    assert lengths_of(table).tolist() == [2, 0, 0, 1]
    assert failed_mask(table).tolist() == [False, True, False, False]
    offsets, hits = flat_hits(table)
    assert offsets.tolist() == [0, 2, 2, 2, 3]
    assert hits.field("doc_id").to_pylist() == ["a", "bb", "ccc"]
    assert field_or_none(hits, "tokens").to_pylist() == [None, None, 4]
    assert field_or_none(hits, "metadata") is None
    assert lengths_of_list(table.column("beyond_depth")).tolist() == [0, 0, 0, 2]


def test_a_chunked_and_sliced_table_reads_as_one():
    table = _table()
    parts = concat([table.slice(2, 2), table.slice(0, 2)])  # q2, q3, q0, q1 in two chunks with offsets
    assert parts.column("hits").num_chunks == 2
    offsets, hits = flat_hits(parts)
    assert offsets.tolist() == [0, 0, 1, 3, 3]
    assert hits.field("doc_id").to_pylist() == ["ccc", "a", "bb"]
    starts, data = string_buffers(hits.field("doc_id"))
    assert starts.tolist() == [0, 3, 4, 6] and data.to_pybytes() == b"cccabb"
    assert [None if h is None else [x.doc_id for x in h] for h in hit_lists(parts)] == [[], ["ccc"], ["a", "bb"], None]


def test_a_null_row_that_owns_values_owns_none_when_read():
    # Arrow lets a null list slot span values; a table from elsewhere (a file, another writer) may hold one
    struct = pa.StructArray.from_arrays(
        [pa.array(["a", "junk", "b"], pa.large_string()), pa.array([1.0, 2.0, 3.0])], names=["doc_id", "score"]
    )
    hits = pa.LargeListArray.from_arrays(
        pa.array([0, 1, 2, 3], pa.int64()), struct, mask=pa.array([False, True, False])
    )
    n = 3
    empty = pa.array([[]] * n, pa.large_list(pa.large_string()))
    table = pa.Table.from_arrays(
        [
            pa.array(["q0", "q1", "q2"], pa.large_string()),
            pa.array(["", "", ""]),
            hits,
            pa.array([None, "x", None], pa.large_string()),
            pa.array(np.zeros(n)),
            pa.array([False] * n),
            pa.array([False] * n),
            empty,
            empty,
        ],
        schema=schema(()),
    )
    assert lengths_of(table).tolist() == [1, 0, 1]
    offsets, flat = flat_hits(table)
    assert offsets.tolist() == [0, 1, 1, 2]
    assert flat.field("doc_id").to_pylist() == ["a", "b"]


def test_string_buffers_of_a_sliced_array_start_at_zero():
    array = pa.array(["zero", "é", "", "three"], pa.large_string()).slice(1, 3)
    starts, data = string_buffers(array)
    assert starts.tolist() == [0, 2, 2, 7]
    assert data.to_pybytes() == "éthree".encode()
    starts, data = string_buffers(pa.array([], pa.large_string()))
    assert starts.tolist() == [0] and data.to_pybytes() == b""


def _varied_parts() -> list[pa.Table]:
    """Parts as a run leaves them: chunked, sliced (a cache shard's rows), with failed rows, hits without a score,
    and parts that differ in optional fields (text, tokens, metadata)."""
    table = _table()
    builder = TableBuilder()
    builder.add("q4", "h4", [Hit("z", 2.0, metadata={"k": [1, "é"]}), Hit("y", 1.0)])
    builder.add("q5", "h5", None, error="down", skipped=True)
    return [table.slice(2, 2), table.slice(0, 2), builder.table(), concat([table.slice(1, 1), table.slice(3, 1)])]


def test_contiguous_gives_one_chunk_per_column_with_the_same_values():
    parts = _varied_parts()
    expected = concat(list(parts)).combine_chunks()
    combined = contiguous(parts)
    assert parts == []  # taken over: the caller's list no longer holds the parts
    combined.validate(full=True)
    assert all(column.num_chunks == 1 for column in combined.columns)
    assert combined.schema.equals(expected.schema)
    assert combined.to_pylist() == expected.to_pylist()
    assert combined.column("hits").null_count == 3  # the failed rows (q1 twice, q5) stay null
    assert lengths_of(combined).tolist() == lengths_of(expected).tolist() == [0, 1, 2, 0, 2, 0, 0, 1]
    offsets, hits = flat_hits(combined)
    assert offsets.tolist() == [0, 0, 1, 3, 3, 5, 5, 5, 6]
    assert hits.field("score").to_pylist() == [None, 1.0, 0.5, 2.0, 1.0, None]
    starts, data = string_buffers(hits.field("doc_id"))
    assert data.to_pybytes() == b"cccabbzyccc" and starts.tolist() == [0, 3, 4, 6, 7, 8, 11]


def test_contiguous_of_nothing_or_of_one_contiguous_table():
    assert contiguous([]).num_rows == 0
    table = _table()
    assert contiguous([table]) is table  # already one chunk per column: nothing copied


def test_contiguous_lets_go_of_the_parts_it_copied():
    # the parts live in Arrow's pool; the combined table in buffers of its own: once the parts are copied and let
    # go, the pool no longer holds them (what lets a million-query run keep one copy of its hits, not two)
    builder = TableBuilder()
    for q in range(3000):
        builder.add(f"q{q}", "h", [Hit(f"q{q}-{i}", 1.0 / (i + 1)) for i in range(50)])
    whole = builder.table()
    parts = [whole.slice(lo, 500) for lo in range(0, 3000, 500)]
    expected = concat(parts).to_pylist()
    del builder
    held = pa.total_allocated_bytes()
    size = whole.nbytes
    del whole
    combined = contiguous(parts)
    assert held - pa.total_allocated_bytes() > 0.9 * size  # the parts' memory is free again
    assert combined.to_pylist() == expected
