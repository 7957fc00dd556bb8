"""The funnel of a pipeline's relevant items: how many exist, how many each stage kept, how many the budget
delivered, each loss named by its cause; and each stage's headline number with its interval (``docs/html-report.md``,
"The first screen").

Counts, summed over the queries, read from :attr:`Report.loss_items` (each relevant item's fate, see
:mod:`rag_eval.reports.fates`) and :attr:`Report.failures`: nothing is measured again. An item lost to a stage that
failed on its query is counted as failed at that stage, never as a ranking loss. Every face (the HTML report,
report.md, the terminal, the notebook) reads it from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .fates import FATES

if TYPE_CHECKING:
    import pandas as pd

    from .report import Report

__all__ = ["HEADLINE_COLUMNS", "LOSS_COLUMNS", "STEP_COLUMNS", "Funnel", "funnel"]

STEP_COLUMNS = ["pipeline", "order", "step", "stage", "role", "items", "lost"]
LOSS_COLUMNS = ["pipeline", "order", "stage", "fate", "cause", "items"]
HEADLINE_COLUMNS = ["pipeline", "stage", "role", "metric", "mean", "low", "high", "n", "n_nan", "interval_method"]
#: how :attr:`Report.summary` makes every interval the headlines quote
INTERVAL_METHOD = "95% percentile bootstrap of the mean (1,000 resamples, seed 0)"
_FIRST_HEADLINES = ("recall@depth",)
_RERANKER_HEADLINES = ("ndcg@budget", "mrr@budget")
_DELIVERED_HEADLINE = "recall@budget"


@dataclass(frozen=True)
class Funnel:
    """Where each pipeline's relevant items went, and each stage's headline number (:func:`funnel`).

    ``steps``: one row per pipeline and step, in order: ``order`` 0 is the relevant items (judged relevant in the
    qrels), 1 the first stage (returned within the depth), then each reranker (kept: for the last one, ranked within
    the budget), last what the budget delivered; ``items`` the relevant items still in after the step, ``lost`` those
    lost at it (the previous step's ``items`` minus this one's). ``stage`` is "" for the relevant items and the
    budget; ``role`` "relevant", "first", "reranker" or "budget".

    ``losses``: one row per pipeline, step and cause with items lost: ``fate`` (a key of
    :data:`rag_eval.reports.fates.FATES`) and ``cause`` in words (``never retrieved by 'bm25'``, ``cut by
    'minilm'``, ...). Per step, ``lost`` is the sum of its losses; per pipeline, the relevant items are those
    delivered plus every loss.

    ``headlines``: per pipeline and stage, the number that fits its job (recall@depth for the first stage, nDCG and
    MRR at the budget for a reranker, recall@budget for what reached the model, on the final stage) with the
    summary's interval (``low``, ``high``), ``n``, ``n_nan`` and ``interval_method``.

    ``notes``: what the funnel could not show, and why (a pipeline whose fates were not measured)."""

    steps: pd.DataFrame
    losses: pd.DataFrame
    headlines: pd.DataFrame
    notes: tuple[str, ...] = ()

    @property
    def pipelines(self) -> list[str]:
        """The pipelines with a funnel, in the report's order."""
        return list(dict.fromkeys(self.steps["pipeline"].tolist()))

    def steps_of(self, pipeline: str) -> list[dict[str, Any]]:
        """One pipeline's steps as records, each with its ``losses`` (records of :attr:`losses`) beside it."""
        losses = self.losses[self.losses["pipeline"] == pipeline]
        out: list[dict[str, Any]] = []
        for row in self.steps[self.steps["pipeline"] == pipeline].to_dict("records"):
            mine = losses[losses["order"] == row["order"]]
            out.append({str(k): v for k, v in row.items()} | {"losses": _records(mine)})
        return out

    def headlines_of(self, pipeline: str) -> list[dict[str, Any]]:
        """One pipeline's headline rows as records."""
        return _records(self.headlines[self.headlines["pipeline"] == pipeline])


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict("records")]


def pipelines_of(report: Report) -> list[dict[str, Any]]:
    """The pipelines a report measured, as its card describes them (``run, structure, depth, budget, stages``)."""
    pipeline = report.card.pipeline
    if not pipeline:
        return []
    every: list[dict[str, Any]] = pipeline.get("all") or [pipeline]
    return every


