"""Layer 4, the reports: ``evaluate``, the Report it returns, the metric card, summaries with spread, and
judge-assisted (prediction-powered) estimates."""

from .card import MetricCard
from .comparison import Comparison, compare
from .evaluation import DEFAULT_METRICS, evaluate
from .formats import FORMATS, format_comparison, format_report
from .power_analysis import PowerAnalysis, power
from .prediction_powered import JudgeAssisted, PPIInterval, human_interval, judge_assisted, judge_interval, ppi_interval
from .report import Report
from .trec_eval import format_trec_eval

__all__ = [
    "DEFAULT_METRICS",
    "FORMATS",
    "Comparison",
    "JudgeAssisted",
    "MetricCard",
    "PPIInterval",
    "PowerAnalysis",
    "Report",
    "compare",
    "evaluate",
    "format_comparison",
    "format_report",
    "format_trec_eval",
    "human_interval",
    "judge_assisted",
    "judge_interval",
    "power",
    "ppi_interval",
]
