"""Conventions: every choice that changes a metric's value without changing its name, decided once and shown.

Two presets: ``"default"`` (what a RAG evaluation wants) and ``"trec_eval"`` (reproduces trec_eval exactly; its
``-c``, ``-M N``, ``-l N`` and ``-J`` flags map to ``missing_run="zero"``, ``max_depth=N``,
``relevance_threshold=N`` and ``unjudged="remove"``).

Every field is checked when a Conventions is made: an int field takes an int (or a NumPy integer) and nothing
else, so ``max_depth=True``, ``2.5``, ``2.0`` or ``"5"`` is an :class:`~rag_eval.errors.InputError` naming the field,
never read as 1, 2 or 5; ``max_depth`` is at most :data:`~rag_eval.metrics.grammar.MAX_CUTOFF` (10^9) and
``relevance_threshold`` below the grade limit (2^29). A frozen dataclass, not a pydantic model (``rag-eval evaluate``
starts without pydantic, issue 28): the same checks and messages; ``model_dump`` and ``model_dump_json`` as before.
"""

from __future__ import annotations

import json
import numbers
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Literal

from .._checks import check_choice
from ..errors import InputError
from .grammar import GRADE_LIMIT, MAX_CUTOFF

__all__ = ["PRESETS", "TREC_EVAL_FLAGS", "Conventions", "follows_trec_eval", "resolve_conventions"]

# what each field takes: its choices (a str field), or its bounds (an int field: (ge, lt, le, None allowed))
_CHOICES: dict[str, tuple[str, ...]] = {
    "ties": ("trec_eval", "doc_id", "input_order"),
    "gain": ("exp", "linear"),
    "no_relevant": ("zero", "skip"),
    "missing_run": ("zero", "skip"),
    "unjudged": ("keep", "remove"),
    "negative_grades": ("nonrelevant", "unjudged"),
    "failed": ("zero", "exclude"),
}
_BOUNDS: dict[str, tuple[int, int | None, int | None, bool]] = {
    "relevance_threshold": (1, GRADE_LIMIT, None, False),
    "max_depth": (1, None, MAX_CUTOFF, True),
}


@dataclass(frozen=True, init=False)
class Conventions:
    """How metric values are decided where the metric's name leaves it open. Every field has a default."""

    ties: Literal["trec_eval", "doc_id", "input_order"] = "trec_eval"
    """How results with equal scores are ordered in a run ranked by score: 'trec_eval' = doc id descending as
    strings (trec_eval, pytrec_eval, ir_measures), 'doc_id' = ascending, 'input_order' = as given. A run built from
    a given order is never re-sorted."""
    relevance_threshold: int = 1
    """Lowest grade that counts as relevant for the binary metrics (trec_eval -l)."""
    gain: Literal["exp", "linear"] = "exp"
    """nDCG gain of a grade g > 0: 'exp' = 2^g - 1, 'linear' = g (trec_eval)."""
    no_relevant: Literal["zero", "skip"] = "zero"
    """A query with judgements but no relevant document: 'zero' = counted (recall-like metrics score 0, as
    trec_eval does), 'skip' = left out of every metric and listed in the card."""
    missing_run: Literal["zero", "skip"] = "zero"
    """A query in the qrels that the run has no results for: 'zero' = counted as an empty ranking (trec_eval -c),
    'skip' = left out and listed in the card (trec_eval without -c)."""
    unjudged: Literal["keep", "remove"] = "keep"
    """Unjudged results: 'keep' = non-relevant where they stand, 'remove' = dropped before measuring, a condensed
    list (trec_eval -J)."""
    negative_grades: Literal["nonrelevant", "unjudged"] = "nonrelevant"
    """A grade below 0: 'nonrelevant' = judged non-relevant, like 0; 'unjudged' = in the pool but not judged
    (trec_eval: skipped by bpref, removed by -J)."""
    failed: Literal["zero", "exclude"] = "zero"
    """A query a pipeline stage failed on: 'zero' = measured as an empty ranking, 'exclude' = left out; either way
    every summary row of a pipeline report shows n_failed."""
    max_depth: int | None = None
    """Only the top N of each ranking are evaluated, after ranking (trec_eval -M N)."""

    # pydantic's reading of it (the card's JSON schema): each field's docstring its description, no other field
    __pydantic_config__: ClassVar[dict[str, Any]] = {"use_attribute_docstrings": True, "extra": "forbid"}

    def __init__(self, **given: Any) -> None:
        for name in _FIELDS:  # in the fields' order: the first problem said is that of the first field
            value = _checked(name, given[name]) if name in given else getattr(type(self), name)
            object.__setattr__(self, name, value)
        unknown = [name for name in given if name not in _FIELDS]
        if unknown:
            raise InputError(f"Conventions: unknown field {unknown[0]!r} (fields: {', '.join(_FIELDS)})")

    def __str__(self) -> str:
        return " ".join(f"{name}={value!r}" for name, value in self.model_dump().items())

    def replace(self, **changes: object) -> Conventions:
        """A copy with some fields changed (validated)."""
        return Conventions(**(self.model_dump() | changes))

    def model_dump(self, *, mode: str = "python") -> dict[str, Any]:
        """The fields as a dict, in order (``mode``: "python" or "json", the same here: every value is a str, an
        int or None), as pydantic's ``model_dump``."""
        return {name: getattr(self, name) for name in _FIELDS}

    def model_dump_json(self) -> str:
        """The fields as compact JSON, as pydantic's ``model_dump_json``."""
        return json.dumps(self.model_dump(), separators=(",", ":"))

    @classmethod
    def preset(cls, name: str) -> Conventions:
        """The preset of that name: ``"default"`` or ``"trec_eval"``."""
        return PRESETS[check_choice(name, "conventions preset", sorted(PRESETS))]

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """A field of a pydantic model (the metric card): read from a dict of fields (or a Conventions), written
        as that dict."""
        from pydantic_core import core_schema

        return core_schema.no_info_before_validator_function(  # made here, then passed as the instance it is
            _from_fields,
            handler(source),  # its fields as pydantic reads a dataclass: the card's JSON schema
            serialization=core_schema.plain_serializer_function_ser_schema(lambda c: c.model_dump()),
        )


