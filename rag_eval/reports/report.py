"""Report: what ``rag_eval.evaluate`` returns, always. Per-query values, a summary with spread, and the card.

A report is made of score blocks: one per run, or, for a pipeline, one per stage (its rows then carry a
``stage`` column). A value may be NaN where a metric is 0/0 (judged@k of an empty top k; the stage-aware views
say when); summaries leave NaN out of the mean and count it in ``n_nan``, so that ``n + n_nan`` is the number of
queries the card says were counted.

The families averaged by a geometric mean (gm_map, gm_bpref) are summarised by it (each value floored at 1e-5, as
trec_eval does; see :func:`~rag_eval.reports.summary.summarize_geometric`). The families whose per-query value is
a string (relstring, runid) are kept apart from the float tables: :meth:`Report.texts` and
:attr:`Report.per_query_text` (saved and loaded with the report); they have no summary row.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import check_int, check_share
from .._files import write_output
from .._markdown import html_table, markdown_table
from ..errors import InputError
from ..metrics.catalogue import FAMILIES
from ..metrics.conventions import follows_trec_eval
from ..metrics.grammar import Metric, parse_metric
from .card_text import CARD_KEY, CardDraft, check_counted, counted_of
from .summary import STAGE_SUMMARY_COLUMNS, SUMMARY_COLUMNS, summarize_geometric, summarize_values
from .weighted import TRAFFIC_COLUMNS, QueryWeights, hajek_bootstrap, hajek_geometric

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd
    import pyarrow as pa

    from ..data.collection import Collection
    from ..data.qrels import Qrels
    from ..data.run import Run
    from ..stages.result import PipelineResult
    from .card import MetricCard

__all__ = ["Report"]

PER_QUERY_COLUMNS = ["run", "query_id", "metric", "value"]
STAGE_PER_QUERY_COLUMNS = ["run", "stage", "query_id", "metric", "value"]
_BLOCKS_KEY = b"rag_eval.blocks"
_TABLES_KEY = b"rag_eval.tables"
CURVES = "recall_curves"
_CURVES_KEY = b"rag_eval.recall_curves"  # the pipeline table of recall@k per stage (Report.recall_curves)
_TEXTS_KEY = b"rag_eval.texts"
_WEIGHTS_KEY = b"rag_eval.query_weights"
ANSWERS = "answers"
_ANSWERS_KEY = b"rag_eval.answers"  # the answer table (Report.answers), every value as given (ids stay str)


def is_text_metric(name: str) -> bool:
    """Whether a reported metric's per-query value is a str (the families of kind "text": relstring, runid)."""
    try:
        return FAMILIES[parse_metric(name).family].kind == "text"
    except (ValueError, TypeError):  # a stage's "ndcg@budget" and the like: numbers
        return False


def is_geometric_metric(name: str) -> bool:
    """Whether a reported metric is averaged by a geometric mean over queries (gm_map, gm_bpref)."""
    try:
        return FAMILIES[parse_metric(name).family].aggregate == "geometric"
    except (ValueError, TypeError):
        return False


@dataclass(frozen=True)
class RunScores:
    """One block of per-query values: ``values[i, j]`` is metric ``metrics[j]`` of query ``query_ids[i]``."""

    query_ids: list[str]
    values: np.ndarray  # float64 [queries, metrics]; NaN where a metric is 0/0
    run: str = "run"
    stage: str | None = None
    metrics: list[str] = field(default_factory=list)  # names as reported (canonical, or e.g. "ndcg@budget")
    n_failed: int = 0  # queries the stage failed on (counted as 0, or left out: see the card)
    # the metrics of kind "text" (relstring, runid): {metric: one str per query, aligned with query_ids}; never in
    # ``values`` or ``metrics``, so that the float tables stay floats
    texts: dict[str, list[str]] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        out = asdict(self)
        del out["values"], out["texts"]
        return out


