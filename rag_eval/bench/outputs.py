"""A report folder: tables (CSV and Parquet), one TREC run per stage, the loss attribution, the metric card, a
``report.md`` a person can read, and PNG plots. What ``benchmarks/run.py`` and ``rag-eval demo`` write."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..data.qrels import Qrels
from ..reports.report import Report
from ..stages.result import PipelineResult

SHOWN = (
    "recall@depth",
    "recall@budget",
    "precision@budget",
    "ndcg@budget",
    "mrr@budget",
    "rerank_gain@budget",
    "cand_ndcg@budget",
    "loss.delivered",
)


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


def write_report_folder(
    out: Path,
    report: Report,
    results: Mapping[str, PipelineResult],
    qrels: Qrels,
    *,
    title: str,
    facts: Mapping[str, Any],
    plots: bool = True,
) -> Path:
    """Write everything about ``report`` into ``out``; returns the path of ``report.md``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    per_query, summary = report.per_query, report.summary
    per_query.to_csv(out / "per_query.csv", index=False)
    per_query.to_parquet(out / "per_query.parquet", index=False)
    summary.to_csv(out / "summary.csv", index=False)
    summary.to_parquet(out / "summary.parquet", index=False)
    report.save(out / "report.parquet")  # per query, with the card and the pipeline tables: Report.load reads it
    report.loss_items.to_csv(out / "loss_items.csv", index=False)
    qrels.to_trec(out / "qrels.txt")  # with runs/, what a notebook needs to recompute any metric
    (out / "card.json").write_text(report.card.model_dump_json(indent=2) + "\n")
    for pipeline, result in results.items():
        for stage, run in result.runs.items():
            run.to_trec(out / "runs" / f"{safe_name(pipeline)}.{safe_name(stage)}.trec", tag=safe_name(stage))
    pictures = _plots(out / "plots", report, results, qrels) if plots else []
    path = out / "report.md"
    path.write_text(_markdown(title, report, results, facts, pictures))
    return path


def _ci(row) -> str:
    if np.isnan(row["mean"]):
        return "n/a"
    return f"{row['mean']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"


