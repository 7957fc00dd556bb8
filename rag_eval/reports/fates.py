"""The fates of a relevant item in a pipeline (``docs/html-report.md``), named by what cut it: where the loss
attribution (:mod:`rag_eval.reports.stage_aware`), report.md, the HTML report and the CLI say them. Kept apart, with
no import, so that every face names a fate the same way."""

from __future__ import annotations

FATES = ("never_retrieved", "below_depth", "reranked_out", "cut_by_budget", "failed", "delivered")
#: the fate of a candidate that did not reach the budget, by whether the pipeline has a reranker: each pipeline
#: reports the one that names what cut it (a pipeline without a reranker never "reranked out" anything)
CUT = {True: "reranked_out", False: "cut_by_budget"}


def fate_label(fate: str, cut_by: str | None = None) -> str:
    """A fate in words, naming what cut the item: ``reranked out by 'minilm'``, ``cut by the budget``."""
    if fate == "reranked_out" and cut_by:
        return f"reranked out by {cut_by!r}"
    if fate == "cut_by_budget":
        return "cut by the budget"
    return fate.replace("_", " ")
