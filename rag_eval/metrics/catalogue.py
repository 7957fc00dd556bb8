"""What is measured: every metric family, registered once with everything known of it.

A :class:`Family` holds its definition, cutoff rule, parameters (:class:`ParamInfo`), trec_eval measures
(:class:`TrecMeasure`: name, print order, nicknames), aggregation, direction and kernel; :func:`register` adds one.
The grammar, the engine and trec_eval's tables read these. See docs/metrics.md ("Adding a family").
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import InputError

__all__ = [
    "ALIASES",
    "FAMILIES",
    "REPORTED",
    "Family",
    "ParamInfo",
    "TrecMeasure",
    "direction",
    "higher_is_better",
    "load_plugins",
    "register",
    "trec_measures",
    "trec_nicknames",
]

MAX_GRADE_LIMIT = 1000  # err's max_grade: 2^max_grade stays finite in float64 (the engine's EXP_GAIN_LIMIT)
MAX_MULT = 10**6  # rprec_mult: R x mult stays an exact rank

PARAM_TYPES = ("choice", "grade", "int", "decimal", "decimals", "gains")


@dataclass(frozen=True)
class ParamInfo:
    """One parameter of a family, as the grammar reads it (``type``, one of :data:`PARAM_TYPES`): ``choice`` (one of
    ``choices``), ``grade`` (a relevance grade, 1 and above), ``int`` and ``decimal`` (within ``low``..``high``,
    ends open where said), ``decimals`` (``;``-separated: exactly ``count`` of them, or ``sort``: sorted, no
    repeat, each in range), ``gains`` (``grade:gain;...``). A value equal to ``default`` is left out of the
    canonical string; a ``required`` one is shown with ``example`` when missing. ``desc`` ends the range errors."""

    type: str
    desc: str
    default: str | None = None
    choices: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    required: bool = False
    example: str | None = None
    count: int | None = None
    sort: bool = False
    item: str = ""  # "decimals": what one value is called in errors ("level", "weight")
    hint: str | None = None  # "choice": the error's advice in place of "choose one of ..."

    def __post_init__(self) -> None:
        if self.type not in PARAM_TYPES:
            raise ValueError(f"parameter type {self.type!r}: one of {', '.join(PARAM_TYPES)}")
        if self.required and self.example is None:
            raise ValueError("a required parameter needs an example value")


@dataclass(frozen=True)
class TrecMeasure:
    """One of trec_eval's measures (measures.c's te_trec_measures): its ``name``, its ``order`` in that table (the
    order trec_eval computes and prints), the ``nicknames`` that include it, how trec_eval reads its parameters
    (``kind``: ``single`` none; ``cut_long``/``cut_double`` a list of cutoffs, one value each; ``p_double``/
    ``p_pair`` one value, printed as typed), the family's parameter they set (``param``; ``k`` for a cutoff), its
    default cutoffs, and its ``family`` (set by :func:`register`). Built-in families only: the table is made
    when :mod:`rag_eval.metrics` is imported, and a family registered later cannot add to it."""

    name: str
    order: int
    kind: str = "single"
    param: str | None = None
    defaults: tuple[float, ...] = ()
    nicknames: tuple[str, ...] = ("all_trec",)
    family: str = ""
    # which of its lines trec_eval prints: "both", "summary" (te_print_single_meas_empty: no per-query line) or
    # "per_query" (te_print_relstring: no "all" line)
    printed: str = "both"


@dataclass(frozen=True)
class Family:
    """A metric family: everything the grammar, the engine, the reports and trec_eval's tables know of it.

    ``kernel`` computes one value per counted query from a :class:`~rag_eval.metrics._registry.KernelInputs`:
    a callable, or ``"module:function"`` (a module of :mod:`rag_eval.metrics` when it starts with ``.``) imported
    on first use."""

    name: str  # canonical, lower case
    definition: str
    cutoff: str = "none"  # "required", "optional" or "none"
    params: Mapping[str, ParamInfo] = field(default_factory=dict)
    trec: tuple[TrecMeasure, ...] = ()  # the first is the family's trec_eval name
    aggregate: str = "mean"  # over queries: "mean", "sum" (the counts), "geometric" (gm_map), "none" (relstring)
    kind: str = "number"  # per-query value: "number" (float64) or "text" (relstring, runid)
    # which way is better: "higher", "lower" (unjudged, a residual, a loss share, seconds) or "none" (a count of
    # the input, a text): what every comparison, gate and diff reads (higher_is_better)
    direction: str = "higher"
    kernel: Callable[..., Any] | str | None = None
    aliases: tuple[str, ...] = ()  # other names, lower case (trec_eval's, ir_measures', common spellings)
    cutoff_default: int | None = None  # a cutoff equal to it is left out of the canonical string (relstring's 10)
    citation: str | None = None  # where the definition comes from

    def __post_init__(self) -> None:
        if self.direction not in ("higher", "lower", "none"):
            raise ValueError(f"direction of {self.name}: 'higher', 'lower' or 'none', not {self.direction!r}")
        if self.cutoff not in ("required", "optional", "none"):
            raise ValueError(f"cutoff of {self.name}: 'required', 'optional' or 'none', not {self.cutoff!r}")
        if self.aggregate not in ("mean", "sum", "geometric", "none"):
            raise ValueError(f"aggregate of {self.name}: mean, sum, geometric or none, not {self.aggregate!r}")
        if self.kind not in ("number", "text"):
            raise ValueError(f"kind of {self.name}: 'number' or 'text', not {self.kind!r}")

    @property
    def trec_name(self) -> str | None:
        """trec_eval's name of the measure; with a cutoff it is printed as f"{trec_name}_{k}"."""
        return self.trec[0].name if self.trec else None

    @property
    def summed(self) -> bool:
        """trec_eval prints the sum over queries, not the mean (the counts)."""
        return self.aggregate == "sum"


