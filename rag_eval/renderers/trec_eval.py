"""What ``trec_eval [-q] -m ...`` prints, digit for digit (layer 6, renderers).

The line format, the order of measures and queries, the number formats, and the ``all`` lines accumulated as
trec_eval 10.0 accumulates them under its conventions: ``docs/metrics.md``, "Printing what trec_eval prints".
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple, TypeAlias

import numpy as np
import numpy.typing as npt

from ..data.qrels import Qrels
from ..data.run import Run
from ..metrics.catalogue import FAMILIES
from ..metrics.conventions import TREC_EVAL_FLAGS, follows_trec_eval
from ..metrics.grammar import Metric, parse_metric
from ..metrics.trec_eval_measures import TREC_MEASURES
from ..reports.report import Report
from ..reports.summary import MIN_GEO_MEAN

__all__ = [
    "MEASURE_TABLE",
    "TREC_EVAL_FLAGS",
    "TrecEvalLine",
    "follows_trec_eval",
    "format_trec_eval",
    "trec_eval_geometric_mean",
    "trec_eval_lines",
    "trec_eval_mean",
]

# trec_eval 10.0's measure table (measures.c, te_trec_measures), less the measures that need other input
# (preference files, judgement groups, yaap) and dcg/ideal_dcg (in no nickname): the order trec_eval prints in,
# derived from the families' registrations (rag_eval.metrics.catalogue)
MEASURE_TABLE = tuple(m.name for m in TREC_MEASURES)
_POSITION = {name: i for i, name in enumerate(MEASURE_TABLE)}
# from the families' registrations (rag_eval.metrics.catalogue): which lines trec_eval prints of a measure, and
# the parameter of its double cutoffs (iprec_at_recall's level, Rprec_mult's mult), printed ascending
_SUMMARY_ONLY = frozenset(f.name for f in FAMILIES.values() if f.trec and f.trec[0].printed == "summary")
_PER_QUERY_ONLY = frozenset(f.name for f in FAMILIES.values() if f.trec and f.trec[0].printed == "per_query")
_LEVEL_PARAM = {f.name: f.trec[0].param for f in FAMILIES.values() if f.trec and f.trec[0].kind == "cut_double"}


def trec_eval_mean(values: np.ndarray) -> float:
    """trec_eval's mean: the values added one by one in the order given, in double precision, divided by their
    number (0.0 for none). Not the most exact mean: the one trec_eval prints."""
    values = np.asarray(values, dtype=np.float64)
    if not len(values):
        return 0.0
    return float(np.cumsum(values)[-1]) / len(values)  # cumsum adds in order (a plain sum adds pairwise)


def trec_eval_geometric_mean(values: np.ndarray) -> float:
    """trec_eval's geometric mean (gm_map, gm_bpref): ``exp(sum(log(max(v, 1e-5))) / n)``, the logs added one by
    one in the order given (``m_gm_map.c``, ``te_calc_avg_meas_s_gm``); 0.0 for no value, as trec_eval leaves an
    empty sum at 0."""
    values = np.asarray(values, dtype=np.float64)
    if not len(values):
        return 0.0
    total = 0.0
    for v in values.tolist():  # the C library's log, value by value, as trec_eval calls it
        total += math.log(v if v > MIN_GEO_MEAN else MIN_GEO_MEAN)  # C's MAX(v, 1e-5): a NaN is floored too
    return math.exp(total / len(values))


class TrecEvalLine(NamedTuple):
    """One line of trec_eval's printout, before printing: ``value`` is a float (a count for the summed
    measures), a str for ``runid`` and relstring (relstring's as printed, quoted), and an int for ``num_q``."""

    run: str
    measure: str  # the name trec_eval prints
    query_id: str  # or "all"
    value: float | int | str
    summed: bool = False  # printed as an integer


class _Column(NamedTuple):
    metric: Metric
    name: str  # as printed
    column: str  # the report's metric (canonical string)
    as_c: bool = False  # a trec_eval measure under trec_eval's conventions: NaN is kept, and printed as C prints it


_PerQuery: TypeAlias = list[tuple[_Column, "npt.NDArray[np.float64] | list[str]"]]
_Summary: TypeAlias = list[tuple[_Column, float | int | str]]
_Block: TypeAlias = tuple[str, list[_Column], list[str], _PerQuery, _Summary]


def trec_eval_lines(
    report: Report,
    *,
    qrels: Qrels | None = None,
    runs: Mapping[str, Run] | None = None,
    per_query: bool = False,
    metrics: Sequence[Metric] | None = None,
) -> list[TrecEvalLine]:
    """The lines :func:`format_trec_eval` prints, with their values at full precision, in the same order."""
    lines: list[TrecEvalLine] = []
    for block in _blocks(report, qrels, runs, metrics):
        name, _, query_ids, per, summary = block
        if per_query:
            for i, qid in enumerate(query_ids):
                lines += [TrecEvalLine(name, c.name, qid, values[i], c.metric.summed) for c, values in per]
        lines += [TrecEvalLine(name, c.name, "all", value, c.metric.summed) for c, value in summary]
    return lines


def format_trec_eval(
    report: Report,
    *,
    qrels: Qrels | None = None,
    runs: Mapping[str, Run] | None = None,
    per_query: bool = False,
    metrics: Sequence[Metric] | None = None,
) -> str:
    """The report as trec_eval prints it (``trec_eval -q`` with ``per_query``), one block per run.

    ``runs`` (``{name: Run}``, as evaluated) give each block's ``runid``, the run's tag (its name where it has
    none, or where ``runs`` are not given). ``qrels`` are needed for num_rel's ``all`` line under trec_eval's
    ``-c`` (see the module's docstring); without them that case is refused rather than printed otherwise.
    ``metrics``: the metrics to print, in place of the report's (see the module's docstring).
    """
    out: list[str] = []
    for block in _blocks(report, qrels, runs, metrics):
        _, _, query_ids, per, summary = block
        if per_query and query_ids:
            printed = [
                [f"{c.name:<22}\t{q}\t{v}\n" for q, v in zip(query_ids, _texts(c, values), strict=True)]
                for c, values in per
            ]
            out += ["".join(row) for row in zip(*printed, strict=True)] if printed else []
        out += [f"{c.name:<22}\tall\t{_printed(value, c.metric.summed, c.as_c)}\n" for c, value in summary]
    return "".join(out)


def _blocks(
    report: Report, qrels: Qrels | None, runs: Mapping[str, Run] | None, metrics: Sequence[Metric] | None
) -> Iterator[_Block]:
    """Per run: its name, the columns in printing order, the query ids, the per-query columns
    ``[(column, values)]`` and the summary ``[(column, value)]``."""
    if report.staged:
        raise ValueError("trec_eval's format has no pipeline stages: evaluate runs, or use another format")
    conventions = report.card.conventions
    trec = follows_trec_eval(conventions)
    columns = [
        c._replace(as_c=trec and _measure(c.metric, c.name) is not None)
        for c in _columns(report, metrics, conventions.gain)
    ]
    always_header = metrics is None  # runid and num_q, as before metrics= existed
    if always_header:
        columns = [c for c in columns if c.metric.family not in ("runid", "num_q")]
    judged_relevant = None
    if trec and conventions.missing_run == "zero" and any(_is_plain(c.metric, "num_rel") for c in columns):
        if qrels is None:
            raise ValueError("num_rel's 'all' line under trec_eval's -c counts the qrels: pass qrels=")
        judged_relevant = float((qrels.columns[2] > 0).sum())
    means: dict[tuple[str, str], float] = {}
    if not trec and any(_aggregate(c.metric) in ("mean", "geometric") for c in columns):
        table = report.summarize(resamples=1)  # the summary's mean, so that a table and this format agree
        means = {(r, m): float(v) for r, m, v in zip(table["run"], table["metric"], table["mean"], strict=True)}
    runid_col = _Column(Metric("runid"), "runid", "runid")
    num_q_col = _Column(Metric("num_q"), "num_q", "num_q")
    for name in report.runs:
        query_ids = report.query_ids(name)
        counted = report.counted(name)
        per: _PerQuery = []
        summary: _Summary = []
        if always_header:
            summary += [(runid_col, _runid(report, name, runs)), (num_q_col, counted)]
        for c in columns:
            family, aggregate = c.metric.family, _aggregate(c.metric)
            if family == "runid":
                summary.append((c, _runid(report, name, runs)))
                continue
            if family == "num_q":
                summary.append((c, counted))
                continue
            if FAMILIES[family].kind == "text":
                if family not in _SUMMARY_ONLY:
                    per.append((c, ["'" + s + "'" for s in report.column(name, c.column)]))
                continue
            values = np.asarray(report.column(name, c.column), dtype=np.float64)
            if family not in _SUMMARY_ONLY:
                per.append((c, values))
            if family in _PER_QUERY_ONLY:
                continue
            column = values if c.as_c else values[~np.isnan(values)]  # trec_eval adds a NaN in: its mean is NaN
            if aggregate == "sum":
                total = (
                    judged_relevant
                    if judged_relevant is not None and _is_plain(c.metric, "num_rel")
                    else float(column.sum())
                )
            elif not trec:
                total = means[(name, c.column)]
            elif aggregate == "geometric":
                total = trec_eval_geometric_mean(column)
            else:
                total = trec_eval_mean(column)
            summary.append((c, total))
        yield name, columns, query_ids, per, summary


def _texts(c: _Column, values: npt.NDArray[np.float64] | list[str]) -> list[str]:
    """One column's per-query values as printed."""
    if isinstance(values, list):  # relstring, already quoted
        return values
    nan = _C_NAN if c.as_c else "nan"
    if c.metric.summed:
        return [str(round(v)) if v == v else nan for v in values.tolist()]
    return [f"{v:6.4f}" if v == v else nan for v in values.tolist()]


# trec_eval's NaN: 0.0 / 0.0 on x86-64 is the default NaN, whose sign bit is set, and printf("%6.4f") prints it so
_C_NAN = "  -nan"


def _printed(value: float | int | str, summed: bool, as_c: bool = False) -> str:
    if isinstance(value, (str, int)):
        return str(value)
    if np.isnan(value):
        return _C_NAN if as_c else "nan"
    return f"{round(value)}" if summed else f"{value:6.4f}"


def _aggregate(metric: Metric) -> str:
    return FAMILIES[metric.family].aggregate


def _runid(report: Report, name: str, runs: Mapping[str, Run] | None) -> str:
    """The run's tag: from ``runs``, else the report's runid column (the last query's), else the run's name."""
    run = (runs or {}).get(name)
    if run is not None:
        return run.tag or run.name
    if "runid" in report.text_metrics:
        texts = report.column(name, "runid")
        if len(texts):
            return str(texts[-1])
    return name


def _is_plain(metric: Metric, family: str) -> bool:
    return metric.family == family and not metric.params


def _columns(report: Report, metrics: Sequence[Metric] | None, gain: str) -> list[_Column]:
    """The columns to print, matched to the report's metrics, in trec_eval's order."""
    measured = report.metrics
    if metrics is None:
        chosen = [(parse_metric(m), m) for m in measured]
    else:
        chosen = []
        for m in metrics:
            if not isinstance(m, Metric):
                raise TypeError(f"metrics= holds Metric objects (as parsed), not {type(m).__name__} {m!r}")
            if m.family in ("runid", "num_q"):  # from the card and the runs; measured or not
                chosen.append((m, str(m)))
                continue
            if str(m) not in measured:
                raise ValueError(f"metric {str(m)!r} is not in the report; measured: {', '.join(measured)}")
            chosen.append((m, str(m)))
        chosen = list({str(m): (m, col) for m, col in reversed(chosen)}.values())[::-1]  # one line each, first kept
    columns = [_Column(m, _trec_name(m, gain), col) for m, col in chosen]
    return [c for _, c in sorted(enumerate(columns), key=lambda item: _order(*item))]


def _trec_name(metric: Metric, gain: str) -> str:
    """trec_eval's name for a metric, unless the conventions make it a different measure (nDCG with exp gain)."""
    if metric.family == "ndcg" and gain == "exp" and not {"gain", "gains"} & set(metric.param):
        return str(metric)
    return metric.trec_name


def _measure(metric: Metric, printed: str) -> str | None:
    """The trec_eval measure a metric is printed as (its name in trec_eval's measure table), or None."""
    family = FAMILIES[metric.family]
    base = family.trec_name
    if base is None:
        return None
    if metric.k is not None:  # the measure that takes the cutoff (ndcg_cut for ndcg@k, map_cut for ap@k)
        base = next((t.name for t in family.trec if t.param == "k"), base)
    if printed != base and not printed.startswith(base + "_"):  # printed by its canonical string: not trec_eval's
        return None
    return base if base in _POSITION else None


def _order(position: int, column: _Column) -> tuple[int, float, int]:
    """trec_eval's measures in its table order, cutoffs (levels) ascending; the others after, as requested."""
    measure = _measure(column.metric, column.name)
    if measure is None:
        return (len(MEASURE_TABLE), 0.0, position)
    metric = column.metric
    level = _LEVEL_PARAM.get(metric.family)
    if metric.k is not None:
        within = float(metric.k)
    elif level is not None and level in metric.param:
        within = float(metric.param[level])
    else:
        within = 0.0
    return (_POSITION[measure], within, position)
