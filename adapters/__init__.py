"""rag_eval.adapters: wrap the retrievers and rerankers a user already has as rag_eval stages.

One module per framework, each imported only when used: ``rag_eval.adapters.functions`` (plain Python callables),
``rag_eval.adapters.langchain`` (LangChain), ``rag_eval.adapters.llamaindex`` (LlamaIndex) and
``rag_eval.adapters.haystack`` (Haystack 3.x). Their rules, and those every adapter shares: ``docs/adapters.md``.
The package itself exports no names; its modules are loaded on first attribute access."""

from __future__ import annotations

import importlib
from typing import Any

if __name__ != "rag_eval.adapters":  # e.g. `import adapters` from the repository root: a second identity
    raise ImportError(
        f"this folder is the package rag_eval.adapters, not {__name__!r}: import rag_eval.adapters instead (under "
        "a second name its modules would define second copies of every class)"
    )

__all__: list[str] = []

_MODULES = ("functions", "haystack", "langchain", "llamaindex")


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULES})
