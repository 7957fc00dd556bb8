"""Context conditions, paired by query: the same questions answered from different contexts, and the answers graded.

:func:`build_contexts` makes, for each query, the chunk ids of each **condition**:

- ``none``: no context;
- ``oracle``: the chunks the qrels judge relevant (grade >= ``relevant_at``), highest grade first, then by chunk id;
- ``delivered``: what the pipeline delivered (within its budget, in its order);
- ``delivered relevant``: the delivered chunks judged relevant, in their delivered order (the gap split's middle
  condition: docs/answers-analysis.md);
- ``delivered +n first|last|shuffled``: the delivered chunks and ``n`` distractors, at fixed recall: distractors are
  drawn only from chunks judged **irrelevant** (grade exactly 0) for that query and not delivered, so no relevant,
  partly relevant, unjudged or repeated chunk enters a distractor slot. Each query's distractors come from a
  generator seeded with ``[seed, crc32(query id)]``: a random order of its candidates, of which the first ``n``
  are used (the 1 distractor is among the 3, the 3 among the 5, and every position gets the same ones);
  ``first`` puts them before the delivered chunks, ``last`` after, ``shuffled`` shuffles all (seeded ``[seed,
  crc32, n]``). A query with fewer than ``n`` candidates is left out of that condition, counted in
  :attr:`Contexts.left_out` and announced once (:class:`~rag_eval.errors.FewDistractors`);
- ``top k`` (for each k of ``ks``, given a ``ranked`` list): the first k chunks of the final ranking, for the
  budget curve.

:func:`answer_contexts` asks a generator, ``generate(question, chunk_texts) -> str``, for each query and condition
(one call per distinct question and context: conditions that give a query the same chunks share the answer) and
grades each answer with ``grade(answer, references) -> (em, f1)``. A failed call is kept: answer None, EM and F1
NaN, the error in ``error``, announced once with the count.
"""

from __future__ import annotations

import re
import warnings
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import check_choice, check_int
from ..data.joins import user_stacklevel
from ..data.qrels import Qrels
from ..errors import FailedAnswers, FewDistractors, InputError

if TYPE_CHECKING:
    import pandas as pd

    from .result import PipelineResult

__all__ = [
    "DELIVERED",
    "DELIVERED_RELEVANT",
    "NONE",
    "ORACLE",
    "POSITIONS",
    "Contexts",
    "answer_contexts",
    "build_contexts",
    "delivered_ids",
    "distractor_condition",
    "ranked_ids",
    "sentence_reader",
]

NONE = "none"
ORACLE = "oracle"
DELIVERED = "delivered"
DELIVERED_RELEVANT = "delivered relevant"
POSITIONS = ("first", "last", "shuffled")
#: an answer is correct when its token F1 is at least this
CORRECT_AT = 0.5

Generate = Callable[[str, list[str]], str]
Grade = Callable[[str, Sequence[str]], tuple[float, float]]


_WORD = re.compile(r"\w+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_STOP = frozenset(
    _WORD.findall(
        "a an the of in on at to for by with from and or is are was were be been what which who whom "
        "whose when where why how did do does that this these those as it its into than then there their they "
        "he she his her"
    )
)


def sentence_reader(question: str, chunks: list[str]) -> str:
    """A deterministic lexical reader, the baseline generator of the tests and ``benchmarks/bench_answers.py
    --generator extractive`` (no model): the sentence of the context sharing the most non-stopwords with the
    question (the first on ties), and in it the first run of up to 4 words that are not in the question;
    ``""`` without context. A floor to compare a model with, not a model."""
    asked = {w.lower() for w in _WORD.findall(question)}
    keys = asked - _STOP
    best, best_overlap = "", 0
    for chunk in chunks:
        for sentence in _SENTENCE.split(chunk):
            overlap = len(keys & {w.lower() for w in _WORD.findall(sentence)})
            if overlap > best_overlap:
                best, best_overlap = sentence, overlap
    words = _WORD.findall(best)
    run: list[str] = []
    for w in words:
        if w.lower() in asked or w.lower() in _STOP:
            if run:
                break
            continue
        run.append(w)
        if len(run) == 4:
            break
    return " ".join(run)


def distractor_condition(n: int, position: str) -> str:
    """The name of the condition with ``n`` distractors at ``position``: ``"delivered +3 last"``."""
    return f"{DELIVERED} +{n} {position}"


