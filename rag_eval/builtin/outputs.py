"""The benchmark's and the demo's report folder: a result folder (:meth:`rag_eval.Report.save_folder`, laid out in
``docs/result-folders.md``) of pipeline results, headed by what was run, where and when."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..data.collection import Collection
from ..data.qrels import Qrels
from ..renderers.result_folder import SHOWN, safe_name
from ..reports.report import Report
from ..stages.result import PipelineResult

__all__ = ["SHOWN", "facts_json", "safe_name", "write_report_folder"]


def write_report_folder(
    out: Path,
    report: Report,
    results: Mapping[str, PipelineResult],
    qrels: Qrels,
    *,
    title: str,
    facts: Mapping[str, Any],
    plots: bool = True,
    collection: Collection | None = None,
) -> Path:
    """Write everything about ``report`` into the result folder ``out`` (its runs per stage, ``qrels``, plots,
    ``report.md`` headed by ``title`` and ``facts``, the manifest); returns the path of ``report.md``.
    ``collection`` fingerprints the whole corpus in the content hashes."""
    return report.save_folder(
        out, qrels=qrels, runs=dict(results), collection=collection, title=title, facts=facts, plots=plots
    )


def facts_json(facts: Mapping[str, Any]) -> str:
    return json.dumps(dict(facts), indent=2, default=str)
