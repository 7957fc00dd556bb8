"""The human-graded sample: the queries people grade in full so that a model judge's estimates can be corrected.

A prediction-powered estimate (:func:`rag_eval.reports.prediction_powered.judge_assisted`) is unbiased only if the
queries people graded are a random sample of the query set with known chances of being drawn. So the tool draws
them: :func:`draw_human_sample` takes a uniform random sample without replacement (NumPy's ``default_rng(seed)``
over the ids sorted) and records the seed and the population it was drawn from; :meth:`HumanSample.from_query_set`
takes a stratified sample made by :func:`rag_eval.ground_truth.sample_queries` with its inclusion probabilities
and strata.
A query of the sample counts as human-graded when a person graded every pooled item of it (the pool is made to its
depth; :meth:`HumanSample.check_complete` lists the queries where a pooled item has no human grade).

Only this sample feeds the estimator. Items labelled in impact order (to improve the qrels where it matters most)
are chosen for what they are, not by chance: they may improve the qrels every report uses, never the sample's
human values.

The sample is saved as JSON (:meth:`HumanSample.save`, whole or not at all) with its population, so that a later
estimate can check that the judge report covers the query set the sample was drawn from.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._files import write_output
from ..errors import InputError

if TYPE_CHECKING:
    from ..data.qrels import Qrels
    from ..data.queryset import QuerySet
    from .pooling import Pool

__all__ = ["FORMAT", "HumanSample", "check_complete", "draw_human_sample"]

FORMAT = "rag_eval.human_sample/1"
_SHOWN = 10  # queries named in an error before "... and k more"


def _shown(ids: Sequence[str]) -> str:
    ids = sorted(ids)
    more = f" ... and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else ""
    return ", ".join(repr(q) for q in ids[:_SHOWN]) + more


def _ids(values: Any, what: str) -> tuple[str, ...]:
    """Sorted distinct str ids; an InputError naming a non-str, an empty id or a duplicate."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InputError(f"{what} must be a sequence of query ids, not {type(values).__name__}", source=what)
    ids = list(values)
    bad = [q for q in ids if not isinstance(q, str) or not q]
    if bad:
        raise InputError(f"{what}: query ids must be non-empty str, not {bad[0]!r}", source=what)
    seen: set[str] = set()
    dupes = {q for q in ids if q in seen or seen.add(q)}  # type: ignore[func-returns-value]
    if dupes:
        raise InputError(f"{what}: queries {_shown(list(dupes))} are given more than once", source=what)
    return tuple(sorted(ids))