_FIELDS = tuple(f.name for f in fields(Conventions))


def _from_fields(value: Any) -> Conventions:
    if isinstance(value, Conventions):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"Conventions: expected a dict of fields, not {type(value).__name__}")
    return Conventions(**value)


def _checked(name: str, value: Any) -> Any:
    """A field's value, checked as the pydantic model did (the same words), or an InputError naming the field."""
    if name in _CHOICES:
        choices = _CHOICES[name]
        if not isinstance(value, str) or value not in choices:
            quoted = [repr(c) for c in choices]
            shown = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
            raise InputError(f"Conventions: {name}={value!r}: Input should be {shown}")
        return choices[choices.index(value)]  # a str subclass comes out a str
    ge, lt, le, optional = _BOUNDS[name]
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"Conventions: {name}={value!r}: expected an int, not {type(value).__name__} {value!r}")
    number = int(value)
    if number < ge:
        raise InputError(f"Conventions: {name}={value!r}: Input should be greater than or equal to {ge}")
    if lt is not None and number >= lt:
        raise InputError(f"Conventions: {name}={value!r}: Input should be less than {lt}")
    if le is not None and number > le:
        raise InputError(f"Conventions: {name}={value!r}: Input should be less than or equal to {le}")
    return number


PRESETS: dict[str, Conventions] = {
    "default": Conventions(),
    "trec_eval": Conventions(gain="linear", missing_run="skip", negative_grades="unjudged"),
}


def resolve_conventions(conventions: Conventions | str) -> Conventions:
    """A Conventions object, or the preset of that name."""
    if isinstance(conventions, Conventions):
        return conventions
    if isinstance(conventions, str) and conventions in PRESETS:
        return Conventions.preset(conventions)
    raise ValueError(f"conventions must be a Conventions object or one of {sorted(PRESETS)}, not {conventions!r}")


TREC_EVAL_FLAGS = ("missing_run", "max_depth", "relevance_threshold", "unjudged")  # trec_eval's -c, -M, -l, -J


def follows_trec_eval(conventions: Conventions) -> bool:
    """Whether ``conventions`` are the ``trec_eval`` preset, with any of trec_eval's flags (``-c``, ``-M``,
    ``-l``, ``-J``: the fields :data:`TREC_EVAL_FLAGS`) set as one likes: numbers are then computed in
    trec_eval's order of operations (a mean is the values added one by one in query order, then divided)."""
    preset = PRESETS["trec_eval"].model_dump()
    given = conventions.model_dump()
    return all(given[key] == value for key, value in preset.items() if key not in TREC_EVAL_FLAGS)
