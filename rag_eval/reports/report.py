"""Report: what ``rag_eval.evaluate`` returns, always. Per-query values, a summary with spread, and the card."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from typing import TYPE_CHECKING

import numpy as np

from ..metrics.grammar import Metric, parse_metric
from .card import MetricCard
from .summary import SUMMARY_COLUMNS, summarize_values

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Report"]

PER_QUERY_COLUMNS = ["run", "query_id", "metric", "value"]
_CARD_KEY = b"rag_eval.card"


@dataclass(frozen=True)
class RunScores:
    """One run's per-query values: ``values[i, j]`` is metric ``j`` of query ``query_ids[i]``."""

    query_ids: list[str]
    values: np.ndarray  # float64 [queries, metrics]


class Report:
    """The values of every metric for every run and query, with the metric card that explains them.

    ``per_query`` is a tidy DataFrame (``run, query_id, metric, value``); ``summary`` averages it per run and
    metric with the spread (computed on first access); ``card`` says how the numbers were made.
    """

    def __init__(self, scores: dict[str, RunScores], metrics: list[Metric], card: MetricCard) -> None:
        self._scores = scores
        self._metrics = list(metrics)
        self._card = card
        self._per_query: pd.DataFrame | None = None
        self._summary: pd.DataFrame | None = None

    @property
    def runs(self) -> list[str]:
        return list(self._scores)

    @property
    def metrics(self) -> list[str]:
        """Canonical names of the metrics, in the order requested."""
        return [str(m) for m in self._metrics]

    @property
    def card(self) -> MetricCard:
        return self._card

    @property
    def per_query(self) -> pd.DataFrame:
        """One row per run, query and metric: columns ``run, query_id, metric, value``."""
        if self._per_query is None:
            import pandas as pd

            names = np.array(self.metrics, dtype=object)
            parts = []
            for run, s in self._scores.items():
                n, m = s.values.shape
                parts.append(
                    pd.DataFrame(
                        {
                            "run": np.full(n * m, run, dtype=object),
                            "query_id": np.repeat(np.array(s.query_ids, dtype=object), m),
                            "metric": np.tile(names, n),
                            "value": s.values.ravel(),
                        }
                    )
                )
            frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=PER_QUERY_COLUMNS)
            self._per_query = frame
        return self._per_query.copy()

    @property
    def summary(self) -> pd.DataFrame:
        """Per run and metric: ``mean, sum, std, median, ci_low, ci_high, n`` (95% bootstrap interval of the
        mean, 1000 resamples, seed 0; see :meth:`summarize` to choose)."""
        if self._summary is None:
            self._summary = self.summarize()
        return self._summary.copy()

    def summarize(self, *, resamples: int = 1000, confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
        """The summary with a bootstrap of ``resamples`` resamples (seeded) at the given confidence."""
        import pandas as pd

        rows = []
        for run, s in self._scores.items():
            stats = summarize_values(s.values, resamples=resamples, confidence=confidence, seed=seed)
            for j, metric in enumerate(self.metrics):
                rows.append([run, metric] + [stats[c][j] for c in SUMMARY_COLUMNS[2:]])
        frame = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
        return frame.astype({"n": np.int64})

    def values(self, run: str, metric: str | Metric) -> pd.Series:
        """One run's values of one metric, indexed by query id."""
        import pandas as pd

        wanted = parse_metric(metric)
        if wanted not in self._metrics:
            raise KeyError(f"metric {str(wanted)!r} was not measured; measured: {self.metrics}")
        if run not in self._scores:
            raise KeyError(f"no run named {run!r}; runs: {self.runs}")
        j = self._metrics.index(wanted)
        s = self._scores[run]
        return pd.Series(s.values[:, j], index=pd.Index(s.query_ids, name="query_id"), name=str(self._metrics[j]))

    def mean(self, run: str, metric: str | Metric) -> float:
        return float(self.values(run, metric).mean())

    def __repr__(self) -> str:
        return f"Report(runs={self.runs}, metrics={self.metrics})"

    def _repr_html_(self) -> str:
        table = self.summary.pivot(index="run", columns="metric", values="mean")[self.metrics]
        return f"<p>rag_eval report ({self.card.preset or 'custom'} conventions)</p>" + table._repr_html_()

    # ----- persistence --------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the per-query values to Parquet, with the metric card in the file's metadata."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(self.per_query, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[_CARD_KEY] = self._card.model_dump_json().encode()
        meta[b"rag_eval.runs"] = json.dumps({r: s.query_ids for r, s in self._scores.items()}).encode()
        pq.write_table(table.replace_schema_metadata(meta), path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Report:
        """Read a report written by :meth:`save`."""
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        meta = table.schema.metadata or {}
        if _CARD_KEY not in meta:
            raise ValueError(f"{os.fspath(path)}: not a rag_eval report (no metric card in its metadata)")
        card = MetricCard.model_validate_json(meta[_CARD_KEY])
        metrics = [parse_metric(m) for m in card.metrics]
        run_queries: dict[str, list[str]] = json.loads(meta[b"rag_eval.runs"])
        frame = table.to_pandas()
        scores = {}
        for run, query_ids in run_queries.items():
            values = frame.loc[frame["run"] == run, "value"].to_numpy(dtype=np.float64)
            scores[run] = RunScores(query_ids, values.reshape(len(query_ids), len(metrics)))
        return cls(scores, metrics, card)
