"""Layer 2, the metrics: one grammar of names (:mod:`.grammar`), what each measures (:mod:`.catalogue`), the
conventions (:mod:`.conventions`), the grade matrix (:mod:`.grades`) and the vectorised kernels (:mod:`.kernels`)."""

from .conventions import PRESETS, Conventions
from .grammar import Metric, parse_metric, parse_metrics

__all__ = ["PRESETS", "Conventions", "Metric", "parse_metric", "parse_metrics"]
