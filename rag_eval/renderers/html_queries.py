"""The HTML report's Queries view, as data (``docs/html-report.md``, "Queries" and "Size").

Two parts. The *listing*, always in the page: every query's id, its question (cut to :data:`TEXT_CHARS`), each
list's main value (rounded to 3 decimals, as shown, and stored as thousandths) and, for the fate filters, the queries
that lost relevant items at each stage and how many (query positions delta-coded). The *drill-down*, in shards of
:data:`SHARD_QUERIES` queries: each shard's chunk ids and texts once, each list's ranking to the drill depth as
columns (offsets and chunk numbers), the grades of the chunks shown and the fate of each relevant chunk. The shards
sit in the page when the page stays under :data:`INLINE_BYTES`; else each is a small script beside it
(``<page>.drill/shard-00000.js``), loaded when one of its queries is opened.

Every array is built from columns (NumPy, pandas): no Python call per query but where a row of JSON is written.
Nothing here measures: the values are the Report's, the fates :mod:`rag_eval.reports.funnel`'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..reports.fates import FATES
from ..reports.funnel import pipelines_of, query_funnel

if TYPE_CHECKING:
    import pandas as pd

    from .html_report import HtmlSide

#: queries per drill-down shard
SHARD_QUERIES = 256
#: the page keeps the drill-down inline while listing and drill-down together stay under this many bytes
INLINE_BYTES = 8_000_000
#: a question longer than this is cut in the list (its whole text is in the drill-down)
TEXT_CHARS = 80
#: per stage, the metric the query list and the diff show first (the first one the stage has)
MAIN = ("ndcg@budget", "recall@depth", "recall@budget")
#: a loss in the words of the fate filter
_FILTER_WORDS = {
    "never_retrieved": "a relevant chunk never retrieved by {stage}",
    "below_depth": "a relevant chunk ranked below the depth by {stage}",
    "reranked_out": "{stage} cut a relevant chunk",
    "cut_by_budget": "a relevant chunk cut at the budget",
    "failed": "{stage} failed on the query (its relevant chunks lost)",
}


@dataclass
class QueryData:
    """The listing (a JSON-ready dict, in the page) and the drill-down shards (each a JSON-ready dict)."""

    listing: dict[str, Any]
    shards: list[dict[str, Any]]


def lists_of(side: HtmlSide) -> list[tuple[str, str | None, str]]:
    """``(run, stage, main metric)`` of each block of the side's report, in its order."""
    out = []
    report = side.report
    for run in report.runs:
        stages: list[str | None] = list(report.stages) if report.staged else [None]
        for stage in stages:
            try:
                metrics = list(report.block(run, stage).metrics)
            except KeyError:
                continue
            main = next((m for m in MAIN if m in metrics), metrics[0] if metrics else "")
            out.append((run, stage, main))
    return out


def label_of(side: HtmlSide, run: str, stage: str | None, many: bool) -> str:
    who = run if stage is None else (stage if len(side.report.runs) == 1 else f"{run} / {stage}")
    return f"{side.name}: {who}" if many else who


def budget_chunks(budget: str | None) -> int | None:
    import re

    found = re.fullmatch(r"budget\((\d+)\)", budget or "")
    return int(found.group(1)) if found else None


