"""What is measured: every metric family, its definition, its parameters and its trec_eval name.

How each is computed lives in :mod:`rag_eval.metrics._kernels`; this module is the documentation and the
vocabulary the grammar checks names against.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import InputError


@dataclass(frozen=True)
class Family:
    name: str  # canonical, lower case
    definition: str
    cutoff: str  # "required", "optional" or "none"
    params: frozenset[str]
    trec_name: str | None  # trec_eval's measure name; with a cutoff it is printed as f"{trec_name}_{k}"
    summed: bool = False  # trec_eval prints the sum over queries, not the mean
    aggregate: str = "mean"  # over queries: "mean", "sum" (the counts), "geometric" (gm_map), "none" (relstring)
    kind: str = "number"  # per-query value: "number" (float64) or "text" (relstring, runid)
    citation: str | None = None  # where the definition comes from
    # which way is better: "higher", "lower" (unjudged, a residual, a loss share, seconds) or "none" (a count of
    # the input, a text): what every comparison, gate and diff reads (higher_is_better)
    direction: str = "higher"

    def __post_init__(self) -> None:
        if self.summed and self.aggregate == "mean":
            object.__setattr__(self, "aggregate", "sum")
        if self.direction not in ("higher", "lower", "none"):
            raise ValueError(f"direction of {self.name}: 'higher', 'lower' or 'none', not {self.direction!r}")


_REL = frozenset({"rel"})
# ties= pins the tie rule of a metric (a foreign tool's: rag_eval.metrics.dialects), overriding conventions.ties
_RANKED = frozenset({"rel", "ties"})

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("recall", "relevant in the top k / all relevant of the query (R)", "required", _RANKED, "recall"),
        Family(
            "precision", "relevant in the top k / k (k even when fewer than k are returned)", "required", _RANKED, "P"
        ),
        Family("hit", "1 if any relevant is in the top k, else 0", "required", _RANKED, "success"),
        Family(
            "mrr", "1 / rank of the first relevant (0 if none, or none in the top k)", "optional", _RANKED, "recip_rank"
        ),
        Family(
            "ndcg",
            "DCG / ideal DCG: gain(grade) discounted by log2(rank + 1); the ideal ranks every judged grade of the "
            "query by gain, cut at k. Gain 'exp' = 2^grade - 1, 'linear' = grade, or a grade:gain map.",
            "optional",
            frozenset({"gain", "gains", "rel", "ties"}),
            "ndcg",
        ),
        Family(
            "ap", "average precision: sum of precision at each relevant rank (top k) / R", "optional", _RANKED, "map"
        ),
        Family("r_precision", "relevant in the top R / R", "none", _RANKED, "Rprec"),
        Family(
            "bpref",
            "Buckley & Voorhees 2004: mean over relevant retrieved of 1 - min(judged non-relevant above it, R) / "
            "min(judged non-relevant, R)",
            "none",
            _RANKED,
            "bpref",
        ),
        Family(
            "judged",
            "share of the top min(k, returned) that has any judgement, on the ranking as given (reports measure it "
            "before any condensing); NaN (0/0, counted in n_nan) when that top is empty. `per=k` divides by k "
            "instead (ir_measures before 0.3.1), `empty=zero` scores an empty top 0 (ir_measures scores a query "
            "missing from the run 0)",
            "required",
            frozenset({"per", "empty", "ties"}),
            None,
        ),
        Family("recall_ceiling", "min(k, R) / R: the most recall@k can be", "required", _REL, None),
        Family(
            "num_rel",
            "R: judged relevant documents of the query",
            "none",
            _REL,
            "num_rel",
            summed=True,
            direction="none",
        ),
        Family(
            "num_ret",
            "results returned (after any -M cut and condensing)",
            "none",
            frozenset(),
            "num_ret",
            summed=True,
            direction="none",
        ),
        Family("num_rel_ret", "relevant results returned", "none", _REL, "num_rel_ret", summed=True),
        # --- the rest of trec_eval's -m all_trec (trec_eval 10.0, m_*.c); kernels in kernels_*.py ---
        Family(
            "gm_map",
            "AP per query; over queries the geometric mean, each value floored at 1e-5 (trec_eval's MIN_GEO_MEAN)",
            "none",
            _REL,
            "gm_map",
            aggregate="geometric",
        ),
        Family(
            "gm_bpref",
            "bpref per query; over queries the geometric mean, floored at 1e-5",
            "none",
            _REL,
            "gm_bpref",
            aggregate="geometric",
        ),
        Family(
            "infap",
            "inferred AP (Yilmaz & Aslam 2006) from a sampled pool: grade -1 is pooled but not judged (m_infap.c)",
            "none",
            _RANKED,
            "infAP",
        ),
        Family(
            "iprec_at_recall",
            "interpolated precision at recall level `level` (0..1): the highest precision "
            "at any rank whose recall is >= level, with recall counted as c = lround(level x R) relevant "
            "(halves away from 0; m_iprec_at_recall.c): 0 if fewer than c are retrieved, the best precision "
            "anywhere if c is 0; an empty ranking 0 (NaN where trec_eval divides 0 by 0: a ranking -J emptied, "
            "under conventions that follow trec_eval)",
            "none",
            frozenset({"rel", "level", "ties"}),
            "iprec_at_recall",
        ),
        Family(
            "11pt_avg",
            "mean interpolated precision (as iprec_at_recall, NaN likewise) over the recall levels "
            "`levels` (in [0, 1], sorted, no repeat; default 0, .1, ..., 1), added from the last level as "
            "m_11pt_avg.c does",
            "none",
            frozenset({"rel", "levels"}),
            "11pt_avg",
        ),
        Family(
            "rprec_mult",
            "precision at rank (long)(mult x R + 0.9), truncated as C does (m_Rprec_mult.c): a "
            "ranking shorter than that counts as filled with non-relevant; 0 for a query with no relevant",
            "none",
            frozenset({"rel", "mult"}),
            "Rprec_mult",
        ),
        Family(
            "utility",
            "w1 x relevant retrieved + w2 x non-relevant retrieved + w3 x relevant not retrieved + "
            "w4 x non-relevant not retrieved (`weights=w1;w2;w3;w4`, default 1;-1;0;0). The collection's size "
            "is taken as 0, as trec_eval without -N does, so non-relevant not retrieved = relevant retrieved - "
            "retrieved - R (negative: w4 rewards nothing real). Under conventions that follow trec_eval, a query "
            "missing from the run (-c) is measured as trec_eval does: on one phantom non-relevant result (gone "
            "under -J), and reset to 0 when the weights are not typed (trec_eval's name plain 'utility')",
            "none",
            frozenset({"rel", "weights"}),
            "utility",
        ),
        Family(
            "g",
            "normalised gain G (m_G.c): each retrieved gain over log2(2 + ideal - cumulative gain), "
            "normalised by the ideal",
            "none",
            frozenset({"gains", "rel"}),
            "G",
        ),
        Family("bing", "binary G (m_binG.c): G with gain 1 for every relevant document", "none", _REL, "binG"),
        Family(
            "ndcg_rel",
            "nDCG over the top R ranks with ideal DCG also at R (m_ndcg_rel.c)",
            "none",
            frozenset({"gains", "rel"}),
            "ndcg_rel",
        ),
        Family(
            "rndcg",
            "nDCG normalised between worst and ideal ranking (m_Rndcg.c)",
            "none",
            frozenset({"gains", "rel"}),
            "Rndcg",
        ),
        Family(
            "relative_precision",
            "relevant in the top k / min(k, R) (trec_eval's relative_P)",
            "required",
            _REL,
            "relative_P",
        ),
        Family("set_precision", "relevant retrieved / retrieved (the whole ranking as a set)", "none", _REL, "set_P"),
        Family("set_relative_precision", "relevant retrieved / min(retrieved, R)", "none", _REL, "set_relative_P"),
        Family("set_recall", "relevant retrieved / R", "none", _REL, "set_recall"),
        Family("set_map", "set_precision x set_recall", "none", _REL, "set_map"),
        Family(
            "set_f",
            "(beta + 1) P R / (beta P + R), 0 when nothing relevant is retrieved (`beta` >= 0, "
            "default 1): trec_eval's set_F.X and ir_measures' SetF(beta=X) both weigh recall by X itself, "
            "van Rijsbergen's beta squared, so beta=4 is the usual F2",
            "none",
            frozenset({"rel", "beta"}),
            "set_F",
        ),
        Family(
            "num_nonrel_judged_ret",
            "judged non-relevant results returned",
            "none",
            _REL,
            "num_nonrel_judged_ret",
            summed=True,
            direction="lower",
        ),
        Family(
            "rbp",
            "rank-biased precision, (1 - p) sum p^(rank-1) x gain (Moffat & Zobel 2008), persistence `p` "
            "(default 0.9, m_rbp.c; 0 < p < 1); gain = the grade, or `gains=`, divided by the query's largest "
            "gain when that is above 1 (m_rbp.c); @k: the first k ranks only",
            "optional",
            frozenset({"rel", "p", "gains"}),
            "rbp",
            citation="Moffat & Zobel, TOIS 27(1), 2008",
        ),
        Family(
            "rbp_resid",
            "RBP's residual: what RBP could gain if every unjudged result and every rank past the "
            "ranking (or past k) had gain 1: p^depth + (1 - p) sum p^(rank-1) over the unjudged ranks; 0 when no "
            "result is unjudged (m_rbp_resid.c)",
            "optional",
            frozenset({"p"}),
            "rbp_resid",
            citation="Moffat & Zobel, TOIS 27(1), 2008",
            direction="lower",
        ),
        Family(
            "unjudged",
            "share of the top k with no judgement (a rank past the ranking counts as judged "
            "non-relevant): trec_eval's unj, divided by k",
            "required",
            frozenset(),
            "unj",
            direction="lower",
        ),
        Family(
            "relstring",
            "the grades of the top k (default 10) as a string: 0-9, '>' above 9, '-' not in the "
            "pool, '.' pooled but unjudged, '<' other negative grades; per query only",
            "optional",
            frozenset(),
            "relstring",
            aggregate="none",
            kind="text",
            direction="none",
        ),
        Family(
            "num_q",
            "1 per counted query: over queries, the number of queries",
            "none",
            frozenset(),
            "num_q",
            summed=True,
            direction="none",
        ),
        Family(
            "runid",
            "the run's tag (trec_eval prints the last line's)",
            "none",
            frozenset(),
            "runid",
            aggregate="none",
            kind="text",
            direction="none",
        ),
        # --- beyond trec_eval ---
        Family(
            "err",
            "expected reciprocal rank (Chapelle et al. 2009): sum over ranks of (1/rank) x R_r x "
            "prod_{i<r} (1 - R_i), R_g = (2^g - 1) / 2^max_grade; `max_grade` defaults to the qrels' largest",
            "optional",
            frozenset({"rel", "max_grade", "ties"}),
            None,
            citation="Chapelle, Metzler, Zhang & Grinspan, CIKM 2009",
        ),
        Family(
            "nerr",
            "ERR / ERR of the ideal ranking of the query's judgements",
            "optional",
            frozenset({"rel", "max_grade", "ties"}),
            None,
            citation="Chapelle et al., CIKM 2009",
        ),
    )
}

# Quantities the reports add beyond the grammar's families (rag_eval.reports.stage_aware and the pipeline report's
# latency table), with their direction: not metric names the engine computes, but names a report, a diff or a gate
# may compare.
REPORTED: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "rerank_gain",
            "@budget: a reranker's recall@budget minus that of its candidates in the previous stage's order",
            "none",
            frozenset(),
            None,
        ),
        Family(
            "cand_ndcg",
            "@budget: a reranker's nDCG@budget over the best its candidates allow",
            "none",
            frozenset(),
            None,
        ),
        *(
            Family(
                f"loss.{fate}",
                f"share of a query's relevant items whose fate is {fate.replace('_', ' ')}",
                "none",
                frozenset(),
                None,
                direction="higher" if fate == "delivered" else "lower",
            )
            for fate in ("never_retrieved", "below_depth", "reranked_out", "cut_by_budget", "failed", "delivered")
        ),
        *(
            Family(
                f"latency{part}", "seconds per query computed, by stage", "none", frozenset(), None, direction="lower"
            )
            for part in ("", ".p50", ".p95")
        ),
    )
}


_PARSER: Callable[[str], Any] | None = None  # the grammar's parse_metric (it imports this module: registered)


def register_parser(parse: Callable[[str], Any]) -> None:
    """Called by :mod:`rag_eval.metrics` with the grammar's ``parse_metric``, which imports this module."""
    global _PARSER
    _PARSER = parse


