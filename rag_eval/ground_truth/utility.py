"""Utility labels (eRAG: Salemi & Zamani, SIGIR 2024): grade each retrieved chunk by whether the generator answers
correctly from that chunk alone.

:func:`utility_labels` asks ``generate(question, [chunk text])`` once per (query, chunk) of ``ranked`` (each query's
first ``depth`` chunks), grades the answer with ``grade(answer, references) -> (em, f1)``, and labels the chunk 1
when the answer is correct (F1 >= ``correct_at``), else 0. The labels are a :class:`~rag_eval.Qrels` of downstream
utility that evaluates like any qrels (``rag_eval.evaluate(labels.qrels, run, metrics)``); a chunk whose call
failed is left unjudged (absent), counted and announced once. :meth:`UtilityLabels.agreement` measures them
against people's qrels with :func:`~rag_eval.ground_truth.agreement.judge_agreement` on the scale 0-1 (people's
grades cut at ``relevant_at``). See docs/answers-analysis.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import check_int
from ..data.joins import user_stacklevel
from ..data.qrels import Qrels
from ..errors import FailedAnswers, InputError
from .agreement import JudgeAgreement, judge_agreement

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["UtilityLabels", "utility_labels"]

CORRECT_AT = 0.5


@dataclass(frozen=True, eq=False)
class UtilityLabels:
    """What :func:`utility_labels` returns: ``qrels`` (grade 1: the generator answered correctly from the chunk
    alone; 0: it did not), ``answers`` (``query_id, chunk_id, rank, answer, em, f1, correct, error``), ``n_failed``
    (calls that failed: unjudged) and the ``correct_at`` threshold."""

    qrels: Qrels
    answers: pd.DataFrame
    n_failed: int
    correct_at: float

    def agreement(self, human: Qrels, *, relevant_at: int = 1, warn: bool = True) -> JudgeAgreement:
        """The agreement of these utility labels with people's ``human`` qrels on the (query, chunk) items both
        graded, people's grades cut to 0/1 at ``relevant_at`` (grades below 0 are not judgements and are left
        out): Cohen's kappa, binary, and the precision and recall of "useful" against "relevant"."""
        relevant_at = check_int(relevant_at, "relevant_at")
        people = {q: {d: int(g >= relevant_at) for d, g in human[q].items() if g >= 0} for q in human.query_ids}
        return judge_agreement(people, self.qrels, scale=(0, 1), threshold=1, warn=warn, names=("people", "utility"))


def utility_labels(
    ranked: Mapping[str, Sequence[str]],
    questions: Mapping[str, str],
    texts: Mapping[str, str],
    generate: Callable[[str, list[str]], str],
    grade: Callable[[str, Sequence[str]], tuple[float, float]],
    references: Mapping[str, Sequence[str]],
    *,
    depth: int | None = None,
    correct_at: float = CORRECT_AT,
) -> UtilityLabels:
    """eRAG's utility labels of the first ``depth`` chunks (all when None) of each query's ranking in ``ranked``
    (see the module's doc). A chunk id without a text, a query without a question or a reference: an
    :class:`~rag_eval.errors.InputError` naming it, before any call."""
    import pandas as pd

    if depth is not None:
        depth = check_int(depth, "depth")
    if not 0 <= correct_at <= 1:
        raise InputError(f"correct_at {correct_at!r}: expected an F1 between 0 and 1")
    items = [(str(q), str(c), r) for q, chunks in ranked.items() for r, c in enumerate(list(chunks)[:depth], 1)]
    missing = sorted({c for _, c, _ in items}.difference(texts))
    if missing:
        raise InputError(f"{len(missing)} chunk id(s) have no text, e.g. {missing[:3]}")
    for what, mapping in (("question", questions), ("reference answer", references)):
        lacking = sorted({q for q, _, _ in items}.difference(mapping))
        if lacking:
            raise InputError(f"{len(lacking)} query(ies) have no {what}, e.g. {lacking[:3]}")
    rows: list[tuple[Any, ...]] = []
    labels: dict[str, dict[str, int]] = {}
    failed = 0
    first = ""
    for qid, chunk, rank in items:
        try:
            answer = generate(questions[qid], [texts[chunk]])
            if not isinstance(answer, str):
                raise TypeError(f"the generator returned a {type(answer).__name__}, not a str")
        except Exception as exc:  # noqa: BLE001 - this item's fault: kept, left unjudged
            failed += 1
            first = first or f"query {qid!r}, chunk {chunk!r}: {type(exc).__name__}: {exc}"
            rows.append((qid, chunk, rank, None, np.nan, np.nan, np.nan, f"{type(exc).__name__}: {exc}"))
            continue
        em, f1 = grade(answer, references[qid])
        ok = float(f1) >= correct_at
        labels.setdefault(qid, {})[chunk] = int(ok)
        rows.append((qid, chunk, rank, answer, float(em), float(f1), ok, None))
    if failed:
        warnings.warn(
            f"the generator failed on {failed} of {len(items)} (query, chunk) item(s): those chunks are unjudged "
            f"in the utility labels; first: {first}",
            FailedAnswers,
            stacklevel=user_stacklevel(),
        )
    answers = pd.DataFrame(rows, columns=["query_id", "chunk_id", "rank", "answer", "em", "f1", "correct", "error"])
    return UtilityLabels(Qrels.from_dict(labels), answers, failed, float(correct_at))
