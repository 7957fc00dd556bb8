"""rag_eval.adapters: wrap the retrievers and rerankers a user already has as rag_eval stages.

Layer 3 of rag_eval, shipped inside the package as ``rag_eval.adapters`` (this folder is mapped there by
``pyproject.toml``; it is never a top-level ``adapters`` module: imported under any other name, it raises
ImportError). Each framework lives in its own module here,
imported only when used, so ``import rag_eval`` and ``import rag_eval.adapters`` stay free of LangChain,
LlamaIndex and Haystack (each module imports its framework when an adapter is built):

- ``rag_eval.adapters.functions``: plain Python callables, sync or async: ``retriever(fn, name=...)``,
  ``reranker(fn, name=...)``, and with ``batch=True`` functions answering a batch of queries in one call;
- ``rag_eval.adapters.langchain``: LangChain retrievers, vector stores and document compressors:
  ``retriever``, ``reranker``, and ``pipeline`` (unfolds a ``ContextualCompressionRetriever`` or an
  ``EnsembleRetriever`` into stages);
- ``rag_eval.adapters.llamaindex``: LlamaIndex retrievers and node postprocessors: ``retriever``, ``reranker``;
- ``rag_eval.adapters.haystack``: Haystack 3.x retriever and ranker components (``@component``s returning
  ``documents``), alone or inside a Haystack ``Pipeline`` (``component=`` names the one to use as the stage):
  ``retriever``, ``reranker``.

Each module also builds a judge (:mod:`rag_eval.stages.judges`: grades pooled (query, chunk) pairs for
:func:`rag_eval.ground_truth.judging.judge`): ``functions.judge(fn, name=...)``, ``langchain.judge(chat_model)``,
``llamaindex.judge(llm)``; the framework ones ask an UMBRELA-style prompt and read the grade strictly.

    >>> from rag_eval.adapters import functions, langchain, llamaindex
    >>> pipe = rag_eval.stages.Pipeline(langchain.retriever(store, name="dense", with_scores=True),
    ...                                 llamaindex.reranker(postprocessor, name="rerank"), depth=50, budget=5)

Every adapter returns a :class:`rag_eval.stages.Retriever` or :class:`rag_eval.stages.Reranker`: rank is the
order the framework returns, doc ids are read by an explicit rule (never made from the text), rerankers get
copies of what they may write into. The fingerprint (the cache key) covers a function's code and what it reaches,
and a LangChain object's settings and content (a store's texts and vectors), exactly or not at all: an object that
cannot be described exactly (a model, a client) refuses the cache, asking for ``version=``. A Haystack component
is described the same way, the documents of an ``InMemoryDocumentStore`` it reads by content (any other store
asks for ``version=``). LlamaIndex objects are
still described by their settings only (their indexes hold random ids and callback state): give them ``version=``
and change it yourself when the index behind it changes.

The package itself exports no names; its modules are loaded on first attribute access.
"""

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