FAMILIES: dict[str, Family] = {}
ALIASES: dict[str, str] = {}  # other names of a family, lower case -> its canonical name
_TREC: dict[str, TrecMeasure] = {}  # trec_eval's measures by name
_TREC_TABLE: list[tuple[TrecMeasure, ...]] = []  # the ordered table, made once (trec_measures)


def register(family: Family) -> Family:
    """Add ``family`` to :data:`FAMILIES` (with its aliases and trec_eval measures): the one way a family is made
    known. A name or alias taken is a ValueError."""
    if family.trec and _TREC_TABLE:  # trec_eval_measures and the reports derived their tables when imported
        raise ValueError(f"family {family.name!r}: trec_eval's measure table is made; only built-ins add measures")
    taken = [n for n in (family.name, *family.aliases) if n in FAMILIES or n in ALIASES]
    taken += [m.name for m in family.trec if m.name in _TREC or m.order in {t.order for t in _TREC.values()}]
    if taken or family.name != family.name.lower():
        raise ValueError(f"family {family.name!r}: {', '.join(taken) or 'not lower case'} already taken")
    for info_name, info in family.params.items():
        if info.default is not None and info.type == "choice" and info.default not in info.choices:
            raise ValueError(f"family {family.name!r}: default of {info_name} not among its choices")
    trec = tuple(replace(m, family=family.name) for m in family.trec)
    family = replace(family, trec=trec)
    FAMILIES[family.name] = family
    ALIASES.update(dict.fromkeys(family.aliases, family.name))
    _TREC.update({m.name: m for m in trec})
    return family


def trec_measures() -> tuple[TrecMeasure, ...]:
    """trec_eval's measure table (measures.c's te_trec_measures, less what is out of scope), in its order."""
    if not _TREC_TABLE:
        _TREC_TABLE.append(tuple(sorted(_TREC.values(), key=lambda m: m.order)))
    return _TREC_TABLE[0]


