"""The optional C twins of rag_eval's per-result loops (``rag_eval._speedups``), or None.

Every caller keeps a pure-Python path with the same results; set ``RAG_EVAL_PURE_PYTHON=1`` to use it even
where the extension is built (the tests run both and compare them).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

speedups: ModuleType | None
if os.environ.get("RAG_EVAL_PURE_PYTHON") == "1":
    speedups = None
else:
    try:
        speedups = importlib.import_module("rag_eval._speedups")
    except ImportError:  # not compiled here (no C compiler at install time)
        speedups = None
