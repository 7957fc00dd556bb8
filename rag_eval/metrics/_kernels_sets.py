"""Kernels for the set measures (the whole ranking as a set): set_precision, set_relative_precision,
set_recall, set_map, set_f, utility, num_nonrel_judged_ret.

Each is trec_eval 10.0's (``m_set_P.c``, ``m_set_rel_P.c``, ``m_set_recall.c``, ``m_set_map.c``, ``m_set_F.c``,
``m_utility.c``, ``m_num_nonrel_judged_ret.c``) in its order of operations, from four counts per query: retrieved
(the ranking's length after ``-M`` and ``-J``), relevant retrieved, judged non-relevant retrieved, and R. A
per-query cutoff (a token budget's) cuts each ranking first: the set is what was delivered.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from . import _kernels as K
from ._kernels_cut import cut_ranking, decimals
from ._registry import KernelInputs
from .conventions import follows_trec_eval

__all__ = ["DEFAULT_UTILITY_WEIGHTS", "set_f", "utility"]

DEFAULT_UTILITY_WEIGHTS = (1.0, -1.0, 0.0, 0.0)  # m_utility.c
DEFAULT_SET_F_BETA = 1.0  # m_set_F.c


def _counts(ki: KernelInputs) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per query: retrieved, relevant retrieved, judged non-relevant retrieved (float64) and R (int64)."""
    rows, _, grades, lengths = cut_ranking(ki)
    n = len(lengths)
    rel = grades >= ki.threshold
    found = K.count_per_query(rows, rel, n)
    judged_nonrel = K.count_per_query(rows, ~rel, n)
    return lengths.astype(np.float64), found, judged_nonrel, ki.stats.num_relevant(ki.threshold)


def set_f(found: np.ndarray, retrieved: np.ndarray, R: np.ndarray, beta: float) -> np.ndarray:
    """trec_eval's set_F: ``(beta + 1) P R / (beta P + R)`` with P and R the set's precision and recall, 0 when
    nothing relevant is retrieved. trec_eval's parameter (ir_measures' SetF ``beta`` too) weighs recall by
    ``beta`` itself, not its square: it is van Rijsbergen's beta squared, so ``beta=4`` is the usual F2."""
    out = np.zeros(len(found))
    some = found > 0
    P = found[some] / retrieved[some]
    Rc = found[some] / R[some].astype(np.float64)
    out[some] = (beta + 1.0) * P * Rc / (beta * P + Rc)
    return out


def utility(found: np.ndarray, retrieved: np.ndarray, R: np.ndarray, weights: tuple[float, ...]) -> np.ndarray:
    """``w1 a + w2 b + w3 c + w4 d`` over the contingency table (``m_utility.c``): a relevant retrieved, b
    non-relevant retrieved, c relevant not retrieved, d non-relevant not retrieved, where d needs the collection's
    size: like trec_eval without ``-N`` it is taken as 0, so ``d = a - retrieved - R`` (that is ``-(b + c)``)."""
    w1, w2, w3, w4 = weights
    Rf = R.astype(np.float64)
    total: np.ndarray = w1 * found + w2 * (retrieved - found) + w3 * (Rf - found) + w4 * (0.0 + found - retrieved - Rf)
    return total


def _set_precision(ki: KernelInputs) -> np.ndarray:
    retrieved, found, _, _ = _counts(ki)
    return K._safe_div(found, retrieved)


def _set_relative_precision(ki: KernelInputs) -> np.ndarray:
    retrieved, found, _, R = _counts(ki)
    return K._safe_div(found, np.minimum(retrieved, R))


def _set_recall(ki: KernelInputs) -> np.ndarray:
    _, found, _, R = _counts(ki)
    return K._safe_div(found, R)


def _set_map(ki: KernelInputs) -> np.ndarray:
    retrieved, found, _, R = _counts(ki)
    return K._safe_div(found * found, retrieved * R)


def _set_f(ki: KernelInputs) -> np.ndarray:
    values = decimals(ki, "beta", (DEFAULT_SET_F_BETA,))
    if len(values) != 1 or values[0] < 0:
        raise InputError(f"metric {str(ki.metric)!r}: beta= takes one decimal, 0 or more (the weight of recall)")
    retrieved, found, _, R = _counts(ki)
    return set_f(found, retrieved, R, values[0])


def _utility(ki: KernelInputs) -> np.ndarray:
    weights = decimals(ki, "weights", DEFAULT_UTILITY_WEIGHTS)
    if len(weights) != 4:
        raise InputError(f"metric {str(ki.metric)!r}: weights= takes 4 decimals w1;w2;w3;w4, not {len(weights)}")
    retrieved, found, _, R = _counts(ki)
    if follows_trec_eval(ki.conventions):
        # trec_eval -c measures a query missing from the run on a ranking of one document outside the pool
        # (trec_eval.c's bogus_ranking; -J removes it), then resets the value of the measure *named* "utility" to
        # 0: the default weights, not typed. With weights typed (even the defaults, -m utility.1,-1,0,0) its name is
        # "utility_w1,w2,w3,w4" and the phantom's value stays: Metric.trec_name tells which.
        missing = ki.stats.returned(ki.run) == 0
        if ki.metric.trec_name == "utility":
            return np.where(missing, 0.0, utility(found, retrieved, R, weights))
        retrieved = np.where(missing, 0.0 if ki.conventions.unjudged == "remove" else 1.0, retrieved)
    return utility(found, retrieved, R, weights)


def _num_nonrel_judged_ret(ki: KernelInputs) -> np.ndarray:
    _, _, judged_nonrel, _ = _counts(ki)
    return judged_nonrel
