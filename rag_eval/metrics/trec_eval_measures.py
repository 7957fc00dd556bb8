"""trec_eval's measure names and ``-m`` arguments, read as trec_eval 10.0 reads them, into canonical
:class:`~rag_eval.metrics.grammar.Metric` values; its measure table and nicknames come from the families'
registrations. See docs/metrics.md ("Reading trec_eval's names and -m arguments").
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from itertools import pairwise

from ..errors import InputError, TrecEvalParametersIgnored, TrecEvalParameterTruncated
from .catalogue import FAMILIES, TrecMeasure, trec_measures, trec_nicknames
from .grammar import MAX_CUTOFF, Metric, _decimal, _number, register_dialect, register_printed_names

__all__ = ["NICKNAMES", "TREC_MEASURES", "TrecMeasure", "is_trec_eval_measure", "trec_eval_metrics", "trec_eval_name"]

# measures.c's te_trec_measures in its order (the order trec_eval computes and prints), less what is out of scope,
# and its nicknames: derived from the families' registrations (catalogue.Family.trec)
TREC_MEASURES: tuple[TrecMeasure, ...] = trec_measures()
NICKNAMES: dict[str, tuple[str, ...]] = trec_nicknames()
_BY_NAME = {m.name: m for m in TREC_MEASURES}
_BY_LOWER = {m.name.lower(): m for m in TREC_MEASURES}
_ORDER = {m.name: i for i, m in enumerate(TREC_MEASURES)}

_OTHER_INPUT_NICKNAMES = {
    "all_prefs": "preference files (trec_eval -R prefs)",
    "prefs": "preference files (trec_eval -R prefs)",
    "qrels_jg": "judgement groups (trec_eval -R qrels_jg)",
}
_OUT_OF_SCOPE = {
    "dcg": "trec_eval prints it under no nickname; rag_eval computes ndcg",
    "ideal_dcg": "trec_eval prints it under no nickname; rag_eval computes ndcg",
    "ndcg_p": "it needs preference files",
    "yaap": "trec_eval prints it under no nickname",
    "map_avgjg": "it needs judgement groups (qrels_jg)",
    "P_avgjg": "it needs judgement groups (qrels_jg)",
    "Rprec_mult_avgjg": "it needs judgement groups (qrels_jg)",
}

_LONG = re.compile(r"\s*[+-]?[0-9]+")  # what atol reads
_FRACTION = re.compile(r"\.[0-9]*")  # what it then leaves, when the rest is a fraction (23.4)


def trec_eval_metrics(args: Sequence[str], *, pin_gain: bool = True) -> list[Metric]:
    """The metrics trec_eval computes for these ``-m`` arguments (each ``MEASURE``, ``MEASURE.PARAMS`` or a
    nickname), in trec_eval's order. An argument trec_eval refuses, or would read as another number than the one
    written, is an InputError naming it."""
    if isinstance(args, str):
        args = [args]
    marked: set[str] = set()
    given: dict[str, tuple[str, str]] = {}  # measure -> (its first parameter list, the argument that gave it)
    ignored: list[str] = []
    for arg in args:
        if not isinstance(arg, str):
            raise TypeError(f"a trec_eval -m argument is a str, not {type(arg).__name__}")
        name, dot, params = arg.strip().partition(".")
        if dot and not params:
            raise InputError(
                f"trec_eval measure {arg!r}: nothing after the '.' (write {name!r} for its default "
                f"parameters, or e.g. '{name}.10')"
            )
        if name in NICKNAMES:
            if dot:
                raise InputError(
                    f"trec_eval measure {arg!r}: the nickname {name!r} takes no parameters (trec_eval ignores them)"
                )
            marked.update(NICKNAMES[name])
            continue
        measure = _measure(name, arg)
        marked.add(measure.name)
        if dot:
            if measure.kind == "single":
                raise InputError(f"trec_eval measure {arg!r}: {measure.name} takes no parameters")
            if measure.name not in given:
                given[measure.name] = (params, arg)
            elif given[measure.name][0] != params:
                ignored.append(arg)
    if ignored:
        firsts = ", ".join(dict.fromkeys(f"-m {given[_measure(a.partition('.')[0], a).name][1]}" for a in ignored))
        warnings.warn(
            f"trec_eval uses a measure's first parameter list only: {', '.join('-m ' + a for a in ignored)} "
            f"ignored (kept {firsts})",
            TrecEvalParametersIgnored,
            stacklevel=2,
        )
    out: list[Metric] = []
    for name in sorted(marked, key=_ORDER.__getitem__):
        first, arg = given.get(name, (None, name))
        out.extend(_metrics(_BY_NAME[name], first, arg, printed=False, pin_gain=pin_gain))
    return list(dict.fromkeys(out))


def is_trec_eval_measure(name: str) -> bool:
    """Whether ``name`` (before any ``.PARAMS``) is one of trec_eval's measures or nicknames, including those out
    of scope (which :func:`trec_eval_metrics` refuses, saying why)."""
    return (
        name in NICKNAMES
        or name.lower() in _BY_LOWER
        or name in _OTHER_INPUT_NICKNAMES
        or name in _OUT_OF_SCOPE
        or name.startswith("prefs_")
    )


def trec_eval_name(text: str, *, pin_gain: bool = True) -> Metric:
    """One measure name as trec_eval prints it (``P_5``, ``iprec_at_recall_0.10``, ``utility_2,-1,0,0``,
    ``ndcg_1=3,2=9``, ``relstring_20``, ``runid``) as its canonical metric, with trec_eval's spelling of its
    parameters kept for :attr:`Metric.trec_name`."""
    metric = trec_eval_printed(text, pin_gain=pin_gain)
    if metric is None:
        raise InputError(f"unknown trec_eval measure name {text!r}{_suggestion(text)}")
    return metric


def trec_eval_printed(text: str, *, pin_gain: bool = True) -> Metric | None:
    """:func:`trec_eval_name`, or None when ``text`` does not start with a trec_eval measure's name."""
    stripped = text.strip()
    lower = stripped.lower()
    for measure in sorted(TREC_MEASURES, key=lambda m: -len(m.name)):  # ndcg_cut before ndcg
        base = measure.name.lower()
        if lower == base:
            params = None
        elif lower.startswith(base + "_") and measure.kind != "single":
            params = stripped[len(base) + 1 :]
        else:
            continue
        if params is None and measure.kind in ("cut_long", "cut_double"):
            example = f"{measure.name}_{_number(measure.defaults[0]) if measure.kind == 'cut_double' else 10}"
            raise InputError(
                f"trec_eval measure name {text!r}: trec_eval prints {measure.name} with its cutoff, e.g. {example!r}"
            )
        metrics = _metrics(measure, params, stripped, printed=True, pin_gain=pin_gain)
        if len(metrics) != 1:
            raise InputError(
                f"trec_eval measure name {text!r} names {len(metrics)} measures; trec_eval prints "
                f"one value per name, e.g. '{measure.name}_{params.split(',')[0] if params else ''}'"
            )
        return metrics[0]
    return None


