"""The kernels of the prediction-powered estimates: arrays in, arrays out (the last axis is the queries; leading
axes broadcast): the PPI++ mean and its variance, the classical mean, the normal interval. The estimators and
their conventions: :mod:`rag_eval.statistics.prediction_powered` and docs/ppi.md."""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["MeanEstimate", "classical_mean", "normal_interval", "ppi_mean"]


class MeanEstimate(NamedTuple):
    """A point estimate, its standard error and the ``lam`` used (arrays over the leading axes, or 0-d)."""

    estimate: npt.NDArray[np.float64]
    se: npt.NDArray[np.float64]
    lam: npt.NDArray[np.float64]


def ppi_mean(
    human: npt.ArrayLike,
    judge_labelled: npt.ArrayLike,
    judge_all: npt.ArrayLike,
    *,
    lam: float | None = None,
    inclusion: npt.ArrayLike | None = None,
    strata: npt.ArrayLike | None = None,
    finite_population: bool = True,
) -> MeanEstimate:
    """The PPI (``lam`` given; ``lam=1`` is plain PPI) or PPI++ (``lam=None``: tuned) mean and its standard error.

    ``human[..., j]`` and ``judge_labelled[..., j]`` are the human and the judge value of the j-th human-graded
    query, ``judge_all[..., i]`` the judge value of the i-th query of the whole set (the human-graded ones
    included); leading axes (simulations, say) broadcast. ``inclusion``: the human-graded queries' inclusion
    probabilities (None: a uniform draw, ``n/N`` each); ``strata``: their strata (one label per human-graded query;
    None: one stratum), for the stratified variance. The formulas, with ``finite_population`` either way, are in
    the module's docstring; ``finite_population=False`` equals ppi_py's ``ppi_mean_pointestimate`` and
    ``ppi_mean_ci`` (with ``w = 1/inclusion``) to rounding, and ignores ``strata``.
    """
    h = np.asarray(human, dtype=np.float64)
    fl = np.asarray(judge_labelled, dtype=np.float64)
    fa = np.asarray(judge_all, dtype=np.float64)
    n, big_n = h.shape[-1], fa.shape[-1]
    if fl.shape[-1] != n:
        raise ValueError(f"human and judge_labelled differ in length: {n} and {fl.shape[-1]}")
    pi = np.full(h.shape, n / big_n) if inclusion is None else np.broadcast_to(np.asarray(inclusion, float), h.shape)
    w = 1.0 / pi
    if not finite_population:
        return _ppi_py_mean(h, fl, fa, w if inclusion is not None else None, lam)
    total = w.sum(-1)
    h_bar = (w * h).sum(-1) / total
    f_bar = (w * fl).sum(-1) / total
    dh, df, k = _centred(h, w, strata), _centred(fl, w, strata), _stratum_factor(strata, n)
    c = k * (1.0 - pi) * w**2
    if lam is None:
        num, den = (c * dh * df).sum(-1), (c * df * df).sum(-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            lam_ = np.where(den > 0, np.clip(num / den, 0.0, 1.0), 0.0)
    else:
        lam_ = np.full(h.shape[:-1], float(lam))
    e = dh - lam_[..., None] * df
    var = (c * e * e).sum(-1) / total**2
    estimate = lam_ * fa.mean(-1) + h_bar - lam_ * f_bar
    return MeanEstimate(estimate, np.sqrt(var), lam_)


def _one_hot(strata: npt.ArrayLike | None, n: int) -> npt.NDArray[np.float64]:
    """``[n, strata]``: 1 where query j is in stratum g (one column without strata)."""
    if strata is None:
        return np.ones((n, 1))
    labels = np.asarray(strata)
    if labels.shape != (n,):
        raise ValueError(f"strata must hold one label per human-graded query ({n}), not shape {labels.shape}")
    _, index = np.unique(labels, return_inverse=True)
    return np.eye(int(index.max()) + 1)[index]


def _centred(x: npt.NDArray[np.float64], w: npt.NDArray[np.float64], strata: npt.ArrayLike | None) -> Any:
    """``x`` less the weighted mean of its stratum (of all of it without strata)."""
    m = _one_hot(strata, x.shape[-1])
    means = ((w * x) @ m) / (w @ m)
    return x - means @ m.T


def _stratum_factor(strata: npt.ArrayLike | None, n: int) -> Any:
    """``n_g / (n_g - 1)`` for each query's stratum g (``n / (n - 1)`` without strata); inf for a stratum of one."""
    m = _one_hot(strata, n)
    sizes = m.sum(0)
    with np.errstate(divide="ignore"):
        return (m @ (sizes / (sizes - 1))).astype(np.float64)


def _ppi_py_mean(
    h: npt.NDArray[np.float64],
    fl: npt.NDArray[np.float64],
    fa: npt.NDArray[np.float64],
    w: npt.NDArray[np.float64] | None,
    lam: float | None,
) -> MeanEstimate:
    """ppi_py's mean estimator (its ``_calc_lam_glm`` with ``clip=True``, its standard error, population ddof 0)."""
    n, big_n = h.shape[-1], fa.shape[-1]
    wn = np.ones_like(h) if w is None else w / w.sum(-1, keepdims=True) * n
    if lam is None:
        theta = fa.mean(-1, keepdims=True) + (wn * (h - fl)).mean(-1, keepdims=True)
        g, gh, gu = wn * (h - theta), wn * (fl - theta), fa - theta
        cov = ((g - g.mean(-1, keepdims=True)) * (gh - gh.mean(-1, keepdims=True))).mean(-1)
        var = np.concatenate([gh, np.broadcast_to(gu, gh.shape[:-1] + gu.shape[-1:])], -1).var(-1, ddof=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            lam_ = np.where(var > 0, np.clip(cov / ((1 + n / big_n) * var), 0.0, 1.0), 0.0)
    else:
        lam_ = np.full(h.shape[:-1], float(lam))
    lb = lam_[..., None]
    rect = wn * (h - lb * fl)
    estimate = lam_ * fa.mean(-1) + rect.mean(-1)
    se = np.sqrt(lam_**2 * fa.var(-1) / big_n + rect.var(-1) / n)
    return MeanEstimate(estimate, se, lam_)


def classical_mean(
    human: npt.ArrayLike,
    *,
    inclusion: npt.ArrayLike | None = None,
    strata: npt.ArrayLike | None = None,
    population: int | None = None,
) -> MeanEstimate:
    """The human-only mean (Hajek with ``inclusion``) and its standard error: :func:`ppi_mean` at ``lam = 0``.
    ``population`` (N) applies the finite-population correction ``1 - pi_i`` (``pi_i = n/N`` without
    ``inclusion``); None without ``inclusion``: none (``se = S_h / sqrt(n)``, n - 1 in ``S_h``)."""
    h = np.asarray(human, dtype=np.float64)
    n = h.shape[-1]
    if inclusion is not None:
        pi = np.broadcast_to(np.asarray(inclusion, float), h.shape)
    else:
        pi = np.full(h.shape, n / population if population else 1.0)
    w = 1.0 / pi
    total = w.sum(-1)
    mean = (w * h).sum(-1) / total
    fpc = (1.0 - pi) if (population is not None or inclusion is not None) else 1.0
    c = _stratum_factor(strata, n) * fpc * w**2
    var = (c * _centred(h, w, strata) ** 2).sum(-1) / total**2
    return MeanEstimate(mean, np.sqrt(var), np.zeros(h.shape[:-1]))


def normal_interval(
    estimate: npt.ArrayLike, se: npt.ArrayLike, alpha: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """``estimate -+ z_{1 - alpha/2} * se`` (two-sided normal interval)."""
    z = NormalDist().inv_cdf(1 - alpha / 2)
    est, s = np.asarray(estimate, float), np.asarray(se, float)
    return est - z * s, est + z * s


def _p_value(estimate: float, se: float) -> float:
    """Two-sided p-value of ``estimate / se`` under the standard normal (NaN when se is 0 and estimate is 0)."""
    if se > 0:
        return math.erfc(abs(estimate / se) / math.sqrt(2))
    return float("nan") if estimate == 0 else 0.0
