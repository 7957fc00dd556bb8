"""Metric names pasted from other tools (ir_measures, ranx), read with the meaning they had there.

:func:`parse_foreign` maps each foreign name to the canonical :class:`~rag_eval.metrics.grammar.Metric` that computes
what that tool computes, with the gain, relevance level, tie rule and judged's rules pinned in the canonical string:
``docs/dialects.md`` has the table and the differences.
"""

from __future__ import annotations

import ast
import difflib
import math
import re
from collections.abc import Callable
from typing import Any

from .._checks import check_choice
from ..errors import InputError
from .grammar import MAX_CUTOFF, Metric, register_dialect

__all__ = ["DIALECTS", "IR_MEASURES_NAMES", "RANX_NAMES", "parse_foreign"]

DIALECTS = ("ir_measures", "ranx")

_TREC = "trec_eval"  # tie rule: score descending, then doc id descending (trec_eval, pytrec_eval, gdeval)
_DOC_ID = "doc_id"  # score descending, then doc id ascending: Python's sort on (-score, doc_id) (msmarco, judged)
_GIVEN = "input_order"  # ranx: numba's argsort of the negated scores, stable up to 15 results (see docs/dialects.md)


def parse_foreign(text: str, dialect: str) -> Metric:
    """The canonical metric that computes what ``text`` computes in ``dialect`` (``"ir_measures"`` or ``"ranx"``).

    >>> str(parse_foreign("nDCG@10", "ir_measures"))
    'ndcg(gain=linear,ties=trec_eval)@10'
    >>> str(parse_foreign("ndcg_burges@5", "ranx"))
    'ndcg(gain=exp,ties=input_order)@5'
    """
    if not isinstance(text, str):
        raise TypeError(f"a metric name is a str, not {type(text).__name__}")
    check_choice(dialect, "metric dialect", DIALECTS)
    return _ir_measures(text) if dialect == "ir_measures" else _ranx(text)


def _shown(text: str) -> str:
    return text if len(text) <= 200 else f"{text[:60]}...({len(text)} characters)"


def _closest(name: str, names: list[str]) -> str:
    lower = {n.lower(): n for n in names}  # a later name wins over an earlier one of the same letters
    found = difflib.get_close_matches(name.lower(), list(lower), n=3, cutoff=0.5)
    if not found:
        return f"; its names are: {', '.join(sorted(names, key=str.lower))}"
    return "; did you mean " + " or ".join(repr(lower[f]) for f in found) + "?"


# --- ir_measures -------------------------------------------------------------------------------------------------
# Its syntax: Name(param=value, ...)@at, parsed as a Python expression (ir_measures.util.parse_measure); the values
# are Python literals. Each measure's parameters, as in its ir_measures/measures/*.py (SUPPORTED_PARAMS).

