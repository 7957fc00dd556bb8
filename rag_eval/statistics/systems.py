"""The systems of reports, as :func:`rag_eval.compare` and :func:`rag_eval.power` see them: a run, or ``run/stage``
for the stages of a pipeline; a name given by the user resolved to one of them (docs/power.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["resolve_system", "with_systems"]


def with_systems(per_query: pd.DataFrame) -> pd.DataFrame:
    """``per_query`` (a report's, or several concatenated) with a ``system`` column: the run, or ``run/stage``."""
    if "stage" in per_query.columns:
        per_query["system"] = np.where(
            per_query["stage"].isna(), per_query["run"], per_query["run"] + "/" + per_query["stage"].fillna("")
        )
    else:
        per_query["system"] = per_query["run"]
    return per_query


def resolve_system(name: str, systems: list[str], *, role: str = "baseline") -> str:
    """The system ``name`` means: its full name, or a run or stage name that one system alone has."""
    if name in systems:
        return name
    matches = [s for s in systems if s.split("/")[-1] == name or s.split("/")[0] == name]
    if len(matches) == 1:
        return matches[0]
    hint = f"; it could be any of {matches}" if matches else f"; systems: {systems}"
    raise ValueError(f"{role} {name!r} is not one of the systems{hint}")
