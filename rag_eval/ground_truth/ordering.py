"""Label what matters first: the impact order of a pool.

The impact of an item, a judge's doubt, ties, and what it saves on cranfield: ``docs/labelling.md``, "Label what
matters first"."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from .._checks import check_int
from ..errors import InputError
from .judgement_log import JudgementLog
from .pooling import Pool, PoolItem

__all__ = ["impact_order", "impact_weights"]


def impact_weights(
    pool: Pool,
    *,
    systems: Sequence[str] | None = None,
    depth: int | None = None,
    baseline: str | None = None,
) -> dict[tuple[str, str], float]:
    """``{(query_id, doc_id): impact}`` for every item of ``pool``, in the pool's order: the mean over the pairs
    of systems compared of ``|w_a - w_b|``, with ``w_s = 1 / log2(1 + rank)`` within ``depth`` (see the module
    doc). Same options as :func:`impact_order`."""
    _, k, pairs = _compared(pool, systems, depth, baseline)
    return {(item.query_id, item.doc_id): _impact(item, pairs, k) for item in pool.items}


def impact_order(
    pool: Pool,
    *,
    systems: Sequence[str] | None = None,
    depth: int | None = None,
    baseline: str | None = None,
    uncertainty: Mapping[tuple[str, str], float] | None = None,
) -> Pool:
    """``pool`` with its items in impact order: highest ``impact * u`` first, across queries (the module doc gives
    the formula and the tie rule), its ``order`` recording how.

    ``systems``: the pool's systems compared (default: all of them; at least two). ``depth``: the cutoff of the
    nDCG compared (default: the pool's depth; at most it, since the pool holds no rank below). ``baseline``: one of
    ``systems``, compared with each other one (default: every pair is compared). ``uncertainty``: ``{(query_id,
    doc_id): u}``, ``u`` in [0, 1], the judge's doubt; pairs not in the pool are ignored, items not named count
    ``u = 1``. Bad input is an :class:`~rag_eval.errors.InputError`.
    """
    if not isinstance(pool, Pool):
        raise TypeError(f"pool must be a Pool (rag_eval.pool or Pool.load), not {type(pool).__name__}")
    compared, k, pairs = _compared(pool, systems, depth, baseline)
    doubt = _check_uncertainty(uncertainty)

    def key(position: int) -> tuple[float, float, float, float, int]:
        item = pool.items[position]
        impact = _impact(item, pairs, k)
        u = doubt.get((item.query_id, item.doc_id), 1.0)
        best = max(_discount(item.ranks.get(s), k) for s in compared)
        return (-impact * u, -impact, -u, -best, position)

    ordered = tuple(pool.items[i] for i in sorted(range(len(pool.items)), key=key))
    order: dict[str, Any] = {
        "by": "impact",
        "metric": f"ndcg@{k}",
        "systems": list(compared),
        "pairs": "all" if baseline is None else f"against {baseline}",
        "uncertainty": uncertainty is not None,
        "from": pool.id,
    }
    return Pool(ordered, pool.depth, pool.strategy, pool.systems, already_judged=pool.already_judged, order=order)


# ----- helpers --------------------------------------------------------------------------------------------------


def judge_uncertainty(log: JudgementLog, *, judge: str | None = None) -> dict[tuple[str, str], float]:
    """``{(query_id, doc_id): 1 - confidence}`` from a model judge's grades in a judgement log (each pair's latest
    grade by ``judge``, or by any judge in the log): what :func:`impact_order` takes as ``uncertainty``. A grade
    given without a confidence leaves its pair out (``u = 1``, as for a pair no judge graded)."""
    if judge is not None and judge not in log.judges:
        raise InputError(
            f"no model judge {judge!r} in the log (its judges: {sorted(log.judges) or 'none'})", source=str(log.path)
        )
    if judge is not None:
        log.one_judge(judge)  # one judge, not two versions under one name
    doubt: dict[tuple[str, str], float] = {}
    for j in log.judgements:  # in file order: a later grade of a pair supersedes an earlier one
        if j.judge is None or (judge is not None and j.assessor != judge):
            continue
        confidence = j.confidence
        if confidence is None:
            doubt.pop(j.pair, None)
        else:
            doubt[j.pair] = 1.0 - float(confidence)
    return doubt


def _discount(rank: int | None, k: int) -> float:
    """nDCG@k's discount of a 1-based rank: ``1 / log2(1 + rank)`` within the cutoff, 0 beyond it or unranked."""
    return 0.0 if rank is None or rank > k else 1.0 / math.log2(1.0 + rank)


def _impact(item: PoolItem, pairs: Sequence[tuple[str, str]], k: int) -> float:
    total = sum(abs(_discount(item.ranks.get(a), k) - _discount(item.ranks.get(b), k)) for a, b in pairs)
    return total / len(pairs)


def _compared(
    pool: Pool, systems: Sequence[str] | None, depth: int | None, baseline: str | None
) -> tuple[tuple[str, ...], int, list[tuple[str, str]]]:
    """The systems compared, the cutoff and the pairs, checked against the pool."""
    if systems is None:
        compared = tuple(pool.systems)
    elif isinstance(systems, str) or not isinstance(systems, Sequence):
        raise InputError(f"systems must be a list of the pool's system names, not {systems!r}")
    else:
        compared = tuple(systems)
        unknown = [s for s in compared if s not in pool.systems]
        if unknown:
            raise InputError(f"system(s) {unknown} are not in pool {pool.id} (its systems: {list(pool.systems)})")
        if len(set(compared)) != len(compared):
            raise InputError(f"systems {list(compared)} name one system twice")
    if len(compared) < 2:
        raise InputError(
            f"impact order compares systems, and pool {pool.id} has {len(compared)} to compare "
            f"({list(compared)}): pool two systems or more, or keep the pool's own order"
        )
    k = pool.depth if depth is None else check_int(depth, "impact order depth", high=pool.depth)
    if baseline is None:
        pairs = list(combinations(compared, 2))
    elif baseline not in compared:
        raise InputError(f"baseline {baseline!r} is not one of the systems compared {list(compared)}")
    else:
        pairs = [(baseline, s) for s in compared if s != baseline]
    return compared, k, pairs


def _check_uncertainty(uncertainty: Mapping[tuple[str, str], float] | None) -> dict[tuple[str, str], float]:
    if uncertainty is None:
        return {}
    if not isinstance(uncertainty, Mapping):
        raise InputError(f"uncertainty must map (query_id, doc_id) to a number in [0, 1], not {uncertainty!r}")
    checked: dict[tuple[str, str], float] = {}
    for pair, value in uncertainty.items():
        if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
            raise InputError(f"uncertainty: key {pair!r} is not a (query_id, doc_id) pair of str")
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not math.isfinite(value)
            or not 0 <= value <= 1
        ):
            raise InputError(
                f"uncertainty of query {pair[0]!r}, doc {pair[1]!r} must be a number in [0, 1], not {value!r}"
            )
        checked[pair] = float(value)
    return checked
