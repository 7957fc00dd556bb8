"""Layer 5, the statistics of reports: paired comparisons with tests and intervals (:mod:`.comparison`,
:mod:`.paired`), power and the queries needed (:mod:`.power_analysis`), judge-assisted (prediction-powered) estimates
(:mod:`.prediction_powered`), the agreement of two rankings of systems (:mod:`.rankings`), and retrieval against
answers: which retrieval number predicts them (:mod:`.answer_prediction`), what the context did to them
(:mod:`.answer_conditions`), and how far a judge of answers agrees with their reference-based grade
(:mod:`.grader_agreement`); why relevant items moved between two snapshots (:mod:`.snapshot_drift`). See
docs/power.md, docs/ppi.md, docs/agreement.md, docs/answers-analysis.md and docs/drift.md."""

from .answer_conditions import ConditionEffects, condition_effects
from .answer_prediction import AnswerPrediction, answer_predictors, budget_curve
from .comparison import Comparison, compare
from .grader_agreement import AnswerAgreement, answer_agreement
from .power_analysis import PowerAnalysis, power
from .prediction_powered import JudgeAssisted, PPIInterval, human_interval, judge_assisted, judge_interval, ppi_interval
from .rankings import RankingAgreement, ranking_agreement
from .snapshot_drift import Drift, drift

__all__ = [
    "AnswerAgreement",
    "AnswerPrediction",
    "Comparison",
    "ConditionEffects",
    "Drift",
    "JudgeAssisted",
    "PPIInterval",
    "PowerAnalysis",
    "RankingAgreement",
    "answer_agreement",
    "answer_predictors",
    "budget_curve",
    "compare",
    "condition_effects",
    "drift",
    "human_interval",
    "judge_assisted",
    "judge_interval",
    "power",
    "ppi_interval",
    "ranking_agreement",
]