def query_data(sides: Sequence[HtmlSide], depth: int) -> QueryData:
    """The Queries view's listing and drill-down shards for ``sides`` (rankings cut to ``depth``)."""
    import pandas as pd

    many = len(sides) > 1
    lists: list[dict[str, Any]] = []
    owners: list[tuple[int, str, str | None, str]] = []  # (side, run, stage, main) of each list
    for s, side in enumerate(sides):
        for run, stage, main in lists_of(side):
            budget = next((budget_chunks(p.get("budget")) for p in pipelines_of(side.report) if p["run"] == run), None)
            lists.append(
                {
                    "label": label_of(side, run, stage, many),
                    "side": s,
                    "run": run,
                    "stage": stage,
                    "metric": main,
                    "budget": budget,
                }
            )
            owners.append((s, run, stage, main))
    # every query any list, ranking or fate names, in string order
    seen: set[str] = set()
    for s, run, stage, _ in owners:
        seen.update(sides[s].report.query_ids(run, stage))
    for side in sides:
        for ranking in side.runs.values():
            seen.update(ranking.query_ids)
    losses = [query_funnel(side.report) for side in sides]
    items = [side.report.loss_items for side in sides]
    for frame in items:
        if len(frame):
            seen.update(frame["query_id"].astype(str))
    for side in sides:
        if side.report.card.answers is not None:
            seen.update(side.report.answers["query_id"].astype(str))
    ids = sorted(seen)
    index = pd.Index(ids)
    n = len(ids)
    values = []
    for s, run, stage, main in owners:
        column = np.full(n, np.nan)
        if main:
            at = _positions(index, sides[s].report.query_ids(run, stage))
            column[at] = np.asarray(sides[s].report.column(run, main, stage), dtype=np.float64)
        values.append(_thousandths(column))
    texts = _question_texts(sides, ids)
    short = [t if len(t) <= TEXT_CHARS else t[: TEXT_CHARS - 1].rstrip() + "…" for t in texts]
    listing = {
        "sides": [side.name for side in sides],
        "depth": depth,
        "lists": lists,
        "ids": ids,
        "text": short,
        "values": values,
        "filters": _filters(sides, losses, index, many),
        "shard": SHARD_QUERIES,
        "fates": list(FATES),  # the shards' fate codes
    }
    runs = list(dict.fromkeys(r for s in sides for p in pipelines_of(s.report) for r in [str(p["run"])]))
    runs += [r for s in sides for r in s.report.runs if r not in runs]
    listing["runs"] = runs  # the pipelines the fates name (by position in the shards)
    shards = _shards(sides, owners, index, depth, texts, items, runs)
    return QueryData(listing, shards)


def _positions(index: pd.Index, ids: Any) -> np.ndarray:
    """The position of each of ``ids`` in ``index`` (-1 where absent), in one vectorised lookup."""
    import pandas as pd

    found: np.ndarray = index.get_indexer(pd.Index(ids))
    return found


def _thousandths(column: np.ndarray) -> list[int | None]:
    """Values as thousandths (the 3 decimals shown), None where missing or NaN."""
    scaled = np.round(column * 1000)
    out: list[int | None] = [None if v != v else int(v) for v in scaled.tolist()]
    return out


def _question_texts(sides: Sequence[HtmlSide], ids: list[str]) -> list[str]:
    texts = [""] * len(ids)
    for side in sides:
        if not side.queries:
            continue
        for i, q in enumerate(ids):
            if not texts[i]:
                texts[i] = side.queries.get(q) or ""
    return texts


def _delta(positions: np.ndarray) -> list[int]:
    """Sorted positions as their differences (the first from 0): short numbers in the JSON."""
    out: list[int] = np.diff(positions, prepend=0).tolist()
    return out


def _filters(
    sides: Sequence[HtmlSide], losses: list[pd.DataFrame], index: pd.Index, many_sides: bool
) -> list[dict[str, Any]]:
    """Per side, pipeline, stage and cause: the queries that lost relevant items so, and how many each (the fate
    filters and the harm order); per pipeline, the queries with relevant items of which none was delivered."""
    out: list[dict[str, Any]] = []
    for s, (side, frame) in enumerate(zip(sides, losses, strict=True)):
        if not len(frame):
            continue
        pipelines = list(dict.fromkeys(frame["pipeline"]))
        for pipeline in pipelines:
            mine = frame[frame["pipeline"] == pipeline]
            prefix = (f"{side.name}: " if many_sides else "") + (f"{pipeline}: " if len(pipelines) > 1 else "")
            lost = mine[mine["fate"] != "delivered"]
            groups = lost.groupby(["order", "stage", "fate"], sort=True)["items"]
            for (order, stage, fate), counts in groups:
                rows = lost.loc[counts.index]
                per = rows.groupby("query_id")["items"].sum()
                at = _positions(index, per.index.astype(str))
                keep = np.argsort(at, kind="stable")
                words = _FILTER_WORDS.get(str(fate), str(fate)).format(stage=repr(stage))
                out.append(
                    {
                        "label": prefix + words,
                        "side": s,
                        "pipeline": pipeline,
                        "stage": stage,
                        "fate": fate,
                        "order": int(order),
                        "q": _delta(at[keep]),
                        "n": per.to_numpy(dtype=np.int64)[keep].tolist(),
                    }
                )
            delivered = set(mine.loc[mine["fate"] == "delivered", "query_id"].astype(str))
            starved = np.sort(
                _positions(index, [q for q in dict.fromkeys(mine["query_id"].astype(str)) if q not in delivered])
            )
            out.append(
                {
                    "label": prefix + "no relevant chunk delivered",
                    "side": s,
                    "pipeline": pipeline,
                    "stage": "",
                    "fate": "none_delivered",
                    "order": -1,
                    "q": _delta(starved),
                    "n": [1] * len(starved),
                }
            )
    return out


