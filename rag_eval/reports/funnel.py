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

__all__ = ["HEADLINE_COLUMNS", "LOSS_COLUMNS", "STEP_COLUMNS", "Funnel", "funnel", "query_funnel"]

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
    measured = _measured(report)
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
    names, placed = _placed(p, items, failures)
    depth, budget = p.get("depth"), p.get("budget")
    lost: dict[tuple[int, str, str], int] = {}
    if len(placed):
        left = placed[placed["fate"] != "delivered"]
        counts = left.groupby(["order", "fate", "stage"], sort=False).size().reset_index(name="items")
        for k, what, by, count in zip(counts["order"], counts["fate"], counts["stage"], counts["items"], strict=True):
            lost[(int(k), str(what), str(by))] = int(count)
    step_rows: list[list[Any]] = []
    loss_rows: list[list[Any]] = []
    remaining = len(placed)
    for k, (step, stage, role) in enumerate(names):
        here = {key: v for key, v in lost.items() if key[0] == k}
        gone = sum(here.values())
        remaining -= gone
        step_rows.append([run, k, step, stage, role, remaining, gone])
        for (_, what, by), count in sorted(here.items(), key=lambda e: FATES.index(e[0][1])):
            loss_rows.append([run, k, by, what, cause(what, by, depth=depth, budget=budget), count])
    return step_rows, loss_rows


def _placed(
    p: dict[str, Any], items: pd.DataFrame, failures: pd.DataFrame
) -> tuple[list[tuple[str, str, str]], pd.DataFrame]:
    """A pipeline's steps ``(step, stage, role)`` in order, and where each relevant item left the funnel:
    ``query_id, order, stage, fate`` (a delivered item at the last step, fate "delivered")."""
    import numpy as np
    import pandas as pd

    roles: dict[str, str] = {str(s): str(r) for s, r in p.get("stages", {}).items()}
    order = [s for s, r in roles.items() if r != "input"]  # a fusion's inputs feed its first stage
    first = next((s for s in order if roles[s] == "first"), order[0])
    rerankers = order[order.index(first) + 1 :]
    final = order[-1]
    step_of = {first: 1, **{r: 2 + i for i, r in enumerate(rerankers)}}
    budget_step = 2 + len(rerankers)
    depth, budget = p.get("depth"), p.get("budget")
    names = [
        ("relevant (judged relevant in the qrels)", "", "relevant"),
        (f"returned by {first!r} within depth {depth}", first, "first"),
    ]
    for name in rerankers:
        words = f"ranked within {budget} by {name!r}" if name == final else f"kept by {name!r}"
        names.append((words, name, "reranker"))
    names.append((f"delivered within {budget}", "", "budget"))
    n = len(items)
    query = items["query_id"].astype(str).to_numpy(dtype=object) if n else np.array([], dtype=object)
    fate = items["fate"].astype(str).to_numpy(dtype=object) if n else np.array([], dtype=object)
    cut_by = (
        items["cut_by"].to_numpy(dtype=object, copy=True)
        if n and "cut_by" in items.columns
        else np.full(n, None, object)
    )
    cut_by[pd.isna(cut_by)] = None
    # each stage at its step (a fusion's inputs at the first stage's)
    step_of_any = {s: (1 if r == "input" else step_of[s]) for s, r in roles.items()}
    # the stage whose failure lost the item: the first stage of the pipeline, in order, that failed on its query
    failed_at = np.full(n, None, dtype=object)
    if n and len(failures):
        known = failures[failures["stage"].isin(list(roles))]
        order_of = {s: i for i, s in enumerate(roles)}
        known = known.assign(at=known["stage"].map(order_of)).sort_values("at", kind="stable")
        known = known.drop_duplicates("query_id")
        found = pd.Series(query).map(dict(zip(known["query_id"].astype(str), known["stage"], strict=True)))
        failed_at = found.astype(object).where(found.notna(), None).to_numpy(dtype=object)
    # an item "reranked out" by a stage at or after one that failed on its query: lost to the failure, not the rank
    failed_step = _steps(failed_at, step_of_any)
    cut_step = _steps(cut_by, step_of)
    fate = np.where((fate == "reranked_out") & (failed_step >= 0) & (failed_step <= cut_step), "failed", fate)
    # where each item left: the first stage's losses at it; a cut at the reranker that cut it (an older folder
    # names none: the final stage); a failure at the stage that failed (a fusion input: the first stage's step;
    # none recorded: the final stage's); the budget's cut and what it delivered at the last step
    steps = np.full(n, budget_step, np.int64)
    stage = np.full(n, "", dtype=object)
    at_first = (fate == "never_retrieved") | (fate == "below_depth")
    steps[at_first], stage[at_first] = 1, first
    reranked = fate == "reranked_out"
    named = reranked & (cut_step >= 1)
    steps[named], stage[named] = cut_step[named], cut_by[named]
    steps[reranked & ~named], stage[reranked & ~named] = step_of[final], final
    failed = fate == "failed"
    where = np.where(failed_step >= 1, failed_step, step_of[final])
    steps[failed] = where[failed]
    stage_at = np.array(["", *step_of], dtype=object)  # the stage of each step (step 0 has none)
    stage[failed] = stage_at[where[failed]]
    frame = pd.DataFrame({"query_id": query, "order": steps, "stage": stage, "fate": fate})
    return names, frame


def query_funnel(report: Report) -> pd.DataFrame:
    """Per pipeline and query, where its relevant items left the funnel: ``pipeline, query_id, order, stage, fate,
    items`` (the step of :attr:`Funnel.steps`, the stage named by the loss, "" for the budget; fate "delivered" for
    those delivered, at the last step). Summed over the queries, the losses are :attr:`Funnel.losses`."""
    import pandas as pd

    columns = ["pipeline", "query_id", "order", "stage", "fate", "items"]
    parts = []
    items, failures = report.loss_items, report.failures
    measured = _measured(report)
    for p in pipelines_of(report):
        run = str(p["run"])
        if run not in measured:
            continue
        mine = items[items["run"] == run] if "run" in items.columns else items
        failed = failures[failures["run"] == run] if "run" in failures.columns else failures
        _, placed = _placed(p, mine, failed)
        if len(placed):
            counts = placed.groupby(["query_id", "order", "stage", "fate"], sort=False).size().reset_index(name="items")
            parts.append(counts.assign(pipeline=run)[columns])
    if not parts:
        return pd.DataFrame(columns=columns)
    return pd.concat(parts, ignore_index=True)


def _measured(report: Report) -> set[str]:
    """The pipelines whose items' fates were measured (a ``loss.delivered`` row in the summary)."""
    if not pipelines_of(report):
        return set()
    summary = report.summary
    return set(summary.loc[summary["metric"] == "loss.delivered", "run"])


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
