"""Layer 3, the stages: hits, retrievers and rerankers, pipelines with a depth and a context budget, fusion,
the runner (concurrency, cache, faults) and its result. Adapters for frameworks live in ``rag_eval.adapters``."""

from .budget import Budget, count_tokens
from ._cache import StageCache
from ._chunk_refs import chunk_map
from .fusion import Fusion, fuse
from .hits import Hit
from .pipeline import Pipeline
from .result import Outcome, PipelineResult, StageOutput
from .stage import Reranker, Retriever, Stage

__all__ = [
    "Budget",
    "Fusion",
    "Hit",
    "Outcome",
    "Pipeline",
    "PipelineResult",
    "Reranker",
    "Retriever",
    "Stage",
    "StageCache",
    "StageOutput",
    "chunk_map",
    "count_tokens",
    "fuse",
]
