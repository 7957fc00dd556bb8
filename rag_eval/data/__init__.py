"""Layer 1, the data model: qrels (graded judgements), runs (ranked results, columnar), labels that survive
re-chunking (answer spans, document- and chunk-level labels), query sets read from logs, where inputs came from and
who graded a qrels (people or model judges)."""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .collection import Chunk, Collection
    from .graded_by import GradedBy, JudgeShare
    from .qrels import Qrels
    from .queryset import QueryProvenance, QuerySet, QuerySetCard
    from .run import Run
    from .source import Source
    from .spans import ChunkRef, Span, SpanLabels

# each name and its module: imported on first use (PEP 562), so that reading qrels and runs loads no other module
_EXPORTS = {
    "Chunk": ".collection",
    "Collection": ".collection",
    "GradedBy": ".graded_by",
    "JudgeShare": ".graded_by",
    "Qrels": ".qrels",
    "QueryProvenance": ".queryset",
    "QuerySet": ".queryset",
    "QuerySetCard": ".queryset",
    "Run": ".run",
    "Source": ".source",
    "ChunkRef": ".spans",
    "Span": ".spans",
    "SpanLabels": ".spans",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "Chunk",
    "ChunkRef",
    "Collection",
    "GradedBy",
    "JudgeShare",
    "Qrels",
    "QueryProvenance",
    "QuerySet",
    "QuerySetCard",
    "Run",
    "Source",
    "Span",
    "SpanLabels",
]
