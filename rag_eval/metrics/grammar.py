"""One grammar of metric names: a parsed metric is a value whose canonical string is its identity. The accepted
spellings, parameters and number rules: docs/metrics.md ("The grammar of names").
"""

from __future__ import annotations

import difflib
import functools
import math
import numbers
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .._checks import MAX_CUTOFF, check_int
from .._checks import shortened as _short
from .._checks import within as _within
from ..errors import InputError
from .catalogue import ALIASES, FAMILIES, Family, ParamInfo, trec_measures

__all__ = ["MAX_CUTOFF", "Metric", "check_int", "parse_metric", "parse_metrics", "read_int"]

GRADE_LIMIT = 2**29  # grades lie strictly within +-GRADE_LIMIT (rag_eval.data's limit): so do rel= and gains= grades

_FORM = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9_\-.]*?)\s*(?:\((?P<params>[^()]*)\))?\s*(?:@\s*(?P<k>[^@\s]+))?\s*$"
)
_TREC_CUT = re.compile(r"^(?P<base>.+?)[_.](?P<k>-?[0-9]+)$")
_TREC_ODD_CUT = re.compile(r"^(?P<base>.+?)[_.](?P<k>-?[0-9][0-9_]*)$")  # P_1_0: a cutoff spelled with '_'
_INT = re.compile(r"-?[0-9]+")  # ASCII only: \d and int() take any Unicode digit, int() also '_'
_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


@dataclass(frozen=True, eq=False)
class Metric:
    """A metric: a family, an optional cutoff and parameters. Equal and hashed by its canonical string."""

    family: str
    k: int | None = None
    params: tuple[tuple[str, str], ...] = field(default=())
    # trec_eval's printable parameters as the user typed them (``.25,.5,.75`` of ``-m 11pt_avg..25,.5,.75``), for
    # :attr:`trec_name`; not part of the metric's identity (equality, hash and str ignore it)
    spelling: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # built by parse_metric or by hand: either way a Metric holds only what the grammar accepts, canonically
        if not isinstance(self.family, str) or self.family not in FAMILIES:
            raise InputError(f"unknown metric family {self.family!r}; known: {', '.join(sorted(FAMILIES))}")
        k = self.k
        if k is not None:
            if isinstance(k, bool) or not isinstance(k, numbers.Integral):
                raise InputError(f"metric {self.family!r}: the cutoff k={k!r} is a {type(k).__name__}, not an int")
            object.__setattr__(self, "k", _check_cutoff(int(k), self.family))
        # which families need a cutoff is the parser's to say: the reports make Metric(family, None) for a cutoff
        # given per query (a token budget's)
        params = self.params
        if isinstance(params, Mapping):
            params = tuple(params.items())
        try:
            pairs = [(key, value) for key, value in params]
        except (TypeError, ValueError):
            raise InputError(f"metric {self.family!r}: params must be (name, value) pairs, not {params!r}") from None
        for key, value in pairs:
            if not isinstance(key, str) or not isinstance(value, str):
                raise InputError(f"metric {self.family!r}: parameter {key!r}={value!r}: names and values are str")
        text = ",".join(f"{key}={value}" for key, value in pairs)
        object.__setattr__(
            self, "params", _params(text, self.family, f"{self.family}({text})" if text else self.family)
        )
        if self.k is not None and self.k == FAMILIES[self.family].cutoff_default:  # relstring@10 is relstring
            object.__setattr__(self, "k", None)
        if self.spelling is not None and not isinstance(self.spelling, str):
            raise InputError(f"metric {self.family!r}: spelling must be a str or None, not {self.spelling!r}")

    def __str__(self) -> str:
        text = self.family
        if self.params:
            text += "(" + ",".join(f"{key}={value}" for key, value in self.params) + ")"
        if self.k is not None:
            text += f"@{self.k}"
        return text

    def __repr__(self) -> str:
        return f"Metric({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        # a str compares by the canonical string only, so that equal objects hash alike
        if isinstance(other, str):
            return str(self) == other
        return isinstance(other, Metric) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    @property
    def param(self) -> dict[str, str]:
        return dict(self.params)

    @property
    def rel(self) -> int | None:
        """The relevance threshold written in the name, if any."""
        value = self.param.get("rel")
        return int(value) if value is not None else None

    @property
    def summed(self) -> bool:
        """Whether trec_eval reports this metric's sum over queries rather than its mean (the counts)."""
        return FAMILIES[self.family].summed

    @property
    def trec_name(self) -> str:
        """The name trec_eval prints for this measure, or the canonical string where trec_eval has none.

        Cutoffs print as ``P_5``; iprec_at_recall's level and Rprec_mult's multiple as ``%3.2f``
        (``iprec_at_recall_0.10``, ``Rprec_mult_5.00``); the measures whose parameters trec_eval prints as typed
        (11pt_avg, utility, set_F, relstring, rbp, rbp_resid, ndcg, ndcg_rel, Rndcg, G) print ``name_<params>``
        with :attr:`spelling` when the metric came from trec_eval's syntax, else with the canonical values in
        trec_eval's syntax (``utility_2,-1,0,0``, ``ndcg_1=3,2=9``, ``rbp_p=0.5``); at their defaults, the bare
        name (``utility``, ``rbp``).
        """
        fam = FAMILIES[self.family]
        params = self.param
        if (
            not fam.trec
            or "rel" in params
            or params.get("gain") == "exp"
            or params.get("ties", "trec_eval") != "trec_eval"
        ):
            return str(self)  # what trec_eval cannot compute has no trec_eval name
        main = fam.trec[0]
        if self.k is not None and not (main.kind == "p_double" and main.param == "k"):  # relstring_20: typed
            cut = next((m for m in fam.trec if m.kind == "cut_long"), None)
            if cut is None or set(params) - {"gain", "ties"}:
                return str(self)  # trec_eval's cutoff measures take cutoffs only (ndcg_cut), mrr and rbp none
            return f"{cut.name}_{self.k}"
        if main.kind == "cut_double":
            return f"{main.name}_{float(params[str(main.param)]):3.2f}"
        if main.kind in ("p_double", "p_pair"):  # trec_eval prints the parameters as typed
            if self.spelling is not None:
                return f"{main.name}_{self.spelling}" if self.spelling else main.name
            printed = _trec_params(fam, params, self.k)
            return f"{main.name}_{printed}" if printed else main.name
        return main.name


