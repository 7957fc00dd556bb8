"""A judge as an answer grader: any :class:`~rag_eval.stages.judges.Judge` of the judges feature grades each
query's answer, reading the question as the item's query and, as its passage, the answer with what it is judged
against (the reference answers, the delivered context, or both), in the judge's batches.

A judge is only trusted with its agreement measured: :func:`rag_eval.statistics.grader_agreement` sets its verdicts
beside the reference-based grades of the same queries (docs/answers.md, "A judge as grader").
"""

from __future__ import annotations

import hashlib
import math
import os
import string
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from .._checks import check_int
from ..data.joins import user_stacklevel
from ..errors import FailingJudge, InputError
from ..stages.judges import Judge, JudgeGrade, JudgeItem, check_scale
from .judgement_log import JudgementLog
from .judging import FAILING_SHARE, _description, _identity, _stored, grade_batches

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ANSWER_PROMPT", "JudgedAnswers", "answer_items", "judge_answers"]

#: A prompt for the model judges (``langchain.judge(model, prompt=ANSWER_PROMPT)``): the item's ``{query}`` is the
#: question and its ``{passage}`` the answer with what it is judged against; the grade is read as UMBRELA's is.
ANSWER_PROMPT = """\
Given a question and a proposed answer, with the reference answers or the context the answer should be judged \
against, you must provide a score on an integer scale of {low} to {high}: {low} means the proposed answer is wrong \
or does not answer the question, {high} means it answers the question correctly (it says what a reference answer \
says, or what the context supports, in any wording); a score between them means partly correct.

Question: {query}
{passage}

Provide the score in the format of: ##final score: score without providing any reasoning."""

_FIELDS = frozenset({"answer", "references", "context"})


def _passage_template(references: bool, contexts: bool) -> str:
    parts = ["Proposed answer: {answer}"]
    if references:
        parts.append("Reference answers: {references}")
    if contexts:
        parts.append("Context:\n{context}")
    return "\n".join(parts)


def answer_id(question: str, passage: str) -> str:
    """The doc id of an answer's item: ``answer-`` and a hash of what the judge reads (another answer, reference or
    context, another item: a verdict in a judgement log is reused only for the same question and passage)."""
    return "answer-" + hashlib.sha256(f"{question}\0{passage}".encode()).hexdigest()[:16]


def _texts(answers: Mapping[str, object]) -> dict[str, str | None]:
    texts = getattr(answers, "texts", None)  # an Answers of rag_eval.stages.generator: its texts, None where failed
    found: Mapping[str, object] = texts if isinstance(texts, Mapping) else answers
    out: dict[str, str | None] = {}
    for qid, text in found.items():
        if text is not None and not isinstance(text, str):
            raise InputError(f"query {qid!r}: an answer must be a str or None, not {type(text).__name__}")
        out[str(qid)] = text
    return out


def answer_items(
    answers: Mapping[str, object],
    questions: Mapping[str, str],
    *,
    references: Mapping[str, str | Sequence[str]] | None = None,
    contexts: Mapping[str, str | Sequence[str]] | None = None,
    passage: str | None = None,
) -> tuple[list[JudgeItem], tuple[str, ...]]:
    """The judge's items of the answered queries (``query`` the question, ``text`` the ``passage`` template
    filled with ``{answer}``, ``{references}`` (joined by `` | ``) and ``{context}`` (chunks numbered ``[1]``,
    blank lines between)), and the ids of the queries without an answer (None: not asked). A query without a
    question, or without the references or context the template shows: an InputError naming it, before any call."""
    texts = _texts(answers)
    if passage is None:
        passage = _passage_template(references is not None, contexts is not None)
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(passage) if f is not None}
    except ValueError as exc:
        raise InputError(f"passage template {passage!r}: {exc}; double literal braces") from None
    if "answer" not in fields or not fields <= _FIELDS:
        raise InputError(f"passage template {passage!r}: needs {{answer}}; its fields are {sorted(_FIELDS)}")
    answered = [q for q, t in texts.items() if t is not None]
    needs: list[tuple[str, Mapping[str, object]]] = [("question", questions)]
    for name, given, argument in (("references", references, "references"), ("context", contexts, "contexts")):
        if name in fields:
            if given is None:
                raise InputError(f"the passage template shows {{{name}}}: give {argument}=")
            needs.append((name, given))
    for what, mapping in needs:
        lacking = [q for q in answered if q not in mapping]
        if lacking:
            more = f" and {len(lacking) - 1} more" if len(lacking) > 1 else ""
            raise InputError(f"query {lacking[0]!r}{more} has an answer but no {what}", source="judge_answers")
    items = []
    for qid in answered:
        text = texts[qid]
        assert text is not None
        values = {"answer": text, "references": "", "context": ""}
        if "references" in fields and references is not None:
            refs = references[qid]
            values["references"] = refs if isinstance(refs, str) else " | ".join(refs)
        if "context" in fields and contexts is not None:
            chunks = contexts[qid]
            values["context"] = (
                chunks if isinstance(chunks, str) else "\n\n".join(f"[{i}] {c}" for i, c in enumerate(chunks, 1))
            )
        question, shown = str(questions[qid]), passage.format(**values)
        items.append(JudgeItem(qid, answer_id(question, shown), question, shown))
    return items, tuple(q for q, t in texts.items() if t is None)


