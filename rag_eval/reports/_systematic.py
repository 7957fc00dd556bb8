"""Systematic problems that would show only as zeros, said once per report, one line per kind.

Each is a warning of its own kind (:mod:`rag_eval.errors`), kept in ``Report.issues`` (a row without a query) and on
the card (``MetricCard.notes``):

- a stage that failed on more than half of its queries, a retriever capping its results below the depth
  (:func:`rag_eval.stages.result.stage_findings`, also said when the run ends);
- qrels and a run (or pipeline) that share no query, or fewer than :data:`QUERY_OVERLAP` of the judged queries
  (the wrong split, or ids spelled another way): :func:`query_overlap`;
- judged shares below the threshold, and when sparse qrels make it unreachable
  (:func:`rag_eval.reports._judged.warn_low`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..data.qrels import Qrels
from ..errors import LowQueryOverlap
from ..metrics.engine import canonical

if TYPE_CHECKING:
    import pandas as pd

QUERY_OVERLAP = 0.1  # a run holding fewer than this share of the qrels' judged queries is announced


def _examples(ids: Sequence[str], n: int = 3) -> str:
    shown = ", ".join(repr(i) for i in ids[:n])
    return shown + (", ..." if len(ids) > n else "")


def query_overlap(qrels: Qrels, runs: Mapping[str, Sequence[str]]) -> str | None:
    """One line for every run (by name: its query ids) that shares no query with the qrels, or fewer than
    :data:`QUERY_OVERLAP` of the qrels' judged queries; None when each shares enough."""
    if not len(qrels):
        return None
    judged = qrels.query_ids
    forms: set[str] | None = None  # the qrels' ids written loosely: made only for a run that shares too few
    parts = []
    for name, ids in runs.items():
        ids = list(ids)
        if not ids:
            continue  # an empty run: nothing of it is mismatched (the card counts its queries as missing)
        rows = qrels.rows_of(ids)
        hit = np.zeros(len(qrels), bool)
        hit[rows[rows >= 0]] = True
        shared = int(hit.sum())  # distinct shared queries, by whole-array work
        if shared and shared >= QUERY_OVERLAP * len(judged):
            continue
        if forms is None:
            forms = set(map(canonical, judged))
        if len(set(map(canonical, ids)) & forms) >= max(QUERY_OVERLAP * len(judged), 1):
            continue  # ids that differ by whitespace or leading zeros: NearMissIds says so, with an example
        mine = set(ids)
        absent = [q for q in judged if q not in mine]
        if not shared:
            parts.append(
                f"run {name!r} shares no query with the qrels (run: {len(ids)} queries, e.g. "
                f"{_examples(ids)}; qrels: {len(judged)} queries, e.g. {_examples(judged)}): the wrong split, "
                "or ids spelled another way? Every score is 0 or left out"
            )
        else:
            parts.append(
                f"run {name!r} holds only {shared} of the qrels' {len(judged)} judged queries "
                f"({shared / len(judged):.1%}, under {QUERY_OVERLAP:.0%}; e.g. qrels "
                f"{_examples(absent)} are not in the run, which has {len(ids)} queries, e.g. {_examples(ids)}): "
                "the wrong split? The others score 0 or are left out"
            )
    if not parts:
        return None
    return "; ".join(parts)


def announce_overlap(line: str | None, stacklevel: int) -> list[str]:
    """Warn :func:`query_overlap`'s line, if any (``stacklevel`` counts from the caller); returns the lines."""
    if line is None:
        return []
    warnings.warn(line, LowQueryOverlap, stacklevel=stacklevel + 1)
    return [line]


def issue_rows(lines: Sequence[str], columns: Sequence[str]) -> pd.DataFrame:
    """``Report.issues`` rows for report-level lines: no query (and no stage unless the line names one)."""
    import pandas as pd

    return pd.DataFrame(
        [{c: (line if c == "issue" else None) for c in columns} for line in lines], columns=list(columns)
    )
