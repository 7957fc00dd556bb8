"""``rag_eval.evaluate``: the one entry point. Qrels and runs in, a Report out; inputs are never changed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..data.qrels import Qrels
from ..data.run import Run
from ..metrics.catalogue import FAMILIES
from ..metrics.conventions import Conventions, resolve_conventions
from ..metrics.engine import evaluate_run
from ..metrics.grammar import Metric, parse_metrics
from ..stages.result import PipelineResult
from .card import InputRecord, MetricCard, QueryRecord, metric_notes_of
from .judged import (
    JUDGED_THRESHOLD,
    JudgedShare,
    ceiling,
    cutoffs_of,
    judged_metrics,
    mean_share,
    shares_frame,
    warn_low,
)
from .projected import evaluate_projections, projections_of
from .report import Report, RunScores
from .systematic import announce_overlap, issue_rows, query_overlap

__all__ = ["DEFAULT_METRICS", "evaluate"]

DEFAULT_METRICS = ("ndcg@10", "recall@10", "recall@100", "precision@10", "mrr@10", "ap", "judged@10")


def evaluate(
    qrels: Qrels | Mapping[str, Mapping[str, int]],
    runs: Run | Sequence[Run] | Mapping[str, Run],
    metrics: str | Metric | Sequence[str | Metric] | None = None,
    *,
    conventions: Conventions | str = "default",
    judged_threshold: float = JUDGED_THRESHOLD,
) -> Report:
    """Measure one or more runs against the qrels.

    ``runs`` is a :class:`Run`, a list of runs (named by ``Run.name``) or a ``{name: run}`` mapping; or what
    :meth:`Pipeline.run` returned (or a ``{name: result}`` mapping of them), to judge each stage by the metrics
    that fit its job (see :mod:`rag_eval.reports.stages`; ``@budget`` and ``@depth`` then resolve to the
    pipeline's); or projections of chunk rankings (:func:`rag_eval.project`, one or a ``{name: projection}``
    mapping), ``qrels`` then being the :class:`~rag_eval.data.spans.SpanLabels` they were projected from (see
    :mod:`rag_eval.reports.projected`).
    ``metrics`` are names in rag_eval's grammar (e.g. ``"ndcg@10"``, ``"P(rel=2)@5"``, trec_eval's ``"P_10"``);
    by default :data:`DEFAULT_METRICS`. ``conventions`` is a :class:`Conventions` or a preset name
    (``"default"``, ``"trec_eval"``). Always returns a :class:`Report`.

    The report also carries each run's (and stage's) judged share at the cutoffs it measures (``Report.judged``,
    on the card too), and warns when one is below ``judged_threshold``: that run's scores are then lower bounds
    (see :mod:`rag_eval.reports.judged`). Systematic problems that would show only as zeros (qrels sharing no
    query, or under 10% of theirs, with a run; a stage failing on most queries; a retriever capping its results)
    are each warned once, in one line, and kept in ``Report.issues`` and the card's notes (see
    :mod:`rag_eval.reports.systematic`).
    """
    if not 0.0 <= judged_threshold <= 1.0:
        raise ValueError(f"judged_threshold must lie in [0, 1], not {judged_threshold!r}")
    projections = projections_of(runs)
    if projections is not None:  # each judged by its own qrels, made from the labels given as ``qrels``
        return evaluate_projections(
            qrels, projections, metrics, conventions=conventions, judged_threshold=judged_threshold
        )
    conv = resolve_conventions(conventions)
    if not isinstance(qrels, Qrels):
        if isinstance(qrels, Mapping):
            qrels = Qrels.from_dict(qrels)
        else:
            raise TypeError(
                f"qrels must be a Qrels or a {{query_id: {{doc_id: grade}}}} mapping, not {type(qrels).__name__}"
            )
    pipelines = _pipeline_results(runs)
    if pipelines is not None:
        from .stages import evaluate_pipelines

        chosen = None if metrics is None else (list(metrics) if isinstance(metrics, (list, tuple)) else [metrics])
        return evaluate_pipelines(qrels, pipelines, chosen, conv, judged_threshold)
    named = _named_runs(runs)
    metric_list = parse_metrics(
        list(metrics) if isinstance(metrics, (list, tuple)) else (metrics or list(DEFAULT_METRICS))
    )
    if not metric_list:
        raise ValueError("no metrics requested")
    blocks: list[RunScores] = []
    records = []
    shares: list[JudgedShare] = []
    cutoffs = cutoffs_of(metric_list)
    extra = judged_metrics(cutoffs)
    n = len(metric_list)
    for name, run in named.items():
        # judged@k (in the table and on the card alike) is measured on the ranking as given: in the same pass,
        # unless unjudged items are removed (condensed lists), where it takes a pass of its own
        if conv.unjudged == "keep":
            result = evaluate_run(qrels, run, metric_list + extra, conv)
            own, given = result.values[:n], result.values[n:]
        else:
            result = evaluate_run(qrels, run, metric_list, conv)
            given = evaluate_run(qrels, run, extra, conv.replace(unjudged="keep"), warn_ids=False).values
            at = dict(zip(cutoffs, given))
            own = [at[m.k] if m.family == "judged" else v for m, v in zip(metric_list, result.values)]
        shares += [
            JudgedShare(name, None, str(k), *mean_share(column), ceiling(qrels, result.account.counted, k))
            for k, column in zip(cutoffs, given)
        ]
        # the text metrics (relstring, runid: one str per query) apart, so that the values stay a float matrix
        numbers = [j for j, m in enumerate(metric_list) if FAMILIES[m.family].kind != "text"]
        texts = {str(metric_list[j]): [str(t) for t in own[j].tolist()] for j in range(n) if j not in numbers}
        counted = len(result.account.counted)
        matrix = (
            np.column_stack([own[j] for j in numbers]) if counted and numbers else np.zeros((counted, len(numbers)))
        )
        blocks.append(
            RunScores(result.account.counted, matrix, name, None, [str(metric_list[j]) for j in numbers], texts=texts)
        )
        account = result.account
        records.append(
            QueryRecord(
                run=name, counted=len(account.counted), left_out=account.left_out, counted_as_zero=account.zeroed
            )
        )
    inputs = [_record("qrels", Path(qrels.source.path).name if qrels.source else "qrels", qrels.source)]
    inputs += [_record("run", name, run.source, run.ranked_by, list(run.notes)) for name, run in named.items()]
    notes = announce_overlap(query_overlap(qrels, {name: run.query_ids for name, run in named.items()}), stacklevel=2)
    notes += warn_low(shares, judged_threshold, stacklevel=3)
    names = [str(m) for m in metric_list]
    card = MetricCard.build(
        conv,
        names,
        inputs,
        records,
        judged=[s.record() for s in shares],
        judged_threshold=judged_threshold,
        notes=notes,
        metric_notes=metric_notes_of(names, max_grade=_largest_grade(qrels, metric_list)),
    )
    issues = issue_rows(notes, ["run", "query_id", "issue"])
    return Report(blocks, metric_list, card, {"judged": shares_frame(shares), "issues": issues})


def _largest_grade(qrels: Qrels, metrics: list[Metric]) -> int | None:
    """The qrels' largest grade, which err and nerr take as max_grade when none is given (stated on the card)."""
    if not any(m.family in ("err", "nerr") and "max_grade" not in m.param for m in metrics):
        return None
    from ..metrics import kernels_gain

    default = getattr(kernels_gain, "default_max_grade", None)  # the kernels' own rule, so the card says what they use
    return int(default(qrels)) if default is not None else max(1, int(qrels.columns[2].max(initial=1)))