_IRM_PARAMS: dict[str, tuple[str, ...]] = {
    "P": ("cutoff", "rel", "judged_only"),
    "R": ("cutoff", "rel", "judged_only"),
    "Success": ("cutoff", "rel", "judged_only"),
    "RR": ("cutoff", "rel", "judged_only"),
    "AP": ("cutoff", "rel", "judged_only"),
    "Rprec": ("rel", "judged_only"),
    "nDCG": ("cutoff", "dcg", "gains", "judged_only"),
    "Bpref": ("rel",),
    "Judged": ("cutoff",),
    "NumRet": ("rel",),
    "NumRelRet": ("rel",),
    "SetP": ("rel", "relative", "judged_only"),
    "SetRelP": ("rel", "relative", "judged_only"),
    "SetR": ("rel",),
    "SetF": ("rel", "beta", "judged_only"),
    "SetAP": ("rel", "judged_only"),
    "infAP": ("rel",),
    "ERR": ("cutoff",),
}
_IRM_ALIASES = {
    "MAP": "AP",
    "BPref": "Bpref",
    "NDCG": "nDCG",
    "Precision": "P",
    "Recall": "R",
    "RPrec": "Rprec",
    "MRR": "RR",
}
# accepted by ir_measures, not computable by rag_eval: why
_IRM_REFUSED = {
    "RBP": "ir_measures computes RBP through cwl_eval (graded, or binary with rel=), whose gain rule rag_eval has "
    "not checked against it; rag_eval's rbp(p=...) is trec_eval's (gains normalised to [0, 1])",
    **{
        n: "ir_measures counts it over the queries the run has only (pytrec_eval skips the others, and ir_measures "
        "scores them 0), so its value depends on the run's coverage, not on one metric's definition: evaluate "
        f"rag_eval's {c} with Conventions(missing_run='skip') to get ir_measures' number"
        for n, c in (("NumRel", "num_rel"), ("NumQ", "num_q"))
    },
    "IPrec": "ir_measures computes it through pytrec_eval, which is trec_eval 9's code: the recall level r of R "
    "relevant documents needs (long)(r x R + 0.9) of them there, lround(r x R) in trec_eval 10.0 and "
    "rag_eval's iprec_at_recall (they differ when r x R has a fraction in [0.1, 0.5))",
    "Compat": "rag_eval has no compatibility (RBO against an ideal ranking) measure",
    "Accuracy": "rag_eval has no pairwise accuracy measure",
    "BPM": "rag_eval has no Bejeweled Player Model",
    "SDCG": "rag_eval has no scaled DCG",
    "INST": "rag_eval has no INST",
    "INSQ": "rag_eval has no INSQ",
    **{
        n: "rag_eval has no C/W/L NERR variants (its nerr is ERR normalised by the ideal ERR)"
        for n in ("NERR8", "NERR9", "NERR10", "NERR11")
    },
    **{
        n: "rag_eval has no diversity (intent-aware) measures: they need subtopic judgements"
        for n in (
            "ERR_IA",
            "nERR_IA",
            "alpha_DCG",
            "α_DCG",
            "alpha_nDCG",
            "α_nDCG",
            "NRBP",
            "nNRBP",
            "AP_IA",
            "MAP_IA",
            "P_IA",
            "StRecall",
        )
    },
}
IR_MEASURES_NAMES = tuple(sorted([*_IRM_PARAMS, *_IRM_ALIASES, *_IRM_REFUSED], key=str.lower))
_IRM_DEFAULT_REL = {"NumRelRet": 1}