@dataclass(frozen=True, eq=False)
class JudgedAnswers:
    """A judge's verdicts on answers, in ``query_ids`` order: ``grades`` (on ``scale``; NaN where the query had no
    answer to judge, in ``unanswered``, or the judge failed on it, in ``errors``), correct where the grade is at
    least ``correct_at``. ``calls``: the judge's ``grade``/``agrade`` calls made; ``from_log``: verdicts reused from
    the judgement log."""

    judge: str
    fingerprint: str
    scale: tuple[int, int]
    correct_at: int
    query_ids: tuple[str, ...] = field(repr=False)
    grades: npt.NDArray[np.float64] = field(repr=False)
    errors: Mapping[str, str] = field(repr=False)
    unanswered: tuple[str, ...] = field(repr=False)
    calls: int = 0
    from_log: int = 0
    description: str | None = None

    @property
    def correct(self) -> npt.NDArray[np.float64]:
        """1.0 where the judge's grade is at least ``correct_at``, 0.0 below, NaN where there is no grade."""
        return np.where(np.isnan(self.grades), np.nan, (self.grades >= self.correct_at).astype(np.float64))

    @property
    def failed(self) -> int:
        """Answers the judge failed on (each kept in :attr:`errors`, never a verdict)."""
        return len(self.errors)

    @property
    def accuracy(self) -> float:
        """The share of the judged answers the judge calls correct (NaN when none was judged)."""
        correct = self.correct
        judged = ~np.isnan(correct)
        return float(correct[judged].mean()) if judged.any() else math.nan

    def to_frame(self) -> pd.DataFrame:
        """One row per query: ``query_id, judge_grade, judge_correct, judge_error``."""
        import pandas as pd

        return pd.DataFrame(
            {
                "query_id": list(self.query_ids),
                "judge_grade": self.grades,
                "judge_correct": self.correct,
                "judge_error": [self.errors.get(q) for q in self.query_ids],
            }
        )

    def __len__(self) -> int:
        return len(self.query_ids)


def judge_answers(
    judge: Judge,
    answers: Mapping[str, object],
    questions: Mapping[str, str],
    *,
    references: Mapping[str, str | Sequence[str]] | None = None,
    contexts: Mapping[str, str | Sequence[str]] | None = None,
    passage: str | None = None,
    scale: tuple[int, int] = (0, 1),
    correct_at: int | None = None,
    batch_size: int = 16,
    concurrency: int = 1,
    log: JudgementLog | str | os.PathLike[str] | None = None,
) -> JudgedAnswers:
    """Grade each answer of ``answers`` (an :class:`~rag_eval.stages.generator.Answers` or ``{query_id: text}``,
    None: no answer, not asked) with ``judge`` on ``scale``, batched as a judging run is (see :func:`answer_items`
    for what the judge reads). ``correct_at``: the lowest grade that counts as correct (default the scale's top).
    A failed item is that query's failure, kept; more than half failing warns once
    (:class:`~rag_eval.errors.FailingJudge`). ``log``: a judgement log (or its path) that keeps each verdict as it
    returns, under the judge's name and fingerprint, and gives back those of the same question and passage on a
    rerun (failures are asked again)."""
    scale = check_scale(scale)
    low, high = scale
    correct_at = high if correct_at is None else correct_at
    if isinstance(correct_at, bool) or not isinstance(correct_at, int) or not low < correct_at <= high:
        raise InputError(f"correct_at {correct_at!r}: expected an int grade above {low} and at most {high}")
    name, fingerprint = _identity(judge)
    batch_size = check_int(batch_size, "batch_size", high=None)
    concurrency = check_int(concurrency, "concurrency", high=None)
    items, unanswered = answer_items(answers, questions, references=references, contexts=contexts, passage=passage)
    ids = tuple(_texts(answers))
    the_log = None if log is None else log if isinstance(log, JudgementLog) else JudgementLog.open(log)
    stored = {} if the_log is None else _stored(the_log, name, fingerprint, scale)
    got = {i.query_id: float(stored[(i.query_id, i.doc_id)]) for i in items if (i.query_id, i.doc_id) in stored}
    todo = [i for i in items if i.query_id not in got]
    errors: dict[str, str] = {}

    def store(batch: Sequence[JudgeItem], grades: Sequence[JudgeGrade]) -> None:
        for item, grade in zip(batch, grades, strict=True):
            if grade.grade is None:
                errors[item.query_id] = str(grade.error)
                continue
            got[item.query_id] = float(grade.grade)
            if the_log is not None:
                extra = {} if grade.confidence is None else {"confidence": grade.confidence}
                mark = {"fingerprint": fingerprint, **extra}
                the_log.append(item.query_id, item.doc_id, grade.grade, assessor=name, scale=scale, judge=mark)

    calls = grade_batches(judge, todo, scale, batch_size=batch_size, concurrency=concurrency, store=store)
    if todo and len(errors) > FAILING_SHARE * len(todo):
        first, why = next(iter(errors.items()))
        warnings.warn(
            f"judge {name!r} failed on {len(errors)} of the {len(todo)} answers it was asked (first: query "
            f"{first!r}: {why}); those answers have no verdict",
            FailingJudge,
            stacklevel=user_stacklevel(),
        )
    grades = np.array([got.get(q, math.nan) for q in ids], dtype=np.float64)
    return JudgedAnswers(
        judge=name,
        fingerprint=fingerprint,
        scale=scale,
        correct_at=correct_at,
        query_ids=ids,
        grades=grades,
        errors={q: errors[q] for q in ids if q in errors},
        unanswered=unanswered,
        calls=calls,
        from_log=len(items) - len(todo),
        description=_description(judge),
    )
