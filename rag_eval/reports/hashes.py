"""Content hashes: what a report's numbers were computed on, so that two reports are only compared when they agree.

A :class:`ContentHashes` (on the metric card and in a result folder's manifest) holds SHA-256 hashes of the qrels,
the query set, the corpus and the conventions, and the budget: ``docs/result-folders.md``, "Content hashes".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..data.collection import Collection
from ..data.qrels import Qrels
from ..metrics.conventions import Conventions

if TYPE_CHECKING:
    from ..stages.result import PipelineResult
    from .card import ContentHashes  # a pydantic model: imported where one is made (start-up, issue 28)

__all__ = [
    "ContentHashes",
    "content_hash_fields",
    "content_hashes",
    "conventions_sha256",
    "corpus_sha256",
    "merged_hashes",
    "qrels_sha256",
    "queries_sha256",
]

FIELDS = ("qrels", "queries", "corpus", "conventions", "budget")  # what comparable() compares


def __getattr__(name: str) -> Any:
    """``ContentHashes``, where it was defined before (now :mod:`rag_eval.reports.card`, with pydantic)."""
    if name == "ContentHashes":
        from .card import ContentHashes

        return ContentHashes
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _digest(lines: Iterable[list[Any]], kind: str) -> str:
    """SHA-256 of a header naming ``kind`` and one compact JSON array per line (UTF-8; no ambiguity between
    fields, since each is a JSON string or number)."""
    sha = hashlib.sha256(f"rag_eval {kind} v1\n".encode())
    for line in lines:
        sha.update(json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        sha.update(b"\n")
    return sha.hexdigest()


_BLOCK = 1 << 18  # lines made and hashed at a time: the transient strings stay a few tens of MB


def _digest_columns(columns: list[Any], kind: str, order: Any = None, *, distinct: bool = False) -> str:
    """:func:`_digest` of the lines whose fields are ``columns`` (Arrow arrays of strs or ints, one value per
    line; a null in the last column leaves that field out of its line), the same value, without one Python
    object per line: the lines are made by Arrow string kernels, a block of lines at a time, and hashed block
    after block (the same bytes in the same order). A str that JSON must escape (a quote, a backslash, a control
    character) has its line made by :func:`json.dumps`. ``order`` (indices into the columns): hash the lines in
    that order, taken a block at a time (no reordered copy of the columns). A column None: all nulls.
    ``distinct``: a line equal to the one before it (in that order) is left out, so sorted lines hash as their
    distinct lines."""
    import pyarrow as pa

    sha = hashlib.sha256(f"rag_eval {kind} v1\n".encode())
    last: list[Any] = []
    if isinstance(columns[0], _SortedRuns):  # the ids alone, merged from runs sorted one at a time
        first = True
        for block in columns[0].blocks(_BLOCK):
            ids = _new_lines([block], None if first else last)
            last, first = [block.slice(len(block) - 1)], False
            _hash_lines(sha, [ids[0], pa.nulls(len(ids[0]), pa.large_string())])
        return sha.hexdigest()
    n = len(next(c for c in columns if c is not None)) if order is None else len(order)
    for start in range(0, n, _BLOCK):
        if order is None:
            block = [c.slice(start, _BLOCK) if c is not None else c for c in columns]
        else:
            rows = order.slice(start, _BLOCK)
            block = [_take(c, rows) if c is not None else c for c in columns]
        size = min(_BLOCK, n - start)
        block = [c if c is not None else pa.nulls(size, pa.large_string()) for c in block]
        block = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in block]
        if distinct:
            block, last = _new_lines(block, last if start else None), [c.slice(size - 1) for c in block]
        _hash_lines(sha, block)
        del block
    return sha.hexdigest()


def _take(column: Any, rows: Any) -> Any:
    """``column.take(rows)`` without concatenating a chunked array's chunks (which ``take`` does: a copy of the
    whole column per call): each chunk gives its own rows, put back in the order asked."""
    import pyarrow as pa

    if not isinstance(column, pa.ChunkedArray) or column.num_chunks <= 1:
        return column.take(rows) if not isinstance(column, pa.ChunkedArray) else column.combine_chunks().take(rows)
    bounds = np.cumsum([0] + [len(c) for c in column.chunks])
    wanted = np.asarray(rows.to_numpy(), np.int64)
    which = np.searchsorted(bounds, wanted, side="right") - 1
    by_chunk = np.argsort(which, kind="stable")
    parts = []
    for k, chunk in enumerate(column.chunks):
        picked = by_chunk[which[by_chunk] == k]
        if len(picked):
            parts.append(chunk.take(pa.array(wanted[picked] - bounds[k])))
    gathered = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
    back = np.empty(len(wanted), np.int64)
    back[by_chunk] = np.arange(len(wanted))
    return gathered.take(pa.array(back))


def _new_lines(columns: list[Any], before: list[Any] | None) -> list[Any]:
    """The rows of ``columns`` that differ from the row before them (``before``: the row before the first, one
    value per column; None: the first row is new). Two nulls are equal."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if before is not None:
        columns_ = [pa.concat_arrays([b, c]) for b, c in zip(before, columns, strict=True)]
    else:
        columns_ = columns
    n = len(columns_[0])
    same = pa.array(np.ones(n - 1, bool))
    for c in columns_:
        head, tail = c.slice(1), c.slice(0, n - 1)
        equal = pc.fill_null(pc.equal(head, tail), False)
        if c.null_count:
            equal = pc.or_(equal, pc.and_(pc.is_null(head), pc.is_null(tail)))
        same = pc.and_(same, equal)
    keep = np.ones(len(columns[0]), bool)
    flags = ~np.asarray(same.to_numpy(zero_copy_only=False), bool)
    if before is not None:
        keep[:] = flags
    else:
        keep[1:] = flags
    if keep.all():
        return columns
    mask = pa.array(keep)
    return [c.filter(mask) for c in columns]


