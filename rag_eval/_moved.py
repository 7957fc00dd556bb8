"""Old import paths of names that moved to another module: a module-level ``__getattr__`` (PEP 562) that warns a
DeprecationWarning naming the new path and returns the name from there (CHANGELOG, 0.10)."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["moved_module", "moved_names"]


def moved_names(old: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """``__getattr__`` for module ``old`` whose ``names`` (name -> new module) moved away."""

    def __getattr__(name: str) -> Any:
        new = names.get(name)
        if new is None:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(f"{old}.{name} moved to {new}.{name}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new), name)

    __getattr__.moved = dict(names)  # type: ignore[attr-defined]  # read by tests/test_layers.py
    return __getattr__


def moved_module(old: str, new: str) -> Callable[[str], Any]:
    """``__getattr__`` for module ``old``, which moved whole to ``new``: every name is looked up there."""

    def __getattr__(name: str) -> Any:
        module = importlib.import_module(new)
        if name.startswith("__") or not hasattr(module, name):
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(f"{old}.{name} moved to {new}.{name}", DeprecationWarning, stacklevel=2)
        return getattr(module, name)

    return __getattr__
