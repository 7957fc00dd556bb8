"""The human-graded sample: the queries people grade in full so that a model judge's estimates can be corrected.

A prediction-powered estimate (:func:`rag_eval.statistics.prediction_powered.judge_assisted`) is unbiased only if the
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
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import check_int
from .._files import write_output
from ..data.near_miss import near_miss_hint
from ..data.records import differ, redraw
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
    stratum (None: not stratified), so that the variance of an estimate can be the stratified one; ``frame``: a
    stratified draw's sampling frame, each stratum in the order drawn with every population query of it.

    A sample with a seed is re-drawn when made (or read) and must be that draw: a uniform one from its seed, size and
    population, a stratified one from its frame too (with each query's stratum and inclusion probability
    ``n_h / N_h`` checked); anything else is an InputError naming what differs. A stratified sample without a frame
    cannot be re-drawn: :attr:`redrawn` is False and an estimate does not call it seeded.
    """

    query_ids: tuple[str, ...]
    population: tuple[str, ...]
    seed: int | None = None
    inclusion: Mapping[str, float] | None = None
    strata: Mapping[str, str] | None = None
    frame: Sequence[tuple[str, Sequence[str]]] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "query_ids", _ids(self.query_ids, "sample"))
        object.__setattr__(self, "population", _ids(self.population, "population"))
        if len(self.query_ids) < 2:
            raise InputError(f"a sample needs at least 2 queries, not {len(self.query_ids)}", source="sample")
        outside = set(self.query_ids) - set(self.population)
        if outside:
            raise InputError(
                f"queries {_shown(list(outside))} are not in the population"
                + near_miss_hint(outside, self.population, "the population's"),
                source="sample",
            )
        if self.seed is not None:
            check_int(self.seed, "seed", low=0, high=None)
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
        if self.frame is not None:
            object.__setattr__(self, "frame", _frame(self.frame, self.population))
        if self.seed is not None:
            self._check_draw()

    @property
    def redrawn(self) -> bool:
        """Whether the sample was checked to be the draw its seed gives (a uniform one; a stratified one with its
        frame)."""
        return self.seed is not None and (self.inclusion is None or self.frame is not None)

    def _check_draw(self) -> None:
        """Re-draw the sample from its record (seed, size, population; frame, strata, inclusion probabilities) and
        raise an InputError naming what differs."""
        n, big_n = len(self.query_ids), len(self.population)
        if self.inclusion is None:
            frame: Sequence[tuple[str, Sequence[str]]] = (("all", self.population),)
            sizes = [n]
            design = f"a uniform draw of {n} of its {big_n} population queries"
        elif self.frame is None:
            return  # nothing to re-draw from: not called seeded (redrawn is False)
        else:
            frame = self.frame
            stratum_of = {q: name for name, members in frame for q in members}
            counts = Counter(stratum_of[q] for q in self.query_ids)
            sizes = [counts.get(name, 0) for name, _ in frame]
            design = f"a stratified draw of {n} of its {big_n} population queries in {len(frame)} strata"
            if self.strata is not None:
                moved = [q for q in self.query_ids if self.strata[q] != stratum_of[q]]
                if moved:
                    raise InputError(
                        f"queries {_shown(moved)}: their stratum is not the one the sampling frame gives them "
                        f"(e.g. {moved[0]!r}: {self.strata[moved[0]]!r}, not {stratum_of[moved[0]]!r})",
                        source="strata",
                    )
            share = {name: counts.get(name, 0) / len(members) for name, members in frame}
            assert self.inclusion is not None
            off = [q for q in self.query_ids if not math.isclose(self.inclusion[q], share[stratum_of[q]], rel_tol=1e-9)]
            if off:
                q = off[0]
                raise InputError(
                    f"queries {_shown(off)}: their inclusion probability is not n_h / N_h of their stratum (e.g. "
                    f"{q!r}: {self.inclusion[q]!r}, not {share[stratum_of[q]]!r})",
                    source="inclusion",
                )
        drawn = redraw(frame, sizes, self.seed or 0)
        if drawn != set(self.query_ids):
            raise InputError(
                f"the sample is not {design} with seed {self.seed}, as it records: "
                + differ(self.query_ids, drawn, have_name="the sample", want_name="that draw")
                + " (edited by hand? a sample chosen by hand is no random sample: give no seed, and no estimate "
                "will call it one)",
                source="sample",
            )

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
            _frame_of(sample, population),
        )

    # ----- files ------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "seed": self.seed,
            "design": "uniform" if self.inclusion is None else "inclusion probabilities",
            "size": len(self.query_ids),
            "query_ids": list(self.query_ids),
            "population": list(self.population),
            "inclusion": None if self.inclusion is None else dict(self.inclusion),
            "strata": None if self.strata is None else dict(self.strata),
            "frame": None if self.frame is None else [[name, list(members)] for name, members in self.frame],
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
        frame = data.get("frame")
        if frame is not None and not (
            isinstance(frame, list)
            and all(isinstance(f, list) and len(f) == 2 and isinstance(f[1], list) for f in frame)
        ):
            raise InputError("'frame' must be a list of [stratum, [query ids]], or be null", source=where)
        size, design = data.get("size"), data.get("design")
        if size is not None and size != len(data["query_ids"]):
            raise InputError(
                f"it records a sample of {size!r} queries and lists {len(data['query_ids'])}", source=where
            )
        if design is not None and design != ("uniform" if inclusion is None else "inclusion probabilities"):
            raise InputError(
                f"it records the design {design!r} and "
                + ("no inclusion probabilities" if inclusion is None else "inclusion probabilities"),
                source=where,
            )
        try:
            return cls(
                tuple(data["query_ids"]),
                tuple(data["population"]),
                data.get("seed"),
                inclusion,
                strata,
                None if frame is None else tuple((f[0], tuple(f[1])) for f in frame),
            )
        except InputError as exc:
            raise InputError(f"{exc.source}: {exc.problem}" if exc.source else exc.problem, source=where) from None

    def check_complete(self, pool: Pool, human_qrels: Qrels | Mapping[str, Mapping[str, int]]) -> None:
        """See :func:`check_complete`."""
        check_complete(self, pool, human_qrels)


