"""What a family's kernel reads (:class:`KernelInputs`) and where the engine finds the kernel: the one its
registration names (:class:`~rag_eval.metrics.catalogue.Family`'s ``kernel``), imported once. See docs/metrics.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..errors import InputError
from .catalogue import FAMILIES

if TYPE_CHECKING:
    from ..data.run import Run
    from ._grades import GradeMatrix
    from ._kernels import Cutoff
    from ._qrels_stats import QrelsStats
    from .conventions import Conventions
    from .grammar import Metric

__all__ = ["KERNELS", "Kernel", "KernelInputs", "kernel_of", "load_kernels"]


class KernelInputs(NamedTuple):
    """What a kernel may read: the run's grade matrix, the qrels' statistics, the conventions, the metric with
    its parameters, its cutoff (an int, None, or one per query), its relevance threshold, the run itself (its
    tag, for runid), ``relevant(t)``: which judged cells of the matrix have grade >= t (cached), and ``cache``:
    a dict the kernels of one evaluation share (None: nothing shared)."""

    matrix: GradeMatrix
    stats: QrelsStats
    conventions: Conventions
    metric: Metric
    k: Cutoff
    threshold: int
    run: Run
    relevant: Callable[[int], np.ndarray]
    cache: dict[Any, Any] | None = None


Kernel = Callable[[KernelInputs], np.ndarray]

# the kernels resolved so far, by family (a registration's "module:function" imported once)
KERNELS: dict[str, Kernel] = {}


def kernel_of(family: str, metric: object = None) -> Kernel:
    """The kernel ``family``'s registration names, imported on first use; an InputError (naming ``metric`` when
    given) when it has none."""
    found = KERNELS.get(family)
    if found is not None:
        return found
    target = FAMILIES[family].kernel
    if target is None:
        where = f"metric {str(metric)!r}: " if metric is not None else ""
        raise InputError(f"{where}the family {family!r} is in the catalogue but has no kernel yet")
    if isinstance(target, str):
        module, _, name = target.partition(":")
        target = getattr(importlib.import_module(module, __package__), name)
    KERNELS[family] = target
    return target


def load_kernels() -> None:
    """Resolve the kernel of every registered family that has one."""
    for family, registered in FAMILIES.items():
        if registered.kernel is not None:
            kernel_of(family)
