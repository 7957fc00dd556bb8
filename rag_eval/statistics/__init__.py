"""Layer 5, the statistics of reports: paired comparisons with tests and intervals (:mod:`.comparison`,
:mod:`.paired`), power and the queries needed (:mod:`.power_analysis`), judge-assisted (prediction-powered) estimates
(:mod:`.prediction_powered`) and the agreement of two rankings of systems (:mod:`.rankings`).
See docs/power.md, docs/ppi.md and docs/agreement.md."""

from .comparison import Comparison, compare
from .power_analysis import PowerAnalysis, power
from .prediction_powered import JudgeAssisted, PPIInterval, human_interval, judge_assisted, judge_interval, ppi_interval
from .rankings import RankingAgreement, ranking_agreement

__all__ = [
    "Comparison",
    "JudgeAssisted",
    "PPIInterval",
    "PowerAnalysis",
    "RankingAgreement",
    "compare",
    "human_interval",
    "judge_assisted",
    "judge_interval",
    "power",
    "ppi_interval",
    "ranking_agreement",
]
