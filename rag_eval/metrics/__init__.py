"""Layer 2, the metrics: one grammar of names (:mod:`.grammar`), what each measures (:mod:`.catalogue`), the
conventions (:mod:`.conventions`), the grade matrix (:mod:`._grades`), and the vectorised kernels (:mod:`._kernels`).
The projection of span and document labels onto ranked chunks is ground truth:
:mod:`rag_eval.ground_truth.projection`."""

from .conventions import PRESETS, Conventions
from .grammar import Metric, parse_metric, parse_metrics

__all__ = [
    "PRESETS",
    "Conventions",
    "Metric",
    "parse_metric",
    "parse_metrics",
]
