"""The HTML report: one self-contained file a person opens in a browser, offline (``docs/html-report.md``).

``rag-eval report FOLDER [FOLDER ...] -o report.html`` and :meth:`Report.to_html` write it. One file: the styles
and the script inline, the plots inline SVG (matplotlib's SVG backend, text kept as text), no URL fetched. Its first
screen answers: for a diff, the verdict (which differences are significant after correction, better or worse by
each metric's direction); for each pipeline, the funnel of its relevant items (:mod:`rag_eval.reports.funnel`) beside
its stages' headline numbers (:mod:`.html_summary`). Then a stage x metric pivot (the flat table one click away, and
as CSV), latency and failures, the plots, the metric card, the Queries view (:mod:`.html_queries`: a virtual list,
filters by fate, a per-query drill-down), the Diff view (per stage and per query) and, when drifts are given, the
Drift view (each drift as the drift page shows it: :mod:`.drift_html`).

Size: the page holds the list; the drill-down comes in shards of queries, inline while the page stays under
:data:`~rag_eval.renderers.html_queries.INLINE_BYTES`, else in small scripts beside it (``<page>.drill/``): 100,000
queries make a page of about 6 MB.

Escaping: every text from the data (queries, chunks, ids, stage names, the card) reaches the page through jinja2
with autoescape on; the list's and the drill-down's data are JSON blocks escaped as ``|tojson`` escapes
(``<``, ``>``, ``&`` and ``'`` as ``\\u`` escapes, so that no ``</script>`` can close them), and the script puts
them into the page with ``textContent``, never as HTML. jinja2 and matplotlib are the ``html`` extra.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._files import write_output
from .._plot_style import FATE_COLOURS
from ..errors import InputError
from ..reports.funnel import funnel, pipelines_of
from ..reports.report import Report
from ..statistics.paired import correct, min_n, paired_bootstrap_ci, t_test
from ._jinja import environment
from .html_queries import INLINE_BYTES, MAIN, budget_chunks, dumps, query_data
from .html_summary import answers_sections, csv_rows, funnel_blocks, pivots
from .plots import svg_plots as _plots

if TYPE_CHECKING:
    from ..data.collection import Collection
    from ..data.qrels import Qrels
    from ..data.run import Run
    from ..stages.result import PipelineResult
    from ..statistics.snapshot_drift import Drift

__all__ = [
    "DRILL_EXTRA",
    "FATE_COLOURS",
    "HtmlSide",
    "folder_names",
    "render_html",
    "report_to_html",
    "side_from_folder",
    "side_of",
    "write_html",
]

#: the drill-down's default depth: the budget plus this many hits (for a token budget: 10 plus this many)
DRILL_EXTRA = 10
_TOKEN_BUDGET_DRILL = 10 + DRILL_EXTRA
_FEATURE = "the HTML report (rag-eval report, Report.to_html)"
_MAIN = MAIN  # per stage, the metric the query list and the diff show first
#: the diff's verdict: the paired test (rag_eval.statistics: O(n), so that a diff of 100,000 queries stays quick; the
#: randomization test draws 10,000 sign flips per row), the correction over the rows, the level
TEST, CORRECTION, CORRECTION_WORDS, ALPHA = "t", "holm", "Holm's correction", 0.05
VERDICT_ROWS = 6  # significant differences named on the first screen (the Diff tab lists every row)
REGRESSED_ROWS = 100  # queries listed as regressed (and as improved) in the Diff tab, worst first
DRIFT_QUERIES = 10  # queries most affected shown in each drift of the Drift view (as rag-eval drift's --top)


@dataclass
class HtmlSide:
    """One report and what its drill-down needs: the rankings per ``(run, stage)`` (stage None for a plain run),
    the qrels, the query texts and the chunk texts (either may be empty: the page then shows ids alone)."""

    name: str
    report: Report
    runs: dict[tuple[str, str | None], Run] = field(default_factory=dict)
    qrels: Qrels | None = None
    queries: dict[str, str] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    note: str = ""  # said above the drill-down (e.g. where texts are missing, and how to add them)


def _chunk_text(collection: Collection, doc: str) -> str | None:
    chunk = collection.corpus.get(doc)
    if chunk is None:
        return None
    return f"{chunk.title}\n{chunk.text}" if chunk.title else chunk.text


def side_of(
    report: Report,
    *,
    results: Mapping[str, PipelineResult] | PipelineResult | None = None,
    qrels: Qrels | Mapping[str, Mapping[str, int]] | None = None,
    collection: Collection | None = None,
    name: str = "report",
) -> HtmlSide:
    """A side of the page from a report in memory and the pipeline results it measured (their stages' hits and
    texts, their queries); ``collection`` gives qrels, query and chunk texts where the results lack them."""
    from ..data.qrels import Qrels
    from ..stages.result import PipelineResult

    if isinstance(results, PipelineResult):  # named by its pipeline, or the report's one run
        results = {report.runs[0] if len(report.runs) == 1 else repr(results.pipeline): results}
    given = dict(results or {})
    if not all(isinstance(r, PipelineResult) for r in given.values()):
        raise TypeError("results must be a PipelineResult or a {name: PipelineResult} mapping")
    if qrels is None and collection is not None:
        qrels = collection.qrels
    if qrels is not None and not isinstance(qrels, Qrels):
        qrels = Qrels.from_dict(qrels)
    side = HtmlSide(name, report, qrels=qrels)
    if collection is not None:
        side.queries.update(collection.queries)
    for run, result in given.items():
        if run not in report.runs:
            raise InputError(f"pipeline {run!r} is not one the report measured ({report.runs})")
        side.queries.update(result.queries)
        for stage, out in result.stages.items():
            side.runs[(run, stage)] = out.ranking_run(with_scores=False)
            _, hits = out.hit_columns()
            if "text" in hits.type.names:
                for doc, text in zip(hits.field("doc_id").to_pylist(), hits.field("text").to_pylist(), strict=True):
                    if text is not None:
                        side.texts.setdefault(doc, text)
    if collection is not None:
        side.texts = _LazyTexts(collection, side.texts)
    if not side.runs:
        side.note = "no rankings given (Report.to_html(results=...)): the drill-down lists the queries' values only"
    return side


class _LazyTexts(dict[str, str]):
    """Texts found in the hits first, else a collection's chunk (looked up only for the chunks the page shows)."""

    def __init__(self, collection: Collection, found: Mapping[str, str]) -> None:
        super().__init__(found)
        self.collection = collection

    def get(self, key: str, default: Any = None) -> Any:
        if key in self:
            return self[key]
        text = _chunk_text(self.collection, key)
        return default if text is None else text