@dataclass(frozen=True)
class HumanSample:
    """The queries people grade in full, drawn at random from ``population`` (the query set's ids).

    ``seed``: the seed of the draw (None for a sample the tool did not draw); ``inclusion``: each sampled query's
    probability of having been drawn (None: a uniform draw, ``n / N`` each); ``strata``: each sampled query's
    stratum (None: not stratified), so that the variance of an estimate can be the stratified one.
    """

    query_ids: tuple[str, ...]
    population: tuple[str, ...]
    seed: int | None = None
    inclusion: Mapping[str, float] | None = None
    strata: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "query_ids", _ids(self.query_ids, "sample"))
        object.__setattr__(self, "population", _ids(self.population, "population"))
        if len(self.query_ids) < 2:
            raise InputError(f"a sample needs at least 2 queries, not {len(self.query_ids)}", source="sample")
        outside = set(self.query_ids) - set(self.population)
        if outside:
            raise InputError(f"queries {_shown(list(outside))} are not in the population", source="sample")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0):
            raise InputError(f"seed must be an int of 0 or more or None, not {self.seed!r}", source="seed")
        if self.inclusion is not None:
            if not isinstance(self.inclusion, Mapping):
                raise InputError("inclusion must map each sampled query id to a probability", source="inclusion")
            missing = [q for q in self.query_ids if q not in self.inclusion]
            extra = [q for q in self.inclusion if q not in set(self.query_ids)]
            if missing or extra:
                what = f"{_shown(missing)} have none" if missing else f"{_shown(extra)} are not in the sample"
                raise InputError(f"inclusion probabilities: queries {what}", source="inclusion")
            bad = [
                q
                for q, p in self.inclusion.items()
                if isinstance(p, bool) or not isinstance(p, (int, float)) or not (math.isfinite(p) and 0 < p <= 1)
            ]
            if bad:
                raise InputError(
                    f"queries {_shown(bad)}: an inclusion probability must be a number in (0, 1]", source="inclusion"
                )
            object.__setattr__(self, "inclusion", {q: float(self.inclusion[q]) for q in self.query_ids})
        if self.strata is not None:
            if not isinstance(self.strata, Mapping):
                raise InputError("strata must map each sampled query id to its stratum", source="strata")
            missing = [q for q in self.query_ids if q not in self.strata]
            extra = [q for q in self.strata if q not in set(self.query_ids)]
            bad = [q for q, g in self.strata.items() if not isinstance(g, str) or not g]
            if missing or extra or bad:
                what = (
                    f"{_shown(missing)} have none"
                    if missing
                    else f"{_shown(extra)} are not in the sample"
                    if extra
                    else f"{_shown(bad)} have a stratum that is not a non-empty str"
                )
                raise InputError(f"strata: queries {what}", source="strata")
            object.__setattr__(self, "strata", {q: self.strata[q] for q in self.query_ids})

    def __len__(self) -> int:
        return len(self.query_ids)

    def inclusion_probabilities(self) -> dict[str, float]:
        """Each sampled query's inclusion probability (``n / N`` for a uniform draw)."""
        if self.inclusion is not None:
            return dict(self.inclusion)
        p = len(self.query_ids) / len(self.population)
        return {q: p for q in self.query_ids}

    @classmethod
    def from_query_set(cls, sample: QuerySet, population: QuerySet | Sequence[str]) -> HumanSample:
        """A stratified sample drawn by :func:`rag_eval.ground_truth.sample_queries`: its queries, their inclusion
        probabilities and its seed; ``population``: the set it was drawn from (or its ids)."""
        from ..data.queryset import QuerySet

        if not isinstance(sample, QuerySet):
            raise InputError(f"sample must be a rag_eval.QuerySet, not {type(sample).__name__}", source="sample")
        probs = {qid: p.inclusion_probability for qid, p in sample.provenance.items()}
        missing = [q for q, p in probs.items() if p is None]
        if missing:
            raise InputError(
                f"queries {_shown(missing)} have no inclusion probability: draw the sample with sample_queries",
                source="sample",
            )
        strata = {qid: p.stratum for qid, p in sample.provenance.items() if p.stratum is not None}
        return cls(
            tuple(sample),
            tuple(population),
            sample.card.seed,
            {q: float(p) for q, p in probs.items() if p is not None},
            strata or None,
        )

    # ----- files ------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "seed": self.seed,
            "design": "uniform" if self.inclusion is None else "inclusion probabilities",
            "query_ids": list(self.query_ids),
            "population": list(self.population),
            "inclusion": None if self.inclusion is None else dict(self.inclusion),
            "strata": None if self.strata is None else dict(self.strata),
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the sample as JSON (whole or not at all; a failure is an InputError naming the file)."""
        write_output(path, (json.dumps(self.to_dict(), indent=1) + "\n").encode())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> HumanSample:
        """Read a sample written by :meth:`save`; every problem is an InputError naming the file."""
        where = os.fspath(path)
        try:
            with open(path, "rb") as file:
                raw = file.read()
        except OSError as exc:
            raise InputError(f"cannot read the file: {exc.strerror or exc}", source=where) from None
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise InputError(f"not JSON: {exc}", source=where) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InputError(f"not a human sample (its 'format' must be {FORMAT!r})", source=where)
        for key in ("query_ids", "population"):
            if not isinstance(data.get(key), list):
                raise InputError(f"{key!r} must be a list of query ids", source=where)
        inclusion = data.get("inclusion")
        if inclusion is not None and not isinstance(inclusion, dict):
            raise InputError("'inclusion' must map query ids to probabilities, or be null", source=where)
        strata = data.get("strata")
        if strata is not None and not isinstance(strata, dict):
            raise InputError("'strata' must map query ids to strata, or be null", source=where)
        try:
            return cls(tuple(data["query_ids"]), tuple(data["population"]), data.get("seed"), inclusion, strata)
        except InputError as exc:
            raise InputError(exc.problem, source=where) from None

    def check_complete(self, pool: Pool, human_qrels: Qrels | Mapping[str, Mapping[str, int]]) -> None:
        """See :func:`check_complete`."""
        check_complete(self, pool, human_qrels)


def draw_human_sample(query_ids: Iterable[str], n: int, *, seed: int) -> HumanSample:
    """A uniform random sample of ``n`` of ``query_ids`` without replacement: NumPy's ``default_rng(seed)``
    ``choice`` over the ids sorted, so one seed and one query set give one sample; the seed is recorded."""
    population = _ids(query_ids, "query_ids")
    if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= len(population):
        raise InputError(f"n must be an int from 2 to the {len(population)} queries of the set, not {n!r}", source="n")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"seed must be an int of 0 or more, not {seed!r}", source="seed")
    picked = np.random.default_rng(seed).choice(len(population), size=n, replace=False)
    return HumanSample(tuple(population[i] for i in picked.tolist()), population, seed)


def check_complete(sample: HumanSample, pool: Pool, human_qrels: Qrels | Mapping[str, Mapping[str, int]]) -> None:
    """Raise an InputError listing the queries of ``sample`` where an item of ``pool`` has no grade in
    ``human_qrels``, with how many items each lacks. A sampled query with no item in the pool (every pooled item of
    it already judged when the pool was made) counts as complete. Qrels that record grades decided by a model judge
    (their ``graded_by``) are refused: the sample's grades must be people's."""
    from .pooling import Pool

    if not isinstance(pool, Pool):
        raise InputError(f"pool must be a rag_eval.ground_truth.Pool, not {type(pool).__name__}", source="pool")
    graded_by = getattr(human_qrels, "graded_by", None)  # qrels merged with a model judge's grades say so
    by_judges = getattr(graded_by, "by_judges", 0)
    if by_judges:
        raise InputError(
            f"{by_judges} of these qrels' judgements were decided by a model judge: the sample must be graded by "
            "people (merge the people's judgement logs alone)",
            source="human_qrels",
        )
    wanted = set(sample.query_ids)
    lacking: dict[str, int] = {}
    for item in pool.items:
        if item.query_id not in wanted:
            continue
        graded = human_qrels[item.query_id] if item.query_id in human_qrels else {}  # noqa: SIM401 (Qrels)
        if item.doc_id not in graded:
            lacking[item.query_id] = lacking.get(item.query_id, 0) + 1
    if lacking:
        listed = ", ".join(f"{q!r} ({lacking[q]} ungraded)" for q in sorted(lacking)[:_SHOWN])
        more = f" ... and {len(lacking) - _SHOWN} more" if len(lacking) > _SHOWN else ""
        raise InputError(
            f"{len(lacking)} of the {len(sample)} sampled queries are not fully human-graded to the pool's depth "
            f"{pool.depth}: {listed}{more}",
            source="human_qrels",
        )
