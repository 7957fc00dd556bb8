"""Conventions: every choice that changes a metric's value without changing its name, decided once and shown.

Two presets: ``"default"`` (what a RAG evaluation wants) and ``"trec_eval"`` (reproduces trec_eval exactly; its
``-c``, ``-M N``, ``-l N`` and ``-J`` flags map to ``missing_run="zero"``, ``max_depth=N``,
``relevance_threshold=N`` and ``unjudged="remove"``).

Every field is checked when a Conventions is made: an int field takes an int (or a NumPy integer) and nothing
else, so ``max_depth=True``, ``2.5``, ``2.0`` or ``"5"`` is an :class:`~rag_eval.errors.InputError` naming the field,
never read as 1, 2 or 5; ``max_depth`` is at most :data:`~rag_eval.metrics.grammar.MAX_CUTOFF` (10^9) and
``relevance_threshold`` below the grade limit (2^29).
"""

from __future__ import annotations

import numbers
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from .._checks import check_choice
from ..errors import InputError
from .grammar import GRADE_LIMIT, MAX_CUTOFF


def _an_int(value: Any) -> Any:
    """An int field's value: an int or a NumPy integer (as int), never a bool, a float or a numeric string."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"expected an int, not {type(value).__name__} {value!r}")
    return int(value)


StrictInt = Annotated[int, BeforeValidator(_an_int)]


__all__ = ["PRESETS", "TREC_EVAL_FLAGS", "Conventions", "follows_trec_eval", "resolve_conventions"]


class Conventions(BaseModel):
    """How metric values are decided where the metric's name leaves it open. Every field has a default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ties: Literal["trec_eval", "doc_id", "input_order"] = Field(
        "trec_eval",
        description="How results with equal scores are ordered in a run ranked by score: 'trec_eval' = doc id "
        "descending as strings (trec_eval, pytrec_eval, ir_measures), 'doc_id' = ascending, 'input_order' = as "
        "given. A run built from a given order is never re-sorted.",
    )
    relevance_threshold: StrictInt = Field(
        1,
        ge=1,
        lt=GRADE_LIMIT,
        description="Lowest grade that counts as relevant for the binary metrics (trec_eval -l).",
    )
    gain: Literal["exp", "linear"] = Field(
        "exp", description="nDCG gain of a grade g > 0: 'exp' = 2^g - 1, 'linear' = g (trec_eval)."
    )
    no_relevant: Literal["zero", "skip"] = Field(
        "zero",
        description="A query with judgements but no relevant document: 'zero' = counted (recall-like metrics "
        "score 0, as trec_eval does), 'skip' = left out of every metric and listed in the card.",
    )
    missing_run: Literal["zero", "skip"] = Field(
        "zero",
        description="A query in the qrels that the run has no results for: 'zero' = counted as an empty ranking "
        "(trec_eval -c), 'skip' = left out and listed in the card (trec_eval without -c).",
    )
    unjudged: Literal["keep", "remove"] = Field(
        "keep",
        description="Unjudged results: 'keep' = non-relevant where they stand, 'remove' = dropped before "
        "measuring, a condensed list (trec_eval -J).",
    )
    negative_grades: Literal["nonrelevant", "unjudged"] = Field(
        "nonrelevant",
        description="A grade below 0: 'nonrelevant' = judged non-relevant, like 0; 'unjudged' = in the pool but "
        "not judged (trec_eval: skipped by bpref, removed by -J).",
    )
    failed: Literal["zero", "exclude"] = Field(
        "zero",
        description="A query a pipeline stage failed on: 'zero' = measured as an empty ranking, 'exclude' = left "
        "out; either way every summary row of a pipeline report shows n_failed.",
    )
    max_depth: StrictInt | None = Field(
        None,
        ge=1,
        le=MAX_CUTOFF,
        description="Only the top N of each ranking are evaluated, after ranking (trec_eval -M N).",
    )

    def __init__(self, **fields: Any) -> None:
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            raise InputError(_describe(exc, fields)) from None

    def replace(self, **changes: object) -> Conventions:
        """A copy with some fields changed (validated)."""
        return Conventions(**(self.model_dump() | changes))

    @classmethod
    def preset(cls, name: str) -> Conventions:
        """The preset of that name: ``"default"`` or ``"trec_eval"``."""
        return PRESETS[check_choice(name, "conventions preset", sorted(PRESETS))]


PRESETS: dict[str, Conventions] = {
    "default": Conventions(),
    "trec_eval": Conventions(gain="linear", missing_run="skip", negative_grades="unjudged"),
}


def _describe(exc: ValidationError, fields: dict[str, Any]) -> str:
    """The first problem of a ValidationError as one sentence naming the field and the value given."""
    error = exc.errors(include_url=False)[0]
    name = ".".join(str(part) for part in error["loc"]) or "conventions"
    given = fields.get(name, error.get("input"))
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return f"Conventions: unknown field {name!r} (fields: {', '.join(Conventions.model_fields)})"
    return f"Conventions: {name}={given!r}: {message}"


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
