"""Layer 2, the metrics: one grammar of names (:mod:`.grammar`), what each measures (:mod:`.catalogue`), the
conventions (:mod:`.conventions`), the grade matrix (:mod:`.grades`), the vectorised kernels (:mod:`.kernels`), and
the projection of span and document labels onto ranked chunks (:mod:`.projection`)."""

from .conventions import PRESETS, Conventions
from .grammar import Metric, parse_metric, parse_metrics
from .projection import Projection, ProjectionRules, project

__all__ = [
    "PRESETS",
    "Conventions",
    "Metric",
    "Projection",
    "ProjectionRules",
    "parse_metric",
    "parse_metrics",
    "project",
]
