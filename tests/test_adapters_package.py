"""The face of rag_eval.adapters: its modules, their public names, and imports that load no framework."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import rag_eval.adapters

MODULES = {
    "functions": ["FunctionReranker", "FunctionRetriever", "reranker", "retriever"],
    "langchain": ["LangChainReranker", "LangChainRetriever", "pipeline", "reranker", "retriever"],
    "llamaindex": ["LlamaIndexReranker", "LlamaIndexRetriever", "reranker", "retriever"],
}


def test_the_package_names_its_modules_and_exports_nothing_itself():
    assert rag_eval.adapters.__all__ == []
    for module in MODULES:
        assert f"rag_eval.adapters.{module}" in rag_eval.adapters.__doc__
        assert module in dir(rag_eval.adapters)
    assert "llama_index`" not in rag_eval.adapters.__doc__  # the module is llamaindex; llama_index is the framework


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_module_pins_its_public_names(module):
    loaded = getattr(rag_eval.adapters, module)  # loaded on first attribute access
    assert loaded.__all__ == MODULES[module] == sorted(loaded.__all__)
    assert all(callable(getattr(loaded, name)) for name in loaded.__all__)


def test_unknown_attributes_fail_as_usual():
    with pytest.raises(AttributeError, match="no attribute 'llama_index'"):
        rag_eval.adapters.llama_index  # noqa: B018


def test_importing_the_adapters_loads_no_framework():
    code = (
        "import json, sys, rag_eval.adapters.functions, rag_eval.adapters.langchain, rag_eval.adapters.llamaindex;"
        "print(json.dumps(sorted(sys.modules)))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    heavy = ("langchain", "langchain_core", "langchain_classic", "llama_index", "bm25s", "torch", "pandas")
    assert [m for m in loaded if m.split(".")[0] in heavy] == []
