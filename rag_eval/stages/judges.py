"""Judges: a model (or a function) that grades (query, chunk) pairs on the pool's scale, in batches, with a
fingerprint like a stage's.

The :class:`Judge` protocol, the UMBRELA prompt and its strict parsing (:func:`parse_grade`): ``docs/judges.md``,
"The protocol" and "The prompt". A failure is that item's, never a guess and never a grade.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import string
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..errors import InputError

__all__ = [
    "DEFAULT_SCALE",
    "PARSER_VERSION",
    "UMBRELA_PROMPT",
    "BaseJudge",
    "Judge",
    "JudgeGrade",
    "JudgeItem",
    "check_prompt",
    "check_scale",
    "parse_grade",
    "prompt_hash",
    "render_prompt",
    "scale_meanings",
]

DEFAULT_SCALE = (0, 3)
PARSER_VERSION = 1  # the rules of parse_grade: in the fingerprint of every prompted judge
_QUOTE_LIMIT = 200  # characters of a malformed answer quoted in its error

#: The grading prompt of the model judges: UMBRELA's (Upadhyay et al. 2024, "UMBRELA: UMbrela is the (Open-Source
#: Reproduction of the) Bing RELevance Assessor"), which reproduces the prompt of Thomas et al. 2023 ("Large
#: language models can accurately predict searcher preferences"). ``{low}``, ``{high}`` and ``{meanings}`` adapt it
#: to the scale asked (:func:`scale_meanings`); on 0..3 it reads as UMBRELA's own.
UMBRELA_PROMPT = """\
Given a query and a passage, you must provide a score on an integer scale of {low} to {high} with the following \
meanings:
{meanings}

Query: {query}
Passage: {passage}

Split this problem into steps:
Consider the underlying intent of the search.
Measure how well the content matches a likely intent of the query (M).
Measure how trustworthy the passage is (T).
Consider the aspects above and the relative importance of each, and decide on a final score (O). Final score must \
be an integer value only.
Do not provide any code in result. Provide each score in the format of: ##final score: score without providing any \
reasoning."""

_UMBRELA_MEANINGS = """\
0 = represent that the passage has nothing to do with the query,
1 = represents that the passage seems related to the query but does not answer it,
2 = represents that the passage has some answer for the query, but the answer may be a bit unclear, or hidden \
amongst extraneous information and
3 = represents that the passage is dedicated to the query and contains the exact answer.