def _trec_params(fam: Family, params: dict[str, str], k: int | None) -> str:
    """The canonical parameters of a measure trec_eval prints as typed, in trec_eval's syntax ('' at defaults)."""
    main = fam.trec[0]
    if main.param == "k":
        return str(k) if k is not None else ""
    if main.kind == "p_double":
        return params.get(str(main.param), "").replace(";", ",")
    pairs = [f"p={params['p']}"] if "p" in params else []
    if "gains" in params:
        pairs += [item.replace(":", "=") for item in params["gains"].split(";")]
    return ",".join(pairs)


DIALECTS = ("trec_eval", "ir_measures", "ranx")

# The grammar is the bottom of the metric names: other tools' names are read by the modules above it that know them
# (trec_eval_measures: trec_eval's names; dialects: ir_measures' and ranx's), each registering its reader here when it
# is imported. rag_eval.metrics imports both, and Python runs a package's __init__ before any of its modules, so the
# readers are in place before any parse_metric call; the grammar imports neither (no import circle).
_DIALECT_READERS: dict[str, Callable[[str], Metric]] = {}
_PRINTED_READERS: list[Callable[[str], Metric | None]] = []


def register_dialect(dialect: str, reader: Callable[[str], Metric]) -> None:
    """Make ``parse_metric(text, dialect=dialect)`` return ``reader(text)``; ``dialect`` is one of :data:`DIALECTS`,
    registered once."""
    if dialect not in DIALECTS or dialect in _DIALECT_READERS:
        raise RuntimeError(f"metric dialect {dialect!r}: not one of {DIALECTS} or registered twice")
    _DIALECT_READERS[dialect] = reader


