"""Layer 7, the drivers: tuning a pipeline's settings on labels (:mod:`.tuning`, docs/tuning.md) and the regression
gate (:mod:`.gating`, docs/gate.md), which run pipelines, evaluate and compare."""

from .gating import GateResult, gate
from .tuning import Space, tune

__all__ = ["GateResult", "Space", "gate", "tune"]