Important Instruction: Assign category 1 if the passage is somewhat related to the topic but not completely, \
category 2 if passage presents something very important related to the entire topic but also has some extra \
information and category 3 if the passage only and entirely refers to the topic. If none of the above satisfies \
give it category 0."""

_FIELDS = frozenset({"query", "passage", "low", "high", "meanings"})
_FINAL = re.compile(r"#*\s*final\s+score\s*[:=]\s*\**\s*([+-]?\d+(?:\.\d+)?)(?![\d.])", re.IGNORECASE)
_LONE = re.compile(r"\s*\**\s*([+-]?\d+)\s*\**\s*")


@dataclass(frozen=True)
class JudgeItem:
    """One pair to grade: the ids (for the log, and for a judge that knows some items, as the built-in does) and
    the texts the judge reads."""

    query_id: str
    doc_id: str
    query: str
    text: str

    def __post_init__(self) -> None:
        for field in ("query_id", "doc_id", "query", "text"):
            if not isinstance(getattr(self, field), str):
                raise InputError(f"JudgeItem.{field} must be a str, not {type(getattr(self, field)).__name__}")


@dataclass(frozen=True)
class JudgeGrade:
    """A judge's answer for one item: exactly one of ``grade`` (an int on the scale) and ``error`` (why there is
    none: the answer quoted, a timeout, an exception); ``confidence`` in [0, 1] where the judge gives one."""

    grade: int | None = None
    confidence: float | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        if (self.grade is None) == (self.error is None):
            raise InputError(
                f"a JudgeGrade holds exactly one of grade and error, not {self.grade!r} and {self.error!r}"
            )
        if self.grade is not None and (isinstance(self.grade, bool) or not isinstance(self.grade, int)):
            raise InputError(f"a JudgeGrade's grade must be an int, not {self.grade!r}")
        if self.error is not None and (not isinstance(self.error, str) or not self.error.strip()):
            raise InputError(f"a JudgeGrade's error must be a non-empty str, not {self.error!r}")
        if self.confidence is not None:
            c = self.confidence
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0.0 <= c <= 1.0:
                raise InputError(f"a JudgeGrade's confidence must be a number in [0, 1] or None, not {c!r}")
            object.__setattr__(self, "confidence", float(c))

    @classmethod
    def failed(cls, error: str | BaseException) -> JudgeGrade:
        """The failure of one item: a message, or the exception it met (``TypeName: message``)."""
        if isinstance(error, BaseException):
            error = f"{type(error).__name__}: {error}".rstrip(": ") or type(error).__name__
        return cls(error=error)

    @property
    def ok(self) -> bool:
        return self.error is None


@runtime_checkable
class Judge(Protocol):
    """What the judging run needs of a judge. ``fingerprint``: a stable string that changes when its grades would
    (model and parameters, prompt, code); ``grade``: one :class:`JudgeGrade` per item, in order, sync and batched.
    An ``async def agrade(items, *, scale)`` with the same contract is used where present (``concurrency`` > 1)."""

    @property
    def name(self) -> str: ...

    @property
    def fingerprint(self) -> str: ...

    def grade(self, items: Sequence[JudgeItem], *, scale: tuple[int, int]) -> list[JudgeGrade]: ...


class BaseJudge(ABC):
    """What rag_eval's judges share: a checked name, a fingerprint like a stage's (a hash of the class, the
    ``version`` when given and :meth:`config`), read once (at the first use of :attr:`fingerprint`, which each
    judge's constructor makes), and a default ``agrade`` that runs ``grade`` on a thread."""

    #: in words: what the judge is and how far it can be trusted (shown by the judging run and the docs)
    description = "a judge"

    def __init__(self, name: str, *, version: str | None = None) -> None:
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise InputError(f"a judge needs a non-empty name without surrounding spaces, not {name!r}")
        if version is not None and (not isinstance(version, str) or not version.strip()):
            raise InputError(f"judge {name!r}: version must be a non-empty str or None, not {version!r}")
        self.name = name
        self.version = version
        self._fingerprint: str | None = None

    def config(self) -> dict[str, Any]:
        """What identifies this judge's grades besides its class and version (JSON-serialisable)."""
        return {}

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            identity = {
                "class": f"{type(self).__module__}.{type(self).__qualname__}",
                "version": self.version,
                "config": self.config(),
            }
            text = json.dumps(identity, sort_keys=True, default=str)
            self._fingerprint = hashlib.sha256(text.encode()).hexdigest()[:20]
        return self._fingerprint

    @abstractmethod
    def grade(self, items: Sequence[JudgeItem], *, scale: tuple[int, int] = DEFAULT_SCALE) -> list[JudgeGrade]: ...

    async def agrade(self, items: Sequence[JudgeItem], *, scale: tuple[int, int] = DEFAULT_SCALE) -> list[JudgeGrade]:
        """The async twin of :meth:`grade` (by default, :meth:`grade` on a thread)."""
        return await asyncio.to_thread(self.grade, items, scale=scale)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, fingerprint={self.fingerprint!r})"


# ----- scales and prompts -------------------------------------------------------------------------------------


def check_scale(scale: object) -> tuple[int, int]:
    """A grading scale: two ints ``(low, high)`` with ``low < high`` (no bool)."""
    if (
        not isinstance(scale, (tuple, list))
        or len(scale) != 2
        or any(isinstance(v, bool) or not isinstance(v, int) for v in scale)
        or not scale[0] < scale[1]
    ):
        raise InputError(f"scale {scale!r}: expected two ints (lowest, highest grade) with lowest < highest")
    return (scale[0], scale[1])


