"""The labelling page (layer 8): ``rag-eval label POOL --qrels OUT`` serves a local page that shows one query and
one pooled chunk at a time and writes each grade at once to ``OUT.judgements.jsonl`` and ``OUT``.

What is judged and how each grade reaches the disk is :mod:`rag_eval.labelling.session`; the server and
:func:`serve` are :mod:`rag_eval.labelling.server`, in front of which the HTTP checks live (a private module).
Each is imported on use: ``import rag_eval`` loads no HTTP server. The page is ``page.html`` beside them, one file
with its script and style inline, no external asset.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .server import LabellingServer, serve
    from .session import LabellingSession, RequestError, log_path_for, parse_scale

__all__ = ["LabellingServer", "LabellingSession", "RequestError", "log_path_for", "parse_scale", "serve"]

# name -> the module that holds it, imported on first use
_MODULE_OF = {
    "LabellingServer": "server",
    "LabellingSession": "session",
    "RequestError": "session",
    "log_path_for": "session",
    "parse_scale": "session",
    "serve": "server",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
