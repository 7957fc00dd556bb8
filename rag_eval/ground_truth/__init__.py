"""Building ground truth (layer 4): pool the systems compared, label the pool, merge the judgements into qrels."""

from .judgements import Agreement, Judgement, JudgementLog, Kappa, Merged, cohen_kappa, merge
from ..metrics.projection import Projection, ProjectionRules, project  # moves here in issue 14
from .pool import Pool, PoolItem, pool

__all__ = [
    "Agreement",
    "Judgement",
    "JudgementLog",
    "Kappa",
    "Merged",
    "Pool",
    "PoolItem",
    "cohen_kappa",
    "merge",
    "pool",
]
