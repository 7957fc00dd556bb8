"""Writing qrels: the TREC file that labelling and merging produce, replaced whole or not at all."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..data.qrels import Qrels
from ..errors import InputError

__all__ = ["write_qrels"]


def write_qrels(
    qrels: Qrels | Mapping[str, Mapping[str, int]], path: str | os.PathLike[str], *, format: str = "trec"
) -> None:
    """Write TREC qrels (``qid 0 docid grade``) atomically, through the one TREC qrels writer,
    :meth:`Qrels.to_trec <rag_eval.data.qrels.Qrels.to_trec>` (:func:`rag_eval._files.write_output`: a temporary
    file, fsync'd, renamed over ``path``, the folder fsync'd), so that ``path`` is at every moment either the old
    file or the whole new one; a symlink is written through. A failure (a full disk) is an InputError naming the
    file; the file keeps its old content. ``qrels`` may be a ``{query_id: {doc_id: grade}}`` mapping.

    An id that a TREC line cannot give back (empty, holding whitespace, or a query id starting with ``#``: the
    line would be read back as a comment) is an InputError naming it, raised before anything is written: ``path``
    keeps its old content. ``format="beir"`` writes a BEIR TSV with a header instead (:meth:`Qrels.to_beir`)."""
    if format not in ("trec", "beir"):
        raise InputError(f"qrels format {format!r}: expected 'trec' or 'beir'")
    given = qrels if isinstance(qrels, Qrels) else Qrels.from_dict(qrels)
    (given.to_trec if format == "trec" else given.to_beir)(path)
