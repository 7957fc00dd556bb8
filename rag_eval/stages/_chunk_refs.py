"""Where each retrieved chunk comes from, read from the hits' metadata: the chunk map a projection needs.

:func:`chunk_map` reads, for every hit a pipeline returned, its source document id and ``[start, end)`` character
offsets into that document, under the names the adapters and the frameworks' splitters use:

- source document: ``source_doc_id`` (what :mod:`rag_eval.adapters.llamaindex` writes from the node's
  ``ref_doc_id``), ``ref_doc_id``; or the metadata key you name with ``doc_key=`` (a LangChain splitter copies the
  source document's metadata, e.g. ``"source"``, into each chunk);
- start: ``start_char`` (the LlamaIndex adapter, from ``start_char_idx``), ``start_char_idx``, ``start_index``
  (LangChain text splitters with ``add_start_index=True``);
- end: ``end_char`` (from ``end_char_idx``), ``end_char_idx``; else, with a start, ``start + len(hit.text)`` (a
  LangChain splitter records no end).

The first stage's hits are read first, then later stages' for chunks not seen yet (a compressor may shorten a
hit's text, which would shorten ``start + len(text)``): the first reading of a chunk id wins.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..data.spans import ChunkRef
from ..errors import InputError
from .hits import Hit
from .result import PipelineResult, StageOutput

__all__ = ["DOC_KEYS", "END_KEYS", "START_KEYS", "chunk_map"]

DOC_KEYS = ("source_doc_id", "ref_doc_id")
START_KEYS = ("start_char", "start_char_idx", "start_index")
END_KEYS = ("end_char", "end_char_idx")


def chunk_map(
    source: PipelineResult | StageOutput | Mapping[str, Iterable[Hit]] | Iterable[Hit],
    *,
    doc_key: str | None = None,
) -> dict[str, ChunkRef]:
    """``{chunk_id: ChunkRef(doc_id, start, end)}`` for the hits of ``source``: a pipeline result (every stage),
    one stage's output, ``{query_id: hits}`` or hits. ``doc_key``: the metadata key holding the source document
    id, tried before ``source_doc_id`` and ``ref_doc_id``. Hits without a source document id are left out (a
    projection then counts them as unjudged, with a warning); none having one is an :class:`InputError`."""
    keys = ((doc_key,) if doc_key else ()) + DOC_KEYS
    out: dict[str, ChunkRef] = {}
    seen = 0
    for doc_id, text, meta in _hits(source):
        seen += 1
        if doc_id in out or not meta:
            continue
        ref = _ref(doc_id, text, json.loads(meta) if isinstance(meta, str) else meta, keys)
        if ref is not None:
            out[doc_id] = ref
    if seen and not out:
        raise InputError(
            f"no hit carries a source document id in its metadata (looked for {', '.join(map(repr, keys))}); "
            "name the key with doc_key=",
            source="hits",
        )
    return out


# a hit's doc id, text and metadata (from a stage's columns, the metadata's JSON text, parsed when needed)
Read = tuple[str, "str | None", "Mapping[str, Any] | str | None"]


def _hits(source: Any) -> Iterator[Read]:
    if isinstance(source, PipelineResult):
        for out in source.stages.values():
            yield from _hits(out)
    elif isinstance(source, StageOutput):
        yield from _stage_hits(source)
    elif isinstance(source, Mapping):
        for hits in source.values():
            yield from _hits(hits)
    else:
        for hit in source:
            if not isinstance(hit, Hit):
                raise TypeError(f"expected Hits, got {type(hit).__name__}")
            yield hit.doc_id, hit.text, hit.metadata


def _stage_hits(out: StageOutput) -> Iterator[Read]:
    """A stage's hits read from its columns, the metadata as its JSON text (None where a hit has none: it carries
    no source), parsed by :func:`chunk_map` only for a chunk not met yet."""
    from .hit_table import field_or_none

    _, hits = out.hit_columns()
    meta = field_or_none(hits, "metadata")
    if meta is None or meta.null_count == len(meta):
        yield from ((d, None, None) for d in hits.field("doc_id").to_pylist())
        return
    text = field_or_none(hits, "text")
    texts = text.to_pylist() if text is not None else [None] * len(hits)
    yield from zip(hits.field("doc_id").to_pylist(), texts, meta.to_pylist(), strict=True)


def _ref(doc_id: str, text: str | None, meta: Mapping[str, Any], doc_keys: tuple[str, ...]) -> ChunkRef | None:
    doc = next((meta[k] for k in doc_keys if meta.get(k) is not None), None)
    if doc is None:
        return None
    if not isinstance(doc, str):
        doc = str(doc) if isinstance(doc, int) and not isinstance(doc, bool) else doc
    start = next((meta[k] for k in START_KEYS if meta.get(k) is not None), None)
    end = next((meta[k] for k in END_KEYS if meta.get(k) is not None), None)
    if start is not None and end is None and text is not None:
        end = start + len(text) if isinstance(start, int) else None
    if start is None or end is None:
        start = end = None
    try:
        return ChunkRef(doc, start, end)
    except InputError as exc:
        raise InputError(f"hit {doc_id!r}: {exc.problem}", source="hits") from None
