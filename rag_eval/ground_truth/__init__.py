"""Building ground truth (layer 4): pool the systems compared (:mod:`.pooling`), label the pool into a judgement
log (:mod:`.judgement_log`), merge the logs into qrels with the assessors' agreement (:mod:`.merging`), write the
qrels (:mod:`.qrels_writer`); and project labels given on documents and answer spans onto ranked chunks
(:mod:`.projection`); merge near-duplicate queries of a query set and draw a stratified sample of it
(:mod:`.querysets`)."""

from .judgement_log import Judgement, JudgementLog
from .merging import Agreement, Kappa, Merged, cohen_kappa, merge
from .pooling import Pool, PoolItem, pool
from .projection import Projection, ProjectionRules, QueryCounts, project
from .qrels_writer import write_qrels
from .querysets import merge_near_duplicates, sample_queries

__all__ = [
    "Agreement",
    "Judgement",
    "JudgementLog",
    "Kappa",
    "Merged",
    "Pool",
    "PoolItem",
    "Projection",
    "ProjectionRules",
    "QueryCounts",
    "cohen_kappa",
    "merge",
    "merge_near_duplicates",
    "pool",
    "project",
    "sample_queries",
    "write_qrels",
]