def side_from_folder(
    report: Report, folder: str | os.PathLike[str], *, collection: Collection | None = None, name: str | None = None
) -> HtmlSide:
    """A side of the page from a result folder and its report (``Report.load_folder(folder)``, which checks every
    file against the manifest): the qrels and every stage's (run's) TREC file; a result folder holds no texts, so
    query and chunk texts come from ``collection`` (``rag-eval report --beir``), else the page shows ids alone and
    says so."""
    from ..data.qrels import Qrels
    from ..data.run import Run
    from .result_folder import listed_file, safe_name

    root = Path(folder)
    qrels = Qrels.from_trec(root / "qrels.txt") if listed_file(root, "qrels.txt") else None
    side = HtmlSide(name or root.resolve().name, report, qrels=qrels)
    every = (report.card.pipeline or {}).get("all") or ([report.card.pipeline] if report.card.pipeline else [])
    for p in every:
        for stage in p.get("stages", {}):
            path = root / "runs" / f"{safe_name(p['run'])}.{safe_name(stage)}.trec"
            if listed_file(root, f"runs/{path.name}"):
                side.runs[(p["run"], stage)] = Run.from_trec(path)
    if not every:
        for run in report.runs:
            path = root / "runs" / f"{safe_name(run)}.trec"
            if listed_file(root, f"runs/{path.name}"):
                side.runs[(run, None)] = Run.from_trec(path)
    if collection is not None:
        side.queries.update(collection.queries)
        side.texts = _LazyTexts(collection, {})
    else:
        side.note = (
            "a result folder holds no texts: the drill-down shows chunk ids alone (rag-eval report --beir FOLDER, "
            "or Report.to_html(collection=...), adds the query and chunk texts)"
        )
    return side


# ----- the page's content --------------------------------------------------------------------------------------


