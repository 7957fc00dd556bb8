"""adapters/ ships inside the package as rag_eval.adapters, from an editable install and from a built wheel, and has
no second identity: from the repository root, where ``adapters`` is on the path, importing it under that name fails
with a message naming rag_eval.adapters (a second name would define second copies of every class)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from .conftest import ROOT

PROBE = """
import json, rag_eval.adapters, rag_eval.examples
try:
    import adapters
    second = adapters.__name__
except ImportError as exc:
    second = "ImportError: " + str(exc)
print(json.dumps({"adapters": rag_eval.adapters.__file__, "second": second}))
"""


def _probe(cwd: Path | str, env: dict[str, str] | None = None) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("cwd", ["/", str(ROOT)], ids=["elsewhere", "repository-root"])
def test_editable_install_maps_adapters_into_the_package(cwd):
    found = _probe(cwd)
    assert Path(found["adapters"]) == ROOT / "adapters" / "__init__.py"
    if cwd == "/":
        assert found["second"].startswith("ImportError: No module named 'adapters'")
    else:  # the folder is on the path (the working directory): it refuses to be imported under that name
        assert found["second"].startswith("ImportError: this folder is the package rag_eval.adapters, not 'adapters'")
        assert "import rag_eval.adapters instead" in found["second"]


def test_the_distribution_is_rag_eval_stages_and_its_version_is_the_package_s():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "rag-eval-stages"
    assert project["scripts"] == {"rag-eval": "rag_eval.cli:main"}
    from importlib.metadata import version

    import rag_eval

    assert version("rag-eval-stages") == rag_eval.__version__ == "0.2.0"


def test_the_core_dependencies_name_no_framework_and_every_extra_exists():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {d.split(">")[0].split("=")[0].split("[")[0].strip().lower() for d in project["dependencies"]}
    assert core == {"numpy", "scipy", "pandas", "pyarrow", "pydantic", "tqdm"}
    extras = project["optional-dependencies"]
    assert set(extras) == {
        *(
            "langchain",
            "llamaindex",
            "models",
            "labelling",
            "bench",
            "ray",
            "querysets",
            "judges",
            "html",
            "haystack",
            "stores",
            "generate",
            "traces",
            "mlflow",
            "docs",
            "dev",
            "all",
        )
    }
    from rag_eval._optional import EXTRAS

    # every extra the error messages name exists, and back; docs (the site's tools, make docs) and dev are the
    # project's own tooling, which no feature of rag_eval imports
    assert set(EXTRAS) == set(extras) - {"docs", "dev", "all"}


@pytest.mark.slow
@pytest.mark.wheel
def test_built_wheel_ships_adapters_as_rag_eval_adapters(project_wheel, tmp_path):
    """The wheel is built from the repository root (``pip wheel .`` there: tests/conftest.py's ``project_wheel``)."""
    assert project_wheel.name.startswith("rag_eval_stages-0.2.0-")
    wheel = zipfile.ZipFile(project_wheel)
    names = wheel.namelist()
    for package in (
        "adapters",
        "data",
        "metrics",
        "stages",
        "reports",
        "statistics",
        "renderers",
        "drivers",
        "builtin",
        "ground_truth",
        "labelling",
    ):
        assert f"rag_eval/{package}/__init__.py" in names
    assert "rag_eval/py.typed" in names and "rag_eval/renderers/report.html.j2" in names
    assert "rag_eval/_old_paths/reports/gate.py" in names  # rag_eval.reports.gate, with a DeprecationWarning
    assert "rag_eval/examples/qrels.txt" in names
    assert "rag_eval/builtin/demo_data/questions.jsonl" in names and "rag_eval/builtin/demo_data/labels.tsv" in names
    tops = {n.split("/")[0] for n in names}
    assert not tops & {"adapters", "tests", "benchmarks", "notebooks"}
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "rag-eval = rag_eval.cli:main" in wheel.read(entry_points).decode()

    unpacked = tmp_path / "site"
    wheel.extractall(unpacked)
    # the unpacked wheel on the path, ahead of the editable install (its import hook answers only after the path)
    found = _probe("/", env=dict(os.environ, PYTHONPATH=str(unpacked)))
    assert Path(found["adapters"]) == unpacked / "rag_eval" / "adapters" / "__init__.py"
    assert found["second"].startswith("ImportError: No module named 'adapters'")
