"""Shared test helpers: where ../shared is, and what to do when it is absent."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("RAG_EVAL_SHARED", ROOT.parent / "shared"))
CONFORMANCE = SHARED / "conformance" / "trec_eval"
DATASETS = SHARED / "datasets"


def need_shared(path: Path) -> Path:
    """Return ``path`` under ../shared; skip the test when it is absent, or fail under CI=true."""
    if path.exists():
        return path
    message = f"needs the shared data at {path} (../shared beside the checkout)"
    if os.environ.get("CI") == "true":
        pytest.fail(message + "; CI=true, so its absence is a failure")
    pytest.skip(message)


def _skip_or_fail(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(message + "; CI=true, so this is a failure")
    pytest.skip(message)


def _build_trec_eval(folder: Path, *, digits: str | None = None) -> Path:
    """trec_eval 10.0 built from ``../shared/conformance/trec_eval/src`` in ``folder`` (a few seconds); with
    ``digits`` (a printf conversion such as ``%.17g``), one that prints its values so instead of ``%6.4f``.

    Skips with the reason where the source, ``make`` or a C compiler is missing; fails instead under CI=true.
    """
    source = CONFORMANCE / "src"
    if not (source / "Makefile").exists():
        _skip_or_fail(f"needs trec_eval's source at {source} (../shared beside the checkout)")
    compiler = shutil.which("cc") or shutil.which("gcc")
    make = shutil.which("make")
    if compiler is None or make is None:
        _skip_or_fail("needs a C compiler (cc) and make to build trec_eval")
    shutil.copytree(source, folder)
    if digits is not None:
        for name in ("meas_print_single.c", "meas_print_final.c"):
            path = folder / name
            text = path.read_text()
            assert text.count("%6.4f") >= 3, f"{name} no longer prints %6.4f"
            path.write_text(text.replace("%6.4f", digits))
    built = subprocess.run(
        [make, "-C", str(folder), "-s", f"CC={compiler}", "trec_eval"], capture_output=True, text=True
    )
    binary = folder / "trec_eval"
    if built.returncode != 0 or not binary.exists():
        pytest.fail(f"building trec_eval failed (exit {built.returncode}):\n{built.stderr[-2000:]}")
    return binary


@pytest.fixture(scope="session")
def trec_eval_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real trec_eval 10.0, built from its source (see :func:`_build_trec_eval`)."""
    return _build_trec_eval(tmp_path_factory.mktemp("trec_eval") / "src")


@pytest.fixture(scope="session")
def trec_eval_exact_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """trec_eval 10.0 printing every value with 17 significant digits (``%.17g``): enough to tell every double
    apart, so rag_eval's values can be compared with its bit for bit."""
    return _build_trec_eval(tmp_path_factory.mktemp("trec_eval_exact") / "src", digits="%.17g")


@pytest.fixture(scope="session")
def project_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built once per session from the repository root (``pip wheel --no-deps
    --no-build-isolation .`` with the venv's setuptools: nothing is downloaded)."""
    folder = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(folder), "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    wheels = list(folder.glob("*.whl"))
    if built.returncode != 0 or len(wheels) != 1:
        pytest.fail(f"pip wheel . failed (exit {built.returncode}):\n{built.stderr[-3000:]}")
    return wheels[0]


@pytest.fixture(params=["c", "python"])
def reader(request, monkeypatch):
    """Run the test with the C paths (``rag_eval._speedups``) and again with the pure-Python ones."""
    from rag_eval import _accel

    if request.param == "c" and _accel.speedups is None:
        pytest.skip("rag_eval._speedups is not built")
    if request.param == "python":
        monkeypatch.setattr(_accel, "speedups", None)
    return request.param


@pytest.fixture
def tmpfs(tmp_path):
    """A real 64 KiB tmpfs mounted for the test (as root), unmounted after it, to fill a disk for real. Where mount
    is not permitted the test skips with the reason; under CI=true (root, on the project's machine, where it
    works) that is a failure."""
    import subprocess

    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0:
        message = "needs root to mount a small tmpfs"
    else:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True, text=True
        )
        message = None if done.returncode == 0 else f"mount -t tmpfs is not permitted here: {done.stderr.strip()}"
    if message is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(message + "; CI=true runs as root on the project's machine, where it works")
        pytest.skip(message)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