def register_printed_names(reader: Callable[[str], Metric | None]) -> None:
    """Let the grammar read trec_eval's printed names with parameters (``iprec_at_recall_0.10``,
    ``utility_2,-1,0,0``): ``reader(text)`` is the metric, or None when ``text`` is no such name (registered once)."""
    if _PRINTED_READERS:
        raise RuntimeError("trec_eval's printed names are registered twice")
    _PRINTED_READERS.append(reader)


def _registered(dialect: str) -> Callable[[str], Metric]:
    reader = _DIALECT_READERS.get(dialect)
    if reader is None:  # only if rag_eval.metrics' __init__ stopped importing the module that registers it
        raise RuntimeError(f"no reader of metric dialect {dialect!r} is registered (rag_eval.metrics imports them)")
    return reader


def parse_metric(text: str | Metric, dialect: str | None = None) -> Metric:
    """Parse a metric name into its canonical :class:`Metric`; an unknown name fails with a suggestion.

    ``dialect``: read ``text`` with the meaning it has in another tool, pinned in the canonical string:
    ``"trec_eval"`` (one name as trec_eval prints it: ``ndcg_cut_10`` is ``ndcg(gain=linear)@10``, see
    :mod:`.trec_eval_measures`), ``"ir_measures"`` or ``"ranx"`` (:mod:`.dialects`). Without one, this grammar:
    trec_eval's names are read too, their gain left to the conventions.
    """
    if isinstance(text, Metric):
        return text
    if not isinstance(text, str):
        raise TypeError(f"a metric name is a str, not {type(text).__name__}")
    if dialect is not None:
        if dialect in DIALECTS:
            return _registered(dialect)(text)
        raise InputError(
            f"unknown metric dialect {dialect!r}; choose one of {', '.join(DIALECTS)} (or none: rag_eval's own grammar)"
        )
    try:
        return _parse(text)
    except InputError as first:
        if "(" in text or "@" in text or not _PRINTED_READERS:
            raise
        try:  # trec_eval's printed names with parameters: iprec_at_recall_0.10, utility_2,-1,0,0, ndcg_1=3,2=9
            metric = _PRINTED_READERS[0](text)
        except InputError as second:  # a trec_eval name with a bad value: its message, rather than "unknown"
            raise (second if first.problem.startswith("unknown metric") else first) from None
        if metric is None:
            raise
        return metric


def _parse(text: str) -> Metric:
    shown = text if len(text) <= 200 else f"{text[:60]}...({len(text)} characters)"  # messages stay one short line
    match = _FORM.match(text)
    if not match:
        raise InputError(f"cannot read metric name {shown!r} (expected e.g. 'ndcg@10' or 'P(rel=2)@5')")
    name = match["name"].lower()
    k_text = match["k"]
    if k_text is None and name in _cut_only_names():  # trec_eval's default cutoff lists (ndcg_cut): say which
        raise InputError(f"metric {shown!r} needs a cutoff, e.g. '{name}_10'")
    family = _family(name)
    if family is None and k_text is None:
        cut = _TREC_CUT.match(name)
        if cut and _family(cut["base"].lower()) is not None:
            family, k_text = _family(cut["base"].lower()), cut["k"]
    if family is None:
        odd = _TREC_ODD_CUT.match(match["name"])
        if odd and _family(odd["base"].lower()) is not None:
            raise InputError(
                f"metric {shown!r}: cutoff {odd['k']!r} is not a plain decimal integer (ASCII digits "
                f"only; trec_eval's cutoff is the digits after the last '_', e.g. '{odd['base']}_10')"
            )
    if family is None:
        raise InputError(f"unknown metric {shown!r}{_suggest(name)}")
    fam = FAMILIES[family]
    k = _cutoff(k_text, shown) if k_text is not None else None
    if k is None and fam.cutoff == "required":
        raise InputError(f"metric {shown!r} needs a cutoff, e.g. '{family}@10'")
    if k is not None and fam.cutoff == "none":
        raise InputError(f"metric {shown!r} takes no cutoff (write '{family}')")
    params = _params(match["params"], family, shown) if match["params"] is not None else ()
    return Metric(family, k, params)


