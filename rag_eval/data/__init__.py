"""Layer 1, the data model: qrels (graded judgements), runs (ranked results, columnar), labels that survive
re-chunking (answer spans, document- and chunk-level labels), where inputs came from."""

from .collection import Chunk, Collection
from .qrels import Qrels
from .run import Run
from .source import Source
from .spans import ChunkRef, Span, SpanLabels

__all__ = ["Chunk", "ChunkRef", "Collection", "Qrels", "Run", "Source", "Span", "SpanLabels"]
