"""One grammar of metric names. A parsed metric is a value whose canonical string is its identity.

Accepted spellings (case-insensitive):

- ir_measures' form: ``name[(param=value,...)][@k]``, e.g. ``ndcg@10``, ``ndcg(gain=linear)@10``, ``P(rel=2)@5``,
  ``ndcg(gains=1:3;2:9;4:4.5)``;
- trec_eval's names: ``P_10``, ``P.10``, ``ndcg_cut_10``, ``ndcg_cut.10``, ``map_cut_10``, ``success_5``,
  ``recall_100``, ``recip_rank``, ``Rprec``, ``map``, ``ndcg``, ``bpref``, ``num_rel``, ...

Parameters: ``rel=N`` (lowest relevant grade for this metric, overriding the conventions' threshold; for nDCG,
only grades >= N earn gain), ``gain=exp|linear`` and ``gains=grade:gain;...`` (nDCG; grades not in the map keep the
gain rule's value, so ``ndcg(gain=linear,gains=1:3)`` is trec_eval's ``ndcg.1=3``). A parameter written in a name
overrides the conventions for that metric only. The other families' parameters, checked when parsed, each an
InputError naming the metric and the parameter otherwise:

- ``iprec_at_recall(level=L)`` (required), ``11pt_avg(levels=L;L;...)`` (sorted here, no repeat): levels in [0, 1];
- ``rprec_mult(mult=M)`` (required), M > 0; ``utility(weights=w1;w2;w3;w4)``, exactly four;
- ``set_f(beta=B)``, B >= 0, trec_eval's set_F parameter (van Rijsbergen's beta squared);
- ``rbp(p=P)``, ``rbp_resid(p=P)``, 0 < P < 1; ``err(max_grade=G)@k``, ``nerr(...)``: an integer 1..1000.

A parameter at trec_eval's default (m_*.c) is left out of the canonical string: ``rbp(p=0.9)`` is ``rbp``,
``utility(weights=1;-1;0;0)`` is ``utility``, ``set_f(beta=1)`` is ``set_f``, 11pt_avg's 11 levels are ``11pt_avg``,
``relstring@10`` is ``relstring``. trec_eval's printed names of these (``iprec_at_recall_0.10``, ``Rprec_mult_0.20``,
``utility_2,-1,0,0``, ``11pt_avg_.25,.5,.75``, ``ndcg_1=3,2=9``, ``rbp_p=0.5``, ``set_F``, ``infAP``, ``unj_5``)
parse too (:mod:`.trec_eval_measures`), keeping trec_eval's spelling of the parameters in :attr:`Metric.spelling`.

Numbers are plain ASCII decimals, nothing else (Python's ``int()`` would read ``1_0`` and ``١٠`` as 10):

- a cutoff (``@10``, trec_eval's ``_10``) and ``rel=`` are ASCII digits ``0-9``, at most :data:`MAX_CUTOFF`
  (10^9) for a cutoff and below the grade limit (2^29) for ``rel=``; in trec_eval's names the cutoff is the digits
  after the last ``_`` or ``.``, so ``P_1_0`` is refused (write ``P_10``), never read as ``P_10``;
- a ``gains=`` grade is an integer within the grade limit, and a gain is a finite decimal ``>= 0`` (``2``, ``4.5``,
  ``.5``, ``1e308``; no ``inf``, ``nan``, hex or ``_``): a negative gain would take nDCG below 0, an infinite one
  makes it NaN. A gain prints as the shortest decimal that reads back as the same double (``1e308``, ``4.5``, ``3``),
  so ``1e308``, ``1E308`` and ``1`` followed by 308 zeros are one metric with one name.
"""

from __future__ import annotations