def _pipeline_results(runs: object) -> dict[str, PipelineResult] | None:
    """``{name: result}`` when ``runs`` is a pipeline result or a mapping of them, else None."""
    if isinstance(runs, PipelineResult):
        return {repr(runs.pipeline): runs}
    if isinstance(runs, Mapping) and runs and all(isinstance(r, PipelineResult) for r in runs.values()):
        return dict(runs)
    return None


def _named_runs(runs: Run | Sequence[Run] | Mapping[str, Run]) -> dict[str, Run]:
    hint = (
        "runs must be a Run, a list of Runs or a {name: Run} mapping (build one with Run.from_scores, "
        "Run.from_ranking or Run.from_trec)"
    )
    if isinstance(runs, Run):
        return {runs.name: runs}
    if isinstance(runs, Mapping):
        named = dict(runs)
        if any(not isinstance(n, str) for n in named):
            raise TypeError("run names (the mapping's keys) must be str")
    elif isinstance(runs, Sequence) and not isinstance(runs, (str, bytes)):
        if any(not isinstance(r, Run) for r in runs):
            raise TypeError(hint)
        named = {}
        for run in runs:
            if run.name in named:
                raise ValueError(f"two runs are named {run.name!r}; pass a {{name: run}} mapping to name them")
            named[run.name] = run
    else:
        raise TypeError(hint)
    if not named or any(not isinstance(r, Run) for r in named.values()):
        raise TypeError(hint)
    return named


def _record(role, name, source, ranked_by=None, notes=None) -> InputRecord:
    return InputRecord(
        role=role,
        name=name,
        path=source.path if source else None,
        sha256=source.sha256 if source else None,
        ranked_by=ranked_by,
        notes=notes or [],
    )
