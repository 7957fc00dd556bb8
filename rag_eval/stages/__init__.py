"""Layer 3, the stages: hits, retrievers and rerankers, pipelines with a depth and a context budget, fusion,
the runner (concurrency, cache, faults) and its result. Adapters for frameworks live in ``rag_eval.adapters``.

A :class:`PipelineResult` keeps every stage's output and a frozen :class:`PipelineSpec` of the pipeline that ran
(its printed form, depth, budget and stages, as :class:`StageSpec` records), never the live pipeline and its models.
"""

from ._cache import StageCache
from ._chunk_refs import chunk_map
from ._fingerprint import Fingerprint, Uncacheable
from .budget import Budget, count_tokens
from .fusion import Fusion, fuse
from .hits import Hit
from .pipeline import Pipeline
from .result import Outcome, PipelineResult, PipelineSpec, StageOutput, StageSpec
from .stage import Reranker, Retriever, Stage

__all__ = [
    "Budget",
    "Fingerprint",
    "Fusion",
    "Hit",
    "Outcome",
    "Pipeline",
    "PipelineResult",
    "PipelineSpec",
    "Reranker",
    "Retriever",
    "Stage",
    "StageCache",
    "StageOutput",
    "StageSpec",
    "Uncacheable",
    "chunk_map",
    "count_tokens",
    "fuse",
]