def _measure(name: str, arg: str) -> TrecMeasure:
    measure = _BY_NAME.get(name) or _BY_LOWER.get(name.lower())
    if measure is not None:
        return measure
    if name in _OTHER_INPUT_NICKNAMES:
        raise InputError(
            f"trec_eval measure {arg!r}: the nickname {name!r} needs {_OTHER_INPUT_NICKNAMES[name]}, "
            "which rag_eval does not read (out of scope)"
        )
    if name in _OUT_OF_SCOPE or name.startswith("prefs_"):
        why = _OUT_OF_SCOPE.get(name, "it needs preference files")
        raise InputError(f"trec_eval measure {arg!r}: rag_eval does not compute {name} ({why})")
    raise InputError(f"unknown trec_eval measure {arg!r}{_suggestion(name)}")


def _suggestion(name: str) -> str:
    import difflib

    known = [m.name for m in TREC_MEASURES] + list(NICKNAMES)
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; trec_eval's measures: {', '.join(known)}"


def _metrics(measure: TrecMeasure, params: str | None, arg: str, *, printed: bool, pin_gain: bool) -> list[Metric]:
    """The metrics of one trec_eval measure with its parameter text (None: the defaults). ``printed``: the text
    comes from a printed name (``P_5``), whose numbers trec_eval wrote itself."""
    family = measure.family
    pinned = (("gain", "linear"),) if pin_gain and "gain" in FAMILIES[family].params else ()  # nDCG's
    kind = measure.kind
    if kind == "single":
        return [Metric(family)]
    if kind == "cut_long":
        cutoffs = list(measure.defaults) if params is None else _longs(params, arg, printed)
        return [Metric(family, int(k), pinned) for k in cutoffs]
    if kind == "cut_double":
        if params is None:
            values = list(measure.defaults)
        else:
            values = sorted(_double(v, arg) for v in params.split(","))
            for a, b in pairwise(values):
                if a == b:
                    raise InputError(
                        f"trec_eval measure {arg!r}: the cutoff {_number(a)} is given twice "
                        "(trec_eval: duplicate cutoffs detected)"
                    )
        key = str(measure.param)  # the family's parameter: iprec_at_recall's level, Rprec_mult's mult
        return [Metric(family, None, ((key, _param(family, key, _number(v), arg)),)) for v in values]
    if params is None:
        return [Metric(family, None, pinned)]
    if kind == "p_double":
        return [_p_double(measure, params, arg, printed)]
    return [_p_pair(measure, params, arg, pinned)]