def _markdown(
    title: str, report: Report, results: Mapping[str, PipelineResult], facts: Mapping[str, Any], pictures
) -> str:
    summary = report.summary
    lines = [f"# {title}", ""]
    lines += [f"- {k}: {v}" for k, v in facts.items()]
    lines += [
        "",
        "Values are means over the queries with a 95% bootstrap interval (1,000 resamples, seed 0), as in "
        "`summary.csv`. `@depth` is the first stage's candidate depth, `@budget` what the generator receives. "
        "n counts the queries a mean is over; n_nan the counted queries whose value is 0/0 (NaN), left out of "
        "that mean; n + n_nan is the number of queries the metric card says the stage counted. n_failed counts "
        "queries a stage failed on (scored as an empty ranking, or left out: see the card's conventions).",
        "",
    ]
    for pipeline, result in results.items():
        rows = summary[summary["run"] == pipeline]
        shown = [m for m in SHOWN if m in set(rows["metric"])]
        lines += [
            f"## {pipeline}",
            "",
            "| stage | metric | mean [95% CI] | n | n_nan | n_failed |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for stage in result.stages:
            cells = rows[rows["stage"] == stage].set_index("metric")
            for m in shown:
                if m in cells.index:
                    c = cells.loc[m]
                    lines.append(
                        f"| {stage} | {m} | {_ci(c)} | {int(c['n'])} | {int(c['n_nan'])} | {int(c['n_failed'])} |"
                    )
        loss = rows[rows["metric"].str.startswith("loss.")].set_index("metric")
        if len(loss):
            base = loss.iloc[0]
            lines += [
                "",
                f"Where the relevant items went (mean share per query, over the {int(base['n'])} queries with "
                f"a relevant item; {int(base['n_nan'])} without one left out): "
                + ", ".join(f"{m.removeprefix('loss.').replace('_', ' ')} {v:.1%}" for m, v in loss["mean"].items()),
            ]
        latency = result.latency
        lines += [
            "",
            "| stage | p50 s/query | p95 s/query | computed | from cache | failed |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r.stage} | {r.p50:.4f} | {r.p95:.4f} | {r.n} | {r.cache_hits} | {r.failed} |"
            for r in latency.itertuples()
        ]
        lines.append("")
    if len(report.failures):
        lines += ["## Failures", "", "| stage | query | error |", "|---|---|---|"]
        lines += [f"| {r.stage} | {r.query_id} | {r.error} |" for r in report.failures.head(50).itertuples()]
        lines.append("")
    if pictures:
        lines += ["## Plots", ""] + [f"![{p.stem}](plots/{p.name})" for p in pictures] + [""]
    card = report.card
    lines += ["## Metric card", "", "```", card.render(), "```", ""]
    return "\n".join(lines)


def _plots(folder: Path, report: Report, results: Mapping[str, PipelineResult], qrels: Qrels) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..reports.evaluate import evaluate

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    # recall@k of every stage, with the depth and the budget marked
    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 4), squeeze=False)
    for ax, (pipeline, result) in zip(axes[0], results.items()):
        depth = result.pipeline.depth
        ks = sorted(set(np.unique(np.geomspace(1, depth, num=min(depth, 30)).astype(int)).tolist()) | {depth})
        # under the report's own conventions, so that the curve meets the table's recall@depth at the depth
        curves = evaluate(
            qrels, result.runs, [f"recall@{k}" for k in ks], conventions=report.card.conventions, judged_threshold=0.0
        )
        for stage in result.stages:
            ax.plot(ks, [curves.mean(stage, f"recall@{k}") for k in ks], marker=".", label=stage)
        ax.axvline(depth, color="grey", linestyle=":", label=f"depth {depth}")
        budget = result.pipeline.budget
        chunks = (
            budget.chunks if budget.chunks is not None else float(np.mean(list(result.delivered().values()) or [0]))
        )
        ax.axvline(max(chunks, 1), color="black", linestyle="--", label=str(budget))
        ax.set(xscale="log", xlabel="k", ylabel="recall@k", title=pipeline, ylim=(0, 1.02))
        ax.legend(fontsize=7)
    fig.tight_layout()
    written.append(_save(fig, folder / "recall_at_k.png", plt))
    # loss attribution as a stacked bar per pipeline
    summary = report.summary
    fates = ["never_retrieved", "below_depth", "reranked_out", "failed", "delivered"]
    shares = {
        p: [float(summary[(summary.run == p) & (summary.metric == f"loss.{f}")]["mean"].mean()) for f in fates]
        for p in results
    }
    if all(np.isfinite(v).all() for v in shares.values()):
        fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(results), 4))
        bottom = np.zeros(len(results))
        for i, fate in enumerate(fates):
            values = np.array([shares[p][i] for p in results])
            ax.bar(list(results), values, bottom=bottom, label=fate.replace("_", " "))
            bottom += values
        ax.set(ylabel="share of relevant items", ylim=(0, 1), title="where relevant items went")
        ax.legend(fontsize=7)
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)
        fig.tight_layout()
        written.append(_save(fig, folder / "loss_attribution.png", plt))
    # per query: what retrieval made available against how well the last stage ordered it
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4), squeeze=False)
    for ax, (pipeline, result) in zip(axes[0], results.items()):
        recall = (
            report.values(pipeline, "recall@depth", stage=result.first_stage)
            if "recall@depth" in report.metrics
            else None
        )
        final_metric = "ndcg@budget" if result.final_stage != result.first_stage else "recall@budget"
        if recall is None or final_metric not in report.metrics:
            continue
        quality = report.values(pipeline, final_metric, stage=result.final_stage)
        joined = recall.to_frame("x").join(quality.to_frame("y"), how="inner")
        ax.scatter(joined["x"], joined["y"], s=8, alpha=0.5)
        ax.set(
            xlabel=f"{result.first_stage} recall@depth",
            ylabel=f"{result.final_stage} {final_metric}",
            title=pipeline,
            xlim=(-0.02, 1.02),
            ylim=(-0.02, 1.02),
        )
    fig.tight_layout()
    written.append(_save(fig, folder / "recall_vs_final.png", plt))
    return written


def _save(fig, path: Path, plt) -> Path:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def facts_json(facts: Mapping[str, Any]) -> str:
    return json.dumps(dict(facts), indent=2, default=str)