def trec_nicknames() -> dict[str, tuple[str, ...]]:
    """trec_eval's nicknames (``official``, ``set``, ``all_trec``): their measures, in the table's order."""
    out: dict[str, list[str]] = {}
    for measure in trec_measures():
        for nick in measure.nicknames:
            out.setdefault(nick, []).append(measure.name)
    return {nick: tuple(names) for nick, names in out.items()}


PLUGINS_VARIABLE = "RAG_EVAL_PLUGINS"
_PLUGINS_LOADED: set[str] = set()


def load_plugins(modules: str | None = None) -> list[str]:
    """Import the modules named in ``modules`` (comma-separated; by default the ``RAG_EVAL_PLUGINS`` environment
    variable), each of which registers its families with :func:`register`; the modules imported, each once. A
    module that cannot be imported is an InputError naming it."""
    text = os.environ.get(PLUGINS_VARIABLE, "") if modules is None else modules
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if name in _PLUGINS_LOADED:
            continue
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise InputError(f"{PLUGINS_VARIABLE}: cannot import the metric plugin {name!r} ({exc})") from None
        _PLUGINS_LOADED.add(name)
    return names


# ---- the parameters shared by several families ----------------------------------------------------------------------
REL = ParamInfo("grade", "the lowest relevant grade for this metric, overriding the conventions' threshold")
# ties= pins the tie rule of a metric (a foreign tool's: rag_eval.metrics.dialects), overriding conventions.ties
TIES = ParamInfo(
    "choice", "this metric's tie rule, overriding conventions.ties", choices=("trec_eval", "doc_id", "input_order")
)
GAIN = ParamInfo(
    "choice",
    "nDCG's gain rule, overriding conventions.gain",
    choices=("exp", "linear"),
    hint="choose 'exp' (2^grade - 1) or 'linear' (grade)",
)
GAINS = ParamInfo("gains", "grade:gain pairs; grades not in the map keep the gain rule's value")
P = ParamInfo(
    "decimal",
    "RBP's persistence: the chance of going on to the next rank",
    default="0.9",  # m_rbp.c: "double p = 0.9"
    low=0.0,
    high=1.0,
    low_open=True,
    high_open=True,
)
MAX_GRADE = ParamInfo("int", "the grade of the surest stop (default: the qrels' largest)", low=1, high=MAX_GRADE_LIMIT)
_REL = {"rel": REL}
_RANKED = {"rel": REL, "ties": TIES}
_CUT = (5, 10, 15, 20, 30, 100, 200, 500, 1000)  # m_P.c's (and the other cut_long measures') default cutoffs
_ALL = ("official", "set", "all_trec")
_OFFICIAL = ("official", "all_trec")
_SET = ("set", "all_trec")


def _cut(
    name: str, order: int, defaults: tuple[float, ...] = _CUT, nicknames: tuple[str, ...] = ("all_trec",)
) -> TrecMeasure:
    return TrecMeasure(name, order, "cut_long", "k", defaults, nicknames)


def _single(name: str, order: int, nicknames: tuple[str, ...] = ("all_trec",), printed: str = "both") -> TrecMeasure:
    return TrecMeasure(name, order, nicknames=nicknames, printed=printed)


def _pair(name: str, order: int) -> TrecMeasure:
    return TrecMeasure(name, order, "p_pair", "gains")


_BASE = "._kernels_base:"  # the kernels of the first families