@functools.cache  # trec_eval's measure table is made once (catalogue.trec_measures)
def _cut_only_names() -> frozenset[str]:
    """trec_eval's cutoff measures of families whose cutoff is optional (``ndcg_cut``, ``map_cut``): a cutoff
    is needed in their name."""
    return frozenset(
        m.name.lower() for m in trec_measures() if m.kind == "cut_long" and FAMILIES[m.family].cutoff == "optional"
    )


def parse_metrics(names: str | Metric | list[str | Metric] | tuple[str | Metric, ...]) -> list[Metric]:
    """Parse several names, dropping repeats (keeping the first) and keeping order."""
    if isinstance(names, (str, Metric)):
        names = [names]
    return list(dict.fromkeys(parse_metric(n) for n in names))


def _family(name: str) -> str | None:
    name = name.replace("-", "_") if name not in ALIASES else name
    if name in FAMILIES:
        return name
    return ALIASES.get(name)


def read_int(text: str, what: str, *, low: int | None = None, high: int | None = None) -> int:
    """``text`` read as a plain ASCII decimal integer (an optional ``-``, digits ``0-9``; no ``_``, ``+``, other
    scripts' digits or spaces inside), within ``low..high``; anything else is an InputError naming ``what``."""
    if not isinstance(text, str):
        raise TypeError(f"{what}: expected a str, not {type(text).__name__}")
    stripped = text.strip()
    if not _INT.fullmatch(stripped):
        raise InputError(f"{what} {text!r} is not a plain decimal integer (ASCII digits 0-9 only)")
    digits = stripped.lstrip("-").lstrip("0")
    # int() refuses thousands of digits; the bounds below refuse far fewer
    huge = -(10**30) if stripped.startswith("-") else 10**30
    value = huge if len(digits) > 30 else int(stripped)
    return _within(value, what, low, high, stripped)


def _cutoff(text: str, whole: str) -> int:
    if not _INT.fullmatch(text):
        raise InputError(f"metric {whole!r}: cutoff {text!r} is not a plain decimal integer (ASCII digits 0-9 only)")
    digits = text.lstrip("-").lstrip("0")
    k = int(text) if len(digits) <= 30 else (-1 if text.startswith("-") else MAX_CUTOFF + 1)
    return _check_cutoff(k, whole, text)


def _check_cutoff(k: int, whole: str, text: str | None = None) -> int:
    if k <= 0:
        raise InputError(f"metric {whole!r}: the cutoff must be 1 or more, not {_short(text or str(k))}")
    if k > MAX_CUTOFF:
        raise InputError(
            f"metric {whole!r}: the cutoff must be at most {MAX_CUTOFF} (10^9), not {_short(text or str(k))}"
        )
    return k


# A parameter at its default (ParamInfo.default: trec_eval 10.0's m_*.c) is not written in the canonical string, so
# ``rbp`` and ``rbp(p=0.9)`` are one metric; a required one (ParamInfo.required) must be written.


def _params(text: str, family: str, whole: str) -> tuple[tuple[str, str], ...]:
    allowed = FAMILIES[family].params
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        key, value = key.strip().lower(), value.strip()
        if not sep or not value:
            raise InputError(f"metric {whole!r}: parameter {item!r} should read name=value")
        if key not in allowed:
            hint = f" ({family} takes {', '.join(sorted(allowed))})" if allowed else f" ({family} takes none)"
            raise InputError(f"metric {whole!r}: unknown parameter {key!r}{hint}")
        if key in out:
            raise InputError(f"metric {whole!r}: parameter {key!r} given twice")
        out[key] = _param_value(key, allowed[key], value, whole)
    for key, info in allowed.items():
        if info.required and key not in out:
            raise InputError(f"metric {whole!r} needs the parameter {key}=, e.g. '{family}({key}={info.example})'")
    for key in [key for key, value in out.items() if allowed[key].default == value]:
        del out[key]
    return tuple(sorted(out.items()))


