"""The built-in offline judge, for the demo and the tests: MiniLM similarity mapped to grades. It is weak.

:func:`minilm_judge` grades a (query, chunk) pair by the cosine similarity of their all-MiniLM-L6-v2 embeddings, cut
into grades by thresholds fitted (cross-fitted) on items people graded. Never use it in place of people, or of a
strong model judge: ``docs/judges.md``, "The built-in judge, and why it is weak".
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._checks import check_int
from ..data import Collection, Qrels
from ..data.groups import query_groups
from ..errors import InputError
from ..ground_truth.pooling import Pool
from ..stages.judges import BaseJudge, JudgeGrade, JudgeItem, check_scale
from .embeddings import MODEL_NAME, Encoder

__all__ = ["MiniLMJudge", "fit_thresholds", "grade_of", "minilm_judge"]

DESCRIPTION = (
    "weak: all-MiniLM-L6-v2 cosine similarity cut into grades by thresholds fitted (cross-fitted by query) on "
    "people's grades; it tells topic, not answers"
)


def minilm_judge(
    human: Collection | Qrels | Mapping[str, Mapping[str, int]],
    *,
    queries: Mapping[str, str] | None = None,
    texts: Mapping[str, Any] | Pool | None = None,
    folds: int = 5,
    seed: int = 0,
    scale: tuple[int, int] = (0, 3),
    name: str = "minilm-weak",
    encoder: Encoder | None = None,
) -> MiniLMJudge:
    """The built-in weak judge (see the module's doc), fitted on ``human``'s grades.

    ``human``: a :class:`~rag_eval.Collection` (its qrels, query texts and corpus), or qrels (a :class:`Qrels` or
    ``{query: {doc: grade}}``) with the texts they need: ``queries`` ``{query_id: text}`` and ``texts``
    ``{doc_id: text or Chunk}``, or a :class:`Pool` whose items carry both (``texts=pool``). Labelled pairs whose
    texts are missing are an error naming them. ``folds``: how many folds the labelled queries are split into (at
    most one per query; at least 2 queries are needed); ``seed``: the split's. ``scale``: the grades to fit (the
    pool's scale); people's grades off it are an error."""
    qrels, query_texts, doc_texts = _human(human, queries, texts)
    return MiniLMJudge(qrels, query_texts, doc_texts, folds=folds, seed=seed, scale=scale, name=name, encoder=encoder)


class MiniLMJudge(BaseJudge):
    """The built-in weak judge; see :func:`minilm_judge`. ``folds_of`` maps each labelled query to its fold."""

    description = DESCRIPTION

    def __init__(
        self,
        labels: Mapping[tuple[str, str], int],
        queries: Mapping[str, str],
        texts: Mapping[str, str],
        *,
        folds: int = 5,
        seed: int = 0,
        scale: tuple[int, int] = (0, 3),
        name: str = "minilm-weak",
        encoder: Encoder | None = None,
    ) -> None:
        super().__init__(name)
        self.scale = check_scale(scale)
        folds = check_int(folds, f"judge {name!r}: folds", low=2)
        low, high = self.scale
        for (q, d), g in labels.items():
            if not low <= g <= high:
                raise InputError(f"judge {name!r}: query {q!r}, doc {d!r} is graded {g}, off the scale {low}..{high}")
        self.labels = dict(labels)
        self.queries, self.texts = dict(queries), dict(texts)
        labelled = sorted({q for q, _ in self.labels})
        if len(labelled) < 2:
            raise InputError(
                f"judge {name!r}: cross-fitting needs people's grades on 2 queries or more, not {labelled}"
            )
        # one question asked under two ids is one group, in one fold: never fitted on its own twin
        group_of: list[int] = query_groups(labelled, self.queries).tolist()
        order: list[list[str]] = [[] for _ in range(max(group_of) + 1)]
        for q, g in zip(labelled, group_of, strict=True):
            order[g].append(q)
        if len(order) < 2:
            raise InputError(
                f"judge {name!r}: cross-fitting needs people's grades on 2 distinct questions or more: "
                f"{labelled} ask one (their texts are equal once normalised)"
            )
        random.Random(seed).shuffle(order)
        self.n_folds = min(folds, len(order))
        self.folds_of = {q: i % self.n_folds for i, group in enumerate(order) for q in group}
        self.seed = seed
        self.encoder = encoder or Encoder()
        self._vectors: dict[str, np.ndarray] = {}
        self._thresholds: dict[int | None, np.ndarray] | None = None  # fold -> thresholds fitted without it
        self._spread = 1.0
        _ = self.fingerprint

    def config(self) -> dict[str, Any]:
        labels = sorted((q, d, g, self.queries[q], self.texts[d]) for (q, d), g in self.labels.items())
        data = hashlib.sha256(json.dumps(labels, ensure_ascii=False).encode()).hexdigest()[:16]
        return {"model": MODEL_NAME, "labels": data, "folds": self.n_folds, "seed": self.seed, "scale": self.scale}

    # ----- fitting ----------------------------------------------------------------------------------------
    def fitted_on(self, query_id: str, doc_id: str) -> frozenset[tuple[str, str]]:
        """The labelled pairs whose grades fitted the thresholds that grade this item: for an item people graded,
        those of the other folds (never the item, nor its query); for any other, every labelled pair."""
        fold = self._fold(query_id, doc_id)
        return frozenset(p for p in self.labels if fold is None or self.folds_of[p[0]] != fold)

    def thresholds(self, query_id: str, doc_id: str) -> np.ndarray:
        """The thresholds (low to high) that grade this item (see :meth:`fitted_on`)."""
        fitted = self._fit()
        return fitted[self._fold(query_id, doc_id)]

    def _fold(self, query_id: str, doc_id: str) -> int | None:
        return self.folds_of[query_id] if (query_id, doc_id) in self.labels else None

    def _fit(self) -> dict[int | None, np.ndarray]:
        if self._thresholds is None:
            pairs = sorted(self.labels)
            sims = self._similarities([self.queries[q] for q, _ in pairs], [self.texts[d] for _, d in pairs])
            grades = np.array([self.labels[p] for p in pairs])
            fold = np.array([self.folds_of[q] for q, _ in pairs])
            fitted: dict[int | None, np.ndarray] = {None: fit_thresholds(sims, grades, self.scale)}
            for f in range(self.n_folds):
                fitted[f] = fit_thresholds(sims[fold != f], grades[fold != f], self.scale)
            self._spread = float(np.std(sims)) or 1.0
            self._thresholds = fitted
        return self._thresholds

    def _similarities(self, queries: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in (*queries, *texts) if t not in self._vectors))
        if missing:
            # Encoder.encode: model batches of its batch_size (one batch of all would pad every text to the longest)
            for text, vector in zip(missing, self.encoder.encode(missing), strict=True):
                self._vectors[text] = vector
        q = np.array([self._vectors[t] for t in queries], dtype=np.float64).reshape(len(queries), -1)
        d = np.array([self._vectors[t] for t in texts], dtype=np.float64).reshape(len(texts), -1)
        return np.einsum("ij,ij->i", q, d) if len(queries) else np.zeros(0)

    # ----- grading ----------------------------------------------------------------------------------------
    def grade(self, items: Sequence[JudgeItem], *, scale: tuple[int, int] = (0, 3)) -> list[JudgeGrade]:
        if check_scale(scale) != self.scale:
            raise InputError(
                f"judge {self.name!r} was fitted on the scale {self.scale[0]}..{self.scale[1]}, asked {scale[0]}.."
                f"{scale[1]}: build it with scale={scale}"
            )
        items = list(items)
        if not items:
            return []
        fitted = self._fit()
        sims = self._similarities([i.query for i in items], [i.text for i in items])
        out = []
        for item, s in zip(items, sims.tolist(), strict=True):
            cuts = fitted[self._fold(item.query_id, item.doc_id)]
            out.append(JudgeGrade(grade=grade_of(s, cuts, self.scale), confidence=self._confidence(s, cuts)))
        return out

    def _confidence(self, similarity: float, cuts: np.ndarray) -> float | None:
        finite = cuts[np.isfinite(cuts)]
        if not len(finite):
            return None
        return float(min(1.0, np.min(np.abs(finite - similarity)) / self._spread))


def grade_of(similarity: float, thresholds: np.ndarray, scale: tuple[int, int]) -> int:
    """``low + #{k: similarity >= t_k}``."""
    return scale[0] + int(np.sum(similarity >= thresholds))


def fit_thresholds(similarities: np.ndarray, grades: np.ndarray, scale: tuple[int, int]) -> np.ndarray:
    """The ``high - low`` thresholds of the non-decreasing step function of ``similarities`` closest to ``grades``
    in summed absolute error (ties of similarity kept on one step), by dynamic programming over the sorted
    similarities; see the module's doc."""
    low, high = scale
    levels = np.arange(low, high + 1)
    order = np.argsort(similarities, kind="stable")
    s, g = np.asarray(similarities, dtype=np.float64)[order], np.asarray(grades)[order]
    values, starts = np.unique(s, return_index=True)  # groups of equal similarity: one level each
    bounds = [*starts.tolist(), len(s)]
    n, k = len(values), len(levels)
    if n == 0:
        return np.full(k - 1, np.inf)
    cost = np.zeros((n, k))
    for i in range(n):
        group = g[bounds[i] : bounds[i + 1]]
        cost[i] = np.abs(group[None, :] - levels[:, None]).sum(axis=1)
    total = np.zeros((n, k))
    choice = np.zeros((n, k), dtype=np.intp)  # the best level <= this one for the group before
    total[0] = cost[0]
    for i in range(1, n):
        best = np.minimum.accumulate(total[i - 1])
        arg = np.array([int(np.argmin(total[i - 1][: j + 1])) for j in range(k)])
        total[i] = cost[i] + best
        choice[i] = arg
    assigned = np.zeros(n, dtype=np.intp)
    assigned[-1] = int(np.argmin(total[-1]))
    for i in range(n - 1, 0, -1):
        assigned[i - 1] = choice[i][assigned[i]]
    cuts = np.full(k - 1, np.inf)
    for step in range(1, k):  # threshold of level `step`: halfway into the first group at or above it
        at = np.flatnonzero(assigned >= step)
        if len(at):
            first = int(at[0])
            cuts[step - 1] = values[first] if first == 0 else (values[first - 1] + values[first]) / 2
    return cuts


def _human(
    human: Any, queries: Mapping[str, str] | None, texts: Mapping[str, Any] | Pool | None
) -> tuple[dict[tuple[str, str], int], dict[str, str], dict[str, str]]:
    """The labelled pairs and the texts they need, from a Collection, or qrels with ``queries`` and ``texts``."""
    query_texts: dict[str, str] = {}
    doc_texts: dict[str, str] = {}
    if isinstance(human, Collection):
        qrels: Any = human.qrels
        query_texts.update(human.queries)
        doc_texts.update({d: _text(c) for d, c in human.corpus.items()})
    else:
        qrels = human
    if isinstance(texts, Pool):
        for item in texts.items:
            if item.query is not None:
                query_texts.setdefault(item.query_id, item.query)
            if item.text is not None:
                doc_texts.setdefault(item.doc_id, item.text)
    elif texts is not None:
        doc_texts.update({d: _text(c) for d, c in texts.items()})
    query_texts.update(queries or {})
    if isinstance(qrels, Qrels):
        graded = {(q, d): int(g) for q in qrels.query_ids for d, g in qrels[q].items()}
    elif isinstance(qrels, Mapping):
        graded = {(str(q), str(d)): g for q, docs in qrels.items() for d, g in docs.items()}
    else:
        raise InputError(f"human must be a Collection, Qrels or {{query: {{doc: grade}}}}, not {type(human).__name__}")
    for (q, d), g in graded.items():
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)):
            raise InputError(f"query {q!r}, doc {d!r}: grade {g!r} is not an int")
    lacking = [(q, d) for q, d in graded if q not in query_texts or d not in doc_texts]
    if lacking:
        q, d = lacking[0]
        raise InputError(
            f"{len(lacking)} labelled pair(s) lack a text, first query {q!r}, doc {d!r} (query text: "
            f"{'yes' if q in query_texts else 'missing'}, chunk text: {'yes' if d in doc_texts else 'missing'}): "
            "give queries= and texts= (or a Collection, or texts=pool)"
        )
    return {p: int(g) for p, g in graded.items()}, query_texts, doc_texts


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    text = getattr(value, "content", None) or getattr(value, "text", None)
    if not isinstance(text, str):
        raise InputError(f"a chunk text must be a str or a Chunk, not {type(value).__name__}")
    return text