for _family in (
    # ---- trec_eval's first measures ----
    Family(
        "recall",
        "relevant in the top k / all relevant of the query (R)",
        "required",
        _RANKED,
        (_cut("recall", 13),),
        kernel=_BASE + "recall_kernel",
    ),
    Family(
        "precision",
        "relevant in the top k / k (k even when fewer than k are returned)",
        "required",
        _RANKED,
        (_cut("P", 11, nicknames=_OFFICIAL),),
        kernel=_BASE + "precision_kernel",
        aliases=("p",),
    ),
    Family(
        "hit",
        "1 if any relevant is in the top k, else 0",
        "required",
        _RANKED,
        (_cut("success", 27, (1, 5, 10)),),
        kernel=_BASE + "hit_kernel",
        aliases=("success",),
    ),
    Family(
        "mrr",
        "1 / rank of the first relevant (0 if none, or none in the top k)",
        "optional",
        _RANKED,
        (_single("recip_rank", 9, _OFFICIAL),),
        kernel=_BASE + "mrr_kernel",
        aliases=("recip_rank", "rr"),
    ),
    Family(
        "ndcg",
        "DCG / ideal DCG: gain(grade) discounted by log2(rank + 1); the ideal ranks every judged grade of the "
        "query by gain, cut at k. Gain 'exp' = 2^grade - 1, 'linear' = grade, or a grade:gain map.",
        "optional",
        {"gain": GAIN, "gains": GAINS, "rel": REL, "ties": TIES},
        (_pair("ndcg", 21), _cut("ndcg_cut", 24)),
        kernel=_BASE + "ndcg_kernel",
        aliases=("ndcg_cut",),
    ),
    Family(
        "ap",
        "average precision: sum of precision at each relevant rank (top k) / R",
        "optional",
        _RANKED,
        (_single("map", 5, _OFFICIAL), _cut("map_cut", 25)),
        kernel=_BASE + "ap_kernel",
        aliases=("map", "map_cut"),
    ),
    Family(
        "r_precision",
        "relevant in the top R / R",
        "none",
        _RANKED,
        (_single("Rprec", 7, _OFFICIAL),),
        kernel=_BASE + "r_precision_kernel",
        aliases=("rprec", "r-precision", "rprecision"),
    ),
    Family(
        "bpref",
        "Buckley & Voorhees 2004: mean over relevant retrieved of 1 - min(judged non-relevant above it, R) / "
        "min(judged non-relevant, R)",
        "none",
        _RANKED,
        (_single("bpref", 8, _OFFICIAL),),
        kernel=_BASE + "bpref_kernel",
    ),
    Family(
        "judged",
        "share of the top min(k, returned) that has any judgement, on the ranking as given (reports measure it "
        "before any condensing); NaN (0/0, counted in n_nan) when that top is empty. `per=k` divides by k "
        "instead (ir_measures before 0.3.1), `empty=zero` scores an empty top 0 (ir_measures scores a query "
        "missing from the run 0)",
        "required",
        {
            "per": ParamInfo("choice", "the denominator: the top returned, or k", choices=("returned", "k")),
            "empty": ParamInfo("choice", "an empty top: NaN, or 0", choices=("nan", "zero")),
            "ties": TIES,
        },
        kernel=_BASE + "judged_kernel",
        aliases=("judged_at",),
    ),
    Family(
        "recall_ceiling",
        "min(k, R) / R: the most recall@k can be",
        "required",
        _REL,
        kernel=_BASE + "recall_ceiling_kernel",
    ),
    Family(
        "num_rel",
        "R: judged relevant documents of the query",
        "none",
        _REL,
        (_single("num_rel", 3, _ALL),),
        aggregate="sum",
        direction="none",
        kernel=_BASE + "num_rel_kernel",
        aliases=("numrel",),
    ),
    Family(
        "num_ret",
        "results returned (after any -M cut and condensing)",
        "none",
        {},
        (_single("num_ret", 2, _ALL),),
        aggregate="sum",
        direction="none",
        kernel=_BASE + "num_ret_kernel",
        aliases=("numret",),
    ),
    Family(
        "num_rel_ret",
        "relevant results returned",
        "none",
        _REL,
        (_single("num_rel_ret", 4, _ALL),),
        aggregate="sum",
        kernel=_BASE + "num_rel_ret_kernel",
        aliases=("numrelret",),
    ),
    # ---- the rest of trec_eval's -m all_trec (trec_eval 10.0, m_*.c) ----
    Family(
        "gm_map",
        "AP per query; over queries the geometric mean, each value floored at 1e-5 (trec_eval's MIN_GEO_MEAN)",
        "none",
        _REL,
        (_single("gm_map", 6, _OFFICIAL, printed="summary"),),
        aggregate="geometric",
        kernel="._kernels_cut:_gm_map",
        aliases=("gm_ap",),
    ),
    Family(
        "gm_bpref",
        "bpref per query; over queries the geometric mean, floored at 1e-5",
        "none",
        _REL,
        (_single("gm_bpref", 15, printed="summary"),),
        aggregate="geometric",
        kernel="._kernels_cut:_gm_bpref",
    ),
    Family(
        "infap",
        "inferred AP (Yilmaz & Aslam 2006) from a sampled pool: grade -1 is pooled but not judged (m_infap.c)",
        "none",
        _RANKED,
        (_single("infAP", 14),),
        kernel="._kernels_pool:infap",
    ),
    Family(
        "iprec_at_recall",
        "interpolated precision at recall level `level` (0..1): the highest precision "
        "at any rank whose recall is >= level, with recall counted as c = lround(level x R) relevant "
        "(halves away from 0; m_iprec_at_recall.c): 0 if fewer than c are retrieved, the best precision "
        "anywhere if c is 0; an empty ranking 0 (NaN where trec_eval divides 0 by 0: a ranking -J emptied, "
        "under conventions that follow trec_eval)",
        "none",
        {
            "rel": REL,
            "level": ParamInfo("decimal", "a recall level", low=0.0, high=1.0, required=True, example="0.1"),
            "ties": TIES,
        },
        (
            TrecMeasure(
                "iprec_at_recall",
                10,
                "cut_double",
                "level",
                (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
                _OFFICIAL,
            ),
        ),
        kernel="._kernels_cut:_iprec_at_recall",
        aliases=("iprec",),
    ),
    Family(
        "11pt_avg",
        "mean interpolated precision (as iprec_at_recall, NaN likewise) over the recall levels "
        "`levels` (in [0, 1], sorted, no repeat; default 0, .1, ..., 1), added from the last level as "
        "m_11pt_avg.c does",
        "none",
        {
            "rel": REL,
            "levels": ParamInfo(
                "decimals",
                "a recall level",
                default="0;0.1;0.2;0.3;0.4;0.5;0.6;0.7;0.8;0.9;1",  # m_11pt_avg.c
                low=0.0,
                high=1.0,
                sort=True,
                item="level",
            ),
        },
        (TrecMeasure("11pt_avg", 18, "p_double", "levels"),),
        kernel="._kernels_cut:_eleven_point_average",
        aliases=("11pt", "11_pt_avg"),
    ),
    Family(
        "rprec_mult",
        "precision at rank (long)(mult x R + 0.9), truncated as C does (m_Rprec_mult.c): a "
        "ranking shorter than that counts as filled with non-relevant; 0 for a query with no relevant",
        "none",
        {
            "rel": REL,
            "mult": ParamInfo(
                "decimal",
                "a multiple of R, the number of relevant documents",
                low=0.0,
                low_open=True,
                high=float(MAX_MULT),
                required=True,
                example="0.2",
            ),
        },
        (TrecMeasure("Rprec_mult", 16, "cut_double", "mult", (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)),),
        kernel="._kernels_cut:_rprec_mult",
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
        {
            "rel": REL,
            "weights": ParamInfo(
                "decimals",
                "w1;w2;w3;w4 (relevant retrieved, non-relevant retrieved, relevant missed, non-relevant missed)",
                default="1;-1;0;0",  # m_utility.c
                count=4,
                item="weight",
            ),
        },
        (TrecMeasure("utility", 17, "p_double", "weights", nicknames=_SET),),
        kernel="._kernels_sets:_utility",
    ),
    Family(
        "g",
        "normalised gain G (m_G.c): each retrieved gain over log2(2 + ideal - cumulative gain), "
        "normalised by the ideal",
        "none",
        {"gains": GAINS, "rel": REL},
        (_pair("G", 20),),
        kernel="._kernels_gain:g_measure",
    ),
    Family(
        "bing",
        "binary G (m_binG.c): G with gain 1 for every relevant document",
        "none",
        _REL,
        (_single("binG", 19),),
        kernel="._kernels_gain:bing",
    ),
    Family(
        "ndcg_rel",
        "nDCG over the top R ranks with ideal DCG also at R (m_ndcg_rel.c)",
        "none",
        {"gains": GAINS, "rel": REL},
        (_pair("ndcg_rel", 22),),
        kernel="._kernels_gain:ndcg_rel",
    ),
    Family(
        "rndcg",
        "nDCG normalised between worst and ideal ranking (m_Rndcg.c)",
        "none",
        {"gains": GAINS, "rel": REL},
        (_pair("Rndcg", 23),),
        kernel="._kernels_gain:rndcg",
    ),
    Family(
        "relative_precision",
        "relevant in the top k / min(k, R) (trec_eval's relative_P)",
        "required",
        _REL,
        (_cut("relative_P", 26),),
        kernel="._kernels_cut:_relative_precision",
        aliases=("relative_p",),
    ),
    Family(
        "set_precision",
        "relevant retrieved / retrieved (the whole ranking as a set)",
        "none",
        _REL,
        (_single("set_P", 28, _SET),),
        kernel="._kernels_sets:_set_precision",
        aliases=("set_p",),
    ),
    Family(
        "set_relative_precision",
        "relevant retrieved / min(retrieved, R)",
        "none",
        _REL,
        (_single("set_relative_P", 29, _SET),),
        kernel="._kernels_sets:_set_relative_precision",
        aliases=("set_relative_p",),
    ),
    Family(
        "set_recall",
        "relevant retrieved / R",
        "none",
        _REL,
        (_single("set_recall", 30, _SET),),
        kernel="._kernels_sets:_set_recall",
    ),
    Family(
        "set_map",
        "set_precision x set_recall",
        "none",
        _REL,
        (_single("set_map", 31, _SET),),
        kernel="._kernels_sets:_set_map",
    ),
    Family(
        "set_f",
        "(beta + 1) P R / (beta P + R), 0 when nothing relevant is retrieved (`beta` >= 0, "
        "default 1): trec_eval's set_F.X and ir_measures' SetF(beta=X) both weigh recall by X itself, "
        "van Rijsbergen's beta squared, so beta=4 is the usual F2",
        "none",
        {
            "rel": REL,
            "beta": ParamInfo(
                "decimal",
                "the weight of recall: van Rijsbergen's beta squared, as trec_eval's set_F",
                default="1",  # m_set_F.c (trec_eval's x: van Rijsbergen's beta squared)
                low=0.0,
            ),
        },
        (TrecMeasure("set_F", 32, "p_double", "beta", nicknames=_SET),),
        kernel="._kernels_sets:_set_f",
    ),
    Family(
        "num_nonrel_judged_ret",
        "judged non-relevant results returned",
        "none",
        _REL,
        (_single("num_nonrel_judged_ret", 33),),
        aggregate="sum",
        direction="lower",
        kernel="._kernels_sets:_num_nonrel_judged_ret",
    ),
    Family(
        "rbp",
        "rank-biased precision, (1 - p) sum p^(rank-1) x gain (Moffat & Zobel 2008), persistence `p` "
        "(default 0.9, m_rbp.c; 0 < p < 1); gain = the grade, or `gains=`, divided by the query's largest "
        "gain when that is above 1 (m_rbp.c); @k: the first k ranks only",
        "optional",
        {"rel": REL, "p": P, "gains": GAINS},
        (_pair("rbp", 34),),
        kernel="._kernels_gain:rbp",
        citation="Moffat & Zobel, TOIS 27(1), 2008",
    ),
    Family(
        "rbp_resid",
        "RBP's residual: what RBP could gain if every unjudged result and every rank past the "
        "ranking (or past k) had gain 1: p^depth + (1 - p) sum p^(rank-1) over the unjudged ranks; 0 when no "
        "result is unjudged (m_rbp_resid.c)",
        "optional",
        {"p": P},  # m_rbp_resid.c's p is 0.9 too
        (_pair("rbp_resid", 35),),
        direction="lower",
        kernel="._kernels_gain:rbp_resid",
        citation="Moffat & Zobel, TOIS 27(1), 2008",
    ),
    Family(
        "unjudged",
        "share of the top k with no judgement (a rank past the ranking counts as judged "
        "non-relevant): trec_eval's unj, divided by k",
        "required",
        {},
        (_cut("unj", 36, (5, 10, 20)),),
        direction="lower",
        kernel="._kernels_pool:unjudged",
        aliases=("unj",),
    ),
    Family(
        "relstring",
        "the grades of the top k (default 10) as a string: 0-9, '>' above 9, '-' not in the "
        "pool, '.' pooled but unjudged, '<' other negative grades; per query only",
        "optional",
        {},
        (TrecMeasure("relstring", 12, "p_double", "k", printed="per_query"),),
        aggregate="none",
        kind="text",
        direction="none",
        kernel="._kernels_pool:relstring",
        cutoff_default=10,  # m_relstring.c
    ),
    Family(
        "num_q",
        "1 per counted query: over queries, the number of queries",
        "none",
        {},
        (_single("num_q", 1, _ALL, printed="summary"),),
        aggregate="sum",
        direction="none",
        kernel="._kernels_pool:num_q",
    ),
    Family(
        "runid",
        "the run's tag (trec_eval prints the last line's)",
        "none",
        {},
        (_single("runid", 0, _ALL, printed="summary"),),
        aggregate="none",
        kind="text",
        direction="none",
        kernel="._kernels_pool:runid",
    ),
    # ---- beyond trec_eval ----
    Family(
        "err",
        "expected reciprocal rank (Chapelle et al. 2009): sum over ranks of (1/rank) x R_r x "
        "prod_{i<r} (1 - R_i), R_g = (2^g - 1) / 2^max_grade; `max_grade` defaults to the qrels' largest",
        "optional",
        {"rel": REL, "max_grade": MAX_GRADE, "ties": TIES},
        kernel="._kernels_gain:err",
        citation="Chapelle, Metzler, Zhang & Grinspan, CIKM 2009",
    ),
    Family(
        "nerr",
        "ERR / ERR of the ideal ranking of the query's judgements",
        "optional",
        {"rel": REL, "max_grade": MAX_GRADE, "ties": TIES},
        kernel="._kernels_gain:nerr",
        citation="Chapelle et al., CIKM 2009",
    ),
):
    register(_family)


# Quantities the reports add beyond the grammar's families (rag_eval.reports.stage_aware and the pipeline report's
# latency table), with their direction: not metric names the engine computes, but names a report, a diff or a gate
# may compare.
REPORTED: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "rerank_gain",
            "@budget: a reranker's recall@budget minus that of its candidates in the previous stage's order",
        ),
        Family(
            "cand_ndcg",
            "@budget: a reranker's nDCG@budget over the best its candidates allow",
        ),
        *(
            Family(
                f"loss.{fate}",
                f"share of a query's relevant items whose fate is {fate.replace('_', ' ')}",
                direction="higher" if fate == "delivered" else "lower",
            )
            for fate in ("never_retrieved", "below_depth", "reranked_out", "cut_by_budget", "failed", "delivered")
        ),
        *(
            Family(f"latency{part}", "seconds per query computed, by stage", direction="lower")
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
