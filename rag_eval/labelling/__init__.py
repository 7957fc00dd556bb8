"""The labelling page (layer 5): ``rag-eval label POOL --qrels OUT`` serves a local page that shows one query and
one pooled chunk at a time and writes each grade at once to ``OUT.judgements.jsonl`` and ``OUT``.

The server lives in :mod:`rag_eval.labelling.server` (imported on use: ``import rag_eval`` loads no HTTP server);
the page is ``page.html`` beside it, one file with its script and style inline, no external asset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .server import LabellingServer, LabellingSession, log_path_for, serve

__all__ = ["LabellingServer", "LabellingSession", "log_path_for", "serve"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
