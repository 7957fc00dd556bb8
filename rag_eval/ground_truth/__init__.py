"""Building ground truth (layer 4): pool the systems compared, label the pool, merge the judgements into qrels."""

from .judgements import Agreement, Judgement, JudgementLog, Kappa, Merged, cohen_kappa, merge
from .pool import Pool, PoolItem, pool

__all__ = [
    "Agreement", "Judgement", "JudgementLog", "Kappa", "Merged", "Pool", "PoolItem", "cohen_kappa", "merge", "pool",
]
