"""The kernels of the first families (precision, recall, hit, mrr, ap, r_precision, bpref, ndcg, judged,
recall_ceiling and the counts) on :class:`~rag_eval.metrics._registry.KernelInputs`, over the array kernels of
:mod:`._kernels`. Registered in :mod:`.catalogue`; see docs/metrics.md."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from . import _kernels as K
from ._registry import KernelInputs
from .grammar import Metric, gains_map

EXP_GAIN_LIMIT = 1000  # 2^grade - 1 stays finite (with room for a sum) in float64 up to here


def precision_kernel(ki: KernelInputs) -> np.ndarray:
    m = ki.matrix
    return K.precision(m.rows, m.ranks, ki.relevant(ki.threshold), ki.k, m.num_queries)


def recall_kernel(ki: KernelInputs) -> np.ndarray:
    m = ki.matrix
    return K.recall(m.rows, m.ranks, ki.relevant(ki.threshold), ki.k, ki.stats.num_relevant(ki.threshold))


def hit_kernel(ki: KernelInputs) -> np.ndarray:
    m = ki.matrix
    return K.hit(m.rows, m.ranks, ki.relevant(ki.threshold), ki.k, m.num_queries)


def mrr_kernel(ki: KernelInputs) -> np.ndarray:
    m = ki.matrix
    return K.reciprocal_rank(m.rows, m.ranks, ki.relevant(ki.threshold), ki.k, m.num_queries)


def ap_kernel(ki: KernelInputs) -> np.ndarray:
    m = ki.matrix
    return K.average_precision(m.rows, m.ranks, ki.relevant(ki.threshold), ki.k, ki.stats.num_relevant(ki.threshold))


def r_precision_kernel(ki: KernelInputs) -> np.ndarray:
    m = ki.matrix
    return K.r_precision(m.rows, m.ranks, ki.relevant(ki.threshold), ki.stats.num_relevant(ki.threshold))


def bpref_kernel(ki: KernelInputs) -> np.ndarray:
    t = ki.threshold
    rel = ki.relevant(t)
    return K.bpref(ki.matrix.rows, rel, ~rel, ki.stats.num_relevant(t), ki.stats.judged_nonrelevant(t))


def _check_exp_gain(qrels_grades: np.ndarray, gmap: dict[int, float] | None, metric: Metric) -> None:
    """Refuse a grade whose exponential gain would overflow to inf (and turn nDCG into NaN)."""
    big = qrels_grades[qrels_grades > EXP_GAIN_LIMIT]
    if gmap:
        big = big[~np.isin(big, list(gmap))]
    if len(big):
        raise InputError(
            f"metric {str(metric)!r}: grade {int(big.max())} is too large for exponential gain (2^grade - 1 "
            f"overflows beyond grade {EXP_GAIN_LIMIT}); use gain=linear, e.g. 'ndcg(gain=linear)', "
            "or map it with gains="
        )


def ndcg_kernel(ki: KernelInputs) -> np.ndarray:
    m, stats, metric = ki.matrix, ki.stats, ki.metric
    rule = metric.param.get("gain", ki.conventions.gain)
    gmap = gains_map(metric)
    cache = {} if ki.cache is None else ki.cache
    # the gains of one matrix (one tie rule) under one gain rule, shared by the nDCG metrics of an evaluation
    key = ("ndcg gains", rule, tuple(sorted(gmap.items())) if gmap else None, metric.rel, id(m))
    if key not in cache:
        if rule == "exp":
            _check_exp_gain(stats.grades, gmap, metric)
        # scaled per query by its largest judged gain, as the ideal is: no sum overflows to inf
        exponents = stats.gain_exponents(rule, gmap, metric.rel)
        cache[key] = K.scale_gains(K.gain_of(m.grades, rule, gmap, metric.rel), m.rows, exponents)
    return K.ndcg(m.rows, m.ranks, cache[key], ki.k, stats.ideal(rule, gmap, metric.rel, ki.k))


def judged_kernel(ki: KernelInputs) -> np.ndarray:
    m, param = ki.matrix, ki.metric.param
    return K.judged(m.rows, m.ranks, ki.k, m.lengths, per=param.get("per", "returned"), empty=param.get("empty", "nan"))


def recall_ceiling_kernel(ki: KernelInputs) -> np.ndarray:
    return K.recall_ceiling(ki.stats.num_relevant(ki.threshold), ki.k)


def num_rel_kernel(ki: KernelInputs) -> np.ndarray:
    return ki.stats.num_relevant(ki.threshold).astype(np.float64)


def num_ret_kernel(ki: KernelInputs) -> np.ndarray:
    return ki.matrix.lengths.astype(np.float64)


def num_rel_ret_kernel(ki: KernelInputs) -> np.ndarray:
    return K.count_per_query(ki.matrix.rows, ki.relevant(ki.threshold), ki.matrix.num_queries)