def _literal(node: ast.expr, what: str, shown: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise InputError(
            f"ir_measures metric {shown!r}: {what} is not a literal value (e.g. 2, 0.5, 'exp-log2', {{0: 0, 1: 1}})"
        ) from None


def _split_ir_measures(text: str, shown: str) -> tuple[str, dict[str, Any], Any]:
    """``Name(k=v, ...)@at`` as (name, params, at), as ir_measures' parse_measure reads it."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise InputError(
            f"cannot read ir_measures metric {shown!r} (expected e.g. 'nDCG@10', 'P(rel=2)@5' or "
            "\"nDCG(dcg='exp-log2')@10\")"
        ) from None
    at = None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        at = _literal(node.right, "the value after '@'", shown)
        node = node.left
    params: dict[str, Any] = {}
    if isinstance(node, ast.Call):
        if node.args or any(kw.arg is None for kw in node.keywords):
            raise InputError(f"ir_measures metric {shown!r}: parameters must be named, e.g. 'P(rel=2)@5'")
        for kw in node.keywords:
            params[str(kw.arg)] = _literal(kw.value, f"parameter {kw.arg!r}", shown)
        node = node.func
    if not isinstance(node, ast.Name):
        raise InputError(f"cannot read ir_measures metric {shown!r} (expected e.g. 'nDCG@10' or 'P(rel=2)@5')")
    return node.id, params, at


def _int(value: Any, what: str, shown: str, *, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"ir_measures metric {shown!r}: {what} must be an integer, not {value!r}")
    if value < low:
        raise InputError(f"ir_measures metric {shown!r}: {what} must be {low} or more, not {value}")
    if value > MAX_CUTOFF:
        raise InputError(f"ir_measures metric {shown!r}: {what} must be at most {MAX_CUTOFF}, not {value}")
    return value


def _number(value: Any, what: str, shown: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"ir_measures metric {shown!r}: {what} must be a finite number, not {value!r}")
    return repr(float(value))


def _ir_measures(text: str) -> Metric:
    shown = _shown(text)
    name, params, at = _split_ir_measures(text, shown)
    if name in _IRM_REFUSED:
        raise InputError(
            f"ir_measures metric {shown!r}: ir_measures accepts it, but rag_eval cannot compute it: "
            f"{_IRM_REFUSED[name]}"
        )
    name = _IRM_ALIASES.get(name, name)
    if name not in _IRM_PARAMS:
        # aliases first, so that a canonical name wins where both differ only by case (NDCG, nDCG)
        names = [*_IRM_ALIASES, *_IRM_PARAMS, *_IRM_REFUSED]
        raise InputError(f"unknown ir_measures metric {shown!r}{_closest(name, names)}")
    allowed = _IRM_PARAMS[name]
    at_param = "recall" if name == "IPrec" else "cutoff"
    if at is not None:
        if at_param in params:
            raise InputError(f"ir_measures metric {shown!r}: {at_param} given twice (as a parameter and after '@')")
        params[at_param] = at
    for key in params:
        if key not in allowed:
            takes = ", ".join(allowed) if allowed else "no parameters"
            raise InputError(
                f"ir_measures metric {shown!r}: ir_measures' {name} has no parameter {key!r} (it takes {takes})"
            )
    judged_only = params.pop("judged_only", False)
    if not isinstance(judged_only, bool):
        raise InputError(f"ir_measures metric {shown!r}: judged_only must be True or False, not {judged_only!r}")
    if judged_only:
        raise InputError(
            f"ir_measures metric {shown!r}: judged_only=True is trec_eval's -J, which rag_eval applies "
            "to a whole evaluation: drop it from the name and evaluate with "
            "Conventions(unjudged='remove')"
        )
    k = _int(params["cutoff"], "the cutoff", shown) if "cutoff" in params else None
    rel = str(_int(params.get("rel", _IRM_DEFAULT_REL.get(name, 1)), "rel", shown))
    return _IRM_BUILD[name](k, rel, params, shown)


def _irm_required(k: int | None, name: str, shown: str) -> int:
    if k is None:
        raise InputError(f"ir_measures metric {shown!r}: ir_measures' {name} needs a cutoff, e.g. '{name}@10'")
    return k


def _irm_ndcg(k: int | None, rel: str, params: dict[str, Any], shown: str) -> Metric:
    dcg = params.get("dcg", "log2")
    if dcg not in ("log2", "exp-log2"):
        raise InputError(f"ir_measures metric {shown!r}: dcg={dcg!r}; ir_measures takes 'log2' or 'exp-log2'")
    gains = params.get("gains")
    if dcg == "exp-log2":
        if gains is not None:
            raise InputError(
                f"ir_measures metric {shown!r}: no ir_measures provider computes dcg='exp-log2' with "
                "gains=; rag_eval does not guess what it would mean"
            )
        if k is None:
            raise InputError(
                f"ir_measures metric {shown!r}: without a cutoff ir_measures computes dcg='exp-log2' "
                "through ranx, whose tie order rag_eval does not reproduce beyond 15 results; give a "
                "cutoff (gdeval computes it then), e.g. \"nDCG(dcg='exp-log2')@10\", or use the ranx "
                "dialect's 'ndcg_burges'"
            )
        # gdeval.pl: gain 2^grade - 1, ties by doc id descending, printed to 5 decimals (ir_measures reads that)
        return Metric("ndcg", k, (("gain", "exp"), ("ties", _TREC)))
    out = [("gain", "linear"), ("ties", _TREC)]  # pytrec_eval: trec_eval's ndcg, gain = grade
    if gains is not None:
        if not isinstance(gains, dict) or not gains:
            raise InputError(
                f"ir_measures metric {shown!r}: gains must be a non-empty dict grade -> gain, e.g. {{0: 0, 1: 1, 2: 3}}"
            )
        parts = []
        for grade, gain in gains.items():
            g = _int(grade, "a gains grade", shown, low=-(2**29) + 1)
            parts.append(f"{g}:{_number(gain, f'the gain of grade {g}', shown)}")
        out.append(("gains", ";".join(parts)))  # pytrec_eval maps the listed grades; the others keep their grade
    return Metric("ndcg", k, tuple(out))


def _irm_set_p(k: int | None, rel: str, params: dict[str, Any], shown: str, relative: bool = False) -> Metric:
    relative = params.get("relative", relative)
    if not isinstance(relative, bool):
        raise InputError(f"ir_measures metric {shown!r}: relative must be True or False, not {relative!r}")
    return Metric("set_relative_precision" if relative else "set_precision", None, (("rel", rel),))


def _irm_err(k: int | None, rel: str, params: dict[str, Any], shown: str) -> Metric:
    if k is None:
        raise InputError(
            f"ir_measures metric {shown!r}: ir_measures computes ERR only with a cutoff (through gdeval), e.g. 'ERR@20'"
        )
    # gdeval.pl: R = (2^grade - 1) / 2^4 ($MAX_JUDGMENT = 4; it refuses larger grades), ties by doc id descending
    return Metric("err", k, (("max_grade", "4"), ("ties", _TREC)))


def _irm_set_f(k: int | None, rel: str, params: dict[str, Any], shown: str) -> Metric:
    beta = _number(params.get("beta", 1.0), "beta", shown)
    return Metric("set_f", None, (("beta", beta), ("rel", rel)))


_Build = Callable[[int | None, str, dict[str, Any], str], Metric]
_IRM_BUILD: dict[str, _Build] = {
    # pytrec_eval (trec_eval's code): ties by doc id descending
    "P": lambda k, rel, p, s: Metric("precision", _irm_required(k, "P", s), (("rel", rel), ("ties", _TREC))),
    "R": lambda k, rel, p, s: Metric("recall", _irm_required(k, "R", s), (("rel", rel), ("ties", _TREC))),
    "Success": lambda k, rel, p, s: Metric("hit", _irm_required(k, "Success", s), (("rel", rel), ("ties", _TREC))),
    # RR with a cutoff is computed by the msmarco provider, which sorts by (-score, doc_id): doc id ascending
    "RR": lambda k, rel, p, s: Metric("mrr", k, (("rel", rel), ("ties", _TREC if k is None else _DOC_ID))),
    "AP": lambda k, rel, p, s: Metric("ap", k, (("rel", rel), ("ties", _TREC))),
    "Rprec": lambda k, rel, p, s: Metric("r_precision", None, (("rel", rel), ("ties", _TREC))),
    "nDCG": _irm_ndcg,
    "Bpref": lambda k, rel, p, s: Metric("bpref", None, (("rel", rel), ("ties", _TREC))),
    # the judged provider: sorted by (-score, doc_id), divided by min(k, returned) (since 0.3.1), and a query
    # missing from the run is 0 (ir_measures' default value); no cutoff = the whole ranking
    "Judged": lambda k, rel, p, s: Metric(
        "judged", MAX_CUTOFF if k is None else k, (("empty", "zero"), ("per", "returned"), ("ties", _DOC_ID))
    ),
    "NumRet": lambda k, rel, p, s: (
        Metric("num_rel_ret", None, (("rel", rel),)) if "rel" in p else Metric("num_ret", None)
    ),
    "NumRelRet": lambda k, rel, p, s: Metric("num_rel_ret", None, (("rel", rel),)),
    "SetP": _irm_set_p,
    "SetRelP": lambda k, rel, p, s: _irm_set_p(k, rel, p, s, relative=True),
    "SetR": lambda k, rel, p, s: Metric("set_recall", None, (("rel", rel),)),
    "SetF": _irm_set_f,
    "SetAP": lambda k, rel, p, s: Metric("set_map", None, (("rel", rel),)),
    "infAP": lambda k, rel, p, s: Metric("infap", None, (("rel", rel), ("ties", _TREC))),
    "ERR": _irm_err,
}


# --- ranx --------------------------------------------------------------------------------------------------------
# Its syntax (ranx/meta/evaluate.py, extract_metric_and_params): name[@k][-lN]; k = 0 or absent is the whole
# ranking; -lN is the relevance level; rbp takes its persistence as rbp.95 / rbp@95 (p = 0.95).

_RANX_FORM = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9_\-]*?)(?:(?P<sep>[@.])(?P<k>[0-9]+))?(?:-l(?P<rel>[0-9]+))?$")
_RANX_REFUSED = {
    "hits": "ranx's hits is a count of relevant results averaged over queries; rag_eval's count, num_rel_ret, is "
    "summed over queries (use num_rel_ret, or precision@k x k per query)",
    "dcg": "rag_eval has no unnormalised DCG (use ndcg(gain=linear))",
    "dcg_burges": "rag_eval has no unnormalised DCG (use ndcg(gain=exp))",
    "rbp": "ranx's rbp weights each result by its raw grade (values above 1 with graded judgements); rag_eval's "
    "rbp(p=...) is trec_eval's, with gains normalised to [0, 1]: they agree on binary judgements only",
}
_RANX_KNOWN = (
    "hits",
    "hit_rate",
    "precision",
    "recall",
    "f1",
    "r-precision",
    "mrr",
    "map",
    "dcg",
    "dcg_burges",
    "ndcg",
    "ndcg_burges",
    "bpref",
    "rbp",
)
RANX_NAMES = _RANX_KNOWN


def _ranx(text: str) -> Metric:
    shown = _shown(text)
    match = _RANX_FORM.match(text.strip())
    if not match:
        raise InputError(f"cannot read ranx metric {shown!r} (expected e.g. 'ndcg@10', 'map@100-l2' or 'mrr')")
    name = match["name"]
    if name not in _RANX_KNOWN:
        raise InputError(f"unknown ranx metric {shown!r}{_closest(name, list(_RANX_KNOWN))}")
    if name in _RANX_REFUSED:
        raise InputError(
            f"ranx metric {shown!r}: ranx accepts it, but rag_eval cannot compute it: {_RANX_REFUSED[name]}"
        )
    if match["sep"] == ".":
        raise InputError(
            f"ranx metric {shown!r}: ranx reads '.' only in rbp's persistence; write '{name}@{match['k']}'"
        )
    k_text, rel_text = match["k"], match["rel"]
    if k_text is not None and len(k_text.lstrip("0")) > 10:
        raise InputError(f"ranx metric {shown!r}: the cutoff must be at most {MAX_CUTOFF}")
    k = int(k_text) if k_text is not None else 0
    if k > MAX_CUTOFF:
        raise InputError(f"ranx metric {shown!r}: the cutoff must be at most {MAX_CUTOFF}, not {k}")
    rel = str(int(rel_text)) if rel_text is not None and len(rel_text) <= 10 else (rel_text or "1")
    cut = k or None  # ranx: k = 0 is the whole ranking
    binary = (("rel", rel), ("ties", _GIVEN))
    if name == "precision":  # hits / k, k even when fewer are returned; without k, hits / returned
        return Metric("precision", cut, binary) if cut else Metric("set_precision", None, (("rel", rel),))
    if name == "recall":
        return Metric("recall", cut, binary) if cut else Metric("set_recall", None, (("rel", rel),))
    if name == "f1":
        if cut:
            raise InputError(
                f"ranx metric {shown!r}: ranx accepts it, but rag_eval cannot compute it: rag_eval has "
                "no F1 at a cutoff (its set_f is F over the whole ranking: ranx's 'f1')"
            )
        return Metric("set_f", None, (("beta", "1"), ("rel", rel)))
    if name == "hit_rate":  # without k, the whole ranking
        return Metric("hit", cut or MAX_CUTOFF, binary)
    if name == "r-precision":
        return Metric("r_precision", None, binary)
    if name == "mrr":
        return Metric("mrr", cut, binary)
    if name == "map":  # ranx divides by every relevant of the query (R), at a cutoff too: trec_eval's map_cut
        return Metric("ap", cut, binary)
    if name == "bpref":
        return Metric("bpref", None, binary)
    # ndcg (Jarvelin: gain = grade) and ndcg_burges (gain = 2^grade - 1); only grades >= -lN earn gain
    gain = "linear" if name == "ndcg" else "exp"
    params = [("gain", gain), ("ties", _GIVEN)] + ([("rel", rel)] if rel != "1" else [])
    return Metric("ndcg", cut, tuple(params))


register_dialect("ir_measures", _ir_measures)
register_dialect("ranx", _ranx)
