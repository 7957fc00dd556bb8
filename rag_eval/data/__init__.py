"""Layer 1, the data model: qrels (graded judgements), runs (ranked results, columnar), labels that survive
re-chunking (answer spans, document- and chunk-level labels), query sets read from logs, where inputs came from and
who graded a qrels (people or model judges)."""

from .collection import Chunk, Collection
from .graded_by import GradedBy, JudgeShare
from .qrels import Qrels
from .queryset import QueryProvenance, QuerySet, QuerySetCard
from .run import Run
from .source import Source
from .spans import ChunkRef, Span, SpanLabels

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
