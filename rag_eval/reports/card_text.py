"""The metric card as text, and as plain data before its pydantic model is made (:class:`CardDraft`).

``rag-eval evaluate`` prints a report's card without loading pydantic (start-up, issue 28): :func:`render_card` reads
the card's fields as a dict (what ``MetricCard.model_dump()`` returns), so that :meth:`MetricCard.render` and
:meth:`CardDraft.render` are one text. See :mod:`rag_eval.reports.card`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._version import __version__
from ..errors import InputError
from ..metrics.conventions import PRESETS, Conventions
from ..metrics.engine import REASONS

if TYPE_CHECKING:
    from .card import MetricCard
    from .report import RunScores

__all__ = [
    "CARD_KEY",
    "STAGE_METRIC_NOTES",
    "CardDraft",
    "card_fields",
    "check_counted",
    "counted_of",
    "metric_notes_of",
    "render_card",
    "render_hashes",
]

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


def preset_of(conventions: Conventions) -> str | None:
    """The name of the preset ``conventions`` equal, if any."""
    return next((name for name, c in PRESETS.items() if c == conventions), None)


def card_fields(
    conventions: Conventions,
    metrics: list[str],
    inputs: list[dict[str, Any]],
    queries: list[dict[str, Any]],
    *,
    judged: list[dict[str, Any]],
    judged_threshold: float | None,
    notes: list[str],
    metric_notes: list[str],
    hashes: dict[str, str | None],
) -> dict[str, Any]:
    """A card of runs as ``MetricCard.build`` makes it, as the dict its ``model_dump()`` gives: ``inputs`` and
    ``queries`` are InputRecord and QueryRecord fields, every one given."""
    return {
        "rag_eval_version": __version__,
        "conventions": conventions.model_dump(),
        "preset": preset_of(conventions),
        "metrics": metrics,
        "inputs": inputs,
        "queries": queries,
        "pipeline": None,
        "comparison": None,
        "judged": judged,
        "judged_threshold": judged_threshold,
        "notes": notes,
        "metric_notes": metric_notes,
        "hashes": hashes,
        "query_set": None,
        "judge_agreement": None,
        "answers": None,
        "answers_by_run": None,
    }


class CardDraft:
    """A report's card as plain data (:func:`card_fields`), made when first read (its content hashes read every
    judgement); ``MetricCard.model_validate(draft.fields())`` is the card ``MetricCard.build`` makes (Report.card),
    and :meth:`render` prints what that card's ``render()`` prints, without pydantic."""

    def __init__(self, fields: Callable[[], dict[str, Any]]) -> None:
        self._make: Callable[[], dict[str, Any]] | None = fields
        self._fields: dict[str, Any] | None = None

    def fields(self) -> dict[str, Any]:
        if self._fields is None:
            assert self._make is not None
            self._fields, self._make = self._make(), None
        return self._fields

    @property
    def conventions(self) -> Conventions:
        return Conventions(**self.fields()["conventions"])

    def render(self) -> str:
        return render_card(self.fields())


def counted_of(card: MetricCard, run: str, stage: str | None = None) -> int | None:
    """The number of queries the card says were counted for ``run`` (and ``stage``): what ``n + n_nan`` of every
    summary row of that run (stage) adds up to. None when the card has no record of it."""
    records = {q.run: q.counted for q in card.queries}
    labels = [run] if stage is None else [f"{run} / {stage}", stage]
    return next((records[label] for label in labels if label in records), None)


def check_counted(card: MetricCard, blocks: list[RunScores], where: str) -> None:
    """Each block (of a saved report) holds as many queries as the card says were counted for it."""
    for b in blocks:
        counted = counted_of(card, b.run, b.stage)
        if counted is not None and counted != len(b.query_ids):
            who = f"run {b.run!r}" + (f", stage {b.stage!r}" if b.stage is not None else "")
            raise InputError(
                f"{who} holds {len(b.query_ids)} queries but its metric card says {counted} were counted", source=where
            )


def render_hashes(hashes: Mapping[str, Any]) -> str:
    """One line: each hash's first 12 hex digits, with what it covers (``ContentHashes.render``)."""
    parts = [f"qrels {_short(hashes['qrels'])}"]
    basis = hashes["queries_basis"]
    parts.append(f"queries {_short(hashes['queries'])}" + (f" ({basis})" if basis else ""))
    basis = hashes["corpus_basis"]
    parts.append(f"corpus {_short(hashes['corpus'])}" + (f" ({basis})" if basis else ""))
    parts.append(f"conventions {_short(hashes['conventions'])}")
    if hashes["budget"] is not None:
        parts.append(f"budget {hashes['budget']}")
    return ", ".join(parts)