@dataclass(frozen=True, eq=False)
class Contexts:
    """What :func:`build_contexts` returns: ``conditions`` maps each condition to ``{query_id: chunk ids}`` (a
    query left out of a condition is absent from it); ``left_out`` is a DataFrame ``condition, query_id, reason``;
    ``rules`` says how the conditions were made."""

    conditions: Mapping[str, Mapping[str, tuple[str, ...]]]
    left_out: pd.DataFrame
    rules: str

    def __getitem__(self, condition: str) -> Mapping[str, tuple[str, ...]]:
        return self.conditions[condition]

    @property
    def names(self) -> list[str]:
        return list(self.conditions)


def delivered_ids(result: PipelineResult, stage: str | None = None) -> dict[str, tuple[str, ...]]:
    """``{query_id: chunk ids}`` the generator receives from ``stage`` (the last by default) of a pipeline
    result: each successful query's ranking cut to the budget (:meth:`PipelineResult.delivered`). A query the stage
    failed on is absent (``result.failures`` names it): no condition answers it."""
    counts = result.delivered(stage)
    run = result.stages[stage or result.final_stage].run()
    offsets = run.offsets
    ids = run.doc_ids
    index = {q: i for i, q in enumerate(run.query_ids)}
    return {q: tuple(str(d) for d in ids[offsets[index[q]] : offsets[index[q]] + k]) for q, k in counts.items()}


def ranked_ids(result: PipelineResult, stage: str | None = None) -> dict[str, tuple[str, ...]]:
    """``{query_id: chunk ids}``: each successful query's whole ranking from ``stage`` (the last by default)."""
    run = result.stages[stage or result.final_stage].run()
    offsets = run.offsets
    ids = run.doc_ids
    return {q: tuple(str(d) for d in ids[offsets[i] : offsets[i + 1]]) for i, q in enumerate(run.query_ids)}


def build_contexts(
    delivered: Mapping[str, Sequence[str]],
    qrels: Qrels,
    *,
    distractors: Sequence[int] = (1, 3, 5),
    positions: Sequence[str] = POSITIONS,
    ranked: Mapping[str, Sequence[str]] | None = None,
    ks: Sequence[int] = (),
    relevant_at: int = 1,
    seed: int = 0,
) -> Contexts:
    """The contexts of each condition for each query of ``delivered`` (``{query_id: chunk ids in order}``), judged
    by ``qrels`` (see the module's doc for each condition and the draw of distractors). ``ranked``
    (``{query_id: the final ranking}``) and ``ks`` add the ``top k`` conditions. A query without a judgement is
    left out of ``oracle`` and ``delivered relevant`` (nothing says what is relevant there) and of the distractor
    conditions; one without a relevant chunk is left out of ``oracle``."""
    import pandas as pd

    ns = sorted({check_int(n, "distractors") for n in distractors})
    for p in positions:
        check_choice(p, "position", POSITIONS)
    relevant_at = check_int(relevant_at, "relevant_at")
    ks = [check_int(k, "k") for k in ks]
    if ks and ranked is None:
        raise InputError("ks needs ranked: the final ranking of each query ({query_id: chunk ids})")
    names = [NONE, ORACLE, DELIVERED, DELIVERED_RELEVANT]
    names += [distractor_condition(n, p) for n in ns for p in positions]
    names += [f"top {k}" for k in ks]
    out: dict[str, dict[str, tuple[str, ...]]] = {name: {} for name in names}
    left: list[tuple[str, str, str]] = []
    short: dict[int, int] = dict.fromkeys(ns, 0)
    for qid, given in delivered.items():
        qid = str(qid)
        chunks = tuple(str(c) for c in given)
        if len(set(chunks)) != len(chunks):
            raise InputError(f"query {qid!r}: the delivered context repeats a chunk id")
        out[NONE][qid] = ()
        out[DELIVERED][qid] = chunks
        for k in ks:
            assert ranked is not None
            if qid in ranked:
                out[f"top {k}"][qid] = tuple(str(c) for c in ranked[qid])[:k]
            else:
                left.append((f"top {k}", qid, "no ranking"))
        judged = qrels[qid] if qid in qrels else None  # noqa: SIM401 - Qrels is no dict
        if not judged:
            for name in names[1:]:
                if name != DELIVERED and not name.startswith("top "):
                    left.append((name, qid, "no judgement"))
            continue
        relevant = sorted((d for d, g in judged.items() if g >= relevant_at), key=lambda d: (-judged[d], d))
        if relevant:
            out[ORACLE][qid] = tuple(relevant)
        else:
            left.append((ORACLE, qid, "no relevant chunk"))
        out[DELIVERED_RELEVANT][qid] = tuple(c for c in chunks if judged.get(c, 0) >= relevant_at)
        if not ns:
            continue
        given_set = set(chunks)
        pool = sorted(d for d, g in judged.items() if g == 0 and d not in given_set)
        crc = zlib.crc32(qid.encode("utf-8"))
        order = np.random.default_rng([seed, crc]).permutation(len(pool))
        for n in ns:
            if len(pool) < n:
                short[n] += 1
                for p in positions:
                    left.append((distractor_condition(n, p), qid, f"{len(pool)} judged-irrelevant chunk(s) < {n}"))
                continue
            added = tuple(pool[i] for i in order[:n].tolist())
            for p in positions:
                if p == "first":
                    context = added + chunks
                elif p == "last":
                    context = chunks + added
                else:
                    both = chunks + added
                    shuffle = np.random.default_rng([seed, crc, n]).permutation(len(both))
                    context = tuple(both[i] for i in shuffle.tolist())
                out[distractor_condition(n, p)][qid] = context
    if any(short.values()):
        warnings.warn(
            "too few judged-irrelevant (grade 0) chunks to add as distractors: "
            + "; ".join(f"{c} query(ies) for n = {n}" for n, c in short.items() if c)
            + ": each left out of those conditions (Contexts.left_out)",
            FewDistractors,
            stacklevel=user_stacklevel(),
        )
    rules = (
        f"oracle: grade >= {relevant_at}, highest grade first, then by id; distractors: grade 0, not delivered, "
        f"seed {seed}, n {ns}, positions {list(positions)}"
    )
    return Contexts(out, pd.DataFrame(left, columns=["condition", "query_id", "reason"]), rules)


