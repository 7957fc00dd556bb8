"""Layer 1, the data model: qrels (graded judgements), runs (ranked results, columnar), where inputs came from."""

from .qrels import Qrels
from .run import Run
from .source import Source

__all__ = ["Qrels", "Run", "Source"]