import difflib
import math
import numbers
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .._checks import MAX_CUTOFF, check_int
from .._checks import shortened as _short
from .._checks import within as _within
from ..errors import InputError
from .catalogue import ALIASES, FAMILIES

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
        if self.family == "relstring" and self.k == RELSTRING_DEFAULT:  # trec_eval's default length: one metric
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
            fam.trec_name is None
            or "rel" in params
            or params.get("gain") == "exp"
            or params.get("ties", "trec_eval") != "trec_eval"
        ):
            return str(self)  # what trec_eval cannot compute has no trec_eval name
        if self.family == "mrr" and self.k is not None:
            return str(self)
        base = fam.trec_name
        family = self.family
        if family in ("ndcg", "ap") and self.k is not None:
            if "gains" in params:
                return str(self)  # trec_eval's ndcg_cut takes cutoffs only
            return f"{'ndcg_cut' if family == 'ndcg' else 'map_cut'}_{self.k}"
        if family in ("rbp", "rbp_resid") and self.k is not None:
            return str(self)  # trec_eval's rbp has no depth
        if family == "iprec_at_recall":
            return f"{base}_{float(params['level']):3.2f}"
        if family == "rprec_mult":
            return f"{base}_{float(params['mult']):3.2f}"
        if family in _PRINTED_AS_TYPED:
            if self.spelling is not None:
                return f"{base}_{self.spelling}" if self.spelling else base
            printed = _trec_params(family, params, self.k)
            return f"{base}_{printed}" if printed else base
        return f"{base}_{self.k}" if self.k is not None else base


# trec_eval's "s_double_p_double" and "s_double_p_pair" measures: the name is printed with the parameters as typed
_PRINTED_AS_TYPED = frozenset(
    {"11pt_avg", "utility", "set_f", "relstring", "rbp", "rbp_resid", "ndcg", "ndcg_rel", "rndcg", "g"}
)


def _trec_params(family: str, params: dict[str, str], k: int | None) -> str:
    """The canonical parameters of a measure trec_eval prints as typed, in trec_eval's syntax ('' at defaults)."""
    if family == "11pt_avg":
        return params.get("levels", "").replace(";", ",")
    if family == "utility":
        return params.get("weights", "").replace(";", ",")
    if family == "set_f":
        return params.get("beta", "")
    if family == "relstring":
        return str(k) if k is not None else ""
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
    if name in ("ndcg_cut", "map_cut") and k_text is None:  # trec_eval's default cutoff lists: say which
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


# Defaults of the parameters (trec_eval 10.0's m_*.c): a parameter at its default is not written in the canonical
# string, so ``rbp`` and ``rbp(p=0.9)`` are one metric. Levels, weights: ";"-separated, as printed by _number.
PARAM_DEFAULTS: dict[tuple[str, str], str] = {
    ("11pt_avg", "levels"): "0;0.1;0.2;0.3;0.4;0.5;0.6;0.7;0.8;0.9;1",  # m_11pt_avg.c
    ("utility", "weights"): "1;-1;0;0",  # m_utility.c
    ("set_f", "beta"): "1",  # m_set_F.c (trec_eval's x: van Rijsbergen's beta squared)
    ("rbp", "p"): "0.9",  # m_rbp.c: "double p = 0.9"
    ("rbp_resid", "p"): "0.9",  # m_rbp_resid.c
}
# Parameters a family cannot do without (trec_eval computes these at a list of values: rag_eval one metric each)
REQUIRED_PARAMS: dict[str, tuple[str, str]] = {
    "iprec_at_recall": ("level", "iprec_at_recall(level=0.1)"),
    "rprec_mult": ("mult", "rprec_mult(mult=0.2)"),
}
RELSTRING_DEFAULT = 10  # relstring's length when no cutoff is given (m_relstring.c): relstring@10 is relstring
MAX_GRADE_LIMIT = 1000  # err's max_grade: 2^max_grade stays finite in float64 (the engine's EXP_GAIN_LIMIT)
MAX_MULT = 10**6  # rprec_mult: R x mult stays an exact rank


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
        out[key] = _param_value(key, value, whole)
    required = REQUIRED_PARAMS.get(family)
    if required and required[0] not in out:
        raise InputError(f"metric {whole!r} needs the parameter {required[0]}=, e.g. {required[1]!r}")
    for key in [key for key, value in out.items() if PARAM_DEFAULTS.get((family, key)) == value]:
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


