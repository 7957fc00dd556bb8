"""rag_eval: stage-aware evaluation of retrieval for RAG, with a metric engine correct to trec_eval's digits.

    >>> import rag_eval
    >>> qrels = rag_eval.Qrels.from_trec("qrels.txt")
    >>> run = rag_eval.Run.from_trec("bm25.trec")
    >>> report = rag_eval.evaluate(qrels, run, ["ndcg@10", "recall@100"])
    >>> report.summary  # mean, std, bootstrap CI per run and metric

Layers, each importing only those below it: ``rag_eval.data`` (qrels, runs, query sets), ``rag_eval.metrics`` (grammar,
conventions, kernels), ``rag_eval.stages`` (pipelines, runner, cache) with ``rag_eval.adapters`` (frameworks),
``rag_eval.reports`` (evaluate, Report, card, stage-aware views) with ``rag_eval.ground_truth`` (pooling,
judgements, model judges' runs and agreement, label order), ``rag_eval.statistics`` (compare, power, judge-assisted
estimates, ranking agreement), ``rag_eval.renderers`` (formats, trec_eval printout, HTML, result folders),
``rag_eval.drivers`` (tune, gate), then ``rag_eval.cli`` and ``rag_eval.labelling`` (faces). ``import rag_eval``
loads no framework and no model.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._version import __version__

# Each public name and the module it lives in: imported on first use (PEP 562), so that ``import rag_eval`` loads
# only what it needs (pydantic, pandas, the stages and the ground-truth tools load where used).
_EXPORTS = {
    "Collection": ".data",
    "Qrels": ".data",
    "QuerySet": ".data",
    "Run": ".data",
    "SpanLabels": ".data",
    "HarnessError": ".errors",
    "InputError": ".errors",
    "RagEvalWarning": ".errors",
    "Pool": ".ground_truth",
    "Projection": ".ground_truth",
    "impact_order": ".ground_truth",
    "judge": ".ground_truth",
    "judge_agreement": ".ground_truth",
    "pool": ".ground_truth",
    "project": ".ground_truth",
    "Conventions": ".metrics",
    "Metric": ".metrics",
    "parse_metric": ".metrics",
    "Comparison": ".statistics",
    "MetricCard": ".reports",
    "PowerAnalysis": ".statistics",
    "Report": ".reports",
    "compare": ".statistics",
    "evaluate": ".reports",
    "format_trec_eval": ".renderers",
    "judge_assisted": ".statistics",
    "power": ".statistics",
    "ppi_interval": ".statistics",
    "GateResult": ".drivers",
    "gate": ".drivers",
    "Space": ".drivers",
    "tune": ".drivers",
    "Hit": ".stages",
    "Pipeline": ".stages",
    "PipelineResult": ".stages",
    "fuse": ".stages",
}

if TYPE_CHECKING:
    from .data import Collection, Qrels, QuerySet, Run, SpanLabels
    from .drivers import GateResult, Space, gate, tune
    from .errors import HarnessError, InputError, RagEvalWarning
    from .ground_truth import Pool, Projection, impact_order, judge, judge_agreement, pool, project
    from .metrics import Conventions, Metric, parse_metric
    from .renderers import format_trec_eval
    from .reports import MetricCard, Report, evaluate
    from .stages import Hit, Pipeline, PipelineResult, fuse
    from .statistics import Comparison, PowerAnalysis, compare, judge_assisted, power, ppi_interval


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (then kept here)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rag_eval' has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "Collection",
    "Comparison",
    "Conventions",
    "GateResult",
    "HarnessError",
    "Hit",
    "InputError",
    "Metric",
    "MetricCard",
    "Pipeline",
    "PipelineResult",
    "Pool",
    "PowerAnalysis",
    "Projection",
    "Qrels",
    "QuerySet",
    "RagEvalWarning",
    "Report",
    "Run",
    "Space",
    "SpanLabels",
    "__version__",
    "compare",
    "evaluate",
    "format_trec_eval",
    "fuse",
    "gate",
    "impact_order",
    "judge",
    "judge_agreement",
    "judge_assisted",
    "parse_metric",
    "pool",
    "power",
    "ppi_interval",
    "project",
    "tune",
]
