"""What is measured: every metric family, its definition, its parameters and its trec_eval name.

How each is computed lives in :mod:`rag_eval.metrics.kernels`; this module is the documentation and the
vocabulary the grammar checks names against.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    name: str  # canonical, lower case
    definition: str
    cutoff: str  # "required", "optional" or "none"
    params: frozenset[str]
    trec_name: str | None  # trec_eval's measure name; with a cutoff it is printed as f"{trec_name}_{k}"
    summed: bool = False  # trec_eval prints the sum over queries, not the mean


_REL = frozenset({"rel"})

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("recall", "relevant in the top k / all relevant of the query (R)", "required", _REL, "recall"),
        Family("precision", "relevant in the top k / k (k even when fewer than k are returned)", "required", _REL, "P"),
        Family("hit", "1 if any relevant is in the top k, else 0", "required", _REL, "success"),
        Family("mrr", "1 / rank of the first relevant (0 if none, or none in the top k)", "optional", _REL, "recip_rank"),
        Family(
            "ndcg",
            "DCG / ideal DCG: gain(grade) discounted by log2(rank + 1); the ideal ranks every judged grade of the "
            "query by gain, cut at k. Gain 'exp' = 2^grade - 1, 'linear' = grade, or a grade:gain map.",
            "optional",
            frozenset({"gain", "gains", "rel"}),
            "ndcg",
        ),
        Family("ap", "average precision: sum of precision at each relevant rank (top k) / R", "optional", _REL, "map"),
        Family("r_precision", "relevant in the top R / R", "none", _REL, "Rprec"),
        Family(
            "bpref",
            "Buckley & Voorhees 2004: mean over relevant retrieved of 1 - min(judged non-relevant above it, R) / "
            "min(judged non-relevant, R)",
            "none",
            _REL,
            "bpref",
        ),
        Family(
            "judged",
            "share of the top min(k, returned) that has any judgement, on the ranking as given (reports measure it "
            "before any condensing); NaN (0/0, counted in n_nan) when that top is empty",
            "required",
            frozenset(),
            None,
        ),
        Family("recall_ceiling", "min(k, R) / R: the most recall@k can be", "required", _REL, None),
        Family("num_rel", "R: judged relevant documents of the query", "none", _REL, "num_rel", summed=True),
        Family("num_ret", "results returned (after any -M cut and condensing)", "none", frozenset(), "num_ret", summed=True),
        Family("num_rel_ret", "relevant results returned", "none", _REL, "num_rel_ret", summed=True),
    )
}

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
}