def funnel(report: Report) -> Funnel:
    """The funnel of each pipeline of ``report`` (a pipeline report, or ``Report.load_folder(folder)``): see
    :class:`Funnel`. A report of plain runs has none (empty tables, a note)."""
    import pandas as pd

    steps: list[list[Any]] = []
    losses: list[list[Any]] = []
    notes: list[str] = []
    every = pipelines_of(report)
    if not every:
        notes.append("a report of runs, not of a pipeline: no stages, so no funnel")
    items = report.loss_items
    failures = report.failures
    summary = report.summary if every else None
    measured = set()
    if summary is not None:
        measured = set(summary.loc[summary["metric"] == "loss.delivered", "run"])
    for p in every:
        run = str(p["run"])
        if run not in measured:
            notes.append(
                f"pipeline {run!r}: the fates of its relevant items were not measured (evaluate it with the "
                "default metrics, or with the loss.* metrics), so it has no funnel"
            )
            continue
        mine = items[items["run"] == run] if "run" in items.columns else items
        failed = failures[failures["run"] == run] if "run" in failures.columns else failures
        s, lo = _pipeline_funnel(run, p, mine, failed)
        steps += s
        losses += lo
    headlines = _headlines(report, every, summary) if summary is not None else []
    return Funnel(
        pd.DataFrame(steps, columns=STEP_COLUMNS).astype({"order": "int64", "items": "int64", "lost": "int64"}),
        pd.DataFrame(losses, columns=LOSS_COLUMNS).astype({"order": "int64", "items": "int64"}),
        pd.DataFrame(headlines, columns=HEADLINE_COLUMNS).astype({"n": "int64", "n_nan": "int64"}),
        tuple(notes),
    )


def _pipeline_funnel(
    run: str, p: dict[str, Any], items: pd.DataFrame, failures: pd.DataFrame
) -> tuple[list[list[Any]], list[list[Any]]]:
    """One pipeline's step rows and loss rows."""
    import numpy as np

    roles: dict[str, str] = {str(s): str(r) for s, r in p.get("stages", {}).items()}
    order = [s for s, r in roles.items() if r != "input"]  # a fusion's inputs feed its first stage
    first = next((s for s in order if roles[s] == "first"), order[0])
    rerankers = order[order.index(first) + 1 :]
    step_of = {first: 1, **{r: 2 + i for i, r in enumerate(rerankers)}}
    budget_step = 2 + len(rerankers)
    n = len(items)
    fate = items["fate"].astype(str).to_numpy() if n else np.array([], dtype=object)
    cut_by = items["cut_by"].to_numpy(dtype=object) if n and "cut_by" in items.columns else np.full(n, None, object)
    # each stage at its step (a fusion's inputs at the first stage's)
    step_of_any = {s: (1 if r == "input" else step_of[s]) for s, r in roles.items()}
    # the stage whose failure lost the item: the first stage of the pipeline, in order, that failed on its query
    failed_at = np.full(n, None, dtype=object)
    if n and len(failures):
        known = failures[failures["stage"].isin(list(roles))]
        order_of = {s: i for i, s in enumerate(roles)}
        known = known.assign(at=known["stage"].map(order_of)).sort_values("at", kind="stable")
        known = known.drop_duplicates("query_id")
        found = items["query_id"].astype(str).map(dict(zip(known["query_id"].astype(str), known["stage"], strict=True)))
        failed_at = found.astype(object).where(found.notna(), None).to_numpy(dtype=object)
    # an item "reranked out" by a stage at or after one that failed on its query: lost to the failure, not the rank
    failed_step = _steps(failed_at, step_of_any)
    cut_step = _steps(cut_by, step_of)
    fate = np.where((fate == "reranked_out") & (failed_step >= 0) & (failed_step <= cut_step), "failed", fate)
    lost: dict[tuple[int, str, str], int] = {}  # (step, fate, stage) -> items

    def add(step: int, what: str, stage: str, count: int) -> None:
        if count:
            lost[(step, what, stage)] = lost.get((step, what, stage), 0) + count

    add(1, "never_retrieved", first, int((fate == "never_retrieved").sum()))
    add(1, "below_depth", first, int((fate == "below_depth").sum()))
    add(budget_step, "cut_by_budget", "", int((fate == "cut_by_budget").sum()))
    final = order[-1]
    for stage in rerankers:
        add(step_of[stage], "reranked_out", stage, int(((fate == "reranked_out") & (cut_by == stage)).sum()))
    unnamed = (fate == "reranked_out") & ~np.isin(cut_by.astype(str), rerankers)
    add(step_of[final], "reranked_out", final, int(unnamed.sum()))  # an older folder: no cut_by, the final stage
    is_failed = fate == "failed"
    for stage in dict.fromkeys(failed_at[is_failed].tolist()):
        where = stage if stage in step_of else (first if stage is not None and roles.get(stage) == "input" else final)
        add(step_of[where], "failed", where, int((is_failed & (failed_at == stage)).sum()))
    total = n
    depth, budget = p.get("depth"), p.get("budget")
    names = {
        0: ("relevant (judged relevant in the qrels)", "", "relevant"),
        1: (f"returned by {first!r} within depth {depth}", first, "first"),
    }
    for stage in rerankers:
        words = f"ranked within {budget} by {stage!r}" if stage == final else f"kept by {stage!r}"
        names[step_of[stage]] = (words, stage, "reranker")
    names[budget_step] = (f"delivered within {budget}", "", "budget")
    step_rows: list[list[Any]] = []
    loss_rows: list[list[Any]] = []
    remaining = total
    for k in range(budget_step + 1):
        step, stage, role = names[k]
        here = {key: v for key, v in lost.items() if key[0] == k}
        gone = sum(here.values())
        remaining -= gone
        step_rows.append([run, k, step, stage, role, remaining, gone])
        for (_, what, by), count in sorted(here.items(), key=lambda e: FATES.index(e[0][1])):
            loss_rows.append([run, k, by, what, cause(what, by, depth=depth, budget=budget), count])
    return step_rows, loss_rows