class Report:
    """The values of every metric for every run (and stage) and query, with the metric card that explains them.

    ``per_query`` is a tidy DataFrame (``run, [stage,] query_id, metric, value``); ``summary`` averages it per run
    (stage) and metric with the spread (computed on first access); ``card`` says how the numbers were made.
    Pipeline reports also have ``latency``, ``failures``, ``issues`` and ``loss_items``.
    """

    def __init__(
        self,
        blocks: list[RunScores],
        metrics: list[Metric | str],
        card: MetricCard | Callable[[], MetricCard] | CardDraft,
        tables: Mapping[str, pd.DataFrame | Callable[[], pd.DataFrame]] | None = None,
        weights: QueryWeights | None = None,
    ) -> None:
        names = [str(m) for m in metrics]
        self._blocks = [
            b
            if b.metrics
            else RunScores(
                b.query_ids, b.values, b.run, b.stage, [n for n in names if n not in b.texts], b.n_failed, b.texts
            )
            for b in blocks
        ]
        self._metrics = names
        # a card may come as a function that builds it (its content hashes read every judgement), or as a CardDraft
        # (its fields as plain data, printed by render_card without pydantic): built on first use
        self._draft = card if isinstance(card, CardDraft) else None
        self._card_of = card if callable(card) else None
        self._card_built = None if callable(card) or isinstance(card, CardDraft) else card
        # a table may come as a function that builds it (pandas loads where a table is read): built on first use
        self._table_of = dict(tables or {})
        self._weights = weights
        if weights is not None:
            for b in self._blocks:
                weights.check(b.query_ids, f"run {b.run!r}" + (f", stage {b.stage!r}" if b.stage is not None else ""))
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
        """Names of the metrics, in the order requested (canonical strings; ``@budget``/``@depth`` for stages),
        those of kind "text" (relstring, runid: see :meth:`texts`) included."""
        return list(self._metrics)

    @property
    def text_metrics(self) -> list[str]:
        """The metrics whose per-query value is a str (relstring, runid), in the order requested: they are in
        :attr:`per_query_text`, not in :attr:`per_query` or :attr:`summary` (no number summarises them)."""
        held = {m for b in self._blocks for m in b.texts}
        return [m for m in self._metrics if m in held]

    def query_ids(self, run: str, stage: str | None = None) -> list[str]:
        """The queries counted for ``run`` (and ``stage``), in the report's order (string order)."""
        return list(self.block(run, stage).query_ids)

    def texts(self, run: str, metric: str | Metric, stage: str | None = None) -> pd.Series:
        """One run's (stage's) values of a text metric (relstring, runid), indexed by query id."""
        import pandas as pd

        b = self.block(run, stage)
        name = metric if isinstance(metric, str) and metric in b.texts else str(parse_metric(metric))
        if name not in b.texts:
            raise KeyError(f"metric {name!r} has no text values; text metrics measured: {sorted(b.texts)}")
        return pd.Series(b.texts[name], index=pd.Index(b.query_ids, name="query_id"), name=name, dtype=object)

    @property
    def per_query_text(self) -> pd.DataFrame:
        """The text metrics (relstring, runid): one row per run, [stage,] query and metric, columns
        ``run, [stage,] query_id, metric, text``."""
        import pandas as pd

        columns = (STAGE_PER_QUERY_COLUMNS if self.staged else PER_QUERY_COLUMNS)[:-1] + ["text"]
        rows = [
            (b.run, b.stage, q, m, t)
            for b in self._blocks
            for m, texts in b.texts.items()
            for q, t in zip(b.query_ids, texts, strict=True)
        ]
        frame = pd.DataFrame(rows, columns=["run", "stage", "query_id", "metric", "text"], dtype=object)
        return frame[columns]

    @property
    def card(self) -> MetricCard:
        if self._card_built is None:
            if self._draft is not None:  # pydantic loads where a card is read (start-up, issue 28)
                from .card import MetricCard

                self._card_built, self._draft = MetricCard.model_validate(self._draft.fields()), None
            else:
                assert self._card_of is not None
                self._card_built, self._card_of = self._card_of(), None
        return self._card_built

    def render_card(self) -> str:
        """``card.render()``, without making the card's pydantic model if not made yet (the command line's card)."""
        return self._draft.render() if self._draft is not None else self.card.render()

    @property
    def query_weights(self) -> dict[str, float] | None:
        """A report made with a :class:`~rag_eval.QuerySet`: each query's traffic weight (``frequency / inclusion
        probability``, what ``QuerySet.weights("traffic")`` gives), from which :attr:`summary` computes the
        traffic-weighted mean; None for other reports."""
        return None if self._weights is None else dict(self._weights.weights)

    def with_query_set(self, query_set: Any) -> Report:
        """The same values with a :class:`~rag_eval.QuerySet`'s card (``card.query_set``) and traffic weights: its
        summary then has the traffic-weighted mean beside the per-query mean. Every evaluated query must be in the
        set (else an InputError naming it)."""
        from ..data.queryset import QuerySet

        if not isinstance(query_set, QuerySet):
            raise TypeError(f"queries must be a rag_eval.QuerySet, not {type(query_set).__name__}")
        weights = QueryWeights.of(query_set)
        from ..data.joins import join  # the set's queries and those evaluated: matched k of n, said when short

        join(
            list(query_set),
            {q for b in self._blocks for q in b.query_ids},
            what="the query set's queries",
            where="the queries evaluated",
            consequence="its traffic-weighted means are over those evaluated only",
        )
        card = self._card_updated({"query_set": query_set.card.to_dict()})
        return Report(self._blocks, list(self._metrics), card, self._table_of, weights)

    def _card_updated(self, update: dict[str, Any]) -> MetricCard | Callable[[], MetricCard]:
        """The card with ``update``: now if it is built, else when first read (its content hashes wait as well)."""
        if self._card_built is not None:
            return self._card_built.model_copy(update=update)
        return lambda: self.card.model_copy(update=update)

    def with_judge_agreement(self, *agreements: Any) -> Report:
        """The same values with a model judge's agreement with people on the card (``card.judge_agreement``, shown
        by ``card.render()``): each of ``agreements`` a :class:`~rag_eval.ground_truth.agreement.JudgeAgreement`
        (on the items both graded) or a :class:`~rag_eval.ground_truth.agreement.RankingAgreement` (of the systems'
        rankings), added to those the card holds already."""
        held = dict(self.card.judge_agreement or {})
        items, rankings = list(held.get("items") or []), list(held.get("rankings") or [])
        for a in agreements:
            # told apart by the kind their to_dict() states (ground_truth sits beside reports: no import of it here)
            record = a.to_dict() if callable(getattr(a, "to_dict", None)) else None
            kind = record.get("kind") if isinstance(record, dict) else None
            if kind == "items":
                items.append(record)
            elif kind == "ranking":
                rankings.append(record)
            else:
                raise TypeError(f"expected a JudgeAgreement or a RankingAgreement, not {type(a).__name__}")
        card = self.card.model_copy(update={"judge_agreement": {"items": items, "rankings": rankings}})
        return self.with_card(card)

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
                    "run": _str_column([b.run], np.zeros(n * m, np.int64)),
                    "stage": _str_column([b.stage], np.zeros(n * m, np.int64)),
                    "query_id": _str_column(b.query_ids, np.repeat(np.arange(n), m)),
                    "metric": _str_column(b.metrics, np.tile(np.arange(m), n)),
                    "value": b.values.ravel(),
                }
                parts.append(pd.DataFrame({c: part[c] for c in columns}))
            self._per_query = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)
        return self._per_query.copy()

    @property
    def summary(self) -> pd.DataFrame:
        """Per run [and stage] and metric: ``mean, sum, std, median, ci_low, ci_high, n, n_nan`` (95% bootstrap
        interval of the mean, 1000 resamples, seed 0; see :meth:`summarize`). ``n`` values are averaged; ``n_nan``
        counted queries are 0/0 (NaN) and left out; ``n + n_nan`` is what the card says was counted. Pipeline
        reports add ``n_failed`` (queries the stage failed on). A report made with a :class:`~rag_eval.QuerySet`
        adds ``traffic_mean, traffic_ci_low, traffic_ci_high`` after ``ci_high``: the traffic-weighted (Hajek) mean
        and its stratified bootstrap interval (see :mod:`rag_eval.reports.weighted`)."""
        if self._summary is None:
            self._summary = self.summarize()
        return self._summary.copy()

    def summarize(self, *, resamples: int = 1000, confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
        """The summary with a bootstrap of ``resamples`` resamples (seeded) at the given confidence."""
        import pandas as pd

        columns, rows = self.summary_rows(resamples=resamples, confidence=confidence, seed=seed)
        frame = pd.DataFrame(rows, columns=columns)
        return frame.astype({c: np.int64 for c in ("n", "n_failed", "n_nan") if c in columns})

    def summary_rows(
        self, *, resamples: int = 1000, confidence: float = 0.95, seed: int = 0
    ) -> tuple[list[str], list[list[Any]]]:
        """:meth:`summarize`'s columns and rows (the same numbers), without pandas: for printing at the command
        line."""
        resamples, confidence = check_int(resamples, "resamples"), check_share(confidence, "confidence")

        columns = list(STAGE_SUMMARY_COLUMNS if self.staged else SUMMARY_COLUMNS)
        if self._weights is not None:  # the traffic-weighted mean beside the per-query mean (see weighted.py)
            at = columns.index("ci_high") + 1
            columns[at:at] = TRAFFIC_COLUMNS
        # trec_eval's mean, in its order of operations
        sequential = follows_trec_eval(self._draft.conventions if self._draft is not None else self.card.conventions)
        rows = []
        for b in self._blocks:
            stats = summarize_values(
                b.values, resamples=resamples, confidence=confidence, seed=seed, sequential=sequential
            )
            geometric = [j for j, m in enumerate(b.metrics) if is_geometric_metric(m)]
            if geometric:  # gm_map, gm_bpref: a geometric mean of the values floored at 1e-5 (see summary.py)
                gm = summarize_geometric(
                    b.values[:, geometric], resamples=resamples, confidence=confidence, seed=seed, sequential=sequential
                )
                for key, column in gm.items():
                    stats[key] = stats[key].astype(np.result_type(stats[key], column))
                    stats[key][geometric] = column
            if self._weights is not None:
                stats |= self._traffic(b, geometric, resamples=resamples, confidence=confidence, seed=seed)
            for j, metric in enumerate(b.metrics):
                row = {"run": b.run, "stage": b.stage, "metric": metric, "n_failed": b.n_failed}
                row.update({c: stats[c][j] for c in columns if c in stats})
                rows.append([row[c] for c in columns])
        return columns, rows

    def _traffic(
        self, b: RunScores, geometric: list[int], *, resamples: int, confidence: float, seed: int
    ) -> dict[str, np.ndarray]:
        """One block's traffic-weighted (Hajek) means and their stratified bootstrap intervals, per metric."""
        assert self._weights is not None
        weights = np.array([self._weights.weights[q] for q in b.query_ids], dtype=np.float64)
        strata = [self._weights.strata.get(q) for q in b.query_ids]
        mean, low, high = hajek_bootstrap(
            b.values, weights, strata, resamples=resamples, confidence=confidence, seed=seed
        )
        if geometric:
            gm = hajek_geometric(
                b.values[:, geometric], weights, strata, resamples=resamples, confidence=confidence, seed=seed
            )
            for whole, part in zip((mean, low, high), gm, strict=True):
                whole[geometric] = part
        return dict(zip(TRAFFIC_COLUMNS, (mean, low, high), strict=True))

    @property
    def blocks(self) -> list[RunScores]:
        """The per-query values, one block per run (and stage), in the report's order."""
        return list(self._blocks)

    def block(self, run: str, stage: str | None = None) -> RunScores:
        """One run's (stage's) block of per-query values; a KeyError names the runs or stages there are."""
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

        b = self.block(run, stage)
        name = metric if isinstance(metric, str) and metric in b.metrics else str(parse_metric(metric))
        if name in b.texts:
            raise KeyError(f"metric {name!r} holds text (one str per query): read it with Report.texts")
        if name not in b.metrics:
            raise KeyError(f"metric {name!r} was not measured; measured: {b.metrics}")
        j = b.metrics.index(name)
        return pd.Series(b.values[:, j], index=pd.Index(b.query_ids, name="query_id"), name=name)

    def column(self, run: str, metric: str, stage: str | None = None) -> np.ndarray | list[str]:
        """One run's (stage's) values of a reported metric (its canonical string) without pandas: a float64 array,
        or for a text metric a list of str; aligned with :meth:`query_ids`."""
        b = self.block(run, stage)
        if metric in b.texts:
            return list(b.texts[metric])
        if metric not in b.metrics:
            raise KeyError(f"metric {metric!r} was not measured; measured: {b.metrics}")
        return b.values[:, b.metrics.index(metric)]

    def counted(self, run: str, stage: str | None = None) -> int:
        """How many queries the card says were counted for ``run`` (and ``stage``): ``n + n_nan`` of each of its
        summary rows."""
        b = self.block(run, stage)
        found = counted_of(self.card, run, stage)
        return len(b.query_ids) if found is None else found

    def mean(self, run: str, metric: str | Metric, stage: str | None = None) -> float:
        """The mean over the queries, NaN values left out (for gm_map and gm_bpref the geometric mean of the
        values floored at 1e-5, as in the summary)."""
        values = self.values(run, metric, stage)
        if is_geometric_metric(str(values.name)):
            finite = values.to_numpy()[~np.isnan(values.to_numpy())]
            return float(summarize_geometric(finite[:, None], resamples=1, confidence=0.95, seed=0)["mean"][0])
        return float(np.nanmean(values.to_numpy()))

    @property
    def _tables(self) -> dict[str, pd.DataFrame]:
        """The tables by name, each built on first read where it came as a function."""
        for name, table in self._table_of.items():
            if callable(table):
                self._table_of[name] = table()
        return self._table_of  # type: ignore[return-value]  # every function replaced by its table

    def _table(self, name: str) -> pd.DataFrame:
        import pandas as pd

        table = self._tables.get(name)
        return table.copy() if table is not None else pd.DataFrame()

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        """The pipeline tables by name (``latency``, ``failures``, ``issues``, ``loss_items``, ``judged``,
        ``recall_curves``), each a copy; empty for a report of runs."""
        return {name: table.copy() for name, table in self._tables.items()}

    @property
    def recall_curves(self) -> pd.DataFrame:
        """Pipeline reports: mean recall@k of every stage for k on a log scale up to the depth (``run, stage, k,
        recall``), measured at evaluation under the report's conventions (it meets the table's recall@depth at the
        depth). Empty for a report of runs, or one saved before 0.10."""
        import pandas as pd

        table = self._table(CURVES)
        return table if len(table.columns) else pd.DataFrame(columns=["run", "stage", "k", "recall"])

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
        """One row per issue (pipeline reports: ``stage, query_id, issue``; plain runs: ``run, query_id, issue``): in
        a pipeline, an issue mended in a usable answer (a repeated doc id kept once, hits cut to the depth, a different
        answer on a second call under ``verify``); in every report, each systematic problem said once, in a row
        without a query (a stage failing on most queries, a retriever capping its results, qrels sharing few queries
        with a run, judged shares below the threshold), as on the card's notes."""
        return self._table("issues")

    @property
    def judged(self) -> pd.DataFrame:
        """The judged share of each run (and stage) at the report's cutoffs: ``run, stage, metric, share, n``
        (share = mean judged@k over the ``n`` counted queries whose top k holds something: the summary's mean and
        ``n`` of judged@k). Below the threshold (on the card), that run's scores are lower bounds. See
        :mod:`rag_eval.reports._judged`."""
        return self._table("judged")

    @property
    def loss_items(self) -> pd.DataFrame:
        """Pipeline reports: where each relevant item went (``query_id, doc_id, grade, fate``; fate is one of
        never_retrieved, below_depth, reranked_out, failed (a stage failed on its query), delivered)."""
        return self._table("loss_items")

    @property
    def answers(self) -> pd.DataFrame:
        """The generator's answer per query and their grades (:func:`with_answers`; columns
        :data:`~rag_eval.reports.answered.ANSWER_TABLE_COLUMNS`, after ``run`` when several runs answered); empty
        without. What made them, and the grades' means with intervals: ``card.answers`` (``card.answers_by_run``)."""
        return self._table(ANSWERS)

    def answer_values(self, metric: str, run: str | None = None) -> pd.Series:
        """One answer grade per query (``answer.f1``, ``answer.exact_match``, ``answer.contains``), indexed by query
        id, NaN where the answer failed; ``run``: whose, when several runs' are attached. A KeyError without answers."""
        from .answered import answer_values

        if self.card.answers is None or ANSWERS not in self._tables:
            raise KeyError("the report carries no answers (Report.with_answers, rag-eval answers)")
        return answer_values(self._tables[ANSWERS], self.card.answers, metric, run=run)

    def with_answers(
        self,
        answers: Any,
        references: Mapping[str, str | Sequence[str]],
        *,
        questions: Mapping[str, str] | None = None,
        run: str | None = None,
        stage: str | None = None,
        predictors: Any = None,
        judged: Any = None,
        agreement: Any = None,
        replace: bool = False,
    ) -> Report:
        """The same report with ``answers`` (:func:`rag_eval.stages.generator.generate_answers`' Answers, made from
        ``run``'s ``stage``: by default the one run and its last stage) graded against ``references`` and attached:
        :attr:`answers` per query, ``card.answers`` (the generator, prompt, counts, means with intervals and
        ``predictors``, an AnswerPrediction, when given). ``judged``: a judge's verdicts on the same answers
        (:func:`~rag_eval.ground_truth.judge_answers`), set beside the grades per query, with ``agreement``
        (:func:`~rag_eval.statistics.answer_agreement`) summarised once on the card. A query answered that the run
        did not measure is an InputError. Once per run: each run's kept, with its paired difference from the first
        (:mod:`~rag_eval.reports.answer_runs`); a run answered again is an InputError unless ``replace``."""
        from .answer_runs import accumulated
        from .answered import attached

        table, record = attached(self, answers, references, questions, run, stage, predictors, judged, agreement)
        table, first, by_run = accumulated(self, table, record, replace=replace)
        card = self.card.model_copy(update={"answers": first, "answers_by_run": by_run})
        return Report(self._blocks, list(self._metrics), card, {**self._table_of, ANSWERS: table}, self._weights)

    def with_card(self, card: MetricCard) -> Report:
        """The same values under another card (a result folder's, with the corpus fingerprinted)."""
        return Report(self._blocks, list(self._metrics), card, self._table_of, self._weights)

    def __repr__(self) -> str:
        stages = f", stages={self.stages}" if self.staged else ""
        queries = max((len(b.query_ids) for b in self._blocks), default=0)
        return f"Report(runs={self.runs}{stages}, metrics={self.metrics}, queries={queries})"

    def _shown(self) -> pd.DataFrame:
        """The summary as a notebook shows it: keys, mean with its interval, n and n_nan."""
        keys = ["run", "stage"] if self.staged else ["run"]
        traffic = TRAFFIC_COLUMNS if self._weights is not None else []
        return self.summary[keys + ["metric", "mean", "ci_low", "ci_high", *traffic, "n", "n_nan"]]

    def _heading(self) -> str:
        card = self.card
        budget = f", {card.budget}" if card.budget else ""
        return (
            f"rag_eval {card.rag_eval_version} report: {len(self.runs)} run(s), {len(self.metrics)} metric(s), "
            f"{card.preset or 'custom'} conventions{budget}"
        )

    def _repr_html_(self) -> str:
        """A pipeline's funnel first (:mod:`rag_eval.reports.funnel_text`), then the summary as an HTML table (values
        escaped by pandas) under a one-line heading (escaped)."""
        from .funnel_text import funnel_html, funnel_of

        found = funnel_of(self)
        text = (funnel_html(found) if found else "") + html_table(self._shown(), heading=self._heading())
        from .answer_runs import answers_html

        return text + answers_html(self.card)

    def _repr_markdown_(self) -> str:
        """A pipeline's funnel first, then the summary as a Markdown table, cells escaped (``<``, ``&``, ``|``:
        Markdown renders raw HTML)."""
        from .funnel_text import funnel_markdown, funnel_of

        found = funnel_of(self)
        text = (funnel_markdown(found, level=3) + "\n" if found else "") + markdown_table(
            self._shown(), heading=self._heading()
        )
        from .answer_runs import answers_markdown

        shown = answers_markdown(self.card, level=3)
        return text + ("\n" + "\n".join(shown) if shown else "")

    # ----- persistence --------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the per-query values to Parquet, with the metric card (its content hashes and budget included) and
        any pipeline tables in its metadata; whole or not at all (a failed write keeps the file's old content)."""
        buffer = io.BytesIO()
        self._save_to(buffer)
        write_output(path, buffer.getvalue())

    def save_folder(
        self,
        folder: str | os.PathLike[str],
        *,
        qrels: Qrels | Mapping[str, Mapping[str, int]] | None = None,
        runs: Mapping[str, Run | PipelineResult] | Run | PipelineResult | None = None,
        collection: Collection | None = None,
        title: str | None = None,
        facts: Mapping[str, Any] | None = None,
        plots: bool | None = None,
    ) -> Path:
        """Write a result folder (``docs/result-folders.md``): the report, its card, summary and per-query tables,
        ``qrels`` (checked to be those the report was computed on), one TREC file per run or pipeline stage
        (``runs``: the runs or pipeline results evaluated), pipeline plots, ``report.md`` and a ``manifest.json``
        with the content hashes and each file's SHA-256. ``collection`` fingerprints the whole corpus. ``plots``:
        None draws them when matplotlib is installed. Returns the path of ``report.md``. See
        :func:`rag_eval.renderers.result_folder.write_folder`."""
        save = _renderers("result_folder").save_folder
        return save(  # type: ignore[no-any-return]
            self, folder, qrels=qrels, runs=runs, collection=collection, title=title, facts=facts, plots=plots
        )

    def to_html(
        self,
        path: str | os.PathLike[str],
        *,
        results: Mapping[str, PipelineResult] | PipelineResult | None = None,
        qrels: Qrels | Mapping[str, Mapping[str, int]] | None = None,
        collection: Collection | None = None,
        baseline: Report | str | os.PathLike[str] | None = None,
        drill_depth: int | None = None,
        title: str | None = None,
        plots: bool = True,
    ) -> Path:
        """Write the report as one self-contained HTML file (``docs/html-report.md``): the stage-aware summary,
        the plots as inline SVG, the metric card and a per-query drill-down of the stages' rankings (``results``,
        what was evaluated) to ``drill_depth`` (default: the budget plus 10), with grades from ``qrels`` and texts
        from the results' hits or ``collection``. ``baseline`` (a report or a result folder) adds a diff view of
        this report against it. Needs the ``html`` extra (jinja2, matplotlib); returns the path."""
        to_html = _renderers("html_report").report_to_html
        return to_html(  # type: ignore[no-any-return]
            self,
            path,
            results=results,
            qrels=qrels,
            collection=collection,
            baseline=baseline,
            drill_depth=drill_depth,
            title=title,
            plots=plots,
        )

    def log_to_mlflow(self, *, tracking_uri: str | None = None, **options: Any) -> Any:
        """Log this report to MLflow through its own client (``docs/mlflow.md``): the summary's means, intervals
        and counts as metrics, the card's settings as params, the card (and with ``html=``, the HTML report) as
        artifacts. Needs the ``mlflow`` extra; returns the LoggedRun. See
        :func:`rag_eval.renderers.mlflow_log.log_report` for the options."""
        return _renderers("mlflow_log").log_report(self, tracking_uri=tracking_uri, **options)

    @classmethod
    def load_folder(cls, folder: str | os.PathLike[str]) -> Report:
        """The report of a result folder written by :meth:`save_folder`, after checking each file against the
        manifest's SHA-256 (a file changed or missing is an InputError naming it); the card's content hashes must be
        the manifest's."""
        return _renderers("result_folder").load_folder(folder)  # type: ignore[no-any-return]

    def _save_to(self, sink: io.BytesIO) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(self.per_query, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[CARD_KEY] = self.card.model_dump_json().encode()
        meta[_BLOCKS_KEY] = json.dumps([b.describe() for b in self._blocks]).encode()
        meta[_TABLES_KEY] = json.dumps(
            {k: v.to_json(orient="split") for k, v in self._tables.items() if k not in (CURVES, ANSWERS)}
        ).encode()
        if ANSWERS in self._tables:
            meta[_ANSWERS_KEY] = json.dumps(self._tables[ANSWERS].to_dict(orient="list")).encode()
        if CURVES in self._tables:  # every digit (to_json keeps 10): the plots meet the table at the depth
            meta[_CURVES_KEY] = json.dumps(self._tables[CURVES].to_dict(orient="list")).encode()
        meta[_TEXTS_KEY] = json.dumps(
            [{"run": b.run, "stage": b.stage, "texts": b.texts} for b in self._blocks if b.texts]
        ).encode()
        if self._weights is not None:  # only for reports made with a QuerySet: older files have no such key
            meta[_WEIGHTS_KEY] = self._weights.to_json()
        pq.write_table(table.replace_schema_metadata(meta), sink)  # save() writes the bytes through _files

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Report:
        """Read a report written by :meth:`save`, each value by its key (run, [stage,] query_id, metric), so that
        rows reordered by another tool land where they belong. A file whose rows do not match its own metadata (a
        key missing, repeated or unknown, a key column of another type) is refused with an InputError naming it."""
        import pandas as pd
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pydantic import ValidationError

        from .card import MetricCard

        where = os.fspath(path)
        try:
            table = pq.read_table(path)
        except (pa.ArrowException, OSError) as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            raise InputError(f"not a Parquet file ({' '.join(str(exc).split())})", source=where) from None
        meta = table.schema.metadata or {}
        if CARD_KEY not in meta or _BLOCKS_KEY not in meta:
            raise InputError("not a rag_eval report (no metric card in its metadata)", source=where)
        try:
            card = MetricCard.model_validate_json(meta[CARD_KEY])
        except ValidationError as exc:
            raise InputError(f"its metric card does not parse ({exc.errors()[0]['msg']})", source=where) from None
        described = _described_blocks(meta[_BLOCKS_KEY], where)
        values = _values_by_key(table, described, where)
        texts = _described_texts(meta.get(_TEXTS_KEY, b"[]"), described, card, where)
        blocks = [
            RunScores(values=v, texts=texts.get((d["run"], d["stage"]), {}), **d)
            for d, v in zip(described, values, strict=True)
        ]
        check_counted(card, blocks, where)
        try:
            tables = {
                k: pd.read_json(io.StringIO(v), orient="split")
                for k, v in json.loads(meta.get(_TABLES_KEY, b"{}")).items()
            }
            if _CURVES_KEY in meta:
                tables[CURVES] = pd.DataFrame(json.loads(meta[_CURVES_KEY]), columns=["run", "stage", "k", "recall"])
            if _ANSWERS_KEY in meta:
                tables[ANSWERS] = pd.DataFrame(json.loads(meta[_ANSWERS_KEY]))
        except (ValueError, TypeError, AttributeError) as exc:
            raise InputError(f"its pipeline tables do not parse ({' '.join(str(exc).split())})", source=where) from None
        weights = QueryWeights.from_json(meta[_WEIGHTS_KEY], where) if _WEIGHTS_KEY in meta else None
        return cls(blocks, list[Metric | str](card.metrics), card, tables, weights)


def _renderers(module: str) -> Any:
    """A module of :mod:`rag_eval.renderers`, a floor above this one, loaded by name when a Report writes itself as
    HTML or a result folder (as pandas loads its plotting backend): this floor imports nothing above it, and the
    renderers read the Report through its public API."""
    import importlib

    return importlib.import_module(f"rag_eval.renderers.{module}")


def _metadata_list(raw: bytes, problem: str, where: str) -> list[Any]:
    """A saved report's metadata entry that must be a JSON list; else an InputError saying ``problem``."""
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, list):
        raise InputError(problem, source=where)
    return value


def _described_blocks(raw: bytes, where: str) -> list[dict[str, Any]]:
    """The blocks a saved report's metadata lists, checked: each a run, a stage or None, distinct query ids and
    distinct metric names, a count of failed queries; no two blocks with the same run and stage."""
    described = _metadata_list(raw, "its block list (metadata rag_eval.blocks) does not parse", where)
    seen: set[tuple[str, str | None]] = set()
    out = []
    for i, d in enumerate(described):
        ok = (
            isinstance(d, dict)
            and set(d) == {"query_ids", "run", "stage", "metrics", "n_failed"}
            and isinstance(d["run"], str)
            and (d["stage"] is None or isinstance(d["stage"], str))
            and isinstance(d["n_failed"], int)
            and not isinstance(d["n_failed"], bool)
            and all(isinstance(d[k], list) and all(isinstance(x, str) for x in d[k]) for k in ("query_ids", "metrics"))
        )
        if not ok:
            raise InputError(f"block {i} of its metadata (rag_eval.blocks) is malformed", source=where)
        who = f"run {d['run']!r}" + (f", stage {d['stage']!r}" if d["stage"] is not None else "")
        for key, what in (("query_ids", "query id"), ("metrics", "metric")):
            if len(set(d[key])) != len(d[key]):
                twice = next(x for x in d[key] if d[key].count(x) > 1)
                raise InputError(f"{who}: {what} {twice!r} is listed twice in its metadata", source=where)
        if (d["run"], d["stage"]) in seen:
            raise InputError(f"{who} is listed twice in its metadata", source=where)
        seen.add((d["run"], d["stage"]))
        out.append(d)
    return out


def _described_texts(
    raw: bytes, described: list[dict[str, Any]], card: MetricCard, where: str
) -> dict[tuple[str, str | None], dict[str, list[str]]]:
    """The text metrics' values a saved report's metadata holds, checked: each for a listed block, a metric of
    the card that is not among the block's numbers, one str per query of the block."""
    listed = _metadata_list(raw, "its text values (metadata rag_eval.texts) do not parse", where)
    blocks = {(d["run"], d["stage"]): d for d in described}
    out: dict[tuple[str, str | None], dict[str, list[str]]] = {}
    for i, entry in enumerate(listed):
        ok = (
            isinstance(entry, dict)
            and set(entry) == {"run", "stage", "texts"}
            and isinstance(entry["run"], str)
            and (entry["stage"] is None or isinstance(entry["stage"], str))
            and isinstance(entry["texts"], dict)
            and (entry["run"], entry["stage"]) in blocks
        )
        if not ok or (entry["run"], entry["stage"]) in out:
            raise InputError(
                f"entry {i} of its text values (metadata rag_eval.texts) is malformed, repeated or names "
                "a block its metadata does not list",
                source=where,
            )
        d = blocks[(entry["run"], entry["stage"])]
        for metric, values in entry["texts"].items():
            if metric not in card.metrics or metric in d["metrics"]:
                raise InputError(
                    f"its text values name metric {metric!r}, which the card does not list as text", source=where
                )
            if (
                not isinstance(values, list)
                or len(values) != len(d["query_ids"])
                or not all(isinstance(v, str) for v in values)
            ):
                raise InputError(
                    f"the text values of {metric!r} (run {d['run']!r}) are not one str per query", source=where
                )
        out[(entry["run"], entry["stage"])] = dict(entry["texts"])
    return out


def _key_column(table: pa.Table, name: str, where: str, *, nullable: bool = False) -> list[Any]:
    import pyarrow as pa

    if name not in table.column_names:
        raise InputError(f"no {name!r} column: not a report written by Report.save", source=where)
    column = table.column(name)
    kind = column.type
    if pa.types.is_dictionary(kind):
        column, kind = column.cast(kind.value_type), kind.value_type
    empty = nullable or len(column) == 0  # a report without rows is written with untyped (null) columns
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or (empty and pa.types.is_null(kind))):
        raise InputError(f"column {name!r} holds {kind}, not strings: its keys cannot be matched", source=where)
    values: list[Any] = column.to_pylist()
    if not nullable and None in values:
        raise InputError(f"column {name!r} has an empty (null) key in row {values.index(None)}", source=where)
    return values


def _values_by_key(table: pa.Table, described: list[dict[str, Any]], where: str) -> list[npt.NDArray[np.float64]]:
    """Each block's ``[queries, metrics]`` values, read from the rows by their key, whatever the rows' order."""
    import pyarrow as pa

    staged = any(d["stage"] is not None for d in described) or "stage" in table.column_names
    keys = [_key_column(table, c, where) for c in ("run", "query_id", "metric")]
    stages = _key_column(table, "stage", where, nullable=True) if staged else [None] * table.num_rows
    if "value" not in table.column_names:
        raise InputError("no 'value' column: not a report written by Report.save", source=where)
    kind = table.column("value").type
    if not (pa.types.is_floating(kind) or pa.types.is_integer(kind) or (pa.types.is_null(kind) and not table.num_rows)):
        raise InputError(f"column 'value' holds {kind}, not numbers", source=where)
    values = table.column("value").cast(pa.float64()).to_numpy(zero_copy_only=False)  # a null reads as NaN

    def shown(key: tuple[str, str | None, str, str]) -> str:
        run, stage, query, metric = key
        return (
            f"run {run!r}"
            + (f", stage {stage!r}" if stage is not None else "")
            + f", query {query!r}, metric {metric!r}"
        )

    rows = list(zip(keys[0], stages, keys[1], keys[2], strict=True))
    index = dict(zip(rows, range(len(rows)), strict=True))
    if len(index) != len(rows):
        seen: set[tuple[str, str | None, str, str]] = set()
        twice = rows[0]
        for twice in rows:
            if twice in seen:
                break
            seen.add(twice)
        raise InputError(f"two rows have the same key ({shown(twice)})", source=where)
    out, used = [], 0
    for d in described:
        wanted = [(d["run"], d["stage"], q, m) for q in d["query_ids"] for m in d["metrics"]]
        at = [index.get(key, -1) for key in wanted]
        if -1 in at:
            raise InputError(f"no row for {shown(wanted[at.index(-1)])}, which its metadata lists", source=where)
        used += len(at)
        out.append(values[np.array(at, dtype=np.int64)].reshape(len(d["query_ids"]), len(d["metrics"])))
    if used != len(rows):
        listed = {(d["run"], d["stage"]): (set(d["query_ids"]), set(d["metrics"])) for d in described}
        for run, stage, query, metric in rows:
            if (run, stage) not in listed:
                raise InputError(
                    f"a row of run {run!r}"
                    + (f", stage {stage!r}" if stage is not None else "")
                    + " that its metadata does not list",
                    source=where,
                )
            queries, metrics = listed[(run, stage)]
            if metric not in metrics:
                raise InputError(f"a row of an unknown metric ({shown((run, stage, query, metric))})", source=where)
            if query not in queries:
                raise InputError(f"a row of an unknown query ({shown((run, stage, query, metric))})", source=where)
    return out


def _str_column(values: Sequence[str | None], index: np.ndarray) -> Any:
    """``values[index]`` as a column of pandas' default str dtype: taken in Arrow where pandas stores str in Arrow
    (pandas 3), rather than inferred from millions of Python objects; an object array otherwise."""
    import pandas as pd

    default = pd.Series(np.array(["a"], dtype=object)).dtype
    if getattr(default, "storage", None) == "pyarrow":
        import pyarrow as pa

        return pd.array(pa.array(list(values), pa.large_string()).take(pa.array(index)), dtype=default)
    return np.asarray(values, dtype=object)[index]
