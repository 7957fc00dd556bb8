"""Layer 2, the metrics: one grammar of names (:mod:`.grammar`), other tools' names read into it (trec_eval's in
:mod:`.trec_eval_measures`, ir_measures' and ranx's in :mod:`.dialects`), what each measures (:mod:`.catalogue`),
the conventions (:mod:`.conventions`), the grade matrix (:mod:`._grades`), and the vectorised kernels
(:mod:`._kernels`). The projection of span and document labels onto ranked chunks is ground truth:
:mod:`rag_eval.ground_truth.projection`."""

# dialects and trec_eval_measures register their readers into the grammar when imported (grammar.register_dialect):
# imported here, before any module of the package is used, so parse_metric(..., dialect=) always finds them
from . import dialects as dialects
from . import trec_eval_measures as trec_eval_measures
from .catalogue import direction, higher_is_better, register_parser
from .conventions import PRESETS, Conventions
from .grammar import Metric, parse_metric, parse_metrics

register_parser(parse_metric)  # the catalogue reads names through the grammar, which imports it

__all__ = ["PRESETS", "Conventions", "Metric", "direction", "higher_is_better", "parse_metric", "parse_metrics"]
