"""Which block of one report (a run, or a pipeline's stage) a diff compares with which block of another.

Same names pair first. Pipelines (runs) left over on both sides pair by position; stages left over pair by role
and position (the first stage with the first stage, the n-th reranker with the n-th reranker, the n-th fusion input
with the n-th); the final stages of two paired pipelines, when not paired already, are compared on what they
deliver (the ``@budget`` metrics and the loss shares). Every pairing not by name is said, and so is every block
left without a counterpart (``docs/bad-input/ids-and-joins.md``, "Joins that match little or nothing").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..reports.report import Report

__all__ = ["BlockPair", "Pairing", "pair_blocks"]

_ROLE_WORDS = {"first": "first stage", "reranker": "reranker", "input": "fusion input", "fusion": "fusion"}


@dataclass(frozen=True)
class BlockPair:
    """``(run, stage)`` of the baseline and of the candidate, how they were paired (``"name"``, ``"position"``,
    ``"role"`` or ``"delivered"``) and, for ``"delivered"``, that only the budget's metrics are compared."""

    a: tuple[str, str | None]
    b: tuple[str, str | None]
    how: str = "name"

    @property
    def delivered_only(self) -> bool:
        return self.how == "delivered"

    def label(self) -> tuple[str, str]:
        """``(run, stage)`` cells: one name where both sides share it, ``a → b`` where they differ."""
        (ra, sa), (rb, sb) = self.a, self.b
        run = ra if ra == rb else f"{ra} → {rb}"
        stage = (sa or "") if sa == sb else f"{sa or ''} → {sb or ''}"
        if self.delivered_only:
            stage = f"delivered ({stage})"
        return run, stage


@dataclass
class Pairing:
    pairs: list[BlockPair]
    notes: list[str]  # how blocks were paired when names differ, and what has no counterpart


def _pipelines(report: Report) -> dict[str, dict[str, str]]:
    """``{run: {stage: role}}`` of a pipeline report, in order (empty for a report of plain runs)."""
    pipeline: dict[str, Any] | None = report.card.pipeline
    if not pipeline:
        return {}
    every = pipeline.get("all") or [pipeline]
    return {str(p["run"]): {str(s): str(r) for s, r in p.get("stages", {}).items()} for p in every}


def _stages(report: Report, run: str, roles: dict[str, dict[str, str]]) -> list[str | None]:
    if not report.staged:
        return [None]
    order = list(roles.get(run, {})) or report.stages
    out: list[str | None] = []
    for stage in order:
        try:
            report.block(run, stage)
        except KeyError:
            continue
        out.append(stage)
    return out


def pair_blocks(a: Report, b: Report, names: tuple[str, str] = ("baseline", "candidate")) -> Pairing:
    """Pair the blocks of ``a`` (the baseline) with those of ``b``; ``names`` name the sides in the notes."""
    na, nb = names
    notes: list[str] = []
    pairs: list[BlockPair] = []
    runs_a, runs_b = a.runs, b.runs
    by_name = [(r, r) for r in runs_a if r in runs_b]
    left_a = [r for r in runs_a if r not in runs_b]
    left_b = [r for r in runs_b if r not in runs_a]
    run_pairs = [(x, y, "name") for x, y in by_name]
    if left_a and len(left_a) == len(left_b):
        run_pairs += [(x, y, "position") for x, y in zip(left_a, left_b, strict=True)]
        notes.append(
            "pipelines named differently, paired by position: "
            + "; ".join(f"{x!r} ({na}) with {y!r} ({nb})" for x, y in zip(left_a, left_b, strict=True))
        )
    else:
        notes += [f"pipeline {x!r} is in {na} only: not compared" for x in left_a]
        notes += [f"pipeline {y!r} is in {nb} only: not compared" for y in left_b]
    roles_a, roles_b = _pipelines(a), _pipelines(b)
    for ra, rb, how in run_pairs:
        stages_a, stages_b = _stages(a, ra, roles_a), _stages(b, rb, roles_b)
        if stages_a == [None] or stages_b == [None]:
            if stages_a == stages_b:
                pairs.append(BlockPair((ra, None), (rb, None), how))
            else:
                notes.append(f"{ra!r} ({na}) and {rb!r} ({nb}): one is a run, the other a pipeline: not compared")
            continue
        named = [s for s in stages_a if s in stages_b]
        rest_a = [s for s in stages_a if s not in named]
        rest_b = [s for s in stages_b if s not in named]
        stage_pairs = [(s, s, how) for s in named]
        role_a, role_b = roles_a.get(ra, {}), roles_b.get(rb, {})
        said = []
        for role in dict.fromkeys([role_a.get(str(s), "stage") for s in rest_a]):
            xs = [s for s in rest_a if role_a.get(str(s), "stage") == role]
            ys = [s for s in rest_b if role_b.get(str(s), "stage") == role]
            for i, (x, y) in enumerate(zip(xs, ys, strict=False)):
                stage_pairs.append((x, y, "role"))
                nth = f"{_ROLE_WORDS.get(role, role)}" + (f" {i + 1}" if len(xs) > 1 or len(ys) > 1 else "")
                said.append(f"{x!r} with {y!r} ({nth})")
        if said:
            notes.append(f"stages of {ra!r} named differently, paired by role and position: " + "; ".join(said))
        paired_a = {x for x, _, _ in stage_pairs}
        paired_b = {y for _, y, _ in stage_pairs}
        alone = [f"{s!r} ({na})" for s in stages_a if s not in paired_a]
        alone += [f"{s!r} ({nb})" for s in stages_b if s not in paired_b]
        if alone:
            notes.append(f"pipeline {ra!r}: no counterpart for stage(s) " + ", ".join(alone) + ": not compared")
        order = {s: i for i, s in enumerate(stages_b)}
        stage_pairs.sort(key=lambda p: order[p[1]])
        pairs += [BlockPair((ra, x), (rb, y), h) for x, y, h in stage_pairs]
        final_a, final_b = stages_a[-1], stages_b[-1]
        if (final_a, final_b) not in {(x, y) for x, y, _ in stage_pairs}:
            pairs.append(BlockPair((ra, final_a), (rb, final_b), "delivered"))
            notes.append(
                f"pipeline {ra!r}: what the budget delivers compared between the final stages {final_a!r} ({na}) "
                f"and {final_b!r} ({nb}) (the @budget metrics and the loss shares)"
            )
    return Pairing(pairs, notes)


def delivered_metric(name: str) -> bool:
    """Whether a metric is about what the budget delivers (compared between two final stages of other roles)."""
    return name.endswith("@budget") or name.startswith("loss.")
