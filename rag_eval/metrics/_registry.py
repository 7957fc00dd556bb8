"""Where the engine finds a family's kernel when it is not one of the engine's own (see :mod:`._engine`).

A kernel module registers a function per family with :func:`kernel`; the function receives a
:class:`KernelInputs` and returns one value per counted query: a float64 array, or for a family of kind "text"
(:mod:`.catalogue`) an array of str. Kernel modules are listed in :data:`KERNEL_MODULES` and imported on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from ..data.run import Run
    from ._grades import GradeMatrix
    from ._kernels import Cutoff
    from ._qrels_stats import QrelsStats
    from .conventions import Conventions
    from .grammar import Metric

__all__ = ["KERNELS", "KERNEL_MODULES", "KernelInputs", "kernel", "load_kernels"]


class KernelInputs(NamedTuple):
    """What a kernel may read: the run's grade matrix, the qrels' statistics, the conventions, the metric with
    its parameters, its cutoff (an int, None, or one per query), its relevance threshold, the run itself (its
    tag, for runid) and ``relevant(t)``: which judged cells of the matrix have grade >= t (cached)."""

    matrix: GradeMatrix
    stats: QrelsStats
    conventions: Conventions
    metric: Metric
    k: Cutoff
    threshold: int
    run: Run
    relevant: Callable[[int], np.ndarray]


KERNELS: dict[str, Callable[[KernelInputs], np.ndarray]] = {}

# modules of rag_eval.metrics that register kernels, by theme
KERNEL_MODULES = ("_kernels_cut", "_kernels_sets", "_kernels_gain", "_kernels_pool")
_loaded = False


def kernel(*families: str) -> Callable[[Callable[[KernelInputs], np.ndarray]], Callable[[KernelInputs], np.ndarray]]:
    """Register the decorated function as the kernel of ``families``."""

    def register(function: Callable[[KernelInputs], np.ndarray]) -> Callable[[KernelInputs], np.ndarray]:
        for family in families:
            if family in KERNELS:
                raise RuntimeError(f"two kernels for the family {family!r}")
            KERNELS[family] = function
        return function

    return register


def load_kernels() -> None:
    """Import every kernel module once (each registers its kernels)."""
    global _loaded
    if not _loaded:
        for name in KERNEL_MODULES:
            importlib.import_module(f"{__package__}.{name}")
        _loaded = True
