"""The metric engine as the floors above use it (docs/metrics.md): a run evaluated under conventions, the account
of the queries counted and left out, grade lookups, the gain and discount kernels of the stage-aware metrics and
the canonical form of an id. Renderers use none of it: they read what the Report holds."""

from __future__ import annotations

from ._engine import REASONS, QueryAccount, evaluate_run
from ._grades import UNJUDGED, lookup_values
from ._id_mismatch import canonical
from ._kernels import discounted, gain_of
from ._kernels_gain import default_max_grade

__all__ = [
    "REASONS",
    "UNJUDGED",
    "QueryAccount",
    "canonical",
    "default_max_grade",
    "discounted",
    "evaluate_run",
    "gain_of",
    "lookup_values",
]
