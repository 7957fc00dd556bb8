"""Evaluating runs against qrels: the evaluator of :func:`rag_eval.evaluate` for runs (and, through it, of each
projection). Private: :mod:`rag_eval.reports.evaluation` dispatches to it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..data.qrels import Qrels
from ..data.run import Run
from ..data.source import Source
from ..metrics.catalogue import FAMILIES
from ..metrics.conventions import Conventions
from ..metrics.engine import evaluate_run
from ..metrics.grammar import Metric
from ._judged import JudgedShare, ceiling, cutoffs_of, judged_metrics, mean_share, shares_frame, warn_low
from ._systematic import announce_overlap, issue_rows, query_overlap
from .card_text import CardDraft, card_fields, metric_notes_of
from .hashes import content_hash_fields
from .report import Report, RunScores

__all__ = ["evaluate_runs", "named_runs"]


def evaluate_runs(
    qrels: Qrels,
    named: Mapping[str, Run],
    metric_list: list[Metric],
    conv: Conventions,
    judged_threshold: float,
    *,
    user_frame: int = 2,
) -> Report:
    """One Report over the runs ``named``, each measured by every metric of ``metric_list`` (at least one) under
    ``conv``. ``user_frame``: how many frames above this function the user's call is (where warnings point)."""
    if not metric_list:
        raise ValueError("no metrics requested")
    blocks: list[RunScores] = []
    records: list[dict[str, Any]] = []  # the card's QueryRecords' fields
    shares: list[JudgedShare] = []
    cutoffs = cutoffs_of(metric_list)
    extra = judged_metrics(cutoffs) + [Metric("num_ret")]  # num_ret: how many results the ceiling may count
    n = len(metric_list)
    for name, run in named.items():
        # judged@k (in the table and on the card alike) is measured on the ranking as given: in the same pass,
        # unless unjudged items are removed (condensed lists), where it takes a pass of its own
        if conv.unjudged == "keep":
            result = evaluate_run(qrels, run, metric_list + extra, conv)
            own, given, returned = result.values[:n], result.values[n:-1], result.values[-1]
        else:
            result = evaluate_run(qrels, run, metric_list, conv)
            *given, returned = evaluate_run(qrels, run, extra, conv.replace(unjudged="keep"), warn_ids=False).values
            at = dict(zip(cutoffs, given, strict=True))
            own = [
                at[m.k] if m.family == "judged" and m.k is not None else v
                for m, v in zip(metric_list, result.values, strict=True)
            ]
        shares += [
            JudgedShare(
                name,
                None,
                str(k),
                *mean_share(column),
                ceiling(qrels, result.account.counted, k, returned=returned, rows=result.account.qrels_rows),
            )
            for k, column in zip(cutoffs, given, strict=True)
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
            {
                "run": name,
                "counted": len(account.counted),
                "left_out": account.left_out,
                "counted_as_zero": account.zeroed,
            }
        )
    name = Path(qrels.source.path).name if qrels.source else "qrels"
    inputs = [_record("qrels", name, qrels.source, notes=graded_by_notes(qrels))]
    inputs += [
        _record("run", name, run.source, run.ranked_by, list(run.notes), tag=run.tag) for name, run in named.items()
    ]
    notes = announce_overlap(
        query_overlap(qrels, {name: run.query_ids for name, run in named.items()}), stacklevel=user_frame + 1
    )
    notes += warn_low(shares, judged_threshold, stacklevel=user_frame + 2)
    names = [str(m) for m in metric_list]

    def card() -> dict[str, Any]:  # made when first read: its content hashes read every judgement
        return card_fields(
            conv,
            names,
            inputs,
            records,
            judged=[s.record() for s in shares],
            judged_threshold=judged_threshold,
            notes=notes,
            metric_notes=metric_notes_of(names, max_grade=_largest_grade(qrels, metric_list)),
            hashes=content_hash_fields(qrels, conventions=conv),
        )

    shown: list[Metric | str] = [*metric_list]
    tables = {  # built when first read: pandas loads there
        "judged": lambda: shares_frame(shares),
        "issues": lambda: issue_rows(notes, ["run", "query_id", "issue"]),
    }
    return Report(blocks, shown, CardDraft(card), tables)  # the card's pydantic model made where it is read


def _largest_grade(qrels: Qrels, metrics: list[Metric]) -> int | None:
    """The qrels' largest grade, which err and nerr take as max_grade when none is given (stated on the card)."""
    if not any(m.family in ("err", "nerr") and "max_grade" not in m.param for m in metrics):
        return None
    from ..metrics.engine import default_max_grade  # the kernels' own rule, so the card says what they use

    return int(default_max_grade(qrels))


def named_runs(runs: object) -> dict[str, Run]:
    """``{name: run}`` of a Run (named by ``Run.name``), a list of them or a ``{name: run}`` mapping; else a
    TypeError saying what ``runs`` may be."""
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


def graded_by_notes(qrels: Qrels) -> list[str]:
    """The qrels input's note on a card: the share of judgements model judges decided, where they did."""
    graded = qrels.graded_by
    return [graded.note()] if graded is not None and graded.judges else []


def _record(
    role: str,
    name: str,
    source: Source | None,
    ranked_by: str | None = None,
    notes: list[str] | None = None,
    *,
    tag: str | None = None,
) -> dict[str, Any]:
    """The fields of the card's InputRecord of an input."""
    return {
        "role": role,
        "name": name,
        "path": source.path if source else None,
        "sha256": source.sha256 if source else None,
        "ranked_by": ranked_by,
        "tag": tag,
        "notes": notes or [],
    }
