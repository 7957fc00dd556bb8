"""adapters/ ships inside the package as rag_eval.adapters, from an editable install and from a built wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .conftest import ROOT

PROBE = (
    "import importlib.util, json, rag_eval.adapters, rag_eval.examples;"
    "print(json.dumps({'adapters': rag_eval.adapters.__file__,"
    " 'top_level_adapters': importlib.util.find_spec('adapters') is not None}))"
)


def _probe(env: dict[str, str] | None = None) -> dict:
    import json

    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, env=env, cwd="/")
    return json.loads(out.stdout)


def test_editable_install_maps_adapters_into_the_package():
    found = _probe()
    assert Path(found["adapters"]) == ROOT / "adapters" / "__init__.py"
    assert found["top_level_adapters"] is False


@pytest.mark.slow
@pytest.mark.wheel
def test_built_wheel_ships_adapters_as_rag_eval_adapters(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    wheel = next(tmp_path.glob("rag_eval_harness-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for package in ("adapters", "data", "metrics", "stages", "reports", "bench"):
        assert f"rag_eval/{package}/__init__.py" in names
    assert "rag_eval/examples/qrels.txt" in names
    assert "rag_eval/bench/demo_data/questions.jsonl" in names and "rag_eval/bench/demo_data/labels.tsv" in names
    tops = {n.split("/")[0] for n in names}
    assert not tops & {"adapters", "tests", "benchmarks", "notebooks"}
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "rag-eval = rag_eval.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()

    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    env = dict(os.environ, PYTHONPATH=str(unpacked))
    found = _probe(env)
    assert Path(found["adapters"]) == unpacked / "rag_eval" / "adapters" / "__init__.py"
    assert found["top_level_adapters"] is False
