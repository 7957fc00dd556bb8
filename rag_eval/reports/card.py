"""The metric card: what a set of numbers means. Attached to every Report.

It records the rag_eval version, the conventions, the metrics (canonical names), every input (path and SHA-256 of
the file as stored, or "in memory"), for each run the queries counted and those left out, with the reason, and the
content hashes of what the numbers were computed on (qrels, query set, corpus, conventions, budget: see
:mod:`rag_eval.reports.hashes`).
"""

from __future__ import annotations

import html
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .._escape import markdown_code
from .._version import __version__
from ..metrics.conventions import Conventions
from .card_text import CARD_KEY, STAGE_METRIC_NOTES, metric_notes_of, preset_of, render_card, render_hashes

__all__ = [
    "CARD_KEY",
    "STAGE_METRIC_NOTES",
    "ContentHashes",
    "InputRecord",
    "MetricCard",
    "QueryRecord",
    "metric_notes_of",
]


class ContentHashes(BaseModel):
    """The hashes of what a report was computed on (see :mod:`rag_eval.reports.hashes`). Each hash is 64 hex
    digits."""

    model_config = ConfigDict(frozen=True)

    qrels: str | None = None
    queries: str | None = None
    queries_basis: str | None = None  # "ids and texts" or "ids"
    corpus: str | None = None
    corpus_basis: str | None = None  # "collection" or "hits"
    conventions: str | None = None
    budget: str | None = None

    def render(self) -> str:
        """One line: each hash's first 12 hex digits, with what it covers."""
        return render_hashes(self.model_dump())


class InputRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: str  # "qrels" or "run"
    name: str
    path: str | None = None  # None: built in memory
    sha256: str | None = None
    ranked_by: str | None = None  # runs: "score" or "given"
    tag: str | None = None  # runs read from a TREC file: its tag (trec_eval's runid), which is not the run's name
    notes: list[str] = Field(default_factory=list)


class QueryRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    run: str
    counted: int
    # reason -> query ids; reasons: "run_only", "missing_run", "no_relevant" (see rag_eval.metrics._engine.REASONS)
    left_out: dict[str, list[str]] = Field(default_factory=dict)
    counted_as_zero: dict[str, list[str]] = Field(default_factory=dict)  # counted, but can only score 0


class MetricCard(BaseModel):
    """Everything needed to read, trust and reproduce a report's numbers."""

    model_config = ConfigDict(frozen=True)

    rag_eval_version: str = __version__
    conventions: Conventions
    preset: str | None = None  # the preset the conventions equal, if any
    metrics: list[str]
    inputs: list[InputRecord]
    queries: list[QueryRecord]
    # a pipeline report: the first pipeline's run, structure, depth, budget and stages, and under "all" every
    # pipeline evaluated (the first one included), each with the same keys
    pipeline: dict[str, Any] | None = None
    comparison: dict[str, Any] | None = None  # a comparison: test, correction, alpha, resamples, seed, ...
    # judged share per run (and stage): {"run", "stage", "metric", "share", "n"}; below the threshold: lower bounds
    judged: list[dict[str, Any]] = Field(default_factory=list)
    judged_threshold: float | None = None
    # systematic problems said once per report (a stage failing on most queries, capped results, qrels sharing
    # few queries with a run, low judged shares): the lines warned, also in Report.issues
    notes: list[str] = Field(default_factory=list)
    # how a metric is aggregated or parameterised where its name does not say it: a geometric mean (gm_map), text
    # values (relstring), err's max_grade taken from the qrels
    metric_notes: list[str] = Field(default_factory=list)
    # what the numbers were computed on (None on a card saved before rag_eval 0.2.0): see rag_eval.reports.hashes
    hashes: ContentHashes | None = None
    # a report made with a rag_eval.QuerySet: that set's card (QuerySetCard.to_dict()); its summary then has the
    # traffic-weighted mean (see rag_eval.reports.weighted)
    query_set: dict[str, Any] | None = None
    # a model judge's agreement with people (Report.with_judge_agreement): {"items": [JudgeAgreement.to_dict()],
    # "rankings": [RankingAgreement.to_dict()]}; see rag_eval.ground_truth.agreement
    judge_agreement: dict[str, Any] | None = None
    # a generator's answers graded (Report.with_answers): the generator, prompt, counts, means with intervals and
    # the predictor table; see rag_eval.reports.answered
    answers: dict[str, Any] | None = None
    # the answers of several runs (with_answers once per run): every run's record by run name, the first being
    # ``answers``, each later one with its paired difference from the first ("paired"); None for one run answered.
    # See rag_eval.reports.answer_runs
    answers_by_run: dict[str, dict[str, Any]] | None = None

    @property
    def budget(self) -> str | None:
        """The pipelines' context budget (``budget(5)``, ``budget(512tok)``), None for plain runs."""
        return self.hashes.budget if self.hashes is not None else None

    @classmethod
    def build(
        cls,
        conventions: Conventions,
        metrics: list[str],
        inputs: list[InputRecord],
        queries: list[QueryRecord],
        pipeline: dict[str, Any] | None = None,
        judged: list[dict[str, Any]] | None = None,
        judged_threshold: float | None = None,
        notes: list[str] | None = None,
        metric_notes: list[str] | None = None,
        hashes: ContentHashes | None = None,
    ) -> MetricCard:
        return cls(
            conventions=conventions,
            preset=preset_of(conventions),
            metrics=metrics,
            inputs=inputs,
            queries=queries,
            pipeline=pipeline,
            judged=judged or [],
            judged_threshold=judged_threshold,
            notes=notes or [],
            metric_notes=metric_notes if metric_notes is not None else metric_notes_of(metrics),
            hashes=hashes,
        )

    def __repr__(self) -> str:
        runs = [q.run for q in self.queries]
        shown = f", budget={self.budget!r}" if self.budget else ""
        hashed = f", qrels sha256:{self.hashes.qrels[:12]}" if self.hashes and self.hashes.qrels else ""
        return (
            f"MetricCard(rag_eval {self.rag_eval_version}, conventions={self.preset or 'custom'}, "
            f"metrics={self.metrics}, runs={runs}{shown}{hashed})"
        )

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(self.render())}</pre>"

    def _repr_markdown_(self) -> str:
        return markdown_code(self.render())

    def render(self) -> str:
        """A short human-readable text (what the CLI prints to stderr)."""
        others = (self.comparison or {}).get("other_reports") or []
        answers: list[str] = []
        if self.answers:
            from .answer_runs import answers_lines

            answers = answers_lines(self)
        return render_card(self.model_dump(), [MetricCard.model_validate(o).model_dump() for o in others], answers)