def _hash_lines(sha: Any, columns: list[Any]) -> None:
    """Feed ``sha`` the lines of ``columns`` (see :func:`_digest_columns`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(columns[0])

    def lit(text: str) -> Any:
        return pa.scalar(text, pa.large_string())

    if n == 0:
        return
    fields = []
    odd = pa.array(np.zeros(n, bool))
    for column in columns:
        if pa.types.is_integer(column.type):
            fields.append(pc.cast(column, pa.large_string()))
            continue
        column = column.cast(pa.large_string())
        fields.append(pc.binary_join_element_wise(lit('"'), column, lit('"'), lit("")))
        odd = pc.or_(odd, pa.array(_escaped(column)))
    parts: list[Any] = [lit("[")]
    for i, f in enumerate(fields):
        parts.extend([f, lit("," if i < len(fields) - 1 else "]\n")])
    lines = pc.binary_join_element_wise(*parts, lit(""))
    if len(fields) > 1 and columns[-1].null_count:
        shorter: list[Any] = [lit("[")]
        for i, f in enumerate(fields[:-1]):
            shorter.extend([f, lit("," if i < len(fields) - 2 else "]\n")])
        lines = pc.coalesce(lines, pc.binary_join_element_wise(*shorter, lit("")))
    del fields, parts
    if pc.any(odd).as_py():
        rows = np.flatnonzero(np.asarray(odd.to_numpy(zero_copy_only=False), bool))
        values = [c.take(pa.array(rows)).to_pylist() for c in columns]
        exact = [
            json.dumps(
                [v for v in row if v is not None] if row[-1] is None else list(row),
                ensure_ascii=False,
                separators=(",", ":"),
            )
            + "\n"
            for row in zip(*values, strict=True)
        ]
        lines = pc.replace_with_mask(lines, odd, pa.array(exact, pa.large_string()))
    lines = lines.cast(pa.large_string())
    offsets = np.frombuffer(lines.buffers()[1], np.int64, n + 1, lines.offset * 8)
    data = lines.buffers()[2]
    sha.update(memoryview(data)[int(offsets[0]) : int(offsets[-1])])


def _escaped(column: Any) -> npt.NDArray[np.bool_]:
    """bool per str of a large_string array: it holds a byte JSON escapes (a quote, a backslash, a control
    character), found by one NumPy pass over the bytes (none, the common case, is known at once)."""
    from ..stages.hit_table import string_buffers

    starts, data = string_buffers(column)
    raw = np.frombuffer(data, np.uint8)
    bad = np.flatnonzero((raw < 0x20) | (raw == 0x22) | (raw == 0x5C))
    out = np.zeros(len(column), bool)
    if len(bad):
        out[np.searchsorted(starts, bad, side="right") - 1] = True
    return out


def qrels_sha256(qrels: Qrels | Mapping[str, Mapping[str, int]]) -> str:
    """The SHA-256 of the judgements in canonical form (sorted; independent of input order and format), made on
    whole columns (Arrow sorts the ids) and kept with the qrels, which cannot change."""
    if not isinstance(qrels, Qrels):
        qrels = Qrels.from_dict(qrels)  # the same checks as every reader: a bad grade is an InputError
    return qrels._derived("content_sha256", lambda: _qrels_digest(qrels))


def _qrels_digest(qrels: Qrels) -> str:
    query_ids, offsets, grades = qrels.columns
    queries = np.array(query_ids, dtype=object) if query_ids else np.empty(0, object)
    by_query = _sorted_within(queries, np.array([0, len(queries)], np.int64))
    within = _sorted_within(qrels.doc_column, offsets)  # each query's doc ids in order
    lengths = np.diff(offsets)[by_query]
    starts = offsets[:-1][by_query]
    order = within[np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))]
    owner = np.repeat(np.arange(len(query_ids)), np.diff(offsets))
    columns = [queries[owner], qrels.doc_column, grades]
    return _digest_lists(columns, "qrels", order)  # as sorted() orders the queries, then each one's docs


def _sorted_within(ids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The permutation that sorts each segment ``ids[offsets[i]:offsets[i+1]]`` of strs by code point (in C, or
    with one sort of every id and a lexsort)."""
    from .. import _accel

    if _accel.speedups is not None:
        perm: np.ndarray = _accel.speedups.sort_within(ids, offsets)
        return perm
    rank = np.empty(len(ids), np.int64)
    rank[np.argsort(ids, kind="stable")] = np.arange(len(ids))
    owner = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    return np.lexsort((rank, owner))


