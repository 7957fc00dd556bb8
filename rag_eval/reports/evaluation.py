"""``rag_eval.evaluate``: the one entry point. Qrels and runs in, a Report out; inputs are never changed.

This module only dispatches: by the kind of ``runs`` given, to the evaluator of runs (:mod:`._runs`), of pipeline
results (:mod:`rag_eval.reports.stage_aware`) or of projections (:mod:`rag_eval.reports.projected`). None of them
imports this module.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from .._checks import check_share
from ..data.qrels import Qrels
from ..data.run import Run
from ..metrics.conventions import Conventions, resolve_conventions
from ..metrics.grammar import Metric, parse_metrics
from ._judged import JUDGED_THRESHOLD
from ._runs import evaluate_runs, named_runs
from .report import Report

if TYPE_CHECKING:
    from ..data.queryset import QuerySet
    from ..data.spans import SpanLabels
    from ..ground_truth import Projection
    from ..stages import PipelineResult

__all__ = ["DEFAULT_METRICS", "JUDGED_THRESHOLD", "evaluate"]

DEFAULT_METRICS = ("ndcg@10", "recall@10", "recall@100", "precision@10", "mrr@10", "ap", "judged@10")

if TYPE_CHECKING:
    Runs = (
        Run
        | Sequence[Run]
        | Mapping[str, Run]
        | PipelineResult
        | Mapping[str, PipelineResult]
        | Projection
        | Sequence[Projection]
        | Mapping[str, Projection]
    )


def evaluate(
    qrels: Qrels | Mapping[str, Mapping[str, int]] | SpanLabels,
    runs: Runs,
    metrics: str | Metric | Sequence[str | Metric] | None = None,
    *,
    conventions: Conventions | str = "default",
    judged_threshold: float = JUDGED_THRESHOLD,
    queries: QuerySet | None = None,
) -> Report:
    """Measure one or more runs against the qrels.

    ``runs`` is a :class:`Run`, a list of runs (named by ``Run.name``) or a ``{name: run}`` mapping; or what
    :meth:`Pipeline.run` returned (or a ``{name: result}`` mapping of them), to judge each stage by the metrics
    that fit its job (see :mod:`rag_eval.reports.stage_aware`; ``@budget`` and ``@depth`` then resolve to the
    pipeline's); or projections of chunk rankings (:func:`rag_eval.project`, one or a ``{name: projection}``
    mapping), ``qrels`` then being the :class:`~rag_eval.data.spans.SpanLabels` they were projected from (see
    :mod:`rag_eval.reports.projected`).
    ``metrics`` are names in rag_eval's grammar (e.g. ``"ndcg@10"``, ``"P(rel=2)@5"``, trec_eval's ``"P_10"``);
    by default :data:`DEFAULT_METRICS`. ``conventions`` is a :class:`Conventions` or a preset name
    (``"default"``, ``"trec_eval"``). Always returns a :class:`Report`.

    The report also carries each run's (and stage's) judged share at the cutoffs it measures (``Report.judged``,
    on the card too), and warns when one is below ``judged_threshold``: that run's scores are then lower bounds.
    Systematic problems that would show only as zeros (qrels sharing no query, or under 10% of theirs, with a run;
    a stage failing on most queries; a retriever capping its results) are each warned once, in one line, and kept
    in ``Report.issues`` and the card's notes.

    ``queries``: the :class:`~rag_eval.QuerySet` the runs answered (a pipeline result run on a QuerySet carries its
    own, ``PipelineResult.query_set``). The report then carries its card (``Report.card.query_set``) and its summary
    has the traffic-weighted mean beside the per-query mean (``traffic_mean``, ``traffic_ci_low``,
    ``traffic_ci_high``: see :mod:`rag_eval.reports.weighted`); every evaluated query must be in the set.
    """
    judged_threshold = check_share(judged_threshold, "judged_threshold", closed="both")
    if queries is not None:
        from ..data.queryset import QuerySet

        if not isinstance(queries, QuerySet):
            raise TypeError(f"queries must be a rag_eval.QuerySet, not {type(queries).__name__}")
    conv = resolve_conventions(conventions)
    if _loaded("rag_eval.ground_truth.projection"):  # else no Projection exists: ground_truth stays unloaded
        from .projected import evaluate_projections, projections_of

        projections = projections_of(runs)
        if projections is not None:  # each judged by its own qrels, made from the labels given as ``qrels``
            return _with_queries(
                evaluate_projections(qrels, projections, _metric_list(metrics), conv, judged_threshold), queries
            )
    if not isinstance(qrels, (Qrels, Mapping)):
        raise TypeError(
            f"qrels must be a Qrels or a {{query_id: {{doc_id: grade}}}} mapping, not {type(qrels).__name__}"
        )
    judged = qrels if isinstance(qrels, Qrels) else Qrels.from_dict(qrels)
    if _loaded("rag_eval.stages.result"):  # else no PipelineResult exists: the stages stay unloaded
        from .stage_aware import evaluate_pipelines, pipeline_results

        pipelines = pipeline_results(runs)
        if pipelines is not None:
            chosen = None if metrics is None else ([metrics] if isinstance(metrics, (str, Metric)) else list(metrics))
            if queries is None:
                queries = _query_set_of(pipelines)
            return _with_queries(evaluate_pipelines(judged, pipelines, chosen, conv, judged_threshold), queries)
    report = evaluate_runs(judged, named_runs(runs), _metric_list(metrics), conv, judged_threshold, user_frame=2)
    return _with_queries(report, queries)


def _loaded(module: str) -> bool:
    """Whether ``module`` is imported: an object of a class it defines can exist only then."""
    return module in sys.modules


def _with_queries(report: Report, queries: QuerySet | None) -> Report:
    return report if queries is None else report.with_query_set(queries)


def _query_set_of(results: Mapping[str, PipelineResult]) -> QuerySet | None:
    """The QuerySet the pipelines were run on (None when run on plain mappings); several must be equal."""
    found = [r.query_set for r in results.values() if r.query_set is not None]
    if not found:
        return None
    if len(found) != len(results) or any(q != found[0] for q in found[1:]):
        raise ValueError("the pipeline results were run on different query sets: give the one to weight by as queries=")
    return found[0]


def _metric_list(metrics: str | Metric | Sequence[str | Metric] | None) -> list[Metric]:
    """The metrics asked for, parsed (the default ones for None); at least one."""
    if metrics is None:
        metric_list = parse_metrics(list(DEFAULT_METRICS))
    else:
        metric_list = parse_metrics(metrics if isinstance(metrics, (str, Metric)) else list(metrics))
    if not metric_list:
        raise ValueError("no metrics requested")
    return metric_list
