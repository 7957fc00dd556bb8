"""Layer 4, the reports: ``evaluate``, the Report it returns, the metric card, summaries with spread."""

from .card import MetricCard
from .evaluate import DEFAULT_METRICS, evaluate
from .report import Report

__all__ = ["DEFAULT_METRICS", "MetricCard", "Report", "evaluate"]
