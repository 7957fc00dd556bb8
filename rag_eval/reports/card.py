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
from ..metrics.conventions import PRESETS, Conventions
from ..metrics.engine import REASONS
from .hashes import ContentHashes

CARD_KEY = b"rag_eval.card"  # where a saved report (Parquet) keeps its card, in the file's metadata


#: what the stage-aware metrics whose name does not say it are a gain or a share of (rag_eval.reports.stage_aware)
STAGE_METRIC_NOTES = {
    "rerank_gain@budget": "a gain in recall: the reranker's recall@budget minus the recall@budget of the same "
    "candidates in the previous stage's order (after − before)",
    "cand_ndcg@budget": "the reranker's nDCG@budget over the best nDCG@budget the candidates it was given allow",
}


def metric_notes_of(metrics: list[str], *, max_grade: int | None = None) -> list[str]:
    """What the card says about metrics whose name does not tell how they are aggregated or parameterised:
    the geometric families (gm_map, gm_bpref), the text ones (relstring, runid), and err/nerr without
    ``max_grade`` (``max_grade``: the qrels' largest grade they then use, when known)."""
    from ..metrics.catalogue import FAMILIES
    from ..metrics.grammar import parse_metric

    notes = []
    for name in metrics:
        if name in STAGE_METRIC_NOTES:
            notes.append(f"{name}: {STAGE_METRIC_NOTES[name]}")
            continue
        try:
            metric = parse_metric(name)
        except (ValueError, TypeError):  # a stage's ndcg@budget and the like
            continue
        family = FAMILIES[metric.family]
        if family.aggregate == "geometric":
            notes.append(
                f"{name}: averaged over queries by the geometric mean of the per-query values, each floored "
                "at 1e-5 (trec_eval's MIN_GEO_MEAN); the summary's interval is the mean log's, exponentiated, "
                "and its sum is NaN"
            )
        elif family.kind == "text":
            notes.append(f"{name}: one string per query (Report.texts), not averaged")
        elif metric.family in ("err", "nerr") and "max_grade" not in metric.param:
            largest = f", {max_grade}" if max_grade is not None else ""
            notes.append(f"{name}: max_grade not given: the qrels' largest grade{largest}")
    return notes


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
        preset = next((name for name, c in PRESETS.items() if c == conventions), None)
        return cls(
            conventions=conventions,
            preset=preset,
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
        conv = self.conventions
        lines = [
            f"rag_eval {self.rag_eval_version} metric card",
            f"  conventions: {self.preset or 'custom'} ("
            + ", ".join(f"{k}={v}" for k, v in conv.model_dump().items())
            + ")",
            f"  metrics: {', '.join(self.metrics)}",
        ]
        if self.hashes is not None:
            lines.append(f"  content hashes: {self.hashes.render()}")
        lines.extend(f"  metric {n}" for n in self.metric_notes)
        if conv.unjudged == "remove":
            lines.append(
                "  condensed lists (Sakai 2007): unjudged items are removed from each ranking before measuring"
            )
        if self.judged:
            low = self.judged_threshold
            shown = []
            for j in self.judged:
                who = j["run"] + (f" / {j['stage']}" if j.get("stage") else "")
                share = j["share"]
                if share != share:  # NaN: no counted query has anything in its top k
                    shown.append(f"{who} {j['metric']} - (no results)")
                    continue
                flag = ", below threshold: lower bound" if low is not None and share < low else ""
                shown.append(f"{who} {j['metric']} {share:.1%} (n={j['n']}{flag})")  # the summary's mean and n
            lines.append(
                f"  judged share (threshold {low:g}): " + "; ".join(shown)
                if low is not None
                else "  judged share: " + "; ".join(shown)
            )
        lines.extend(f"  warning: {n}" for n in self.notes)
        if self.query_set is not None:
            from ..data.queryset import QuerySetCard

            lines.append(
                "  queries: a query set; the summary's traffic_mean is the traffic-weighted (Hajek) mean, "
                "weights frequency / inclusion probability, with a stratified bootstrap interval"
            )
            lines.extend("  " + line for line in QuerySetCard.from_dict(self.query_set).render().splitlines())
        if self.judge_agreement:
            from ..ground_truth.agreement_text import card_lines

            lines.extend(card_lines(self.judge_agreement))
        if self.answers:
            from .answer_runs import answers_lines

            lines.extend("  answers: " + line for line in answers_lines(self))
        if self.comparison:
            c = self.comparison
            lines.append(
                f"  comparison: against {c['baseline']!r}, {c['test']} test"
                + (f" ({c['permutations']} permutations)" if c.get("permutations") else "")
                + f", {c['correction']} correction over {c['hypotheses']} hypotheses, alpha {c['alpha']}, "
                f"{c['bootstrap_resamples']} bootstrap resamples, seed {c['seed']}"
            )
            detectable = c.get("minimum_detectable") or {}
            found = [r for r in detectable.get("pairs", []) if r.get("difference") is not None]
            if found:
                geometric = set(c.get("geometric") or [])
                lines.append(
                    f"  minimum detectable difference (paired t, power {detectable['power']:g}, alpha "
                    f"{detectable['alpha_per_test']:.4g} per test): "
                    + ", ".join(
                        f"{r['system']} {r['metric']} {r['difference']:.4g}"
                        + (" (of the mean log)" if r["metric"] in geometric else "")
                        + f" (n={r['n']}, sd {r['sd']:.4g})"
                        for r in found
                    )
                )
            if c.get("margin") is not None:
                lines.append(
                    f"  margin {c['margin']:g}: a difference that is not significant is ruled out where its "
                    f"{c['confidence']:.0%} interval lies within (-{c['margin']:g}, {c['margin']:g})"
                )
            shares = {k: v for k, v in c.get("unjudged_share", {}).items() if v is not None}
            at = c.get("unjudged_at") or {}
            if shares:
                lines.append(
                    "  unjudged share: "
                    + ", ".join(f"{k} {v:.1%}" + (f" (1 - {at[k]})" if at.get(k) else "") for k, v in shares.items())
                )
        if self.pipeline:
            every = self.pipeline.get("all") or [self.pipeline]
            for p in every:
                who = f" {p['run']!r}" if len(every) > 1 else ""
                lines.append(f"  pipeline{who}: {p['structure']} (depth {p['depth']}, {p['budget']})")
                lines.extend(_source_lines(p.get("source")))
        lines += self._sources("  ")
        for i, other in enumerate((self.comparison or {}).get("other_reports") or [], start=2):
            card = MetricCard.model_validate(other)
            lines.append(f"  report {i} of the comparison ({card.preset or 'custom'} conventions):")
            lines += card._sources("    ")
        return "\n".join(lines)

    def _sources(self, indent: str) -> list[str]:
        """The inputs, and the queries counted and left out of each run (stage)."""
        lines = []
        for record in self.inputs:
            where = f"{record.path} sha256:{record.sha256}" if record.path else "in memory"
            extra = f", ranked by {record.ranked_by}" if record.ranked_by else ""
            extra += f", TREC tag {record.tag!r}" if record.tag else ""
            lines.append(f"{indent}{record.role} {record.name!r}: {where}{extra}")
            lines.extend(f"{indent}  note: {n}" for n in record.notes)
        for q in self.queries:
            lines.append(f"{indent}{'stage' if self.pipeline else 'run'} {q.run!r}: {q.counted} queries counted")
            for label, groups in (("left out", q.left_out), ("counted as 0", q.counted_as_zero)):
                for reason, ids in groups.items():
                    shown = ", ".join(ids[:10]) + (f", ... ({len(ids) - 10} more)" if len(ids) > 10 else "")
                    lines.append(f"{indent}  {label}, {REASONS.get(reason, reason)}: {len(ids)} ({shown})")
        return lines


def _source_lines(source: dict[str, Any] | None) -> list[str]:
    """A pipeline read from recorded traces (rag_eval.stages.traced): the file, window and span counts."""
    if not source or source.get("kind") != "traces":
        return []
    start, end = source.get("window") or (None, None)
    kinds = ", ".join(f"{n} {k}" for k, n in (source.get("kinds") or {}).items())
    lines = [
        f"    source: traces, {source.get('path')} ({source.get('format')}), {source.get('spans')} spans ({kinds}); "
        f"{source.get('spans_used')} stage spans used for {source.get('queries')} queries; window {start} to {end}"
    ]
    lines.extend(f"    traces: {line}" for line in source.get("problems") or [])
    return lines
