"""Layer 2, the metrics: every family registered once (:mod:`.catalogue`), one grammar of names (:mod:`.grammar`),
other tools' names read into it (:mod:`.trec_eval_measures`, :mod:`.dialects`), the conventions and the kernels.
See docs/metrics.md."""

# dialects and trec_eval_measures register their readers into the grammar when imported (grammar.register_dialect):
# imported here, before any module of the package is used, so parse_metric(..., dialect=) always finds them
from . import dialects as dialects
from . import trec_eval_measures as trec_eval_measures
from .catalogue import direction, higher_is_better, load_plugins, register, register_parser
from .conventions import PRESETS, Conventions
from .grammar import Metric, parse_metric, parse_metrics

register_parser(parse_metric)  # the catalogue reads names through the grammar, which imports it

__all__ = [
    "PRESETS",
    "Conventions",
    "Metric",
    "direction",
    "higher_is_better",
    "load_plugins",
    "parse_metric",
    "parse_metrics",
    "register",
]
