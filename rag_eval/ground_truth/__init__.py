"""Building ground truth (layer 4): pool the systems compared (:mod:`.pooling`), label the pool into a judgement
log (:mod:`.judgement_log`), merge the logs into qrels with the assessors' agreement (:mod:`.merging`), write the
qrels (:mod:`.qrels_writer`); and project labels given on documents and answer spans onto ranked chunks
(:mod:`.projection`); merge near-duplicate queries of a query set and draw a stratified sample of it
(:mod:`.querysets`). With model judges: grade a pool with a judge into a log (:mod:`.judging`), measure the judge's
agreement with people (:mod:`.agreement`; the rankings' agreement is :mod:`rag_eval.statistics`), draw the queries
people grade in full for prediction-powered estimates (:mod:`.human_sample`), and order a pool so that what matters
to the comparison is labelled first (:mod:`.ordering`). With a generator: eRAG's utility labels, each chunk graded by
whether the generator answers from it alone (:mod:`.utility`); any judge as a grader of answers
(:mod:`.answer_judge`)."""

from .._moved import moved_names, old_paths
from .agreement import JudgeAgreement, judge_agreement, log_agreement
from .answer_judge import JudgedAnswers, judge_answers
from .human_sample import HumanSample, check_complete, draw_human_sample
from .judgement_log import Judgement, JudgementLog
from .judging import JudgingRun, judge, load_judge
from .merging import Agreement, Kappa, Merged, cohen_kappa, merge
from .ordering import impact_order, impact_weights, judge_uncertainty
from .pooling import Pool, PoolItem, pool
from .projection import Projection, ProjectionRules, QueryCounts, project
from .qrels_writer import write_qrels
from .querysets import merge_near_duplicates, sample_queries
from .utility import UtilityLabels, utility_labels

__all__ = [
    "Agreement",
    "HumanSample",
    "JudgeAgreement",
    "JudgedAnswers",
    "Judgement",
    "JudgementLog",
    "JudgingRun",
    "Kappa",
    "Merged",
    "Pool",
    "PoolItem",
    "Projection",
    "ProjectionRules",
    "QueryCounts",
    "UtilityLabels",
    "check_complete",
    "cohen_kappa",
    "draw_human_sample",
    "impact_order",
    "impact_weights",
    "judge",
    "judge_agreement",
    "judge_answers",
    "judge_uncertainty",
    "load_judge",
    "log_agreement",
    "merge",
    "merge_near_duplicates",
    "pool",
    "project",
    "sample_queries",
    "utility_labels",
    "write_qrels",
]

# the agreement of rankings moved to rag_eval.statistics: the old path warns (DeprecationWarning)
__getattr__ = moved_names(__name__, dict.fromkeys(["RankingAgreement", "ranking_agreement"], "rag_eval.statistics"))
__path__.append(old_paths(__name__))  # the old module paths (rag_eval/_old_paths): importable, with a warning
