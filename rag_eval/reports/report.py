"""Report: what ``rag_eval.evaluate`` returns, always. Per-query values, a summary with spread, and the card.

A report is made of score blocks: one per run, or, for a pipeline, one per stage (its rows then carry a
``stage`` column). A value may be NaN where a metric is 0/0 (the stage-aware views say when); summaries leave
NaN out of the mean and show how many there were.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..metrics.grammar import Metric, parse_metric
from .card import MetricCard
from .summary import STAGE_SUMMARY_COLUMNS, SUMMARY_COLUMNS, summarize_values

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Report"]

PER_QUERY_COLUMNS = ["run", "query_id", "metric", "value"]
STAGE_PER_QUERY_COLUMNS = ["run", "stage", "query_id", "metric", "value"]
_CARD_KEY = b"rag_eval.card"
_BLOCKS_KEY = b"rag_eval.blocks"
_TABLES_KEY = b"rag_eval.tables"


@dataclass(frozen=True)
class RunScores:
    """One block of per-query values: ``values[i, j]`` is metric ``metrics[j]`` of query ``query_ids[i]``."""

    query_ids: list[str]
    values: np.ndarray  # float64 [queries, metrics]; NaN where a metric is 0/0
    run: str = "run"
    stage: str | None = None
    metrics: list[str] = field(default_factory=list)  # names as reported (canonical, or e.g. "ndcg@budget")
    n_failed: int = 0  # queries the stage failed on (counted as 0, or left out: see the card)

    def describe(self) -> dict[str, Any]:
        out = asdict(self)
        del out["values"]
        return out


class Report:
    """The values of every metric for every run (and stage) and query, with the metric card that explains them.

    ``per_query`` is a tidy DataFrame (``run, [stage,] query_id, metric, value``); ``summary`` averages it per run
    (stage) and metric with the spread (computed on first access); ``card`` says how the numbers were made.
    Pipeline reports also have ``latency``, ``failures``, ``issues`` and ``loss_items``.
    """

    def __init__(
        self, blocks: list[RunScores], metrics: list[Metric | str], card: MetricCard,
        tables: dict[str, pd.DataFrame] | None = None,
    ) -> None:
        names = [str(m) for m in metrics]
        self._blocks = [b if b.metrics else RunScores(b.query_ids, b.values, b.run, b.stage, names, b.n_failed) for b in blocks]
        self._metrics = names
        self._card = card
        self._tables = dict(tables or {})
        self._per_query: pd.DataFrame | None = None
        self._summary: pd.DataFrame | None = None

    @property
    def staged(self) -> bool:
        """Whether the report judges the stages of a pipeline (its tables then carry a ``stage`` column)."""
        return any(b.stage is not None for b in self._blocks)

    @property
    def runs(self) -> list[str]:
        return list(dict.fromkeys(b.run for b in self._blocks))

    @property
    def stages(self) -> list[str]:
        return list(dict.fromkeys(b.stage for b in self._blocks if b.stage is not None))

    @property
    def metrics(self) -> list[str]:
        """Names of the metrics, in the order requested (canonical strings; ``@budget``/``@depth`` for stages)."""
        return list(self._metrics)

    @property
    def card(self) -> MetricCard:
        return self._card

    @property
    def per_query(self) -> pd.DataFrame:
        """One row per run, [stage,] query and metric: columns ``run, [stage,] query_id, metric, value``."""
        if self._per_query is None:
            import pandas as pd

            columns = STAGE_PER_QUERY_COLUMNS if self.staged else PER_QUERY_COLUMNS
            parts = []
            for b in self._blocks:
                n, m = b.values.shape
                part = {
                    "run": np.full(n * m, b.run, dtype=object),
                    "stage": np.full(n * m, b.stage, dtype=object),
                    "query_id": np.repeat(np.array(b.query_ids, dtype=object), m),
                    "metric": np.tile(np.array(b.metrics, dtype=object), n),
                    "value": b.values.ravel(),
                }
                parts.append(pd.DataFrame({c: part[c] for c in columns}))
            self._per_query = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)
        return self._per_query.copy()

    @property
    def summary(self) -> pd.DataFrame:
        """Per run [and stage] and metric: ``mean, sum, std, median, ci_low, ci_high, n`` (95% bootstrap interval
        of the mean, 1000 resamples, seed 0; see :meth:`summarize`). Pipeline reports add ``n_failed`` (queries
        the stage failed on) and ``n_nan`` (0/0 values left out of the mean)."""
        if self._summary is None:
            self._summary = self.summarize()
        return self._summary.copy()

    def summarize(self, *, resamples: int = 1000, confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
        """The summary with a bootstrap of ``resamples`` resamples (seeded) at the given confidence."""
        import pandas as pd

        columns = STAGE_SUMMARY_COLUMNS if self.staged else SUMMARY_COLUMNS
        rows = []
        for b in self._blocks:
            stats = summarize_values(b.values, resamples=resamples, confidence=confidence, seed=seed)
            for j, metric in enumerate(b.metrics):
                row = {"run": b.run, "stage": b.stage, "metric": metric, "n_failed": b.n_failed}
                row.update({c: stats[c][j] for c in ("mean", "sum", "std", "median", "ci_low", "ci_high", "n", "n_nan")})
                rows.append([row[c] for c in columns])
        frame = pd.DataFrame(rows, columns=columns)
        return frame.astype({c: np.int64 for c in ("n", "n_failed", "n_nan") if c in columns})

    def _block(self, run: str, stage: str | None) -> RunScores:
        if run not in self.runs:
            raise KeyError(f"no run named {run!r}; runs: {self.runs}")
        if stage is None and self.staged:
            raise KeyError(f"this report has stages: give one of {self.stages}")
        for b in self._blocks:
            if b.run == run and b.stage == stage:
                return b
        raise KeyError(f"no stage named {stage!r} in run {run!r}; stages: {self.stages}")

    def values(self, run: str, metric: str | Metric, stage: str | None = None) -> pd.Series:
        """One run's (stage's) values of one metric, indexed by query id."""
        import pandas as pd

        b = self._block(run, stage)
        name = metric if isinstance(metric, str) and metric in b.metrics else str(parse_metric(metric))
        if name not in b.metrics:
            raise KeyError(f"metric {name!r} was not measured; measured: {b.metrics}")
        j = b.metrics.index(name)
        return pd.Series(b.values[:, j], index=pd.Index(b.query_ids, name="query_id"), name=name)

    def mean(self, run: str, metric: str | Metric, stage: str | None = None) -> float:
        """The mean over the queries, NaN values left out."""
        return float(np.nanmean(self.values(run, metric, stage).to_numpy()))

    def _table(self, name: str) -> pd.DataFrame:
        import pandas as pd

        table = self._tables.get(name)
        return table.copy() if table is not None else pd.DataFrame()

    @property
    def latency(self) -> pd.DataFrame:
        """Pipeline reports: per stage, p50 and p95 seconds per query computed, n, cache hits, failures."""
        return self._table("latency")

    @property
    def failures(self) -> pd.DataFrame:
        """Pipeline reports: one row per failed query and stage (``stage, query_id, error``)."""
        return self._table("failures")

    @property
    def issues(self) -> pd.DataFrame:
        """Pipeline reports: one row per issue mended in a usable answer (``stage, query_id, issue``): a repeated
        doc id kept once, hits cut to the depth, a different answer on a second call (``verify``)."""
        return self._table("issues")

    @property
    def judged(self) -> pd.DataFrame:
        """The judged share of each run (and stage) at the report's cutoffs: ``run, stage, metric, share, n``
        (share = mean judged@k over the counted queries that returned something, ``n`` of them). Below the
        threshold (on the card), that run's scores are lower bounds. See :mod:`rag_eval.reports.judged`."""
        return self._table("judged")

    @property
    def loss_items(self) -> pd.DataFrame:
        """Pipeline reports: where each relevant item went (``query_id, doc_id, grade, fate``; fate is one of
        never_retrieved, below_depth, reranked_out, delivered)."""
        return self._table("loss_items")

    def __repr__(self) -> str:
        stages = f", stages={self.stages}" if self.staged else ""
        return f"Report(runs={self.runs}{stages}, metrics={self.metrics})"

    def _repr_html_(self) -> str:
        index = ["run", "stage"] if self.staged else "run"
        table = self.summary.pivot_table(index=index, columns="metric", values="mean", sort=False)
        return f"<p>rag_eval report ({self.card.preset or 'custom'} conventions)</p>" + table._repr_html_()

    # ----- persistence --------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the per-query values to Parquet, with the metric card (and any pipeline tables) in its metadata."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(self.per_query, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[_CARD_KEY] = self._card.model_dump_json().encode()
        meta[_BLOCKS_KEY] = json.dumps([b.describe() for b in self._blocks]).encode()
        meta[_TABLES_KEY] = json.dumps({k: v.to_json(orient="split") for k, v in self._tables.items()}).encode()
        pq.write_table(table.replace_schema_metadata(meta), path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Report:
        """Read a report written by :meth:`save`."""
        import io

        import pandas as pd
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        meta = table.schema.metadata or {}
        if _CARD_KEY not in meta or _BLOCKS_KEY not in meta:
            raise ValueError(f"{os.fspath(path)}: not a rag_eval report (no metric card in its metadata)")
        card = MetricCard.model_validate_json(meta[_CARD_KEY])
        values = table.column("value").to_numpy()
        blocks, start = [], 0
        for d in json.loads(meta[_BLOCKS_KEY]):
            size = len(d["query_ids"]) * len(d["metrics"])
            block_values = values[start : start + size].reshape(len(d["query_ids"]), len(d["metrics"]))
            blocks.append(RunScores(values=block_values.astype(np.float64), **d))
            start += size
        tables = {k: pd.read_json(io.StringIO(v), orient="split") for k, v in json.loads(meta.get(_TABLES_KEY, b"{}")).items()}
        return cls(blocks, card.metrics, card, tables)