def _short(value: str | None) -> str:
    return "unknown" if value is None else f"sha256:{value[:12]}"


def render_card(
    card: Mapping[str, Any], others: list[Mapping[str, Any]] | None = None, answers: list[str] | None = None
) -> str:
    """A card's short human-readable text (what the CLI prints to stderr), from its fields (``model_dump()``);
    ``others``: the fields of the other reports of a comparison (``comparison["other_reports"]``, validated);
    ``answers``: the lines of its answers (``answer_runs.answers_lines``)."""
    conv = card["conventions"]
    lines = [
        f"rag_eval {card['rag_eval_version']} metric card",
        f"  conventions: {card['preset'] or 'custom'} (" + ", ".join(f"{k}={v}" for k, v in conv.items()) + ")",
        f"  metrics: {', '.join(card['metrics'])}",
    ]
    if card["hashes"] is not None:
        lines.append(f"  content hashes: {render_hashes(card['hashes'])}")
    lines.extend(f"  metric {n}" for n in card["metric_notes"])
    if conv["unjudged"] == "remove":
        lines.append("  condensed lists (Sakai 2007): unjudged items are removed from each ranking before measuring")
    if card["judged"]:
        low = card["judged_threshold"]
        shown = []
        for j in card["judged"]:
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
    lines.extend(f"  warning: {n}" for n in card["notes"])
    if card["query_set"] is not None:
        from ..data.queryset import QuerySetCard

        lines.append(
            "  queries: a query set; the summary's traffic_mean is the traffic-weighted (Hajek) mean, "
            "weights frequency / inclusion probability, with a stratified bootstrap interval"
        )
        lines.extend("  " + line for line in QuerySetCard.from_dict(card["query_set"]).render().splitlines())
    if card["judge_agreement"]:
        from ..ground_truth.agreement_text import card_lines

        lines.extend(card_lines(card["judge_agreement"]))
    if card["answers"]:
        lines.extend("  answers: " + line for line in answers or [])
    if card["comparison"]:
        lines += _comparison_lines(card["comparison"])
    if card["pipeline"]:
        every = card["pipeline"].get("all") or [card["pipeline"]]
        for p in every:
            who = f" {p['run']!r}" if len(every) > 1 else ""
            lines.append(f"  pipeline{who}: {p['structure']} (depth {p['depth']}, {p['budget']})")
            lines.extend(_source_lines(p.get("source")))
    lines += _sources(card, "  ")
    for i, other in enumerate(others or [], start=2):
        lines.append(f"  report {i} of the comparison ({other['preset'] or 'custom'} conventions):")
        lines += _sources(other, "    ")
    return "\n".join(lines)


def _comparison_lines(c: Mapping[str, Any]) -> list[str]:
    lines = [
        f"  comparison: against {c['baseline']!r}, {c['test']} test"
        + (f" ({c['permutations']} permutations)" if c.get("permutations") else "")
        + f", {c['correction']} correction over {c['hypotheses']} hypotheses, alpha {c['alpha']}, "
        f"{c['bootstrap_resamples']} bootstrap resamples, seed {c['seed']}"
    ]
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
    return lines


def _sources(card: Mapping[str, Any], indent: str) -> list[str]:
    """The inputs, and the queries counted and left out of each run (stage)."""
    lines = []
    for record in card["inputs"]:
        where = f"{record['path']} sha256:{record['sha256']}" if record["path"] else "in memory"
        extra = f", ranked by {record['ranked_by']}" if record["ranked_by"] else ""
        extra += f", TREC tag {record['tag']!r}" if record["tag"] else ""
        lines.append(f"{indent}{record['role']} {record['name']!r}: {where}{extra}")
        lines.extend(f"{indent}  note: {n}" for n in record["notes"])
    for q in card["queries"]:
        lines.append(f"{indent}{'stage' if card['pipeline'] else 'run'} {q['run']!r}: {q['counted']} queries counted")
        for label, groups in (("left out", q["left_out"]), ("counted as 0", q["counted_as_zero"])):
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