def _digest_lists(columns: list[np.ndarray], kind: str, order: np.ndarray | None = None) -> str:
    """:func:`_digest` of the lines whose fields are ``columns`` (object arrays of strs, or int arrays), made a
    block at a time by one ``str.join`` over the fields and the JSON around them (no Python call per line); a
    block holding a str that JSON escapes (a quote, a backslash, a control character: found in its UTF-8 bytes) is
    made line by line with :func:`json.dumps`. In C (``_speedups.json_lines``) where it is built. ``order``: the
    rows in that order."""
    from .. import _accel

    sha = hashlib.sha256(f"rag_eval {kind} v1\n".encode())
    texts = [c.dtype == object for c in columns]
    quotes = 2 * sum(texts)
    n = len(columns[0])
    native = _accel.speedups.json_lines if _accel.speedups is not None else None
    every = tuple(np.ascontiguousarray(c, object if t else np.int64) for c, t in zip(columns, texts, strict=True))
    for start in range(0, n, _BLOCK):
        rows = (
            np.arange(start, min(n, start + _BLOCK), dtype=np.int64) if order is None else order[start : start + _BLOCK]
        )
        lines = native(every, np.ascontiguousarray(rows, np.int64)) if native else None
        if lines is not None:  # the lines made in C (None: a str JSON escapes, written below)
            sha.update(lines)
            continue
        block = [c[rows] for c in columns]
        size = len(block[0])
        pieces = np.empty((size, 2 * len(columns) + 1), dtype=object)
        for j, (column, text) in enumerate(zip(block, texts, strict=True)):
            before = "[" if j == 0 else ('"' if texts[j - 1] else "") + ","  # closes the field before
            pieces[:, 2 * j] = before + ('"' if text else "")
            pieces[:, 2 * j + 1] = column if text else np.array(list(map(str, column.tolist())), dtype=object)
        pieces[:, -1] = ('"' if texts[-1] else "") + "]\n"
        data = "".join(pieces.ravel().tolist()).encode("utf-8")
        raw = np.frombuffer(data, np.uint8)
        if (
            np.count_nonzero(raw < 0x20) != size
            or np.count_nonzero(raw == 0x0A) != size
            or np.count_nonzero(raw == 0x22) != quotes * size
            or np.count_nonzero(raw == 0x5C)
        ):
            lines = zip(*(c.tolist() for c in block), strict=True)
            data = "".join(
                json.dumps(list(r), ensure_ascii=False, separators=(",", ":")) + "\n" for r in lines
            ).encode()
        sha.update(data)
    return sha.hexdigest()


