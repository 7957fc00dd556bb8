"""The face of rag_eval.adapters: its modules, their public names, and imports that load no framework."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import rag_eval.adapters

from .conftest import ROOT

MODULES = {
    "functions": [
        "FunctionBatchReranker",
        "FunctionBatchRetriever",
        "FunctionGenerator",
        "FunctionJudge",
        "FunctionReranker",
        "FunctionRetriever",
        "generator",
        "judge",
        "reranker",
        "retriever",
    ],
    "haystack": ["HaystackGenerator", "HaystackReranker", "HaystackRetriever", "generator", "reranker", "retriever"],
    "langchain": [
        "LangChainGenerator",
        "LangChainJudge",
        "LangChainReranker",
        "LangChainRetriever",
        "generator",
        "judge",
        "pipeline",
        "reranker",
        "retriever",
    ],
    "llamaindex": [
        "LlamaIndexGenerator",
        "LlamaIndexJudge",
        "LlamaIndexReranker",
        "LlamaIndexRetriever",
        "generator",
        "judge",
        "reranker",
        "retriever",
    ],
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


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_adapter_runs_the_contract_suite(module):
    """tests/adapter_contract.py is the one definition of what an adapter must do: each module of the package has a
    test module with at least one AdapterContract subclass built on that module's stages."""
    import ast

    path = ROOT / "tests" / f"test_adapters_{module}.py"
    assert path.exists(), f"rag_eval.adapters.{module} has no tests/{path.name}"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    contracts = [
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef) and any(getattr(b, "id", None) == "AdapterContract" for b in node.bases)
    ]
    imported = {
        alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module == "rag_eval.adapters"
        for alias in node.names
    }
    assert contracts, f"tests/{path.name} runs no AdapterContract subclass"
    assert module in imported, f"tests/{path.name} does not build its stages with rag_eval.adapters.{module}"
    assert sorted(MODULES) == sorted(rag_eval.adapters._MODULES)
    assert f"`rag_eval.adapters.{module}`" in (ROOT / "docs" / "adapters.md").read_text(encoding="utf-8")


def test_unknown_attributes_fail_as_usual():
    with pytest.raises(AttributeError, match="no attribute 'llama_index'"):
        rag_eval.adapters.llama_index  # noqa: B018


def test_importing_the_adapters_loads_no_framework():
    code = (
        "import json, sys, rag_eval.adapters.functions, rag_eval.adapters.langchain, rag_eval.adapters.llamaindex,"
        " rag_eval.adapters.haystack; print(json.dumps(sorted(sys.modules)))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    heavy = ("langchain", "langchain_core", "langchain_classic", "llama_index", "haystack", "bm25s", "torch", "pandas")
    assert [m for m in loaded if m.split(".")[0] in heavy] == []


# ----- a framework that is not installed ----------------------------------------------------------------------
HIDE = """
import sys
class Hidden:
    '''Refuses {top} and its submodules, as if it were not installed.'''
    def find_spec(self, name, path=None, target=None):
        if name == {top!r} or name.startswith({top!r} + "."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Hidden())
"""


def _without(top: str, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", HIDE.format(top=top) + code], capture_output=True, text=True, check=False, timeout=120
    )


LANGCHAIN_BUILDS = {
    "retriever": "lc.retriever(object(), name='r')",
    "reranker": "lc.reranker(object(), name='r')",
    "pipeline": "lc.pipeline(object())",
}


@pytest.mark.parametrize("build", sorted(LANGCHAIN_BUILDS))
def test_a_langchain_adapter_without_langchain_names_the_extra(build):
    """Importing the module works without langchain-core; building an adapter raises an ImportError naming the
    extra's pip command (before looking at what it was given)."""
    done = _without(
        "langchain_core",
        "import rag_eval.adapters.langchain as lc\n"
        f"try:\n    {LANGCHAIN_BUILDS[build]}\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc)\n"
        "import sys; print(sorted(m for m in sys.modules if m.startswith('langchain')))",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "ImportError rag_eval.adapters.langchain needs langchain_core, which is not installed: "
        "pip install 'rag-eval-stages[langchain]'",
        "[]",
    ]


@pytest.mark.parametrize("build", ["retriever", "reranker"])
def test_a_llamaindex_adapter_without_llamaindex_names_the_extra(build):
    done = _without(
        "llama_index",
        "from rag_eval.adapters import llamaindex as li\n"
        f"try:\n    li.{build}(object(), name='r')\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc)",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "ImportError rag_eval.adapters.llamaindex needs llama_index, which is not installed: "
        "pip install 'rag-eval-stages[llamaindex]'"
    ]


@pytest.mark.parametrize("build", ["retriever", "reranker"])
def test_a_haystack_adapter_without_haystack_names_the_extra(build):
    done = _without(
        "haystack",
        "from rag_eval.adapters import haystack as hs\n"
        f"try:\n    hs.{build}(object(), name='r')\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc)",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "ImportError rag_eval.adapters.haystack needs haystack, which is not installed: "
        "pip install 'rag-eval-stages[haystack]'"
    ]


def test_with_the_framework_installed_a_wrong_object_is_still_a_type_error():
    """The check for the framework comes first, and does not hide the check of the object when it is there."""
    from rag_eval.adapters import langchain, llamaindex

    with pytest.raises(TypeError, match="BaseDocumentCompressor"):
        langchain.reranker(object(), name="r")
    with pytest.raises(TypeError, match="expected a LlamaIndex BaseRetriever, not object"):
        llamaindex.retriever(object(), name="r")


# ----- one identity -------------------------------------------------------------------------------------------
def test_the_adapters_folder_has_one_identity_from_the_repository_root():
    """From the repository root ``import adapters`` would find the folder as a top-level package: it refuses, and
    ``rag_eval.adapters`` (the folder under its one name) works there, its classes those of rag_eval.stages."""
    code = (
        "import sys\n"
        "try:\n    import adapters\n"
        "except ImportError as exc:\n    print('refused:', exc)\n"
        "print('adapters' in sys.modules, any(m.startswith('adapters.') for m in sys.modules))\n"
        "import rag_eval.adapters, rag_eval.stages as s\n"
        "from rag_eval.adapters import functions, langchain, llamaindex\n"
        "print(rag_eval.adapters.__name__, functions.Retriever is s.Retriever, langchain.Pipeline is s.Pipeline,\n"
        "      issubclass(llamaindex.LlamaIndexReranker, s.Reranker), s.Hit is functions.Hit)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "refused: this folder is the package rag_eval.adapters, not 'adapters': import rag_eval.adapters instead "
        "(under a second name its modules would define second copies of every class)",
        "False False",
        "rag_eval.adapters True True True True",
    ]
    assert (ROOT / "adapters" / "__init__.py").resolve() == Path(rag_eval.adapters.__file__).resolve()
