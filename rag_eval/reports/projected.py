"""Evaluating projections: runs of chunks judged with labels given on documents and answer spans.

``rag_eval.evaluate(labels, {"512": projection_512, "1024": projection_1024}, metrics)`` evaluates each
:class:`~rag_eval.ground_truth.Projection` against its own Qrels (its ids are relevance units, the same for
every chunking of the same labels where the labels are spans or documents) as ``evaluate`` measures runs, and
gathers them in one Report, so that chunkings compare side by side (``rag_eval.compare`` pairs them by query).
The metric card names the labels (file and SHA-256 where read from one) and, on each run, the projection's rules,
threshold and counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..data.spans import SpanLabels
from ..ground_truth import Projection
from ..metrics.conventions import Conventions
from ..metrics.grammar import Metric
from ._runs import evaluate_runs
from .card import InputRecord, MetricCard
from .hashes import merged_hashes
from .report import Report

__all__ = ["evaluate_projections", "projections_of"]


def projections_of(runs: object) -> dict[str, Projection] | None:
    """``{name: projection}`` when ``runs`` is a Projection, or a list or mapping of them; else None."""
    if isinstance(runs, Projection):
        return {runs.name: runs}
    if isinstance(runs, Mapping) and runs and all(isinstance(p, Projection) for p in runs.values()):
        if any(not isinstance(n, str) for n in runs):
            raise TypeError("run names (the mapping's keys) must be str")
        return dict(runs)
    if isinstance(runs, (list, tuple)) and runs and all(isinstance(p, Projection) for p in runs):
        named: dict[str, Projection] = {}
        for p in runs:
            if p.name in named:
                raise ValueError(
                    f"two projections are named {p.name!r}; pass a {{name: projection}} mapping to name them"
                )
            named[p.name] = p
        return named
    return None


def evaluate_projections(
    labels: object,
    projections: Mapping[str, Projection],
    metrics: list[Metric],
    conventions: Conventions,
    judged_threshold: float,
) -> Report:
    """One Report over several projections of the same ``labels`` (see the module's docstring), each measured by
    ``metrics`` under ``conventions``, as :func:`rag_eval.evaluate` measures runs."""
    if not isinstance(labels, SpanLabels):
        raise TypeError(
            "projections carry their own qrels: pass the SpanLabels they were projected from as the first argument, "
            f"not {type(labels).__name__} (or evaluate projection.qrels with projection.run)"
        )
    for name, p in projections.items():
        if p.labels is not labels and p.labels != labels:
            raise ValueError(f"projection {name!r} was projected from other labels than the ones given")
    reports = []
    for name, p in projections.items():  # a loop, not a comprehension: a frame of its own would move the warnings
        reports.append(evaluate_runs(p.qrels, {name: p.run}, metrics, conventions, judged_threshold, user_frame=3))
    return _merged(labels, reports)


def _merged(labels: SpanLabels, reports: list[Report]) -> Report:
    import pandas as pd

    cards = [r.card.model_dump() for r in reports]
    source = labels.source
    record = InputRecord(
        role="labels",
        name=source.path.rsplit("/", 1)[-1] if source else "span labels",
        path=source.path if source else None,
        sha256=source.sha256 if source else None,
        notes=[
            labels.describe(),
            "each run is measured against the qrels of its own projection (ids = relevance units)",
        ],
    )
    merged: dict[str, Any] = dict(cards[0])
    merged["inputs"] = [record.model_dump()] + [i for c in cards for i in c["inputs"] if i["role"] != "qrels"]
    for key, value in cards[0].items():
        if isinstance(value, list) and key not in ("inputs", "metrics", "metric_notes"):  # one note per metric
            merged[key] = [item for c in cards for item in c[key]]
    # each run has the qrels of its own projection: the hashes cover every run's (rag_eval.reports.hashes)
    merged["hashes"] = merged_hashes({r.runs[0]: r.card.hashes for r in reports})
    card = MetricCard.model_validate(merged)
    blocks = [b for r in reports for b in r.blocks]
    keys = dict.fromkeys(k for r in reports for k in r.tables)
    tables = {k: pd.concat([r.tables[k] for r in reports if k in r.tables], ignore_index=True) for k in keys}
    metrics: list[Metric | str] = [*reports[0].metrics]
    return Report(blocks, metrics, card, tables)
