"""Stage-aware evaluation: each stage of a pipeline judged by the metric that fits its job.

A first stage by recall, a reranker by order and by what it added, the last stage by where each relevant item went
(the ``loss.*`` shares): ``docs/stage-aware.md``, "The metrics of each stage" and "Where relevant items go".
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..data.packed import PackedIds
from ..data.qrels import Qrels
from ..data.run import Run
from ..errors import InputError, StarvedBudget
from ..metrics.catalogue import FAMILIES
from ..metrics.conventions import Conventions
from ..metrics.engine import UNJUDGED, QueryAccount, discounted, evaluate_run, gain_of, lookup_values
from ..metrics.grammar import Metric, parse_metric
from ..stages.result import ArrowIds, Finding, PipelineResult, StageOutput, announce
from ._judged import JUDGED_THRESHOLD, JudgedShare, judged_share, shares_frame, warn_low
from ._runs import graded_by_notes
from ._systematic import announce_overlap, issue_rows, query_overlap
from .card import InputRecord, MetricCard, QueryRecord
from .fates import CUT, FATES
from .hashes import content_hashes
from .report import CURVES, Report, RunScores

if TYPE_CHECKING:
    import pandas as pd

FIRST_STAGE_METRICS = ("recall@depth", "recall@budget", "precision@budget", "hit@budget", "recall_ceiling@budget")
RERANKER_METRICS = (
    "ndcg@budget",
    "mrr@budget",
    "recall@budget",
    "precision@budget",
    "rerank_gain@budget",
    "cand_ndcg@budget",
)
LOSS_METRICS = tuple(f"loss.{fate}" for fate in FATES)
_SYMBOLIC = re.compile(r"^(?P<base>.+)@(?P<k>budget|depth)$", re.IGNORECASE)


@dataclass(frozen=True)
class _Spec:
    """One metric to report for a stage: its reported name, and how to compute it."""

    name: str
    metric: Metric | None  # an engine metric (None: a stage-aware one, by name)
    cut: str | None  # "budget" / "depth" when the cutoff is symbolic


def pipeline_results(runs: object) -> dict[str, PipelineResult] | None:
    """``{name: result}`` when ``runs`` is a pipeline result (named by its pipeline) or a mapping of them, else
    None."""
    if isinstance(runs, PipelineResult):
        return {repr(runs.pipeline): runs}
    if isinstance(runs, Mapping) and runs and all(isinstance(r, PipelineResult) for r in runs.values()):
        return dict(runs)
    return None


def evaluate_pipelines(
    qrels: Qrels,
    results: Mapping[str, PipelineResult],
    metrics: Sequence[str | Metric] | None,
    conv: Conventions,
    judged_threshold: float = JUDGED_THRESHOLD,
) -> Report:
    import pandas as pd

    blocks: list[RunScores] = []
    records: list[QueryRecord] = []
    inputs = [
        InputRecord(
            role="qrels",
            name="qrels",
            path=qrels.source.path if qrels.source else None,
            sha256=qrels.source.sha256 if qrels.source else None,
            notes=graded_by_notes(qrels),
        )
    ]
    tables: dict[str, list[pd.DataFrame]] = {"latency": [], "failures": [], "issues": [], "loss_items": [], CURVES: []}
    names: list[str] = []
    described = []
    shares: list[JudgedShare] = []
    findings: list[Finding] = []
    for run_name, result in results.items():
        judge = _PipelineJudge(qrels, result, conv)
        found = result.findings
        for f in found:
            who = f"run {run_name!r}: " if len(results) > 1 else ""
            findings.append(Finding(f.kind, f.stage, who + f.message))
        for stage, out in result.stages.items():
            shares.extend(judge.judged(run_name, stage, out))
            specs = _specs(metrics, out.role, stage == result.final_stage, result)
            block, account = judge.block(run_name, stage, out, specs)
            blocks.append(block)
            names.extend(s.name for s in specs)
            records.append(
                QueryRecord(
                    run=f"{run_name} / {stage}" if len(results) > 1 else stage,
                    counted=len(account.counted),
                    left_out=account.left_out,
                    counted_as_zero=account.zeroed,
                )
            )
            notes = [
                f"{out.role}",
                f"fingerprint {out.fingerprint}" + (f" (covers {out.covers})" if out.covers else ""),
            ]
            starved = judge.starved(out)
            if starved:
                note = (
                    f"{len(starved)} query(ies) deliver no chunk: the first chunk alone exceeds the "
                    f"{result.pipeline.budget.tokens}-token budget (e.g. {starved[0]!r}); they score 0 at the budget"
                )
                warnings.warn(f"stage {stage!r}: {note}", StarvedBudget, stacklevel=3)
                notes.append(note)
            mended = out.mended
            if mended:
                notes.append(f"{mended} query(ies) with an issue in a usable answer: see Report.issues")
            if out.failures:
                notes.append(f"failed on {len(out.failures)} query(ies): see Report.failures")
            inputs.append(
                InputRecord(role="stage", name=f"{run_name} / {stage}" if len(results) > 1 else stage, notes=notes)
            )
        issues = result.issues
        if found:  # a systematic problem: a row of its own, without a query
            issues = pd.concat(
                [issues, pd.DataFrame([(f.stage, None, f.message) for f in found], columns=issues.columns)],
                ignore_index=True,
            )
        tables_of_run = (
            ("latency", result.latency),
            ("failures", result.failures),
            ("issues", issues),
            ("loss_items", judge.loss_items),
        )
        tables[CURVES].append(judge.recall_curves(run_name))
        for key, table in tables_of_run:
            tables[key].append(table.assign(run=run_name) if len(results) > 1 else table)
        p = result.pipeline
        described.append(
            {
                "run": run_name,
                "structure": repr(p),
                "depth": p.depth,
                "budget": str(p.budget),
                "stages": {s: o.role for s, o in result.stages.items()},
                "fingerprints": {s: o.fingerprint for s, o in result.stages.items()},
                **({"source": dict(p.source)} if p.source else {}),
            }
        )
    pipeline = described[0] | {"all": described}
    lines = announce(findings, stacklevel=3)  # at the caller of evaluate
    notes = lines + announce_overlap(
        query_overlap(qrels, {name: r.query_ids for name, r in results.items()}), stacklevel=3
    )
    low = warn_low(shares, judged_threshold, stacklevel=4)

    def card() -> MetricCard:  # built when first read: its corpus fingerprint sorts every hit's id (5 s at 20M)
        return MetricCard.build(
            conv,
            list(dict.fromkeys(names)),
            inputs,
            records,
            pipeline=pipeline,
            judged=[s.record() for s in shares],
            judged_threshold=judged_threshold,
            notes=notes + low,
            hashes=content_hashes(qrels, conventions=conv, results=results),
        )

    merged = {k: pd.concat(v, ignore_index=True) if v else pd.DataFrame() for k, v in tables.items()}
    report_level = notes[len(lines) :] + low  # the stage-level lines have their rows already
    if report_level:
        merged["issues"] = pd.concat(
            [merged["issues"], issue_rows(report_level, list(merged["issues"].columns))], ignore_index=True
        )
    merged["judged"] = shares_frame(shares)
    return Report(blocks, list(dict.fromkeys(names)), card, merged)


def has_reranker(result: PipelineResult) -> bool:
    """Whether a stage of the pipeline reranks its candidates (else the budget alone cuts them)."""
    return any(out.role == "reranker" for out in result.stages.values())


def _specs(metrics: Sequence[str | Metric] | None, role: str, final: bool, result: PipelineResult) -> list[_Spec]:
    token_budget = result.pipeline.budget.tokens is not None
    if metrics is None:
        names = list(RERANKER_METRICS if role == "reranker" else FIRST_STAGE_METRICS)
        if final:  # the cut fate that names what cut the candidates: a reranker, or the budget
            other = f"loss.{CUT[not has_reranker(result)]}"
            names += [m for m in LOSS_METRICS if m != other]
    else:
        names = [str(m) for m in metrics]
    specs = []
    for name in names:
        if name in LOSS_METRICS:
            if final:
                specs.append(_Spec(name, None, None))
            continue
        match = _SYMBOLIC.match(name)
        base, cut = (match["base"], match["k"].lower()) if match else (name, None)
        if base in ("rerank_gain", "cand_ndcg"):
            if cut != "budget":
                raise ValueError(f"{base} is measured at the budget: write {base}@budget")
            if role == "reranker":
                specs.append(_Spec(f"{base}@budget", None, "budget"))
            continue
        metric = parse_metric(f"{base}@1" if cut else base)
        if cut:
            if metric.family == "recall_ceiling" and token_budget and cut == "budget":
                continue  # not defined when each query delivers its own number of chunks
            specs.append(_Spec(f"{str(metric)[: -len('@1')]}@{cut}", metric, cut))
        else:
            specs.append(_Spec(str(metric), metric, None))
    return specs


class _PipelineJudge:
    """Judges the stages of one pipeline result against the qrels."""

    def __init__(self, qrels: Qrels, result: PipelineResult, conv: Conventions) -> None:
        import pandas as pd

        self.qrels, self.result, self.conv = qrels, result, conv
        self.pipeline = result.pipeline
        self.loss_items = pd.DataFrame(columns=["query_id", "doc_id", "grade", "fate", "cut_by"])
        self._stage_names = list(result.stages)
        self._loss_cache: dict[str, npt.NDArray[np.float64]] | None = None
        self._runs: dict[str, tuple[Run, set[str]]] = {}  # per stage: its ranking and failed queries
        self._counts: dict[str, npt.NDArray[np.int64]] = {}  # per stage: the hits each query delivers

    def _run(self, out: StageOutput) -> tuple[Run, set[str]]:
        """The stage's ranking as given, read from its columns (failed queries as empty rankings under
        ``failed="zero"``, else absent), and its failed queries."""
        if out.name not in self._runs:
            run = _ranking(out, with_failed=self.conv.failed == "zero")
            run._memo["judgements"] = (self.qrels, self._judgements_named(out))  # its grades are read from them
            run._memo["matrices"] = []  # and its grade matrices kept: the report evaluates it several times
            self._runs[out.name] = (run, set(out.failures))
        return self._runs[out.name]

    def _delivered_counts(self, out: StageOutput) -> npt.NDArray[np.int64]:
        if out.name not in self._counts:
            self._counts[out.name] = out.delivered(self.pipeline.budget, self.pipeline.tokenizer)
        return self._counts[out.name]

    def _delivered(self, out: StageOutput) -> dict[str, int]:
        return dict(zip(out.query_ids, self._delivered_counts(out).tolist(), strict=True))

    def starved(self, out: StageOutput) -> list[str]:
        """Queries with results of which not even the first fits the token budget (none with a chunk budget)."""
        if self.pipeline.budget.tokens is None:
            return []
        starved = (out.lengths > 0) & (self._delivered_counts(out) == 0)  # a failed row has no hits
        ids = out.query_ids
        return [ids[i] for i in np.flatnonzero(starved).tolist()]

    def _cutoff(self, out: StageOutput, cut: str | None) -> int | dict[str, int] | None:
        if cut == "depth":
            return self.pipeline.depth
        if cut == "budget":
            budget = self.pipeline.budget
            return budget.chunks if budget.chunks is not None else self._delivered(out)
        return None

    def _cut(self, out: StageOutput, cut: str) -> int | dict[str, int]:
        """The cutoff ``budget`` or ``depth`` stands for."""
        k = self._cutoff(out, cut)
        if k is None:
            raise ValueError(f"no cutoff {cut!r}: expected 'budget' or 'depth'")
        return k

    def recall_curves(self, run_name: str) -> pd.DataFrame:
        """Mean recall@k of every stage for k on a log scale up to the depth (the depth included), measured as the
        table measures recall@depth (the stage's ranking as given, under the report's conventions), so that the
        curve meets the table's value at the depth (Report.recall_curves, the plots of the renderers)."""
        import pandas as pd

        depth = self.pipeline.depth
        ks = sorted(set(np.unique(np.geomspace(1, depth, num=min(depth, 30)).astype(int)).tolist()) | {depth})
        recall = [Metric("recall", k) for k in ks]
        rows = []
        for stage, out in self.result.stages.items():
            run, failed = self._run(out)
            exclude = failed if self.conv.failed == "exclude" else ()
            at_k = evaluate_run(self.qrels, run, recall, self.conv, exclude=exclude, warn_ids=False).values
            rows += [
                (run_name, stage, k, float(np.nanmean(v)) if len(v) else np.nan) for k, v in zip(ks, at_k, strict=True)
            ]
        return pd.DataFrame(rows, columns=["run", "stage", "k", "recall"])

    def block(self, run_name: str, stage: str, out: StageOutput, specs: list[_Spec]) -> tuple[RunScores, QueryAccount]:
        run, failed = self._run(out)
        exclude = failed if self.conv.failed == "exclude" else ()
        engine = [(j, s, s.metric) for j, s in enumerate(specs) if s.metric is not None]
        for _, s, m in engine:  # a stage's table holds numbers: relstring and runid are one string per query
            if FAMILIES[m.family].kind == "text":
                raise InputError(
                    f"metric {s.name!r} is one string per query, which a pipeline report's stage "
                    "tables cannot hold: evaluate a stage's ranking as a run (Report.texts) instead"
                )
        metrics: list[Metric] = []
        cutoffs: list[Mapping[str, int] | None] = []
        for _, s, m in engine:
            k = self._cutoff(out, s.cut)
            if isinstance(k, int):
                metrics.append(Metric(m.family, k, m.params))
                cutoffs.append(None)
            else:
                metrics.append(Metric(m.family, None, m.params) if s.cut else m)
                cutoffs.append(k)
        result = evaluate_run(self.qrels, run, metrics, self.conv, cutoffs=cutoffs, exclude=exclude)
        columns = list(result.values)
        as_given = [i for i, m in enumerate(metrics) if m.family == "judged"]
        if as_given and self.conv.unjudged == "remove":  # judged@k is measured on the ranking as given
            plain = evaluate_run(
                self.qrels,
                run,
                [metrics[i] for i in as_given],
                self.conv.replace(unjudged="keep"),
                cutoffs=[cutoffs[i] for i in as_given],
                exclude=exclude,
                warn_ids=False,
            )
            for i, column in zip(as_given, plain.values, strict=True):
                columns[i] = column
        counted = result.account.counted
        zeroed = sorted(failed.intersection(counted))
        if zeroed:  # failed="zero": measured as empty rankings, and said so
            result.account.zeroed["failed"] = zeroed
        values = np.full((len(counted), len(specs)), np.nan)
        for (j, _, _), column in zip(engine, columns, strict=True):
            values[:, j] = column
        for j, s in enumerate(specs):
            if s.metric is None:
                values[:, j] = self._special(s.name, stage, out, counted)
        n_failed = len(failed.intersection(self.qrels.query_ids))
        return RunScores(counted, values, run_name, stage, [s.name for s in specs], n_failed), result.account

    def judged(self, run_name: str, stage: str, out: StageOutput) -> list[JudgedShare]:
        """The stage's judged share at the budget, and for a first stage (or fusion input) at the depth too."""
        run, failed = self._run(out)
        exclude = failed if self.conv.failed == "exclude" else ()
        cuts = ["budget"] if out.role == "reranker" else ["budget", "depth"]
        return [
            JudgedShare(
                run_name, stage, cut, *judged_share(self.qrels, run, self._cut(out, cut), self.conv, exclude=exclude)
            )
            for cut in cuts
        ]

    # ----- the stage-aware metrics --------------------------------------------------------------------------
    def _previous(self, stage: str) -> StageOutput:
        return self.result.stages[self._stage_names[self._stage_names.index(stage) - 1]]

    def _special(self, name: str, stage: str, out: StageOutput, counted: list[str]) -> npt.NDArray[np.float64]:
        if name == "rerank_gain@budget":
            mine = self._recall_at_budget(out, counted)
            before = self._recall_at_budget(self._previous(stage), counted)
            return mine - before
        if name == "cand_ndcg@budget":
            return self._candidate_ndcg(out, self._previous(stage), counted)
        return self._loss(counted)[name.removeprefix("loss.")]

    def _recall_at_budget(self, out: StageOutput, counted: list[str]) -> npt.NDArray[np.float64]:
        run, _ = self._run(out)
        k = self._cutoff(out, "budget")
        metric = Metric("recall", k if isinstance(k, int) else None)
        result = evaluate_run(
            self.qrels,
            run,
            [metric],
            self.conv.replace(missing_run="zero", failed="zero"),
            cutoffs=[None if isinstance(k, int) else k],
        )
        values = dict(zip(result.account.counted, result.values[0], strict=True))
        return np.fromiter(map(values.get, counted, repeat(0.0)), np.float64, len(counted))

    def _gains(self, grades: np.ndarray) -> np.ndarray:
        return gain_of(np.asarray(grades, dtype=np.int64), self.conv.gain, None, None)

    def _judgements_named(self, out: StageOutput) -> np.ndarray:
        """For each of the stage's hits, the index of the judgement it names in the qrels' columns (``UNJUDGED``
        where none): one lookup over the packed doc ids per stage and qrels, read for grades and lost items alike."""
        held = out._memo.get("judgements_named")
        if held is None or held[0] is not self.qrels:
            offsets, _ = out.hit_columns()
            every = np.arange(self.qrels.num_judgements, dtype=np.int64)
            named = lookup_values(out.doc_ids(), offsets, self.qrels.rows_of(out.query_ids), self.qrels, every)
            held = out._memo["judgements_named"] = (self.qrels, named)
        codes: np.ndarray = held[1]
        return codes

    def _positive_cells(self, out: StageOutput) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rows, ranks, gains)`` of the stage's hits with a positive gain (by row, then rank), from the judgements
        they name; the other hits, gain 0, add nothing to a DCG."""
        offsets, _ = out.hit_columns()
        codes = self._judgements_named(out)
        judged = np.flatnonzero(codes != UNJUDGED)
        grades = self.qrels.columns[2][codes[judged]]
        positive = grades > 0  # a gain is positive only for a grade > 0
        cells, gains = judged[positive], self._gains(grades[positive])
        rows = np.searchsorted(offsets, cells, side="right") - 1
        keep = gains > 0
        return rows[keep], (cells - offsets[rows])[keep], gains[keep]

    def _candidate_ndcg(self, out: StageOutput, given: StageOutput, counted: list[str]) -> np.ndarray:
        """nDCG@budget of each counted query over the best order of the candidates it was given, from the
        columns: only the hits with a positive gain are read (a gain of 0 adds nothing), and each query's DCG is
        added in rank order (``np.bincount`` adds its weights one by one in array order), as one by one."""
        cut = self._cut(out, "budget")
        n = len(counted)
        values = np.full(n, np.nan)
        budgets = (
            np.full(n, cut, np.int64)
            if isinstance(cut, int)
            else np.fromiter(map(cut.get, counted, repeat(0)), np.int64, n)
        )
        given_rows, mine_rows = _rows_of(given, counted), _rows_of(out, counted)
        g_len, m_len = np.diff(given.hit_columns()[0]), np.diff(out.hit_columns()[0])
        ok = given_rows >= 0
        ok[ok] &= ~given.failed[given_rows[ok]]  # nothing was given: no best order to compare with
        # the candidates' positive gains, best first, per counted query; the ideal keeps the first b of them
        where = _inverse(given_rows, len(given.table))
        rows, _, gains = self._positive_cells(given)
        who = where[rows]
        inside = who >= 0
        who, gains = who[inside], gains[inside]
        inside = ok[who]
        who, gains = who[inside], gains[inside]
        order = np.lexsort((-gains, who))
        who, gains = who[order], gains[order]
        place = np.arange(len(who)) - np.searchsorted(who, who, side="left")
        b = np.minimum(budgets, np.where(given_rows >= 0, g_len[np.maximum(given_rows, 0)], 0))
        kept = place < b[who]
        who, gains, place = who[kept], gains[kept], place[kept]
        if not len(who):
            return values  # no counted query has a relevant candidate: 0/0 everywhere
        has = np.zeros(n, bool)  # a relevant candidate (else 0/0: NaN)
        has[who] = True
        starts = np.flatnonzero(np.r_[True, who[1:] != who[:-1]])
        top = np.zeros(n)
        top[who[starts]] = gains[starts]  # each query's best gain (ideal[0])
        scale = np.frexp(top)[1]  # DCG as the engine's nDCG computes it: gains scaled by a power of two
        best = np.bincount(who, weights=discounted(np.ldexp(gains, -scale[who]), place), minlength=n)
        # the stage's own positive gains within its first b hits
        where = _inverse(mine_rows, len(out.table))
        rows, ranks, gains = self._positive_cells(out)
        who = where[rows]
        take = np.where(mine_rows >= 0, np.minimum(budgets, m_len[np.maximum(mine_rows, 0)]), 0)
        inside = who >= 0
        who, ranks, gains = who[inside], ranks[inside], gains[inside]
        inside = has[who] & (ranks < take[who])
        who, ranks, gains = who[inside], ranks[inside], gains[inside]
        dcg = np.bincount(who, weights=discounted(np.ldexp(gains, -scale[who]), ranks), minlength=n)
        # so cand_ndcg is ndcg@budget against the qrels of the candidates alone
        values[has] = np.where(take[has] > 0, dcg[has] / best[has], 0.0)
        return values

    def _loss(self, counted: list[str]) -> dict[str, np.ndarray]:
        """The fate of each counted query's relevant items, from the columns: each stage's hits (and the first
        stage's ids past the depth) looked up in a per-query table ``{relevant doc: item number}``."""
        if self._loss_cache is not None:
            return self._loss_cache
        import pandas as pd

        first = self.result.stages[self.result.first_stage]
        final = self.result.stages[self.result.final_stage]
        t = self.conv.relevance_threshold
        n = len(counted)
        # the relevant judgements of the counted queries, query by query in the qrels' order: the items
        _, offsets, grade_column = self.qrels.columns
        rows = self.qrels.rows_of(counted)  # -1: a query the qrels lack, read as the appended empty row
        lengths = np.append(np.diff(offsets), 0)[rows]
        starts = np.append(offsets[:-1], 0)[rows]
        judgement = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))
        owner = np.repeat(np.arange(n, dtype=np.int64), lengths)
        relevant = grade_column[judgement] >= t
        judgement, owner = judgement[relevant], owner[relevant]
        m = len(judgement)
        item_of = np.full(len(grade_column), -1, np.int64)  # each judgement's item number, -1 if none
        item_of[judgement] = np.arange(m)
        positions = np.arange(len(grade_column), dtype=np.int64)  # each judgement's own index: the lookup names it
        head_rows = _rows_of(first, counted)
        tail_rows = _rows_of(final, counted)
        head_failed = (head_rows >= 0) & np.where(head_rows >= 0, first.failed[np.maximum(head_rows, 0)], False)
        tail_failed = (tail_rows >= 0) & np.where(tail_rows >= 0, final.failed[np.maximum(tail_rows, 0)], False)

        def found(codes: np.ndarray, offsets: np.ndarray, limit: np.ndarray | None = None) -> np.ndarray:
            """Which items ids name, given the judgement each names (``limit``: only the first ``limit[row]`` ids
            of each row)."""
            cells = np.flatnonzero(codes != UNJUDGED)
            if limit is not None:  # the rank of the few judged hits only (no rank array over every hit)
                rows = np.searchsorted(offsets, cells, side="right") - 1
                cells = cells[cells - offsets[rows] < limit[rows]]
            items = item_of[codes[cells]]
            mask = np.zeros(m, bool)
            mask[items[items >= 0]] = True
            return mask

        head_off, _ = first.hit_columns()
        candidates = found(self._judgements_named(first), head_off)
        beyond_off, beyond_ids = _beyond(first)
        beyond_rows = self.qrels.rows_of(first.query_ids)
        below = found(lookup_values(beyond_ids, beyond_off, beyond_rows, self.qrels, positions), beyond_off)
        tail_off, _ = final.hit_columns()
        delivered = found(self._judgements_named(final), tail_off, self._delivered_counts(final))
        # a failed stage's rows hold no hits, so a failed first stage leaves candidates and below empty
        fate = np.full(m, FATES.index("never_retrieved"), np.int64)
        fate[below] = FATES.index("below_depth")
        cut = FATES.index(CUT[has_reranker(self.result)])
        fate[candidates] = np.where(tail_failed[owner[candidates]], FATES.index("failed"), cut)
        fate[head_failed[owner]] = FATES.index("failed")  # anything, when the first stage failed
        fate[delivered] = FATES.index("delivered")
        # what cut each candidate: the first reranker whose output lacks it, else the final stage's order (the last
        # reranker put it below the budget); without a reranker, the budget
        cut_by = np.full(m, None, dtype=object)
        if FATES[cut] == "cut_by_budget":
            cut_by[fate == cut] = "budget"
        else:
            open_ = fate == cut
            for name, out in self.result.stages.items():
                if out.role != "reranker" or name == self.result.final_stage or not open_.any():
                    continue
                offsets, _ = out.hit_columns()
                lacks = open_ & ~found(self._judgements_named(out), offsets)
                cut_by[lacks] = name
                open_ &= ~lacks
            cut_by[open_] = self.result.final_stage
        totals = np.bincount(owner, minlength=n).astype(np.float64)
        shares = {}
        for k, name in enumerate(FATES):
            counts = np.bincount(owner[fate == k], minlength=n).astype(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                shares[name] = np.where(totals > 0, counts / np.where(totals > 0, totals, 1.0), np.nan)
        self.loss_items = pd.DataFrame(
            {
                "query_id": np.array(counted, dtype=object)[owner],
                "doc_id": self.qrels.doc_column[judgement],
                "grade": grade_column[judgement],
                "fate": np.array(FATES, dtype=object)[fate],
                "cut_by": cut_by,
            },
            columns=["query_id", "doc_id", "grade", "fate", "cut_by"],
        )
        self._loss_cache = shares
        return shares


def _ranking(out: StageOutput, *, with_failed: bool) -> Run:
    """The stage's ranking as given (no scores: the order is the stage's), read from its columns."""
    return out.ranking_run(with_failed=with_failed, with_scores=False)


def _rows_of(out: StageOutput, queries: list[str]) -> npt.NDArray[np.int64]:
    """The row of each query in the stage's table (-1: absent); the last ids asked are answered again from the
    stage's memo (the candidate nDCG and the lost items ask for the same counted queries)."""
    held = out._memo.get("rows_of")
    if held is not None and (held[0] is queries or held[0] == queries):
        rows: npt.NDArray[np.int64] = held[1]
        return rows
    index = out.rows
    rows = np.fromiter(map(index.get, queries, repeat(-1)), np.int64, len(queries))
    rows.flags.writeable = False
    out._memo["rows_of"] = (list(queries), rows)
    return rows


def _beyond(out: StageOutput) -> tuple[npt.NDArray[np.int64], PackedIds]:
    """``(offsets, ids)`` of the stage's ``beyond_depth`` column (doc ids returned past the depth), packed."""
    import pyarrow.compute as pc

    from ..stages.hit_table import lengths_of_list, string_buffers

    column = out.table.column("beyond_depth")
    lengths = lengths_of_list(column)
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = pc.list_flatten(column)
    starts, data = string_buffers(flat)
    return offsets, ArrowIds(data, starts)


def _inverse(rows: np.ndarray, size: int) -> npt.NDArray[np.int64]:
    """For a table of ``size`` rows: the position in ``rows`` of each row (-1 where absent)."""
    out = np.full(size, -1, np.int64)
    present = rows >= 0
    out[rows[present]] = np.flatnonzero(present)
    return out