def scale_meanings(scale: tuple[int, int]) -> str:
    """What each grade of ``scale`` means, as the prompt says it: UMBRELA's four lines on 0..3; on a two-grade
    scale, not relevant / relevant; on another, its ends described as UMBRELA's 0 and 3 and the grades between
    them as steps of how fully and directly the passage answers."""
    low, high = check_scale(scale)
    if (low, high) == (0, 3):
        return _UMBRELA_MEANINGS
    if high - low == 1:
        return (
            f"{low} = represents that the passage does not answer the query (it has nothing to do with it, or is "
            f"only related to it),\n{high} = represents that the passage contains an answer for the query."
        )
    return (
        f"{low} = represents that the passage has nothing to do with the query,\n"
        f"{high} = represents that the passage is dedicated to the query and contains the exact answer;\n"
        f"the grades between {low} and {high} mean, the higher the grade, that the passage answers the query more "
        f"fully and more directly (a passage related to the query that does not answer it is graded {low + 1})."
    )


def check_prompt(prompt: str, where: str) -> str:
    """A prompt template: a str whose fields are ``{query}`` and ``{passage}`` (both required) and optionally
    ``{low}``, ``{high}``, ``{meanings}``; literal braces doubled (``{{``), as ``str.format`` reads them."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise InputError(f"{where}: the prompt must be a non-empty str (a template with {{query}} and {{passage}})")
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(prompt) if f is not None}
    except ValueError as exc:
        raise InputError(
            f"{where}: the prompt is not a valid template ({exc}); double literal braces: {{{{ }}}}"
        ) from None
    unknown = sorted(fields - _FIELDS)
    if unknown:
        raise InputError(f"{where}: the prompt names {unknown}: its fields are {sorted(_FIELDS)}")
    missing = sorted({"query", "passage"} - fields)
    if missing:
        raise InputError(
            f"{where}: the prompt has no {', '.join('{' + m + '}' for m in missing)}: the judge would not see it"
        )
    return prompt


def render_prompt(prompt: str, item: JudgeItem, scale: tuple[int, int]) -> str:
    """The prompt for one item (the texts inserted as they are: braces in them are not read as fields)."""
    low, high = scale
    return prompt.format(query=item.query, passage=item.text, low=low, high=high, meanings=scale_meanings(scale))


def prompt_hash(prompt: str) -> str:
    """What a judge's fingerprint records of its prompt."""
    return hashlib.sha256(prompt.encode()).hexdigest()[:16]


def _quoted(answer: str) -> str:
    return repr(answer if len(answer) <= _QUOTE_LIMIT else answer[:_QUOTE_LIMIT] + "...")


def parse_grade(answer: object, scale: tuple[int, int] = DEFAULT_SCALE) -> int:
    """The grade in a model's answer, strictly: the integer of ``##final score: N`` (hashes optional, any case,
    ``:`` or ``=``; when the answer holds several, they must agree), or, without one, an answer that is a lone
    integer (spaces and Markdown bold around it allowed). Anything else, a fraction, or a grade off ``scale`` is an
    :class:`~rag_eval.errors.InputError` quoting the answer: never a guess."""
    low, high = check_scale(scale)
    if not isinstance(answer, str):
        raise InputError(f"the answer is a {type(answer).__name__}, not text: {answer!r:.{_QUOTE_LIMIT}}")
    found = _FINAL.findall(answer)
    if found:
        values = set(found)
        if any("." in v for v in values):
            raise InputError(f"the final score is not an integer: {_quoted(answer)}")
        grades = {int(v) for v in values}
        if len(grades) > 1:
            raise InputError(f"the answer gives several final scores {sorted(grades)}: {_quoted(answer)}")
        grade = grades.pop()
    else:
        lone = _LONE.fullmatch(answer)
        if lone is None:
            raise InputError(f"no '##final score: N' and not a lone integer in the answer: {_quoted(answer)}")
        grade = int(lone.group(1))
    if not low <= grade <= high:
        raise InputError(f"grade {grade} is off the scale {low}..{high}: {_quoted(answer)}")
    return grade


def without_secrets(description: Any) -> Any:
    """A description (``adapters._common.describe``) without the fields that hold credentials (a name holding
    key, token, secret or password): they change no grade, and a fingerprint is no place for them."""
    if isinstance(description, Mapping):
        return {
            k: without_secrets(v)
            for k, v in description.items()
            if not any(word in str(k).lower() for word in ("key", "token", "secret", "password"))
            or str(k) in ("max_tokens", "max_new_tokens", "num_output", "top_k", "max_completion_tokens")
        }
    if isinstance(description, list):
        return [without_secrets(v) for v in description]
    return description
