"""Answer grades against reference answers: exact match and token F1 as the SQuAD v1.1 evaluation script defines
them (its normalisation: lower case, punctuation, the articles a/an/the and extra whitespace removed; several
references: the best), and answer containment. Rajpurkar et al. 2016, "SQuAD: 100,000+ Questions for Machine
Comprehension of Text", the script ``evaluate-v1.1.py``. See docs/answers.md.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..errors import InputError

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ANSWER_COLUMNS",
    "ANSWER_METRICS",
    "AnswerGrades",
    "contains_answer",
    "exact_match",
    "grade_answers",
    "normalize_answer",
    "token_f1",
]

#: the columns of a generator's answers, one row per query (:meth:`rag_eval.stages.generator.Answers.to_frame`; a
#: report's answer table, :data:`rag_eval.reports.answered.ANSWER_TABLE_COLUMNS`, is built from them)
ANSWER_COLUMNS = (
    "query_id",
    "answer",
    "error",
    "skipped",
    "cached",
    "latency",
    "tokens_in",
    "tokens_out",
    "n_context",
    "context_ids",
)

#: the grades :func:`grade_answers` gives, in the order of its columns
ANSWER_METRICS = ("exact_match", "f1", "contains")

_PUNCTUATION = str.maketrans("", "", string.punctuation)  # the script's set(string.punctuation), ASCII only
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD v1.1's normalisation: lower case, ASCII punctuation removed, the words a/an/the removed, whitespace
    runs made one space and the ends stripped (the script's order: lower, punctuation, articles, whitespace)."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def _references(references: str | Sequence[str]) -> Sequence[str]:
    refs = [references] if isinstance(references, str) else references
    if not refs:
        raise InputError("no reference answer to grade against (at least one is needed)")
    return refs


def exact_match(prediction: str, references: str | Sequence[str]) -> float:
    """1.0 when the normalised prediction equals a normalised reference, else 0.0 (SQuAD v1.1)."""
    answer = normalize_answer(prediction)
    return float(any(answer == normalize_answer(r) for r in _references(references)))


def _f1(prediction: list[str], reference: list[str]) -> float:
    same = sum((Counter(prediction) & Counter(reference)).values())
    if same == 0:
        return 0.0  # v1.1: also when both are empty (v2.0 gives 1.0 there)
    precision, recall = same / len(prediction), same / len(reference)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, references: str | Sequence[str]) -> float:
    """The best over references of the harmonic mean of token precision and recall, tokens being the normalised
    text split at whitespace and counted with repeats (SQuAD v1.1; 0.0 when no token is shared)."""
    tokens = normalize_answer(prediction).split()
    return max(_f1(tokens, normalize_answer(r).split()) for r in _references(references))


def contains_answer(prediction: str, references: str | Sequence[str]) -> float:
    """1.0 when a normalised reference occurs in the normalised prediction as whole tokens ("in 1847" contains
    "1847"; "category" does not contain "cat"), else 0.0. A reference that normalises to nothing ("the") is
    contained in no answer."""
    padded = f" {normalize_answer(prediction)} "
    for reference in _references(references):
        wanted = normalize_answer(reference)
        if wanted and f" {wanted} " in padded:
            return 1.0
    return 0.0


@dataclass(frozen=True)
class AnswerGrades:
    """The grades of each query's answer, in ``query_ids`` order: :data:`ANSWER_METRICS` as float arrays, NaN where
    the answer is missing (the generator failed on that query: counted in ``failed``, never graded as wrong)."""

    query_ids: tuple[str, ...]
    exact_match: npt.NDArray[np.float64]
    f1: npt.NDArray[np.float64]
    contains: npt.NDArray[np.float64]

    @property
    def failed(self) -> int:
        """How many queries have no answer to grade (NaN)."""
        return int(np.isnan(self.f1).sum())

    def mean(self) -> dict[str, float]:
        """Each grade's mean over the answered queries (NaN left out; NaN when none is answered)."""
        n = len(self.query_ids) - self.failed
        return {m: float(np.nanmean(getattr(self, m))) if n else math.nan for m in ANSWER_METRICS}

    def to_frame(self) -> pd.DataFrame:
        """One row per query: ``query_id, exact_match, f1, contains``."""
        import pandas as pd

        return pd.DataFrame({"query_id": list(self.query_ids), **{m: getattr(self, m) for m in ANSWER_METRICS}})

    def __len__(self) -> int:
        return len(self.query_ids)


def grade_answers(answers: Mapping[str, str | None], references: Mapping[str, str | Sequence[str]]) -> AnswerGrades:
    """Grade each answer of ``answers`` (``{query_id: text}``; None: no answer, graded NaN) against its query's
    ``references`` (a :class:`~rag_eval.data.answers.ReferenceAnswers` or ``{query_id: answers}``). An answered
    query without a reference is an InputError naming it (and how many more): it would otherwise vanish from the
    mean."""
    if not isinstance(answers, Mapping) or not isinstance(references, Mapping):
        raise TypeError("answers and references must be mappings by query id")
    missing = [q for q in answers if q not in references]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise InputError(
            f"query {missing[0]!r}{more} has an answer but no reference answer: give references for every query "
            "graded (or leave those queries out)",
            source="grade_answers",
        )
    ids = tuple(answers)
    out = np.full((3, len(ids)), np.nan)
    for i, qid in enumerate(ids):
        text = answers[qid]
        if text is None:
            continue
        if not isinstance(text, str):
            raise InputError(f"query {qid!r}: an answer must be a str or None, not {type(text).__name__}")
        refs = _references(references[qid])
        answer = normalize_answer(text)
        normal = [normalize_answer(r) for r in refs]
        tokens = answer.split()
        padded = f" {answer} "
        out[0, i] = float(any(answer == r for r in normal))
        out[1, i] = max(_f1(tokens, r.split()) for r in normal)
        out[2, i] = float(any(r and f" {r} " in padded for r in normal))
    return AnswerGrades(ids, out[0], out[1], out[2])