def _param(family: str, key: str, value: str, arg: str) -> str:
    """A parameter's canonical value, checked by the grammar (its range), in an InputError naming ``arg``."""
    try:
        return dict(Metric(family, None, ((key, value),)).params).get(key, value)
    except InputError as exc:
        raise InputError(f"trec_eval measure {arg!r}: {exc.problem.split(': ', 1)[-1]}") from None


def _longs(params: str, arg: str, printed: bool) -> list[int]:
    """Cutoffs as trec_eval's get_long_cutoffs reads them (atol each, sorted, > 0, no duplicate)."""
    values: list[int] = []
    truncated: list[str] = []
    for item in params.split(","):
        head = _LONG.match(item)
        rest = item[head.end() :] if head else item
        if head is None or (rest and (printed or not _FRACTION.fullmatch(rest))):
            raise InputError(
                f"trec_eval measure {arg!r}: cutoff {item!r} is not a plain decimal integer (ASCII "
                "digits 0-9; trec_eval's atol would read " + (f"{int(head.group())}" if head else "0") + ")"
            )
        if rest:
            truncated.append(item)
        digits = head.group().strip().lstrip("+-").lstrip("0")
        value = int(head.group()) if len(digits) <= 30 else MAX_CUTOFF + 1
        if value > MAX_CUTOFF:
            raise InputError(f"trec_eval measure {arg!r}: cutoff {item!r} is beyond {MAX_CUTOFF} (10^9)")
        values.append(value)
    values.sort()
    if values[0] <= 0:
        raise InputError(
            f"trec_eval measure {arg!r}: a cutoff must be 1 or more, not {values[0]} (trec_eval: "
            "Negative cutoff detected)"
        )
    for a, b in pairwise(values):
        if a == b:
            raise InputError(
                f"trec_eval measure {arg!r}: the cutoff {a} is given twice (trec_eval: duplicate cutoffs detected)"
            )
    if truncated:
        read = ", ".join(str(int(_LONG.match(t).group())) for t in truncated)  # type: ignore[union-attr]
        warnings.warn(
            f"trec_eval measure {arg!r}: cutoff {', '.join(repr(t) for t in truncated)} read as trec_eval "
            f"reads it (atol): {read}",
            TrecEvalParameterTruncated,
            stacklevel=4,
        )
    return values


