"""What ``trec_eval [-q] -m ...`` prints, digit for digit (layer 4, reports).

Each line is the measure's name padded to 22, a tab, the query id (or ``all``), a tab, and the value (``%6.4f``;
the counts num_ret, num_rel and num_rel_ret as integers). Lines come in trec_eval's order: with ``per_query``,
each query (in string order) with its measures; then ``runid``, ``num_q`` and the ``all`` lines. Measures are in
trec_eval's measure table order (num_ret, num_rel, num_rel_ret, map, Rprec, bpref, recip_rank, P, recall, ndcg,
ndcg_cut, map_cut, success), cutoffs ascending within one measure, as trec_eval prints them; metrics trec_eval
does not have (judged@k, ``P(rel=2)@5``, ...) follow, in the order requested. So ``diff`` against trec_eval's own
output is empty.

Under conventions that follow trec_eval (:func:`follows_trec_eval`: the ``trec_eval`` preset, with any of its
``-c``, ``-M``, ``-l`` and ``-J`` flags), the ``all`` lines are accumulated as trec_eval 10.0 does it
(``trec_eval.c``, ``meas_acc.c``, ``meas_avg.c``, ``m_num_rel.c``, ``m_runid.c``):

- a mean is the per-query values added one by one, in query order, in double precision, then divided by the
  number of queries (``te_acc_meas_s`` then ``te_calc_avg_meas_s``): :func:`trec_eval_mean`. A more exact sum can
  print another fourth decimal (P_20 over 1,000 queries: exactly 0.30105, which trec_eval prints 0.3011);
- with ``-c`` (``missing_run="zero"``), the ``all`` line of num_rel counts every judgement of grade > 0 in the
  qrels, whatever ``-l`` says: ``te_calc_avg_num_rel`` replaces the sum of the per-query values by a count over
  the qrels file (to include queries the run has no results for, from before ``-c`` evaluated them), and that
  count tests ``rel > 0``, not ``rel >= relevance_level``. With ``-l 1`` (the default) both are the same;
- ``runid`` is the tag on the run file's last line (``Run.tag``): trec_eval keeps the tag of each line it reads,
  so the last one wins.

Under any other conventions, the ``all`` line of a mean is the summary's mean (``Report.summary``'s ``mean``),
so a table and this format show one number. A NaN value (a 0/0 metric such as judged@k of an empty
ranking; no trec_eval measure is ever NaN here) prints ``nan`` on its query's line and is left out of the mean,
as in the summary, whose ``n_nan`` counts it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from ..data.qrels import Qrels
from ..data.run import Run
from ..metrics.conventions import TREC_EVAL_FLAGS, follows_trec_eval
from ..metrics.grammar import Metric, parse_metric
from .report import Report

__all__ = ["TREC_EVAL_FLAGS", "TrecEvalLine", "follows_trec_eval", "format_trec_eval", "trec_eval_lines", "trec_eval_mean"]

# trec_eval's measure table (measures.c), for the measures rag_eval has: the order trec_eval prints them in
_TABLE_ORDER = ["num_ret", "num_rel", "num_rel_ret", "map", "Rprec", "bpref", "recip_rank", "P", "recall", "ndcg",
                "ndcg_cut", "map_cut", "success"]


def trec_eval_mean(values: np.ndarray) -> float:
    """trec_eval's mean: the values added one by one in the order given, in double precision, divided by their
    number (0.0 for none). Not the most exact mean: the one trec_eval prints."""
    total = 0.0
    for v in np.asarray(values, dtype=np.float64).tolist():
        total += v
    return total / len(values) if len(values) else 0.0


class TrecEvalLine(NamedTuple):
    """One line of trec_eval's printout, before printing: ``value`` is a float (a count for the summed
    measures), or a str for ``runid`` and an int for ``num_q``."""

    run: str
    measure: str  # the name trec_eval prints
    query_id: str  # or "all"
    value: float | int | str
    summed: bool = False  # printed as an integer


def trec_eval_lines(
    report: Report, *, qrels: Qrels | None = None, runs: Mapping[str, Run] | None = None, per_query: bool = False,
) -> list[TrecEvalLine]:
    """The lines :func:`format_trec_eval` prints, with their values at full precision, in the same order."""
    if report.staged:
        raise ValueError("trec_eval's format has no pipeline stages: evaluate runs, or use another format")
    conventions = report.card.conventions
    trec = follows_trec_eval(conventions)
    metrics = [parse_metric(m) for m in report.metrics]
    names = {m: _trec_name(m, conventions.gain) for m in metrics}
    metrics = _in_trec_eval_order(metrics, names)
    judged_relevant = None
    if trec and conventions.missing_run == "zero" and any(_is_plain(m, "num_rel") for m in metrics):
        if qrels is None:
            raise ValueError("num_rel's 'all' line under trec_eval's -c counts the qrels: pass qrels=")
        judged_relevant = float((qrels.columns[2] > 0).sum())
    means: dict[tuple[str, str], float] = {}
    if not trec:  # the summary's mean, so that a table and this format print one number
        summary = report.summarize(resamples=1)
        means = {(r, m): float(v) for r, m, v in zip(summary["run"], summary["metric"], summary["mean"])}
    lines: list[TrecEvalLine] = []
    for name in report.runs:
        values = {m: report.values(name, m).to_numpy() for m in metrics}
        if per_query:
            query_ids = list(report.values(name, metrics[0]).index) if metrics else []
            for i, qid in enumerate(query_ids):
                lines += [TrecEvalLine(name, names[m], qid, float(values[m][i]), m.summed) for m in metrics]
        run = (runs or {}).get(name)
        runid = (run.tag or run.name) if run is not None else name
        lines.append(TrecEvalLine(name, "runid", "all", runid))
        lines.append(TrecEvalLine(name, "num_q", "all", next(q.counted for q in report.card.queries if q.run == name)))
        for m in metrics:
            column = values[m][~np.isnan(values[m])]
            if m.summed:
                total = judged_relevant if judged_relevant is not None and _is_plain(m, "num_rel") else float(column.sum())
            elif trec:
                total = trec_eval_mean(column)
            else:
                total = means[(name, str(m))]
            lines.append(TrecEvalLine(name, names[m], "all", total, m.summed))
    return lines


def format_trec_eval(
    report: Report, *, qrels: Qrels | None = None, runs: Mapping[str, Run] | None = None, per_query: bool = False,
) -> str:
    """The report as trec_eval prints it (``trec_eval -q`` with ``per_query``), one block per run.

    ``runs`` (``{name: Run}``, as evaluated) give each block's ``runid``, the run's tag (its name where it has
    none, or where ``runs`` are not given). ``qrels`` are needed for num_rel's ``all`` line under trec_eval's
    ``-c`` (see the module's docstring); without them that case is refused rather than printed otherwise.
    """
    return "".join(
        f"{line.measure:<22}\t{line.query_id}\t{_printed(line)}\n"
        for line in trec_eval_lines(report, qrels=qrels, runs=runs, per_query=per_query)
    )


def _printed(line: TrecEvalLine) -> str:
    value = line.value
    if isinstance(value, (str, int)):
        return str(value)
    if np.isnan(value):
        return "nan"
    return f"{int(round(value))}" if line.summed else f"{value:6.4f}"


def _is_plain(metric: Metric, family: str) -> bool:
    return metric.family == family and not metric.params


def _trec_name(metric: Metric, gain: str) -> str:
    """trec_eval's name for a metric, unless the conventions make it a different measure (nDCG with exp gain)."""
    if metric.family == "ndcg" and gain == "exp" and not {"gain", "gains"} & set(metric.param):
        return str(metric)
    return metric.trec_name


def _in_trec_eval_order(metrics: list[Metric], names: dict[Metric, str]) -> list[Metric]:
    """trec_eval's measures in its table order, cutoffs ascending; the others after them, as requested."""

    def key(item: tuple[int, Metric]) -> tuple[int, int, int]:
        position, metric = item
        printed = names[metric]
        base = printed
        if metric.k is not None and printed.endswith(f"_{metric.k}"):
            base = printed[: -len(f"_{metric.k}")]
        elif printed.startswith("ndcg_") and "=" in printed:  # ndcg with a gain table: ndcg_1=3,2=9
            base = "ndcg"
        if base not in _TABLE_ORDER:  # not a trec_eval measure
            return (len(_TABLE_ORDER), position, 0)
        return (_TABLE_ORDER.index(base), metric.k or 0, position)

    return [m for _, m in sorted(enumerate(metrics), key=key)]