def direction(name: str) -> str:
    """``"higher"``, ``"lower"`` or ``"none"``: which way ``name`` is better (a metric name the grammar accepts, or a
    quantity a report adds: ``loss.never_retrieved``, ``rerank_gain@budget``, ``recall@depth``, ``latency.p95``).
    An unknown name is an InputError; see :func:`higher_is_better`."""
    if not isinstance(name, str):
        name = str(name)  # a parsed Metric
    text = name.strip()
    key = text.lower()
    if key in REPORTED:
        return REPORTED[key].direction
    base, at, cut = key.rpartition("@")
    if at and cut in ("budget", "depth"):
        if base in REPORTED:
            return REPORTED[base].direction
        text = f"{text[: len(base)]}@1"  # recall@budget measures as recall@k does
    if _PARSER is None:  # pragma: no cover - rag_eval.metrics registers it on import
        raise RuntimeError("import rag_eval.metrics before asking a metric's direction")
    return FAMILIES[_PARSER(text).family].direction


def higher_is_better(name: str) -> bool:
    """True when a higher value of metric ``name`` is better, False when lower is (``unjudged``, ``rbp_resid``,
    ``num_nonrel_judged_ret``, ``loss.*`` but ``loss.delivered``, latency). Read from the family's ``direction``
    (:data:`FAMILIES`, :data:`REPORTED`); an unknown name, or one with no better side (``num_ret``, ``num_rel``,
    ``num_q``, ``relstring``, ``runid``), is an InputError."""
    way = direction(name)
    if way == "none":
        raise InputError(f"{name!r} has no better side (a count of the input or a text): it is not compared as a score")
    return way == "higher"


# Names accepted for a family, lower case (trec_eval's, ir_measures', and common spellings).
ALIASES: dict[str, str] = {
    "p": "precision",
    "success": "hit",
    "recip_rank": "mrr",
    "rr": "mrr",
    "map": "ap",
    "rprec": "r_precision",
    "r-precision": "r_precision",
    "rprecision": "r_precision",
    "ndcg_cut": "ndcg",
    "map_cut": "ap",
    "numrel": "num_rel",
    "numret": "num_ret",
    "numrelret": "num_rel_ret",
    "judged_at": "judged",
    "gm_ap": "gm_map",
    "iprec": "iprec_at_recall",
    "11pt": "11pt_avg",
    "11_pt_avg": "11pt_avg",
    "relative_p": "relative_precision",
    "set_p": "set_precision",
    "set_relative_p": "set_relative_precision",
    "unj": "unjudged",
}