def queries_sha256(queries: Mapping[str, str] | Iterable[str]) -> tuple[str, str]:
    """``(sha256, basis)`` of a query set: ``{id: text}`` (basis ``"ids and texts"``) or ids alone (``"ids"``)."""
    if isinstance(queries, Mapping):
        import pyarrow as pa

        pairs = sorted((str(q), str(t)) for q, t in queries.items())
        columns = [
            pa.array([q for q, _ in pairs], pa.large_string()),
            pa.array([t for _, t in pairs], pa.large_string()),
        ]
        return _digest_columns(columns, "queries"), "ids and texts"
    ids = sorted(set(map(str, queries)))
    return _digest_lists([np.array(ids, dtype=object) if ids else np.empty(0, object)], "query ids"), "ids"


def corpus_sha256(source: Collection | PipelineResult | Mapping[str, PipelineResult]) -> tuple[str, str]:
    """``(fingerprint, basis)`` of the chunks: a Collection's whole corpus (``"collection"``), or the distinct
    chunks (id, text) that the stages of one or more pipeline results returned (``"hits"``)."""
    if isinstance(source, Collection):
        corpus = source.corpus
        return _digest(([i, corpus[i].content] for i in sorted(corpus)), "corpus"), "collection"
    results = [source] if not isinstance(source, Mapping) else list(source.values())
    columns, order = _chunks(results)
    return _digest_columns(columns, "chunks", order, distinct=True), "hits"


