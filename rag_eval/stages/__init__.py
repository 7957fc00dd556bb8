"""Layer 3, the stages: hits, retrievers and rerankers, pipelines with a depth and a context budget, fusion,
the runner (concurrency, cache, faults) and its result; model judges (:mod:`.judges`: the protocol a judge of
(query, chunk) pairs keeps). Adapters for frameworks live in ``rag_eval.adapters``.

A :class:`PipelineResult` keeps every stage's output and a frozen :class:`PipelineSpec` of the pipeline that ran
(its printed form, depth, budget and stages, as :class:`StageSpec` records), never the live pipeline and its models.
:func:`from_traces` makes one from recorded OpenInference spans (docs/traces.md).
"""

from typing import TYPE_CHECKING, Any

from ._chunk_refs import chunk_map
from .budget import Budget, count_tokens
from .fingerprint import Fingerprint, Uncacheable
from .fusion import Fusion, fuse
from .hits import Hit
from .judges import BaseJudge, Judge, JudgeGrade, JudgeItem
from .pipeline import Pipeline
from .result import Outcome, PipelineResult, PipelineSpec, StageOutput, StageSpec
from .stage import Reranker, Retriever, Stage

if TYPE_CHECKING:
    from ._cache import StageCache
    from ._executor import Executor
    from ._ray import RayExecutor
    from .traced import from_traces

# names whose modules need pyarrow (or Ray): imported when first used, so that ``import rag_eval`` stays light
_LAZY = {"StageCache": "._cache", "Executor": "._executor", "RayExecutor": "._ray", "from_traces": ".traced"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "BaseJudge",
    "Budget",
    "Executor",
    "Fingerprint",
    "Fusion",
    "Hit",
    "Judge",
    "JudgeGrade",
    "JudgeItem",
    "Outcome",
    "Pipeline",
    "PipelineResult",
    "PipelineSpec",
    "RayExecutor",
    "Reranker",
    "Retriever",
    "Stage",
    "StageCache",
    "StageOutput",
    "StageSpec",
    "Uncacheable",
    "chunk_map",
    "count_tokens",
    "from_traces",
    "fuse",
]