def _drill_depth(sides: Sequence[HtmlSide], given: int | None) -> int:
    if given is not None:
        if given < 1:
            raise InputError(f"the drill depth must be 1 or more, not {given}")
        return given
    budgets = [budget_chunks(p.get("budget")) for s in sides for p in pipelines_of(s.report)]
    chunks = [b for b in budgets if b is not None]
    if chunks:
        return max(chunks) + DRILL_EXTRA
    return _TOKEN_BUDGET_DRILL if budgets else DRILL_EXTRA


def _num(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _shown(value: Any, digits: int = 3) -> str:
    number = _num(value)
    return "n/a" if number is None else f"{number:.{digits}f}"


def _summary_rows(side: HtmlSide) -> list[dict[str, Any]]:
    summary = side.report.summary
    rows = []
    for r in summary.to_dict("records"):
        mean = _num(r["mean"])
        rows.append(
            {
                "run": r["run"],
                "stage": r.get("stage") or "",
                "metric": r["metric"],
                "mean": mean,
                "shown": "n/a" if mean is None else f"{mean:.3f} [{_shown(r['ci_low'])}, {_shown(r['ci_high'])}]",
                "n": int(r["n"]),
                "n_nan": int(r["n_nan"]),
                "n_failed": int(r["n_failed"]) if "n_failed" in r else "",
            }
        )
    return rows


@dataclass
class _Diff:
    baseline: str
    candidate: str
    notes: list[str]
    stages: list[dict[str, Any]]
    metric: str
    where: str
    regressed: list[dict[str, Any]]
    improved: list[dict[str, Any]]
    pairing: list[str] = field(default_factory=list)  # how blocks were paired where names differ, what is alone
    better: str = "higher"  # the direction of ``metric`` (the per-query tables)
    n_regressed: int = 0  # all the regressed (improved) queries; the lists hold the first REGRESSED_ROWS
    n_improved: int = 0
    verdict: dict[str, Any] = field(default_factory=dict)  # the first screen's verdict (_verdict)


def _direction(metric: str) -> str:
    """``"higher"``, ``"lower"`` or ``"none"`` (a count of the input, a text, or a name the catalogue lacks)."""
    from ..metrics import direction

    try:
        return direction(metric)
    except (InputError, ValueError, KeyError):
        return "none"


def _diff_row(pair: Any, metric: str, x: Any, y: Any) -> dict[str, Any]:
    """One row of the per-stage diff: the means over the queries both sides counted (neither NaN), the paired
    difference with a 95% bootstrap interval (seed 0), wins and losses by the metric's direction, the paired
    t-test's p-value (its verdict, after the correction over the diff's rows: :func:`_verdicts`), and the queries
    on one side only."""

    only_a = int((~x.index.isin(y.index)).sum())
    only_b = int((~y.index.isin(x.index)).sum())
    both = x.to_frame("a").join(y.to_frame("b"), how="inner").dropna()
    d = (both["b"] - both["a"]).to_numpy()
    low, high = paired_bootstrap_ci(d, resamples=1000, confidence=0.95, seed=0)
    better = _direction(metric)
    sign = {"higher": 1.0, "lower": -1.0}.get(better)
    run, stage = pair.label()
    row: dict[str, Any] = {
        "run": run,
        "stage": stage,
        "metric": metric,
        "better": {"higher": "higher", "lower": "lower"}.get(better, "neither"),  # shown: "higher is better"
        "a": _shown(np.mean(both["a"]) if len(both) else None),
        "b": _shown(np.mean(both["b"]) if len(both) else None),
        "diff": _num(np.mean(d)) if len(d) else None,
        "shown": f"{np.mean(d):+.3f} [{low:+.3f}, {high:+.3f}]" if len(d) else "n/a",
        "ties": int((d == 0).sum()),
        "n": len(d),
        "only_a": only_a,
        "only_b": only_b,
    }
    row["p"] = float("nan")  # the paired test's p-value; corrected over the diff's rows in _diff
    if sign is None:  # no better side: changes are counted, not called wins or losses
        row.update(wins="—", losses="—", verdict="not ranked (no better side)", tone="neutral")
        return row
    gain = d * sign
    row.update(wins=int((gain > 0).sum()), losses=int((gain < 0).sum()), gain=float(np.mean(gain)) if len(d) else 0.0)
    if len(d) >= min_n(TEST):
        row["p"] = t_test(both["b"].to_numpy(), both["a"].to_numpy())
    row.update(verdict="no paired query" if not len(d) else "unclear", tone="neutral")
    return row


def _verdicts(rows: list[dict[str, Any]]) -> None:
    """Each row's verdict: better or worse (by the metric's direction) where the paired test's p-value, corrected
    over every row with one (:data:`CORRECTION`), is below :data:`ALPHA`; else no significant change."""
    ps = np.array([r["p"] for r in rows], dtype=np.float64)
    adjusted = correct(ps, CORRECTION) if len(ps) else ps
    for r, p in zip(rows, adjusted.tolist(), strict=True):
        r["p_adjusted"] = p
        r["p_shown"] = "n/a" if p != p else ("< 0.0001" if p < 1e-4 else f"{p:.2g}")
        if r["verdict"] == "not ranked (no better side)" or p != p:
            if r["verdict"] == "unclear":
                r["verdict"] = f"no test (n < {min_n(TEST)})"
            continue
        if p < ALPHA and r["gain"] > 0:
            r.update(verdict="better", tone="better")
        elif p < ALPHA and r["gain"] < 0:
            r.update(verdict="worse", tone="worse")
        else:
            r.update(verdict="no significant change", tone="neutral")


def _verdict(d: _Diff) -> dict[str, Any]:
    """The first screen's verdict on one diff: the significant differences (worse first), how many were tested,
    the test and its correction, and what the verdict does not cover (a pipeline in one folder only, inputs not
    computed alike)."""
    tested = [r for r in d.stages if r["p_adjusted"] == r["p_adjusted"]]
    significant = [r for r in d.stages if r["tone"] in ("better", "worse")]
    significant.sort(key=lambda r: (r["tone"] != "worse", r["p_adjusted"]))
    alone = [n for n in d.pairing if " only: not compared" in n or "no counterpart" in n]
    return {
        "tests": len(tested),
        "better": sum(r["tone"] == "better" for r in significant),
        "worse": sum(r["tone"] == "worse" for r in significant),
        "rows": significant[:VERDICT_ROWS],
        "more": max(0, len(significant) - VERDICT_ROWS),
        "method": f"paired t-test, {CORRECTION_WORDS} over the {len(tested)} differences tested, alpha {ALPHA}",
        "alone": alone,
        "unlike": d.notes,
    }


def _diff(a: HtmlSide, b: HtmlSide) -> _Diff:
    """What changed from ``a`` (the baseline) to ``b``: per paired block (run and stage, paired by name, else by
    role and position: :mod:`rag_eval.renderers.stage_pairs`) and metric, the means, their paired difference with a
    95% bootstrap interval (queries resampled, seed 0), the queries won, tied and lost by the metric's direction
    and those on one side only; per query, the final stage's main metric, the queries that got worse and those
    that got better."""
    from .result_folder import differences
    from .stage_pairs import delivered_metric, pair_blocks

    notes = [line for _, line in differences(a.report, b.report, names=(a.name, b.name))]
    pairing = pair_blocks(a.report, b.report, names=(a.name, b.name))
    rows: list[dict[str, Any]] = []
    va, vb = a.report, b.report
    final: tuple[Any, str] | None = None
    for pair in pairing.pairs:
        (ra, sa), (rb, sb) = pair.a, pair.b
        mine = va.block(ra, sa).metrics
        for metric in vb.block(rb, sb).metrics:
            if metric not in mine or (pair.delivered_only and not delivered_metric(metric)):
                continue
            rows.append(_diff_row(pair, metric, va.values(ra, metric, sa), vb.values(rb, metric, sb)))
        # the per-query tables: the last pair's main metric (for final stages of other roles, what is delivered)
        order = ("ndcg@budget", "recall@budget") if pair.delivered_only else _MAIN
        main = next((m for m in order if m in mine and m in vb.block(rb, sb).metrics), "")
        if main:
            final = (pair, main)
    _verdicts(rows)
    regressed: list[dict[str, Any]] = []
    improved: list[dict[str, Any]] = []
    counts = (0, 0)
    metric, where, better = "", "", "higher"
    if final is not None:
        pair, metric = final
        run, stage = pair.label()
        where = run if not stage else f"{run} / {stage}"
        better = _direction(metric)
        sign = -1.0 if better == "lower" else 1.0
        x = va.values(pair.a[0], metric, pair.a[1])
        y = vb.values(pair.b[0], metric, pair.b[1])
        both = x.to_frame("a").join(y.to_frame("b"), how="inner").dropna()
        both["d"] = both["b"] - both["a"]
        both["gain"] = both["d"] * sign
        texts = {**a.queries, **b.queries}
        worse = both[both["gain"] < 0].sort_values(["gain", "a"], kind="stable")
        gained = both[both["gain"] > 0].sort_values("gain", ascending=False, kind="stable")
        counts = (len(worse), len(gained))
        for q, r in worse.head(REGRESSED_ROWS).iterrows():
            regressed.append({"id": str(q), "text": texts.get(str(q), ""), "a": r["a"], "b": r["b"], "d": r["d"]})
        for q, r in gained.head(REGRESSED_ROWS).iterrows():
            improved.append({"id": str(q), "text": texts.get(str(q), ""), "a": r["a"], "b": r["b"], "d": r["d"]})
    diff = _Diff(a.name, b.name, notes, rows, metric, where, regressed, improved, pairing.notes, better, *counts)
    diff.verdict = _verdict(diff)
    return diff


# ----- the page ------------------------------------------------------------------------------------------------


def _latency(side: HtmlSide) -> list[dict[str, Any]]:
    table = side.report.latency
    rows = []
    for r in table.to_dict("records") if len(table) else []:
        rows.append(
            {
                "run": r.get("run", side.report.runs[0]),
                "stage": r["stage"],
                "p50": _shown(r["p50"], 4),
                "p95": _shown(r["p95"], 4),
                "n": int(r["n"]),
                "cache_hits": int(r["cache_hits"]),
                "failed": int(r["failed"]),
            }
        )
    return rows


def render_html(
    sides: Sequence[HtmlSide],
    *,
    drill_depth: int | None = None,
    title: str | None = None,
    plots: bool = True,
    drifts: Mapping[str, Drift] | None = None,
) -> str:
    """The page for ``sides`` (the first is the baseline of the diff views), as a str, its drill-down inline
    (:func:`write_html` puts a large one beside the page)."""
    page, _ = _page(sides, drill_depth=drill_depth, title=title, plots=plots, beside=None, drifts=drifts)
    return page


def _drift_views(drifts: Mapping[str, Drift] | None) -> list[dict[str, Any]]:
    """The Drift view's sections: each drift's heading and what drift_body.html.j2 shows of it."""
    if not drifts:
        return []
    from ..statistics.snapshot_drift import Drift
    from .drift_html import drift_context

    views = []
    for heading, found in drifts.items():
        if not isinstance(found, Drift):
            raise TypeError(f"drifts[{heading!r}] must be a Drift (rag_eval.statistics.drift), not {type(found)}")
        views.append({"heading": str(heading), "drift": drift_context(found, top=DRIFT_QUERIES)})
    return views


def _page(
    sides: Sequence[HtmlSide],
    *,
    drill_depth: int | None,
    title: str | None,
    plots: bool,
    beside: str | None,
    drifts: Mapping[str, Drift] | None = None,
) -> tuple[str, list[str]]:
    """The page, and the drill-down's shard scripts to write in the folder ``beside`` (a name relative to the
    page) when the page would grow past :data:`~rag_eval.renderers.html_queries.INLINE_BYTES` with them inline
    (none when ``beside`` is None: then they are inline whatever their size)."""
    env = environment(_FEATURE)
    if not sides:
        raise InputError("no report to show")
    depth = _drill_depth(sides, drill_depth)
    template = env.get_template("report.html.j2")
    svgs = _plots(sides) if plots else {}
    from markupsafe import Markup  # jinja2's own dependency

    queries = query_data(sides, depth)
    shards = [dumps(shard) for shard in queries.shards]
    listing = queries.listing
    inline = beside is None or len(dumps(listing)) + sum(map(len, shards)) <= INLINE_BYTES
    listing["drill"] = {"inline": inline, "folder": None if inline else beside, "count": len(shards)}
    many = len(sides) > 1
    funnels = [funnel(s.report) for s in sides]
    diffs = [_diff(sides[0], b) for b in sides[1:]]
    page = str(
        template.render(
            title=title or " vs ".join(s.name for s in sides),
            sides=[
                {
                    "name": s.name,
                    "summary": _summary_rows(s),
                    "pivots": pivots(s),
                    "funnels": funnel_blocks(s, f, many, FATE_COLOURS),
                    "funnel_notes": list(f.notes),
                    "latency": _latency(s),
                    "failures": s.report.failures.head(100).to_dict("records") if len(s.report.failures) else [],
                    "n_failures": len(s.report.failures),
                    "card": s.report.card.render(),
                    "pipelines": pipelines_of(s.report),
                    "note": s.note,
                    "answers": answers_sections(s.report.card),
                }
                for s, f in zip(sides, funnels, strict=True)
            ],
            diffs=diffs,
            drifts=_drift_views(drifts),
            notes=_notes(sides),
            plots={k: Markup(v) for k, v in svgs.items()},  # matplotlib's SVG writer escapes the texts it draws
            listing=Markup(dumps(listing)),  # escaped as |tojson escapes: no text closes its <script>
            shards=[Markup(shard) for shard in shards] if inline else [],
            summaries=Markup(dumps([csv_rows(s) for s in sides])),
            depth=depth,
            fate_colours=FATE_COLOURS,
        )
    )
    if inline:
        return page, []
    return page, [f"window.ragEvalShard({k},{shard});\n" for k, shard in enumerate(shards)]


def _notes(sides: Sequence[HtmlSide]) -> list[str]:
    """The notes above the drill-down: one where every side says the same, else each with its side's name."""
    said = [s.note for s in sides if s.note]
    if len(said) == len(sides) and len(set(said)) == 1:
        return said[:1]
    return [f"{s.name}: {s.note}" if len(sides) > 1 else s.note for s in sides if s.note]


def report_to_html(
    report: Report,
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
    """:meth:`Report.to_html`: ``report`` as one HTML file, with a diff against ``baseline`` (a report or a result
    folder) when given."""
    from .result_folder import load_folder

    side = side_of(
        report, results=results, qrels=qrels, collection=collection, name="candidate" if baseline else "report"
    )
    sides = [side]
    if baseline is not None:
        first = (
            side_of(baseline, qrels=qrels, collection=collection, name="baseline")
            if isinstance(baseline, Report)
            else side_from_folder(load_folder(baseline), baseline, collection=collection, name="baseline")
        )
        sides = [first, side]
    return write_html(path, sides, drill_depth=drill_depth, title=title, plots=plots)


def write_html(
    path: str | os.PathLike[str],
    sides: Sequence[HtmlSide],
    *,
    drill_depth: int | None = None,
    title: str | None = None,
    plots: bool = True,
    drifts: Mapping[str, Drift] | None = None,
) -> Path:
    """Write the page to ``path`` (whole or not at all); returns the path. A drill-down too large for the page
    (past :data:`~rag_eval.renderers.html_queries.INLINE_BYTES`) goes into ``<name>.drill/`` beside it, one small
    script a shard, written before the page. ``drifts``: ``{heading: Drift}``, each computed by the caller
    (:func:`rag_eval.statistics.drift`, e.g. between the first side's pipeline and another's), shown in a Drift
    view as the drift page shows it (docs/drift.md)."""
    out = Path(path)
    if out.is_dir():
        raise InputError("is a folder: give the HTML file to write", source=str(out))
    folder = out.with_name(out.name + ".drill")
    page, shards = _page(sides, drill_depth=drill_depth, title=title, plots=plots, beside=folder.name, drifts=drifts)
    out.parent.mkdir(parents=True, exist_ok=True)
    if shards:
        folder.mkdir(exist_ok=True)
        for old in folder.glob("shard-*.js"):  # a previous page's shards: never mixed with this one's
            old.unlink()
        for k, script in enumerate(shards):
            write_output(folder / f"shard-{k:05d}.js", script.encode("utf-8"))
    elif folder.is_dir():
        for old in folder.glob("shard-*.js"):
            old.unlink()
    write_output(out, page.encode("utf-8"))
    return out


def folder_names(folders: Sequence[str | os.PathLike[str]]) -> list[str]:
    """Each folder's name on the page: its own, or, where two share one, prefixed by its position (A, B, ...)."""
    names = [Path(f).resolve().name for f in folders]
    if len(set(names)) != len(names):
        names = [f"{chr(ord('A') + i) if i < 26 else i}: {n}" for i, n in enumerate(names)]
    return names