def _chunks(results: list[PipelineResult]) -> tuple[list[Any], Any]:
    """``([ids, texts], order)``: every hit's ``(id, text)`` (a text null where the hit had none; ``texts`` None
    when no hit had a text), as chunked arrays over the stages' columns read in place, and the order that sorts
    them by id, then text (None first): Arrow compares UTF-8 bytes, which orders as Python orders strs (by code
    point). :func:`_digest_columns` (``distinct=True``) walks that order a block at a time and hashes each
    distinct chunk once: the sorted distinct chunks, as a hash aggregation then a sort gives them, without its
    hash table (~50 bytes per distinct id) and without a copy of every id (the order costs 8 bytes per hit)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..stages.hit_table import field_or_none

    docs: list[Any] = []
    texts: list[Any] = []
    for result in results:
        for out in result.stages.values():
            _, hits = out.hit_columns()
            docs.append(hits.field("doc_id").cast(pa.large_string()))
            texts.append(field_or_none(hits, "text"))
    if all(t is None for t in texts):
        return [_SortedRuns(docs), None], None
    ids = pa.chunked_array(docs, pa.large_string())
    text = pa.chunked_array(
        [
            t.cast(pa.large_string()) if t is not None else pa.nulls(len(d), pa.large_string())
            for d, t in zip(docs, texts, strict=True)
        ],
        pa.large_string(),
    )
    # a null text sorts first, then the texts: as (id, text is not None, text or "") sorts
    keys = [("id", "ascending", "at_start"), ("text", "ascending", "at_start")]
    order = pc.sort_indices(pa.table({"id": ids, "text": text}), sort_keys=keys)
    return [ids, text], _narrow(order)


_RUN = 1 << 24  # ids sorted at a time by _SortedRuns: the sort's own int64 order is 128 MB at most


class _SortedRuns:
    """Every id of several arrays in sorted order, a block at a time: each array is sorted alone, in runs of at
    most :data:`_RUN` ids (each run's order held as uint32: 4 bytes per id, and the sort's transient int64 order
    of one run, not of a stage's every hit, nor the 16 bytes per id a sort over all of them at once takes), and the
    sorted runs are merged."""

    def __init__(self, arrays: list[Any]) -> None:
        import pyarrow.compute as pc

        self.arrays = [a.slice(lo, _RUN) for a in arrays for lo in range(0, len(a), _RUN)]
        self.orders = [_narrow(pc.sort_indices(a)) for a in self.arrays]

    def __len__(self) -> int:
        return sum(len(a) for a in self.arrays)

    def blocks(self, size: int) -> Any:
        """Sorted blocks of ids (each id as often as it occurs), together every id in sorted order."""
        import pyarrow as pa
        import pyarrow.compute as pc

        at = [0] * len(self.arrays)
        while True:
            live = [k for k in range(len(self.arrays)) if at[k] < len(self.arrays[k])]
            if not live:
                return
            heads = {k: self.arrays[k].take(self.orders[k].slice(at[k], size)) for k in live}
            if len(live) == 1:
                (k,) = live
                at[k] += len(heads[k])
                yield heads[k]
                continue
            # what every run has reached: the smallest of the heads' last ids (str order is UTF-8 byte order)
            cut = min((heads[k][len(heads[k]) - 1] for k in live), key=lambda v: v.as_py().encode("utf-8"))
            parts = []
            for k in live:
                n = int(pc.sum(pc.less_equal(heads[k], cut)).as_py() or 0)
                at[k] += n
                if n:
                    parts.append(heads[k].slice(0, n))
            merged = pa.concat_arrays(parts)
            yield merged.take(pc.sort_indices(merged))


def _narrow(order: Any) -> Any:
    """Sort indices as uint32 where they fit (half the memory they hold while the chunks are hashed)."""
    import pyarrow as pa

    return order.cast(pa.uint32()) if len(order) < 2**32 else order


def conventions_sha256(conventions: Conventions) -> str:
    """The SHA-256 of the conventions' canonical JSON (sorted keys, compact)."""
    text = json.dumps(conventions.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"rag_eval conventions v1\n{text}".encode()).hexdigest()


def content_hashes(
    qrels: Qrels | Mapping[str, Mapping[str, int]],
    *,
    conventions: Conventions,
    results: Mapping[str, PipelineResult] | None = None,
    collection: Collection | None = None,
) -> ContentHashes:
    """The hashes of one evaluation: its qrels and conventions, and for pipelines (``results``) their queries (ids
    and texts), chunks and budget; ``collection`` fingerprints the whole corpus (and its queries) instead."""
    from .card import ContentHashes

    return ContentHashes(**content_hash_fields(qrels, conventions=conventions, results=results, collection=collection))


def content_hash_fields(
    qrels: Qrels | Mapping[str, Mapping[str, int]],
    *,
    conventions: Conventions,
    results: Mapping[str, PipelineResult] | None = None,
    collection: Collection | None = None,
) -> dict[str, str | None]:
    """:func:`content_hashes`' fields, as a dict (without pydantic)."""
    queries: tuple[str, str]
    corpus: tuple[str, str] | tuple[None, None] = (None, None)
    budget = None
    if collection is not None:
        queries = queries_sha256(collection.queries)
        corpus = corpus_sha256(collection)
    elif results:
        asked: dict[str, str] = {}
        for result in results.values():
            asked.update(result.queries)
        queries = queries_sha256(asked)
        corpus = corpus_sha256(results)
    else:
        queries = queries_sha256(qrels.query_ids if isinstance(qrels, Qrels) else list(qrels))
    if results:
        budget = ", ".join(dict.fromkeys(str(r.pipeline.budget) for r in results.values()))
    return {
        "qrels": qrels_sha256(qrels),
        "queries": queries[0],
        "queries_basis": queries[1],
        "corpus": corpus[0],
        "corpus_basis": corpus[1],
        "conventions": conventions_sha256(conventions),
        "budget": budget,
    }


def merged_hashes(named: Mapping[str, ContentHashes | None]) -> ContentHashes | None:
    """The hashes of a report merged from reports of one run each, every run measured against qrels of its own (the
    projections of span labels): ``qrels`` and ``queries`` hash the sorted ``[run, hash]`` pairs, so that they
    change when any run's qrels do; the conventions and budget are the runs' (None where they differ)."""
    from .card import ContentHashes

    if not named or any(h is None for h in named.values()):
        return None
    every = {name: h for name, h in named.items() if h is not None}

    def pairs(field: str) -> str:
        return _digest(([name, getattr(every[name], field)] for name in sorted(every)), f"per-run {field}")

    def shared(field: str) -> str | None:
        values = {getattr(h, field) for h in every.values()}
        return values.pop() if len(values) == 1 else None

    return ContentHashes(
        qrels=pairs("qrels"),
        queries=pairs("queries"),
        queries_basis="per run: " + (shared("queries_basis") or "mixed"),
        corpus=shared("corpus"),
        corpus_basis=shared("corpus_basis"),
        conventions=shared("conventions"),
        budget=shared("budget"),
    )
