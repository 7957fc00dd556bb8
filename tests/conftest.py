"""Shared test helpers: where ../shared is, and what to do when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("RAG_EVAL_SHARED", ROOT.parent / "shared"))
CONFORMANCE = SHARED / "conformance" / "trec_eval"
DATASETS = SHARED / "datasets"


def need_shared(path: Path) -> Path:
    """Return ``path`` under ../shared; skip the test when it is absent, or fail under CI=true."""
    if path.exists():
        return path
    message = f"needs the shared data at {path} (../shared beside the checkout)"
    if os.environ.get("CI") == "true":
        pytest.fail(message + "; CI=true, so its absence is a failure")
    pytest.skip(message)
