"""The text of a judge's agreement with people (:mod:`rag_eval.ground_truth.agreement`) from its JSON form: the
lines its ``render()`` and the metric card (``card.judge_agreement``) show. A module of its own, importing nothing,
so that the card renders what a saved report holds without importing the agreement's numerics (docs/agreement.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["card_lines", "items_line", "num", "ranking_line", "signed"]


def num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4f}"


def items_line(d: Mapping[str, Any]) -> str:
    """One line of a :meth:`JudgeAgreement.to_dict`: the numbers and whether they are low."""
    head = f"judge {d['judge']!r} against {d['people']}: {d['n']} item(s) graded by both"
    if not d["n"]:
        return head + "; agreement cannot be measured"
    verdict = (
        f"below {d['warn_below']:g}: its grades should not stand in for people's"
        if d["low"]
        else f"at least {d['warn_below']:g}"
    )
    return (
        f"{head}; same grade {d['observed']:.1%}, kappa {num(d['kappa'])}, quadratic-weighted kappa "
        f"{num(d['weighted_kappa'])} ({verdict}), Krippendorff's alpha (ordinal) {num(d['alpha'])}, "
        f"kappa at grade >= {d['threshold']} {num(d['binary_kappa'])}"
    )


def ranking_line(d: Mapping[str, Any]) -> str:
    """One line of a :meth:`RankingAgreement.to_dict`."""
    head = f"{len(d['systems'])} systems ranked by {d['metric']} under human and judge qrels"
    if d["method"] == "kendall_tau":
        top = "the same top system" if d["top_match"] else f"top {d['top_human']} (human) vs {d['top_judge']} (judge)"
        return (
            f"{head}: Kendall's tau {num(d['tau'])} (warned below {d['tau_below']:g}), {top}; "
            f"{d['pair_share']:.0%} of pairs agree in order and significance"
        )
    n = len(d["pairs"])
    agree = round(d["pair_share"] * n)
    return f"{head}: {agree} of {n} pair(s) agree in order and significance ({d['test']} test, alpha {d['alpha']:g})"


def card_lines(d: Mapping[str, Any]) -> list[str]:
    """The metric card's lines for its ``judge_agreement`` (what :meth:`Report.with_judge_agreement` stores)."""
    lines = []
    for entry in d.get("items") or []:
        lines.append("  judge agreement: " + items_line(entry))
    for entry in d.get("rankings") or []:
        lines.append("  judge ranking agreement: " + ranking_line(entry))
    return lines