def answer_contexts(
    contexts: Contexts | Mapping[str, Mapping[str, Sequence[str]]],
    questions: Mapping[str, str],
    texts: Mapping[str, str],
    generate: Generate,
    grade: Grade,
    references: Mapping[str, Sequence[str]],
    *,
    conditions: Sequence[str] | None = None,
    correct_at: float = CORRECT_AT,
) -> pd.DataFrame:
    """Answer every (condition, query) of ``contexts`` with ``generate(question, [chunk texts])`` and grade the
    answer against the query's ``references`` with ``grade``: one row per query and condition, columns
    ``query_id, condition, answer, em, f1, correct, error`` (``correct``: F1 >= ``correct_at``; NaN where the
    call failed). ``texts`` maps chunk id to text; a chunk without a text, or a query without a question or a
    reference, is an :class:`~rag_eval.errors.InputError` naming it, before any call."""
    import pandas as pd

    table = contexts.conditions if isinstance(contexts, Contexts) else contexts
    names = list(table) if conditions is None else list(conditions)
    for name in names:
        if name not in table:
            raise InputError(f"no condition {name!r}; conditions: {list(table)}")
    needed = {c for name in names for ctx in table[name].values() for c in ctx}
    missing = sorted(needed.difference(texts))
    if missing:
        raise InputError(f"{len(missing)} chunk id(s) have no text, e.g. {missing[:3]}")
    queries = {q for name in names for q in table[name]}
    for what, mapping in (("question", questions), ("reference answer", references)):
        lacking = sorted(queries.difference(mapping))
        if lacking:
            raise InputError(f"{len(lacking)} query(ies) have no {what}, e.g. {lacking[:3]}")
    done: dict[tuple[str, tuple[str, ...]], tuple[str | None, str | None]] = {}
    rows: list[tuple[Any, ...]] = []
    failed = 0
    first_error = ""
    for name in names:
        for qid, ctx in table[name].items():
            key = (qid, tuple(ctx))
            if key not in done:
                try:
                    made = generate(questions[qid], [texts[c] for c in ctx])
                    if not isinstance(made, str):
                        raise TypeError(f"the generator returned a {type(made).__name__}, not a str")
                    done[key] = (made, None)
                except Exception as exc:  # noqa: BLE001 - this item's fault: kept and counted
                    done[key] = (None, f"{type(exc).__name__}: {exc}")
            answer, error = done[key]
            if answer is None:
                failed += 1
                first_error = first_error or f"query {qid!r}, condition {name!r}: {error}"
                rows.append((qid, name, None, np.nan, np.nan, np.nan, error))
                continue
            em, f1 = grade(answer, references[qid])
            rows.append((qid, name, answer, float(em), float(f1), float(f1 >= correct_at), None))
    if failed:
        warnings.warn(
            f"the generator failed on {failed} of {len(rows)} (query, condition) item(s), kept with EM and F1 NaN "
            f"(column 'error'); first: {first_error}",
            FailedAnswers,
            stacklevel=user_stacklevel(),
        )
    frame = pd.DataFrame(rows, columns=["query_id", "condition", "answer", "em", "f1", "correct", "error"])
    frame["correct"] = frame["correct"].astype(object).where(frame["correct"].isna(), frame["correct"] == 1.0)
    return frame
