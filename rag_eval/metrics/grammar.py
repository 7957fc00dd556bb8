"""One grammar of metric names. A parsed metric is a value whose canonical string is its identity.

Accepted spellings (case-insensitive):

- ir_measures' form: ``name[(param=value,...)][@k]``, e.g. ``ndcg@10``, ``ndcg(gain=linear)@10``, ``P(rel=2)@5``,
  ``ndcg(gains=1:3;2:9;4:4.5)``;
- trec_eval's names: ``P_10``, ``P.10``, ``ndcg_cut_10``, ``ndcg_cut.10``, ``map_cut_10``, ``success_5``,
  ``recall_100``, ``recip_rank``, ``Rprec``, ``map``, ``ndcg``, ``bpref``, ``num_rel``, ...

Parameters: ``rel=N`` (lowest relevant grade for this metric, overriding the conventions' threshold; for nDCG,
only grades >= N earn gain), ``gain=exp|linear`` and ``gains=grade:gain;...`` (nDCG only; grades not in the map
keep the gain rule's value). A parameter written in a name overrides the conventions for that metric only.

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from .catalogue import ALIASES, FAMILIES

__all__ = ["MAX_CUTOFF", "Metric", "check_int", "parse_metric", "parse_metrics", "read_int"]

MAX_CUTOFF = 10**9  # the largest cutoff (and depth, budget, -M): far beyond any ranking, and exact in int64 and float64
GRADE_LIMIT = 2**29  # grades lie strictly within +-GRADE_LIMIT (rag_eval.data's limit): so do rel= and gains= grades

_FORM = re.compile(r"^\s*(?P<name>[A-Za-z][A-Za-z0-9_\-.]*?)\s*(?:\((?P<params>[^()]*)\))?\s*(?:@\s*(?P<k>[^@\s]+))?\s*$")
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
        object.__setattr__(self, "params", _params(text, self.family, f"{self.family}({text})") if pairs else ())

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
        """The name trec_eval prints for this measure, or the canonical string where trec_eval has none."""
        fam = FAMILIES[self.family]
        params = self.param
        if fam.trec_name is None or "rel" in params or params.get("gain") == "exp":
            return str(self)
        if self.family == "mrr" and self.k is not None:
            return str(self)
        base = fam.trec_name
        if self.family == "ndcg" and self.k is not None:
            base = "ndcg_cut"
        elif self.family == "ap" and self.k is not None:
            base = "map_cut"
        if "gains" in params:
            if self.k is not None:
                return str(self)
            return "ndcg_" + params["gains"].replace(":", "=").replace(";", ",")
        return f"{base}_{self.k}" if self.k is not None else base


def parse_metric(text: str | Metric) -> Metric:
    """Parse a metric name into its canonical :class:`Metric`; an unknown name fails with a suggestion."""
    if isinstance(text, Metric):
        return text
    if not isinstance(text, str):
        raise TypeError(f"a metric name is a str, not {type(text).__name__}")
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
            raise InputError(f"metric {shown!r}: cutoff {odd['k']!r} is not a plain decimal integer (ASCII digits "
                             f"only; trec_eval's cutoff is the digits after the last '_', e.g. '{odd['base']}_10')")
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
    if len(digits) > 30:  # int() refuses thousands of digits; the bounds below refuse far fewer
        value = -(10**30) if stripped.startswith("-") else 10**30
    else:
        value = int(stripped)
    return _within(value, what, low, high, stripped)


def check_int(value: Any, what: str, *, low: int | None = 1, high: int | None = MAX_CUTOFF) -> int:
    """``value`` as an int if it is one (a Python or NumPy integer, never a bool, a float or a str) within
    ``low..high`` (by default a count: 1 to :data:`MAX_CUTOFF`); otherwise an InputError naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{what} must be an int, not {type(value).__name__} {value!r}")
    value = int(value)
    return _within(value, what, low, high, str(value))


def _within(value: int, what: str, low: int | None, high: int | None, shown: str) -> int:
    """``value`` if it lies within ``low..high``; else an InputError naming ``what`` and showing ``shown``."""
    if low is not None and value < low:
        raise InputError(f"{what} must be {low} or more, not {_short(shown)}")
    if high is not None and value > high:
        raise InputError(f"{what} must be at most {high}, not {_short(shown)}")
    return value


def _short(digits: str) -> str:
    return digits if len(digits) <= 40 else f"{digits[:20]}...({len(digits)} characters)"


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
        raise InputError(f"metric {whole!r}: the cutoff must be at most {MAX_CUTOFF} (10^9), not "
                         f"{_short(text or str(k))}")
    return k


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
    if "gain" in out and "gains" in out:
        raise InputError(f"metric {whole!r}: give either gain= or gains=, not both")
    return tuple(sorted(out.items()))


def _param_value(key: str, value: str, whole: str) -> str:
    if key == "rel":
        if not _INT.fullmatch(value):
            raise InputError(f"metric {whole!r}: rel={value!r} is not an integer (plain ASCII digits 0-9)")
        rel = int(value) if len(value.lstrip("-").lstrip("0")) <= 30 else GRADE_LIMIT * (-1 if value[0] == "-" else 1)
        if rel < 1:
            raise InputError(f"metric {whole!r}: rel must be 1 or more, not {_short(value)}")
        if rel >= GRADE_LIMIT:
            raise InputError(f"metric {whole!r}: rel must be below {GRADE_LIMIT} (grades lie within "
                             f"+-{GRADE_LIMIT}), not {_short(value)}")
        return str(rel)
    if key == "gain":
        if value.lower() not in ("exp", "linear"):
            raise InputError(f"metric {whole!r}: gain={value!r}; choose 'exp' (2^grade - 1) or 'linear' (grade)")
        return value.lower()
    # gains=grade:gain;grade:gain
    pairs: dict[int, float] = {}
    for part in filter(None, (p.strip() for p in value.split(";"))):
        grade, sep, gain = (x.strip() for x in part.partition(":"))
        if sep and gain.lstrip("+-").lower() in ("inf", "infinity", "nan"):
            raise InputError(f"metric {whole!r}: gains entry {part!r}: a gain must be a finite number, not {gain!r} "
                             "(an infinite or NaN gain makes nDCG NaN)")
        if not sep or not _INT.fullmatch(grade) or not _DECIMAL.fullmatch(gain):
            raise InputError(f"metric {whole!r}: gains entry {part!r} should read grade:gain, e.g. 2:9 (plain "
                             "ASCII decimal numbers: no '_', hex, inf or nan)")
        g = int(grade) if len(grade.lstrip("-").lstrip("0")) <= 30 else GRADE_LIMIT
        if abs(g) >= GRADE_LIMIT:
            raise InputError(f"metric {whole!r}: gains entry {part!r}: grade {_short(grade)} is out of range "
                             f"(grades lie within +-{GRADE_LIMIT})")
        v = float(gain)
        if math.isinf(v):
            raise InputError(f"metric {whole!r}: gains entry {part!r}: the gain {gain} is beyond the largest "
                             "double (about 1.8e308), so it is infinite and nDCG would be NaN")
        if v < 0:
            raise InputError(f"metric {whole!r}: gains entry {part!r}: a gain must be 0 or more (a negative gain "
                             "takes nDCG below 0)")
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