def _steps(stages: Any, step_of: dict[str, int]) -> Any:
    """The step of each stage named in ``stages`` (-1 where none, or a stage of no step)."""
    import pandas as pd

    return pd.Series(stages, dtype=object).map(step_of).fillna(-1).to_numpy(dtype="int64")


def cause(fate: str, stage: str, *, depth: Any = None, budget: Any = None) -> str:
    """A loss in words, naming what caused it: ``never retrieved by 'bm25'``, ``ranked below the depth (100) by
    'bm25'``, ``cut by 'minilm'``, ``cut at the budget (budget(5))``, ``failed: 'minilm' failed on the query (not a
    ranking loss)``."""
    if fate == "never_retrieved":
        return f"never retrieved by {stage!r}"
    if fate == "below_depth":
        return f"ranked below the depth ({depth}) by {stage!r}"
    if fate == "reranked_out":
        return f"cut by {stage!r}"
    if fate == "cut_by_budget":
        return f"cut at the budget ({budget})"
    if fate == "failed":
        return f"failed: {stage!r} failed on the query (a stage failure, not a ranking loss)"
    return fate.replace("_", " ")


def _headlines(report: Report, every: list[dict[str, Any]], summary: pd.DataFrame) -> list[list[Any]]:
    rows: list[list[Any]] = []
    index = {(r["run"], r["stage"], r["metric"]): r for r in summary.to_dict("records")}
    for p in every:
        run = str(p["run"])
        roles = {str(s): str(r) for s, r in p.get("stages", {}).items()}
        stages = [s for s, r in roles.items() if r != "input"]
        if not stages:
            continue
        final = stages[-1]
        for stage in stages:
            wanted = list(_FIRST_HEADLINES if roles[stage] == "first" else _RERANKER_HEADLINES)
            if stage == final:
                wanted.append(_DELIVERED_HEADLINE)
            for metric in wanted:
                r = index.get((run, stage, metric))
                if r is None:
                    continue
                rows.append(
                    [
                        run,
                        stage,
                        roles[stage],
                        metric,
                        float(r["mean"]),
                        float(r["ci_low"]),
                        float(r["ci_high"]),
                        int(r["n"]),
                        int(r["n_nan"]),
                        INTERVAL_METHOD,
                    ]
                )
    return rows
