"""Deprecated alias of :mod:`rag_eval.builtin` (renamed: ``bench`` was confused with ``benchmarks/``).

``import rag_eval.bench.pipelines`` gives the module ``rag_eval.builtin.pipelines`` itself (one module under two
names: a patch of one is a patch of the other), with a DeprecationWarning.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

__all__: list[str] = []  # as rag_eval.builtin: its modules are its face
_OLD = __name__
_NEW = __name__.rpartition(".")[0] + ".builtin"
__path__: list[str] = []  # a package: its submodules are found by _Alias


def _warn(name: str) -> None:
    # stacklevel 3: past this function and its caller, to the import statement (the import system's frames skipped)
    warnings.warn(f"{name} is deprecated: import {_NEW}{name[len(_OLD) :]}", DeprecationWarning, stacklevel=3)


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``rag_eval.bench.X`` as the module ``rag_eval.builtin.X`` itself."""

    MARK = f"<{_OLD} alias of {_NEW}>"

    def __repr__(self) -> str:
        return self.MARK

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(_OLD + "."):
            return None
        _warn(fullname)
        real = importlib.import_module(_NEW + fullname[len(_OLD) :])
        spec = importlib.machinery.ModuleSpec(fullname, self, is_package=hasattr(real, "__path__"))
        spec.loader_state = (real, real.__spec__)
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module: ModuleType = spec.loader_state[0]
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system gave the module the alias's spec: give it back its own
        alias = module.__spec__
        if alias is not None and alias.loader is self:
            module.__spec__ = alias.loader_state[1]


if not any(repr(finder) == _Alias.MARK for finder in sys.meta_path):  # once, if this module is imported again
    sys.meta_path.insert(0, _Alias())
_warn(_OLD)