_CHOICES = {"ties": ("trec_eval", "doc_id", "input_order"), "per": ("returned", "k"), "empty": ("nan", "zero")}


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


def _param_value(key: str, value: str, whole: str) -> str:
    if key in _CHOICES:  # ties= (a metric's own tie rule), judged's per= and empty= (rag_eval.metrics.dialects)
        if value.lower() not in _CHOICES[key]:
            raise InputError(f"metric {whole!r}: {key}={value!r}; choose one of {', '.join(_CHOICES[key])}")
        return value.lower()
    if key == "rel":
        if not _INT.fullmatch(value):
            raise InputError(f"metric {whole!r}: rel={value!r} is not an integer (plain ASCII digits 0-9)")
        rel = int(value) if len(value.lstrip("-").lstrip("0")) <= 30 else GRADE_LIMIT * (-1 if value[0] == "-" else 1)
        if rel < 1:
            raise InputError(f"metric {whole!r}: rel must be 1 or more, not {_short(value)}")
        if rel >= GRADE_LIMIT:
            raise InputError(
                f"metric {whole!r}: rel must be below {GRADE_LIMIT} (grades lie within "
                f"+-{GRADE_LIMIT}), not {_short(value)}"
            )
        return str(rel)
    if key == "gain":
        if value.lower() not in ("exp", "linear"):
            raise InputError(f"metric {whole!r}: gain={value!r}; choose 'exp' (2^grade - 1) or 'linear' (grade)")
        return value.lower()
    if key == "level":
        level = _decimal(value, "level", whole)
        _in_range(level, "level", whole, value, low=0.0, high=1.0, why=" (a recall level)")
        return _number(level)
    if key == "levels":
        levels = [_decimal(v.strip(), "a level", whole) for v in value.split(";")]
        for v, text in zip(levels, value.split(";"), strict=True):
            _in_range(v, "each of levels", whole, text.strip(), low=0.0, high=1.0, why=" (a recall level)")
        if len(set(levels)) != len(levels):
            raise InputError(f"metric {whole!r}: levels={value!r} repeats a level")
        return ";".join(_number(v) for v in sorted(levels))
    if key == "mult":
        mult = _decimal(value, "mult", whole)
        _in_range(
            mult,
            "mult",
            whole,
            value,
            low=0.0,
            low_open=True,
            high=float(MAX_MULT),
            why=" (a multiple of R, the number of relevant documents)",
        )
        return _number(mult)
    if key == "weights":
        parts = value.split(";")
        if len(parts) != 4:
            raise InputError(
                f"metric {whole!r}: weights={value!r} must be exactly 4 numbers w1;w2;w3;w4 (relevant "
                f"retrieved, non-relevant retrieved, relevant missed, non-relevant missed), not {len(parts)}"
            )
        return ";".join(_number(_decimal(v.strip(), "a weight", whole)) for v in parts)
    if key == "beta":
        beta = _decimal(value, "beta", whole)
        _in_range(
            beta,
            "beta",
            whole,
            value,
            low=0.0,
            why=" (the weight of recall: van Rijsbergen's beta squared, as trec_eval's set_F)",
        )
        return _number(beta)
    if key == "p":
        p = _decimal(value, "p", whole)
        _in_range(
            p,
            "p",
            whole,
            value,
            low=0.0,
            high=1.0,
            low_open=True,
            high_open=True,
            why=" (RBP's persistence: the chance of going on to the next rank)",
        )
        return _number(p)
    if key == "max_grade":
        return str(read_int(value, f"metric {whole!r}: max_grade", low=1, high=MAX_GRADE_LIMIT))
    if key != "gains":  # a parameter of the catalogue whose value check is not written here yet
        raise InputError(f"metric {whole!r}: parameter {key!r} has no value check in the grammar")
    # gains=grade:gain;grade:gain
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