def _rankings(
    sides: Sequence[HtmlSide], owners: list[tuple[int, str, str | None, str]], index: pd.Index, depth: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each list's ranking to ``depth`` as columns ``(list, query position, doc id)``, by query position, then list,
    then rank."""
    lists, queries, docs = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0, object)]
    for j, (s, run, stage, _) in enumerate(owners):
        ranking = sides[s].runs.get((run, stage))
        if ranking is None or not len(ranking):
            continue
        offsets = np.asarray(ranking.offsets, np.int64)
        take = np.minimum(np.diff(offsets), depth)
        total = int(take.sum())
        row = np.repeat(np.arange(len(take)), take)
        within = np.arange(total) - np.repeat(np.cumsum(take) - take, take)
        entries = np.asarray(ranking.ranked())[offsets[:-1][row] + within]
        docs.append(np.asarray(ranking.doc_ids_at(entries), dtype=object))
        queries.append(_positions(index, list(ranking.query_ids))[row])
        lists.append(np.full(total, j, np.int64))
    lst, q, d = np.concatenate(lists), np.concatenate(queries), np.concatenate(docs)
    order = np.lexsort((lst, q))  # stable: the rank order stays within each (query, list)
    return lst[order], q[order], d[order]


def _grades(
    sides: Sequence[HtmlSide],
    owners: list[tuple[int, str, str | None, str]],
    index: pd.Index,
    ranks: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The grade of each chunk shown (``side, query position, doc id, grade``, by query position), from each side's
    qrels: one lookup of integer keys (query position x chunk number), no Python call per chunk."""
    import pandas as pd

    lst, q, d = ranks
    out: list[tuple[np.ndarray, ...]] = []
    for s, side in enumerate(sides):
        if side.qrels is None or not len(q):
            continue
        mine = np.isin(lst, [j for j, o in enumerate(owners) if o[0] == s])
        judged = side.qrels.to_frame()
        jq = _positions(index, judged["query_id"].astype(str).to_numpy(dtype=object))
        jd = judged["doc_id"].astype(str).to_numpy(dtype=object)
        codes, _ = pd.factorize(np.concatenate([d[mine], jd]))
        shown, known = codes[: int(mine.sum())], codes[int(mine.sum()) :]
        width = int(codes.max()) + 1 if len(codes) else 1
        key = pd.Index(jq.astype(np.int64) * width + known)
        at = _positions(key, q[mine].astype(np.int64) * width + shown)  # -1: not judged (a query of no qrels too)
        hit = at >= 0
        grades = judged["grade"].to_numpy(dtype=np.int64)[at[hit]]
        qs, ds = q[mine][hit], d[mine][hit]
        keep = ~pd.DataFrame({"q": qs, "d": ds}).duplicated().to_numpy()  # a chunk shown by two stages: once
        out.append((np.full(int(keep.sum()), s, np.int64), qs[keep], ds[keep], grades[keep]))
    if not out:
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(0, object), empty
    side_, q_, d_, g_ = (np.concatenate(c) for c in zip(*out, strict=True))
    order = np.argsort(q_, kind="stable")
    return side_[order], q_[order], d_[order], g_[order]


def _fates(
    sides: Sequence[HtmlSide], index: pd.Index, items: list[pd.DataFrame], runs: list[str]
) -> dict[str, np.ndarray]:
    """The fate of each relevant chunk, as columns (by query position): side, query, pipeline (its position in
    ``runs``), doc id, grade, fate (its position in :data:`FATES`), what cut it."""
    import pandas as pd

    code = {r: i for i, r in enumerate(runs)}
    fate_code = {f: i for i, f in enumerate(FATES)}
    parts = []
    for s, (side, frame) in enumerate(zip(sides, items, strict=True)):
        if not len(frame):
            continue
        run = frame["run"].astype(str) if "run" in frame.columns else pd.Series([side.report.runs[0]] * len(frame))
        cut_by = frame["cut_by"] if "cut_by" in frame.columns else pd.Series([None] * len(frame))
        parts.append(
            {
                "s": np.full(len(frame), s, np.int64),
                "q": _positions(index, frame["query_id"].astype(str).to_numpy(dtype=object)),
                "r": run.map(code).to_numpy(dtype=np.int64),
                "d": frame["doc_id"].astype(str).to_numpy(dtype=object),
                "g": frame["grade"].to_numpy(dtype=np.int64),
                "f": frame["fate"].map(fate_code).to_numpy(dtype=np.int64),
                "c": cut_by.astype(object).where(cut_by.notna(), None).to_numpy(dtype=object),
            }
        )
    if not parts:
        return {}
    joined = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    order = np.argsort(joined["q"], kind="stable")
    return {k: v[order] for k, v in joined.items()}


def _shards(
    sides: Sequence[HtmlSide],
    owners: list[tuple[int, str, str | None, str]],
    index: pd.Index,
    depth: int,
    texts: list[str],
    items: list[pd.DataFrame],
    runs: list[str],
) -> list[dict[str, Any]]:
    """The drill-down, :data:`SHARD_QUERIES` queries a shard (see the module's docstring)."""
    import pandas as pd

    n, size = len(index), SHARD_QUERIES
    ranks = _rankings(sides, owners, index, depth)
    lst, rq, rd = ranks
    gs, gq, gd, gg = _grades(sides, owners, index, ranks)
    fates = _fates(sides, index, items, runs)
    answers = _answers(sides, index)
    answer_at = np.searchsorted(np.array([a["q"] for a in answers], dtype=np.int64), np.arange(0, n + size, size))
    cuts = np.arange(0, n + size, size)
    rank_at, grade_at = np.searchsorted(rq, cuts), np.searchsorted(gq, cuts)
    fate_at = np.searchsorted(fates["q"], cuts) if fates else None
    stored = [(run, stage) in sides[s].runs for s, run, stage, _ in owners]
    shards = []
    for k in range((n + size - 1) // size):
        first, last = k * size, min(n, (k + 1) * size)
        r0, r1 = rank_at[k], rank_at[k + 1]
        g0, g1 = grade_at[k], grade_at[k + 1]
        f0, f1 = (fate_at[k], fate_at[k + 1]) if fate_at is not None else (0, 0)
        fate_docs = fates["d"][f0:f1] if fates else np.zeros(0, object)
        answered = answers[answer_at[k] : answer_at[k + 1]]
        context = np.array([d for a in answered for d in a["c"]], dtype=object)
        codes, docs = pd.factorize(np.concatenate([rd[r0:r1], fate_docs, gd[g0:g1], context]))
        rank_codes = codes[: r1 - r0]
        fate_codes = codes[r1 - r0 : r1 - r0 + len(fate_docs)]
        grade_codes = codes[r1 - r0 + len(fate_docs) : len(codes) - len(context)]
        context_codes = codes[len(codes) - len(context) :].tolist()
        ids = docs.tolist()
        shard: dict[str, Any] = {
            "first": first,
            "docs": ids,
            "texts": _chunk_texts(sides, ids),
            "questions": [t if len(t) > TEXT_CHARS else None for t in texts[first:last]],
            "ranks": [],
        }
        local, lists = rq[r0:r1] - first, lst[r0:r1]
        for j in range(len(owners)):
            if not stored[j]:
                shard["ranks"].append(None)
                continue
            mine = lists == j
            offsets = np.zeros(last - first + 1, np.int64)
            np.cumsum(np.bincount(local[mine], minlength=last - first), out=offsets[1:])
            shard["ranks"].append({"o": offsets.tolist(), "d": rank_codes[mine].tolist()})
        if g1 > g0:
            shard["grades"] = {
                "s": gs[g0:g1].tolist(),
                "q": (gq[g0:g1] - first).tolist(),
                "d": grade_codes.tolist(),
                "g": gg[g0:g1].tolist(),
            }
        if f1 > f0:
            shard["fates"] = {
                "s": fates["s"][f0:f1].tolist(),
                "q": (fates["q"][f0:f1] - first).tolist(),
                "r": fates["r"][f0:f1].tolist(),
                "d": fate_codes.tolist(),
                "g": fates["g"][f0:f1].tolist(),
                "f": fates["f"][f0:f1].tolist(),
                "c": [c if isinstance(c, str) else None for c in fates["c"][f0:f1].tolist()],
            }
        if answered:
            at = 0
            shard["answers"] = []
            for a in answered:
                shown = {**a, "q": a["q"] - first, "c": context_codes[at : at + len(a["c"])]}
                at += len(a["c"])
                shard["answers"].append(shown)
        shards.append(shard)
    return shards


def _answers(sides: Sequence[HtmlSide], index: pd.Index) -> list[dict[str, Any]]:
    """Each side's answers (``Report.answers``), one JSON row per answered query, by query position: the side
    (``s``), the query (``q``), the answer (``a``) or the error (``e``), the references (``r``), the grades
    exact match, F1, containment (``g``, None where NaN), the context as delivered (``c``: chunk ids), each
    chunk's grade in the side's qrels (``cg``: None where unjudged) and, where a judge graded the answers, its
    grade (``j``: None without a verdict) and its failure (``je``); where a side answered several runs, whose
    answer it is (``n``, the run), the runs in the order answered."""
    rows: list[dict[str, Any]] = []
    for s, side in enumerate(sides):
        if side.report.card.answers is None:
            continue
        table = side.report.answers
        at = _positions(index, table["query_id"].astype(str).to_numpy(dtype=object))
        grades = table[["exact_match", "f1", "contains"]].to_numpy(dtype=np.float64)
        judged = "judge_grade" in table.columns
        verdicts = table["judge_grade"].to_numpy(dtype=np.float64) if judged else None
        runs = table["run"].tolist() if "run" in table.columns else None
        order = {r: k for k, r in enumerate(table["run"].unique().tolist())} if runs is not None else {}
        by_run = side.report.card.answers_by_run or {}
        qrels = side.qrels
        for i, r in enumerate(table.to_dict("records")):
            qid = str(r["query_id"])
            labels = qrels[qid] if qrels is not None and qid in qrels else {}
            context = [str(d) for d in r["context_ids"]]
            row: dict[str, Any] = {}
            if runs is not None:  # several runs answered: whose answer, and a judge's grade only where it judged
                row["n"], row["k"] = runs[i], order[runs[i]]
            if verdicts is not None and (runs is None or by_run.get(runs[i], {}).get("judge")):
                verdict = float(verdicts[i])
                row["j"] = None if verdict != verdict else verdict
                row["je"] = r["judge_error"] if isinstance(r["judge_error"], str) else None
            rows.append(
                {
                    "s": s,
                    "q": int(at[i]),
                    "a": r["answer"] if isinstance(r["answer"], str) else None,
                    "e": r["error"] if isinstance(r["error"], str) else None,
                    "r": [str(x) for x in r["references"]],
                    "g": [None if v != v else float(v) for v in grades[i].tolist()],
                    "c": context,
                    "cg": [None if labels.get(d) is None else int(labels[d]) for d in context],
                    **row,
                }
            )
    rows.sort(key=lambda row: (row["q"], row["s"], row.pop("k", 0)))
    return rows


def _chunk_texts(sides: Sequence[HtmlSide], docs: list[str]) -> list[str | None]:
    texts: list[str | None] = [None] * len(docs)
    for side in sides:
        if not side.texts and not hasattr(side.texts, "collection"):
            continue
        for i, doc in enumerate(docs):
            if texts[i] is None:
                texts[i] = side.texts.get(doc)
    return texts


def dumps(value: Any) -> str:
    """Compact JSON with each of ``<``, ``>``, ``&``, ``'`` escaped, as jinja2's ``|tojson`` escapes them, so that no
    text can close the ``<script>`` block that holds it (and U+2028, U+2029, so that a script file beside the page
    reads it as JavaScript too)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("'", "\\u0027")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
