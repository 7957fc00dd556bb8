"""Layer 4, the reports: ``evaluate``, the Report it returns, the metric card and summaries with spread
(docs/metrics.md). Statistics are :mod:`rag_eval.statistics`, renderers :mod:`rag_eval.renderers`."""

from typing import TYPE_CHECKING

from .._moved import moved_names, old_paths

if TYPE_CHECKING:
    from .card import MetricCard
    from .evaluation import DEFAULT_METRICS, evaluate
    from .report import Report

__all__ = ["DEFAULT_METRICS", "MetricCard", "Report", "evaluate"]

# this face's names, imported on first use (so that importing one module of the package loads only what it needs);
# names that moved to rag_eval.statistics and rag_eval.renderers: the old path warns (DeprecationWarning)
__getattr__ = moved_names(
    __name__,
    {
        **dict.fromkeys(
            ["Comparison", "compare", "PowerAnalysis", "power", "JudgeAssisted", "PPIInterval", "human_interval"],
            "rag_eval.statistics",
        ),
        **dict.fromkeys(["judge_assisted", "judge_interval", "ppi_interval"], "rag_eval.statistics"),
        **dict.fromkeys(["FORMATS", "format_comparison", "format_report", "format_trec_eval"], "rag_eval.renderers"),
    },
    exports={"DEFAULT_METRICS": ".evaluation", "evaluate": ".evaluation", "MetricCard": ".card", "Report": ".report"},
)
__path__.append(old_paths(__name__))  # the old module paths (rag_eval/_old_paths): importable, with a warning


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
