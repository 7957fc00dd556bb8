"""Layer 4, the reports: ``evaluate``, the Report it returns, the metric card, summaries with spread."""

from .card import MetricCard
from .comparison import Comparison, compare
from .evaluation import DEFAULT_METRICS, evaluate
from .formats import FORMATS, format_comparison, format_report
from .power_analysis import PowerAnalysis, power
from .report import Report
from .trec_eval import format_trec_eval

__all__ = [
    "DEFAULT_METRICS",
    "FORMATS",
    "Comparison",
    "MetricCard",
    "PowerAnalysis",
    "Report",
    "compare",
    "evaluate",
    "format_comparison",
    "format_report",
    "format_trec_eval",
    "power",
]
