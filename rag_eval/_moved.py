"""Old import paths of names that moved to another module: a module-level ``__getattr__`` (PEP 562) that warns a
DeprecationWarning naming the new path and returns the name from there (CHANGELOG, 0.10). The modules of the old
paths live in ``rag_eval/_old_paths/PACKAGE/``, which :func:`old_paths` adds to the package's ``__path__``: the
old files are gone from the package's folder, so git follows each move."""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["moved_module", "moved_names", "old_paths"]


def moved_names(
    old: str, names: Mapping[str, str], *, exports: Mapping[str, str] | None = None
) -> Callable[[str], Any]:
    """``__getattr__`` for module ``old`` whose ``names`` (name -> new module) moved away."""
    # exports: the module's own names (name -> its module, relative to ``old``), imported on first use (PEP 562)
    # and then kept in the module, without a warning
    own = dict(exports or {})

    def __getattr__(name: str) -> Any:
        if name in own:
            value = getattr(importlib.import_module(own[name], old), name)
            setattr(sys.modules[old], name, value)
            return value
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


def old_paths(package: str) -> str:
    """The folder of ``package``'s old module paths (``rag_eval.reports`` -> ``rag_eval/_old_paths/reports``), for
    the package's ``__path__``."""
    return os.path.join(os.path.dirname(__file__), "_old_paths", package.rpartition(".")[2])