def _decimal(text: str, what: str | None, whole: str, *, subject: str = "metric") -> float:
    """A parameter's number: a plain ASCII decimal (``0.5``, ``.5``, ``2``, ``1e-3``; no ``_``, hex, inf or
    nan), finite, ``-0`` read as 0. Messages start ``{subject} {whole!r}: [{what} ]{text!r}``: the grammar's
    (``metric 'rbp(p=0_5)': p '0_5' ...``) and trec_eval's ``-m`` arguments' (``trec_eval measure ...``)."""
    where = f"{subject} {whole!r}: " + (f"{what} " if what else "")
    if text.lstrip("+-").lower() in ("inf", "infinity", "nan"):
        raise InputError(f"{where}{text!r} must be a finite number")
    if not _DECIMAL.fullmatch(text):
        raise InputError(
            f"{where}{text!r} is not a plain decimal number (ASCII digits, an optional '-', '.' and "
            "exponent: no '_', hex, inf or nan)"
        )
    value = float(text)
    if math.isinf(value):
        raise InputError(f"{where}{text!r} is beyond the largest double (about 1.8e308)")
    return value + 0.0


def _in_range(
    value: float,
    what: str,
    whole: str,
    text: str,
    *,
    low: float,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    why: str = "",
) -> None:
    bad = value < low or (low_open and value == low)
    if high is not None:
        bad = bad or value > high or (high_open and value == high)
    if bad:
        lo, hi = "(" if low_open else "[", ")" if high_open else "]"
        span = (
            f"in {lo}{_number(low)}, {_number(high)}{hi}"
            if high is not None
            else (f"{'above' if low_open else 'at least'} {_number(low)}")
        )
        raise InputError(f"metric {whole!r}: {what} must be {span}, not {text}{why}")


def _param_value(key: str, info: ParamInfo, value: str, whole: str) -> str:
    """A parameter's canonical value, read by its type (:class:`~rag_eval.metrics.catalogue.ParamInfo`)."""
    return _READERS[info.type](key, info, value, whole)


def _choice(key: str, info: ParamInfo, value: str, whole: str) -> str:
    if value.lower() not in info.choices:
        advice = info.hint or f"choose one of {', '.join(info.choices)}"
        raise InputError(f"metric {whole!r}: {key}={value!r}; {advice}")
    return value.lower()


def _grade(key: str, info: ParamInfo, value: str, whole: str) -> str:
    if not _INT.fullmatch(value):
        raise InputError(f"metric {whole!r}: {key}={value!r} is not an integer (plain ASCII digits 0-9)")
    grade = int(value) if len(value.lstrip("-").lstrip("0")) <= 30 else GRADE_LIMIT * (-1 if value[0] == "-" else 1)
    if grade < 1:
        raise InputError(f"metric {whole!r}: {key} must be 1 or more, not {_short(value)}")
    if grade >= GRADE_LIMIT:
        raise InputError(
            f"metric {whole!r}: {key} must be below {GRADE_LIMIT} (grades lie within "
            f"+-{GRADE_LIMIT}), not {_short(value)}"
        )
    return str(grade)


def _bound(x: float | None) -> int | None:
    return None if x is None else int(x)


def _integer(key: str, info: ParamInfo, value: str, whole: str) -> str:
    return str(read_int(value, f"metric {whole!r}: {key}", low=_bound(info.low), high=_bound(info.high)))


def _checked(x: float, what: str, info: ParamInfo, whole: str, text: str) -> None:
    if info.low is not None:
        _in_range(
            x,
            what,
            whole,
            text,
            low=info.low,
            high=info.high,
            low_open=info.low_open,
            high_open=info.high_open,
            why=f" ({info.desc})",
        )


def _one_decimal(key: str, info: ParamInfo, value: str, whole: str) -> str:
    x = _decimal(value, key, whole)
    _checked(x, key, info, whole, value)
    return _number(x)