def _double(item: str, arg: str) -> float:
    """A number of a ``-m`` argument as atof reads it where that is unambiguous (spaces around it and a ``+``
    allowed), else the grammar's one number rule refuses it."""
    text = item.strip()
    return _decimal(
        text[1:] if text.startswith("+") and text[1:2] != "-" else text, None, arg, subject="trec_eval measure"
    )


def _p_double(measure: TrecMeasure, params: str, arg: str, printed: bool) -> Metric:
    """A measure with one parameter, printed as typed: the cutoff (relstring), one number (set_F's beta), a fixed
    count of numbers (utility's weights) or a list that must increase (11pt_avg's levels)."""
    family, key = measure.family, str(measure.param)
    items = params.split(",")
    if key == "k":
        if len(items) != 1:
            raise InputError(f"trec_eval measure {arg!r}: {measure.name} takes one length, not {len(items)}")
        (k,) = _longs(params, arg, printed)
        return Metric(family, k, (), spelling=params)
    info = FAMILIES[family].params[key]
    values = [_double(v, arg) for v in items]
    if info.type == "decimal" and len(values) != 1:
        raise InputError(f"trec_eval measure {arg!r}: {measure.name} takes one parameter ({key}), not {len(values)}")
    if info.count is not None and len(values) != info.count:
        raise InputError(
            f"trec_eval measure {arg!r}: {measure.name} takes exactly {info.count} coefficients "
            f"{info.desc.partition(' ')[2]}, not {len(values)}"
        )
    for a, b in pairwise(values if info.sort else ()):  # trec_eval's interpolation walks the levels in order
        if b < a:
            raise InputError(
                f"trec_eval measure {arg!r}: {measure.name}'s {key} must increase (trec_eval's "
                f"interpolation walks them in order, and gives {_number(a)} before {_number(b)} another "
                "value): sort them"
            )
    text = ";".join(_number(v) for v in values)
    return Metric(family, None, ((key, _param(family, key, text, arg)),), spelling=params)


def _p_pair(measure: TrecMeasure, params: str, arg: str, pinned: tuple[tuple[str, str], ...]) -> Metric:
    family = measure.family
    gains: list[str] = []
    extra: list[tuple[str, str]] = []
    for item in params.split(","):
        name, eq, value = item.partition("=")
        if not eq or not name or not value or "=" in value:
            raise InputError(
                f"trec_eval measure {arg!r}: {item!r} should read name=value (trec_eval: malformed pair parameters)"
            )
        if re.fullmatch(r"[+-]?[0-9]+", name):
            gains.append(f"{int(name)}:{_number(_double(value, arg))}")
        elif name == "p" and "p" in FAMILIES[family].params:
            if extra:
                raise InputError(f"trec_eval measure {arg!r}: p is given twice")
            extra.append(("p", _number(_double(value, arg))))
        else:
            takes = "p=persistence and grade=gain pairs" if "p" in FAMILIES[family].params else "grade=gain pairs"
            raise InputError(
                f"trec_eval measure {arg!r}: unknown parameter {name!r} ({measure.name} takes {takes}; "
                "trec_eval ignores any other name)"
            )
    pairs = list(extra) + ([("gains", ";".join(gains))] if gains else [])
    try:
        return Metric(family, None, tuple(pairs) + pinned, spelling=params)
    except InputError as exc:
        raise InputError(f"trec_eval measure {arg!r}: {exc.problem.split(': ', 1)[-1]}") from None


def _printed_unpinned(text: str) -> Metric | None:
    """The grammar's reading of a trec_eval printed name: its gain left to the conventions."""
    return trec_eval_printed(text, pin_gain=False)


register_dialect("trec_eval", trec_eval_name)
register_printed_names(_printed_unpinned)
