"""Writing qrels: the TREC file that labelling and merging produce, replaced whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

from .._files import write_output
from ..data._ids import check_writable
from ..data.qrels import Qrels

__all__ = ["write_qrels"]


def write_qrels(qrels: Qrels, path: str | os.PathLike[str]) -> None:
    """Write TREC qrels (``qid 0 docid grade``) atomically (:func:`rag_eval._files.atomic_write`: a temporary
    file, fsync'd, renamed over ``path``, the folder fsync'd), so that ``path`` is at every moment either the old
    file or the whole new one; a symlink is written through. A failure (a full disk) is an InputError naming the
    file; the file keeps its old content.

    An id that a TREC line cannot give back (empty, holding whitespace, or a query id starting with ``#``: the
    line would be read back as a comment) is an InputError naming it, raised before anything is written: ``path``
    keeps its old content."""
    path = Path(path)
    lines = []
    for q, docs in qrels.judgements.items():
        check_writable([q], "query id", str(path))
        check_writable(docs, f"query {q!r}: doc id", str(path), starts_line=False)
        lines.extend(f"{q} 0 {d} {g}\n" for d, g in docs.items())
    write_output(path, "".join(lines).encode("utf-8"))