def _frame(frame: Any, population: Sequence[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A checked sampling frame: ``((stratum, (ids...)), ...)``, each population query in exactly one stratum."""
    if isinstance(frame, (str, bytes)) or not isinstance(frame, Iterable):
        raise InputError("frame must be a sequence of (stratum, query ids)", source="frame")
    out = []
    for part in frame:
        if not (isinstance(part, (tuple, list)) and len(part) == 2 and isinstance(part[0], str) and part[0]):
            raise InputError(f"frame: {part!r} is not a (stratum, query ids) pair", source="frame")
        out.append((part[0], _ids(part[1], f"frame stratum {part[0]!r}")))
    names = [name for name, _ in out]
    if len(set(names)) != len(names):
        raise InputError("frame: a stratum is named twice", source="frame")
    members = [q for _, ids in out for q in ids]
    if len(members) != len(set(members)) or set(members) != set(population):
        twice = [q for q, k in Counter(members).items() if k > 1]
        raise InputError(
            "frame: its strata must hold each population query once: "
            + (
                f"{_shown(twice)} in two strata"
                if twice
                else differ(members, population, have_name="the frame", want_name="the population")
            ),
            source="frame",
        )
    return tuple(out)


def _frame_of(sample: QuerySet, population: QuerySet | Sequence[str]) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
    """The frame :func:`sample_queries` drew ``sample`` from, recomputed from ``population`` (a QuerySet with
    the provenance it was sampled with); None where it cannot be (ids alone, or cluster strata)."""
    from ..data.queryset import QuerySet
    from .querysets import _strata, _stratum_order

    criteria = tuple(c for c in sample.card.stratify if c != "all")
    if not isinstance(population, QuerySet) or "cluster" in criteria:
        return None
    try:
        parts = _strata(population, criteria)
    except ValueError:
        return None  # a column the population does not hold: not the set the sample was drawn from
    members: dict[str, list[str]] = {}
    order: dict[str, Any] = {}
    for qid, p in parts.items():
        name = "/".join(p) if p else "all"
        members.setdefault(name, []).append(qid)
        order[name] = _stratum_order(p, criteria)
    return tuple((name, tuple(sorted(members[name]))) for name in sorted(members, key=order.__getitem__))


def draw_human_sample(query_ids: Iterable[str], n: int, *, seed: int) -> HumanSample:
    """A uniform random sample of ``n`` of ``query_ids`` without replacement: NumPy's ``default_rng(seed)``
    ``choice`` over the ids sorted, so one seed and one query set give one sample; the seed is recorded."""
    population = _ids(query_ids, "query_ids")
    if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= len(population):
        raise InputError(f"n must be an int from 2 to the {len(population)} queries of the set, not {n!r}", source="n")
    seed = check_int(seed, "seed", low=0, high=None)
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