def _decimals(key: str, info: ParamInfo, value: str, whole: str) -> str:
    parts = value.split(";")
    if info.count is not None and len(parts) != info.count:
        raise InputError(
            f"metric {whole!r}: {key}={value!r} must be exactly {info.count} numbers {info.desc}, not {len(parts)}"
        )
    xs = [_decimal(v.strip(), f"a {info.item}", whole) for v in parts]
    for x, text in zip(xs, parts, strict=True):
        _checked(x, f"each of {key}", info, whole, text.strip())
    if info.sort:
        if len(set(xs)) != len(xs):
            raise InputError(f"metric {whole!r}: {key}={value!r} repeats a {info.item}")
        xs.sort()
    return ";".join(_number(x) for x in xs)


def _gains(key: str, info: ParamInfo, value: str, whole: str) -> str:
    """``gains=grade:gain;grade:gain``: integer grades within the grade limit, finite gains >= 0, no repeat."""
    pairs: dict[int, float] = {}
    for part in filter(None, (p.strip() for p in value.split(";"))):
        grade, sep, gain = (x.strip() for x in part.partition(":"))
        if sep and gain.lstrip("+-").lower() in ("inf", "infinity", "nan"):
            raise InputError(
                f"metric {whole!r}: gains entry {part!r}: a gain must be a finite number, not {gain!r} "
                "(an infinite or NaN gain makes nDCG NaN)"
            )
        if not sep or not _INT.fullmatch(grade) or not _DECIMAL.fullmatch(gain):
            raise InputError(
                f"metric {whole!r}: gains entry {part!r} should read grade:gain, e.g. 2:9 (plain "
                "ASCII decimal numbers: no '_', hex, inf or nan)"
            )
        g = int(grade) if len(grade.lstrip("-").lstrip("0")) <= 30 else GRADE_LIMIT
        if abs(g) >= GRADE_LIMIT:
            raise InputError(
                f"metric {whole!r}: gains entry {part!r}: grade {_short(grade)} is out of range "
                f"(grades lie within +-{GRADE_LIMIT})"
            )
        v = float(gain)
        if math.isinf(v):
            raise InputError(
                f"metric {whole!r}: gains entry {part!r}: the gain {gain} is beyond the largest "
                "double (about 1.8e308), so it is infinite and nDCG would be NaN"
            )
        if v < 0:
            raise InputError(
                f"metric {whole!r}: gains entry {part!r}: a gain must be 0 or more (a negative gain takes nDCG below 0)"
            )
        if g in pairs:
            raise InputError(f"metric {whole!r}: gains entry {part!r} is repeated (grade {g} is given twice)")
        pairs[g] = v + 0.0  # -0.0 is 0
    if not pairs:
        raise InputError(f"metric {whole!r}: gains= is empty")
    return ";".join(f"{g}:{_number(v)}" for g, v in sorted(pairs.items()))


_READERS: dict[str, Callable[[str, ParamInfo, str, str], str]] = {
    "choice": _choice,
    "grade": _grade,
    "int": _integer,
    "decimal": _one_decimal,
    "decimals": _decimals,
    "gains": _gains,
}


def _number(value: float) -> str:
    """The shortest decimal that reads back as ``value`` (Python's repr), without ``.0``, ``+`` or exponent
    zeros: ``3``, ``4.5``, ``1e308``, ``1e-5``, ``1.5e16``."""
    text = repr(value)
    mantissa, e, exponent = text.partition("e")
    if mantissa.endswith(".0"):
        mantissa = mantissa[:-2]
    if not e:
        return mantissa
    sign = "-" if exponent.startswith("-") else ""
    return f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"


def gains_map(metric: Metric) -> dict[int, float] | None:
    """The ``gains=`` parameter of an nDCG metric as ``{grade: gain}``, or None."""
    text = metric.param.get("gains")
    if text is None:
        return None
    return {int(g): float(v) for g, v in (p.split(":") for p in text.split(";"))}


def _suggest(name: str) -> str:
    known = sorted(set(FAMILIES) | set(ALIASES) | {"ndcg_cut", "p"})
    base = _TREC_CUT.match(name)
    candidates = difflib.get_close_matches(base["base"] if base else name, known, n=1, cutoff=0.6)
    if not candidates:
        return f"; known metrics: {', '.join(sorted(FAMILIES))}"
    return f"; did you mean {ALIASES.get(candidates[0], candidates[0])!r}?"
