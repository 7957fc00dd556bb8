"""The agreement of two rankings of systems: the means under the judge's qrels against people's, Kendall's tau with
five or more systems, the order and significance of each pair with fewer (docs/agreement.md).

**Where it matters** (:func:`ranking_agreement`): the systems (runs, and ``run/stage`` for pipeline reports)
scored on the same queries under human qrels and under the judge's. Voorhees (2000, "Variations in relevance
judgments and the measurement of retrieval effectiveness") found that assessors who disagree on many documents
still rank systems alike (Kendall's tau around 0.9); a judge is judged the same way. With five or more systems:
Kendall's tau (tau-b, ``scipy.stats.kendalltau``) between the two orders of the system means, and whether the top
system is the same; below ``tau_below`` (0.9, Voorhees' mark of an equivalent ranking) a warning. With fewer (too
few for a tau to mean anything): for every two systems, whether their order and the significance of their
difference (a paired test over the queries both reports hold, :mod:`rag_eval.statistics.paired`) agree; a warning
unless every pair agrees.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import check_choice, check_share
from ..errors import InputError, LowAgreement
from ..ground_truth.agreement import LOW_TAU
from ..ground_truth.agreement_text import num, ranking_line, signed
from ..reports.report import Report, is_geometric_metric
from ..reports.summary import MIN_GEO_MEAN
from .paired import TESTS, p_value
from .systems import with_systems

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PAIR_COLUMNS", "RankingAgreement", "ranking_agreement"]

MIN_SYSTEMS_FOR_TAU = 5  # with fewer systems, the pairs' order and significance are compared instead


@dataclass(frozen=True)
class RankingAgreement:
    """What :func:`ranking_agreement` returns: the systems' means under human and under judge qrels on the queries
    both reports hold, and how their orders agree. ``method`` is ``"kendall_tau"`` (five or more systems:
    ``tau``, ``tau_p_value``, ``top_match``) or ``"pairs"`` (fewer: ``pair_share``); :attr:`pairs` is computed
    either way. None where undefined, with the reason in ``reasons``."""

    metric: str
    systems: tuple[str, ...]
    human_means: Mapping[str, float]
    judge_means: Mapping[str, float]
    n_queries: Mapping[str, int]  # per system, the queries both reports hold (NaN values left out)
    method: str
    tau: float | None
    tau_p_value: float | None
    top_human: tuple[str, ...]  # the system(s) with the highest mean under human qrels
    top_judge: tuple[str, ...]
    pair_share: float | None  # share of the pairs of systems whose order and significance agree
    pair_rows: tuple[Mapping[str, Any], ...] = field(repr=False)
    test: str = "t"
    alpha: float = 0.05
    tau_below: float = LOW_TAU
    reasons: Mapping[str, str] = field(default_factory=dict)

    @property
    def top_match(self) -> bool:
        """Whether the best system under the judge's qrels is the best under people's (ties: the same tied set)."""
        return set(self.top_human) == set(self.top_judge)

    @property
    def low(self) -> bool:
        """Whether the judge's qrels rank the systems unlike people's: tau below ``tau_below`` (or undefined) with
        five or more systems; a pair of systems that disagrees (or no pair share) with fewer."""
        if self.method == "kendall_tau":
            return self.tau is None or self.tau < self.tau_below
        return self.pair_share is None or self.pair_share < 1.0

    @property
    def pairs(self) -> pd.DataFrame:
        """One row per two systems: ``system_a, system_b``, then for ``human`` and ``judge`` qrels ``n_*`` (queries
        paired), ``diff_*`` (mean of a minus b), ``p_*`` and ``significant_*`` (p < alpha), and ``order_agrees``,
        ``significance_agrees``, ``agrees`` (both)."""
        import pandas as pd

        return pd.DataFrame(list(self.pair_rows), columns=PAIR_COLUMNS)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "ranking",
            "metric": self.metric,
            "systems": list(self.systems),
            "human_means": dict(self.human_means),
            "judge_means": dict(self.judge_means),
            "n_queries": dict(self.n_queries),
            "method": self.method,
            "tau": self.tau,
            "tau_p_value": self.tau_p_value,
            "top_human": list(self.top_human),
            "top_judge": list(self.top_judge),
            "top_match": self.top_match,
            "pair_share": self.pair_share,
            "pairs": [dict(r) for r in self.pair_rows],
            "test": self.test,
            "alpha": self.alpha,
            "tau_below": self.tau_below,
            "reasons": dict(self.reasons),
            "low": self.low,
        }

    def render(self) -> str:
        lines = [ranking_line(self.to_dict())]
        width = max(len("system"), *(len(s) for s in self.systems))
        lines.append(f"  {'system':<{width}}  human   judge   queries")
        for s in sorted(self.systems, key=lambda s: -self.human_means[s]):
            lines.append(f"  {s:<{width}}  {self.human_means[s]:.4f}  {self.judge_means[s]:.4f}  {self.n_queries[s]}")
        for r in self.pair_rows:
            if not r["agrees"]:
                lines.append(
                    f"  disagree: {r['system_a']} - {r['system_b']}: human {signed(r['diff_human'])} "
                    f"(p {num(r['p_human'])}), judge {signed(r['diff_judge'])} (p {num(r['p_judge'])})"
                )
        lines.extend(f"  {name}: {why}" for name, why in self.reasons.items())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


PAIR_COLUMNS = [
    "system_a",
    "system_b",
    "n_human",
    "diff_human",
    "p_human",
    "significant_human",
    "n_judge",
    "diff_judge",
    "p_judge",
    "significant_judge",
    "order_agrees",
    "significance_agrees",
    "agrees",
]


def ranking_agreement(
    human_report: Report,
    judge_report: Report,
    metric: str,
    *,
    test: str = "t",
    alpha: float = 0.05,
    tau_below: float = LOW_TAU,
    permutations: int = 10000,
    seed: int = 0,
    warn: bool = True,
) -> RankingAgreement:
    """Do the judge's qrels rank the systems as people's do? ``human_report`` and ``judge_report`` are
    :func:`rag_eval.evaluate` of the same runs (pipelines) under human qrels and under the judge's; a system is a
    run, or ``run/stage`` (as in :func:`rag_eval.compare`); both reports must hold the same systems and
    ``metric``. Each system is scored on the queries both reports count for it (a value NaN in either left out);
    for a geometric family (gm_map) its geometric mean, tested on the logs.

    With five or more systems: Kendall's tau-b between the two orders of the means and whether the top system is
    the same (Voorhees 2000); a :class:`~rag_eval.errors.LowAgreement` warning when tau is below ``tau_below``.
    With two to four: for each two systems, the sign of their mean difference and whether a paired ``test``
    (``"t"``, ``"wilcoxon"``, ``"randomization"`` with ``permutations`` and ``seed``; uncorrected, at ``alpha``)
    finds it significant, under each qrels; a warning unless every pair agrees in both."""
    check_choice(test, "test", TESTS)
    alpha = check_share(alpha, "alpha")
    for role, report in (("human_report", human_report), ("judge_report", judge_report)):
        if not isinstance(report, Report):
            raise InputError(f"{role}: expected a rag_eval Report, not {type(report).__name__}")
    name = _metric_name(metric, human_report, judge_report)
    human_values, judge_values = _system_values(human_report, name), _system_values(judge_report, name)
    only_human = sorted(set(human_values) - set(judge_values))
    only_judge = sorted(set(judge_values) - set(human_values))
    if only_human or only_judge:
        raise InputError(
            "the two reports must hold the same systems: "
            + "; ".join(
                f"only in {role}: {names}"
                for role, names in (("human_report", only_human), ("judge_report", only_judge))
                if names
            )
        )
    systems = list(human_values)
    if len(systems) < 2:
        raise InputError(f"ranking agreement needs two systems or more; the reports hold {systems}")
    geometric = is_geometric_metric(name)

    def comparable(values: Mapping[str, float]) -> dict[str, float]:  # logs of a geometric family's floored values
        if not geometric:
            return dict(values)
        return {q: math.log(max(v, MIN_GEO_MEAN)) for q, v in values.items()}

    h_by: dict[str, dict[str, float]] = {}
    j_by: dict[str, dict[str, float]] = {}
    human_means: dict[str, float] = {}
    judge_means: dict[str, float] = {}
    n_queries: dict[str, int] = {}
    for s in systems:
        h, j = comparable(human_values[s]), comparable(judge_values[s])
        common = sorted(set(h) & set(j))
        if not common:
            raise InputError(f"system {s!r}: the two reports share no query with a value of {name!r}")
        h_by[s], j_by[s] = {q: h[q] for q in common}, {q: j[q] for q in common}
        hm = float(np.mean([h[q] for q in common]))
        jm = float(np.mean([j[q] for q in common]))
        human_means[s] = math.exp(hm) if geometric else hm
        judge_means[s] = math.exp(jm) if geometric else jm
        n_queries[s] = len(common)

    rows = []
    for a, b in combinations(systems, 2):
        row: dict[str, Any] = {"system_a": a, "system_b": b}
        for role, by in (("human", h_by), ("judge", j_by)):
            paired = sorted(set(by[a]) & set(by[b]))
            x = np.array([by[a][q] for q in paired], dtype=np.float64)
            y = np.array([by[b][q] for q in paired], dtype=np.float64)
            diff = float(np.mean(x - y)) if len(paired) else math.nan
            with warnings.catch_warnings():  # differences equal but for rounding (0.6 - 0.4, 0.4 - 0.2): p ~ 0
                warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
                p = p_value(test, x, y, permutations=permutations, seed=seed) if len(paired) else math.nan
            row[f"n_{role}"] = len(paired)
            row[f"diff_{role}"] = None if math.isnan(diff) else diff  # None: no query paired
            row[f"p_{role}"] = None if math.isnan(p) else p
            row[f"significant_{role}"] = bool(p < alpha) if not math.isnan(p) else False
        signs = _sign(row["diff_human"]), _sign(row["diff_judge"])
        row["order_agrees"] = None not in signs and signs[0] == signs[1]
        row["significance_agrees"] = row["significant_human"] == row["significant_judge"]
        row["agrees"] = row["order_agrees"] and row["significance_agrees"]
        rows.append({c: row[c] for c in PAIR_COLUMNS})

    reasons: dict[str, str] = {}
    tau = tau_p = None
    method = "kendall_tau" if len(systems) >= MIN_SYSTEMS_FOR_TAU else "pairs"
    if method == "kendall_tau":
        from scipy.stats import kendalltau

        hv = [human_means[s] for s in systems]
        jv = [judge_means[s] for s in systems]
        if len(set(hv)) < 2 or len(set(jv)) < 2:
            reasons["tau"] = "every system has the same mean under one of the qrels: Kendall's tau is undefined"
        else:
            result = kendalltau(hv, jv)
            tau, tau_p = float(result.statistic), float(result.pvalue)
    else:
        reasons["tau"] = (
            f"{len(systems)} systems: too few for Kendall's tau (5 or more); the pairs' order and significance "
            "are compared instead"
        )
    pair_share = sum(r["agrees"] for r in rows) / len(rows)
    result_ = RankingAgreement(
        metric=name,
        systems=tuple(systems),
        human_means=human_means,
        judge_means=judge_means,
        n_queries=n_queries,
        method=method,
        tau=tau,
        tau_p_value=tau_p,
        top_human=_top(human_means),
        top_judge=_top(judge_means),
        pair_share=pair_share,
        pair_rows=tuple(rows),
        test=test,
        alpha=float(alpha),
        tau_below=float(tau_below),
        reasons=reasons,
    )
    if warn and result_.low:
        warnings.warn(
            f"the judge's qrels rank the systems unlike people's on {name}: {ranking_line(result_.to_dict())}; "
            "its qrels should not stand in for people's when comparing these systems",
            LowAgreement,
            stacklevel=2,
        )
    return result_


def _metric_name(metric: str, *reports: Report) -> str:
    """The reported name of ``metric`` (canonical, or as a stage reports it: ``ndcg@budget``), in both reports."""
    from ..metrics.grammar import parse_metric

    for report in reports:
        if metric in report.metrics:
            name = metric
            break
    else:
        try:
            name = str(parse_metric(metric))
        except (ValueError, TypeError) as exc:
            raise InputError(f"metric {metric!r}: {exc}") from None
    for role, report in zip(("human_report", "judge_report"), reports, strict=True):
        if name not in report.metrics:
            raise InputError(f"metric {name!r} is not in {role}; it measures {report.metrics}")
    return name


def _system_values(report: Report, metric: str) -> dict[str, dict[str, float]]:
    """``{system: {query_id: value}}`` of one metric, NaN values left out; a system is a run or ``run/stage``."""
    frame = with_systems(report.per_query)
    frame = frame[frame["metric"] == metric]
    out: dict[str, dict[str, float]] = {}
    for system, q, v in zip(frame["system"], frame["query_id"], frame["value"], strict=True):
        values = out.setdefault(str(system), {})
        if v == v:
            values[str(q)] = float(v)
    return out


def _sign(value: float | None) -> int | None:
    return None if value is None else 0 if value == 0 else (1 if value > 0 else -1)


def _top(means: Mapping[str, float]) -> tuple[str, ...]:
    best = max(means.values())
    return tuple(s for s, v in means.items() if v == best)
