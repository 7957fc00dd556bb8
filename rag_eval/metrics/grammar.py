"""One grammar of metric names. A parsed metric is a value whose canonical string is its identity.

Accepted spellings (case-insensitive):

- ir_measures' form: ``name[(param=value,...)][@k]``, e.g. ``ndcg@10``, ``ndcg(gain=linear)@10``, ``P(rel=2)@5``,
  ``ndcg(gains=1:3;2:9;4:4.5)``;
- trec_eval's names: ``P_10``, ``P.10``, ``ndcg_cut_10``, ``ndcg_cut.10``, ``map_cut_10``, ``success_5``,
  ``recall_100``, ``recip_rank``, ``Rprec``, ``map``, ``ndcg``, ``bpref``, ``num_rel``, ...

Parameters: ``rel=N`` (lowest relevant grade for this metric, overriding the conventions' threshold; for nDCG,
only grades >= N earn gain), ``gain=exp|linear`` and ``gains=grade:gain;...`` (nDCG only; grades not in the map
keep the gain rule's value). A parameter written in a name overrides the conventions for that metric only.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from ..errors import InputError
from .catalogue import ALIASES, FAMILIES

__all__ = ["Metric", "parse_metric", "parse_metrics"]

_FORM = re.compile(r"^\s*(?P<name>[A-Za-z][A-Za-z0-9_\-.]*?)\s*(?:\((?P<params>[^()]*)\))?\s*(?:@\s*(?P<k>[^@\s]+))?\s*$")
_TREC_CUT = re.compile(r"^(?P<base>.+?)[_.](?P<k>-?\d+)$")


@dataclass(frozen=True, eq=False)
class Metric:
    """A metric: a family, an optional cutoff and parameters. Equal and hashed by its canonical string."""

    family: str
    k: int | None = None
    params: tuple[tuple[str, str], ...] = field(default=())

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
    match = _FORM.match(text)
    if not match:
        raise InputError(f"cannot read metric name {text!r} (expected e.g. 'ndcg@10' or 'P(rel=2)@5')")
    name = match["name"].lower()
    k_text = match["k"]
    if name in ("ndcg_cut", "map_cut") and k_text is None:  # trec_eval's default cutoff lists: say which
        raise InputError(f"metric {text!r} needs a cutoff, e.g. '{name}_10'")
    family = _family(name)
    if family is None and k_text is None:
        cut = _TREC_CUT.match(name)
        if cut and _family(cut["base"].lower()) is not None:
            family, k_text = _family(cut["base"].lower()), cut["k"]
    if family is None:
        raise InputError(f"unknown metric {text!r}{_suggest(name)}")
    fam = FAMILIES[family]
    k = _cutoff(k_text, text) if k_text is not None else None
    if k is None and fam.cutoff == "required":
        raise InputError(f"metric {text!r} needs a cutoff, e.g. '{family}@10'")
    if k is not None and fam.cutoff == "none":
        raise InputError(f"metric {text!r} takes no cutoff (write '{family}')")
    params = _params(match["params"], family, text) if match["params"] is not None else ()
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


def _cutoff(text: str, whole: str) -> int:
    try:
        k = int(text)
    except ValueError:
        raise InputError(f"metric {whole!r}: cutoff {text!r} is not an integer") from None
    if k <= 0:
        raise InputError(f"metric {whole!r}: the cutoff must be 1 or more, not {k}")
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
        try:
            rel = int(value)
        except ValueError:
            raise InputError(f"metric {whole!r}: rel={value!r} is not an integer") from None
        if rel < 1:
            raise InputError(f"metric {whole!r}: rel must be 1 or more, not {rel}")
        return str(rel)
    if key == "gain":
        if value.lower() not in ("exp", "linear"):
            raise InputError(f"metric {whole!r}: gain={value!r}; choose 'exp' (2^grade - 1) or 'linear' (grade)")
        return value.lower()
    # gains=grade:gain;grade:gain
    pairs: dict[int, float] = {}
    for part in filter(None, (p.strip() for p in value.split(";"))):
        grade, sep, gain = part.partition(":")
        try:
            g, v = int(grade), float(gain)
        except ValueError:
            raise InputError(f"metric {whole!r}: gains entry {part!r} should read grade:gain, e.g. 2:9") from None
        if not sep or g in pairs or v != v:
            raise InputError(f"metric {whole!r}: gains entry {part!r} is repeated or not grade:gain")
        pairs[g] = v
    if not pairs:
        raise InputError(f"metric {whole!r}: gains= is empty")
    return ";".join(f"{g}:{_number(v)}" for g, v in sorted(pairs.items()))


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


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
