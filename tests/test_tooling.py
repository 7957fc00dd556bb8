"""The tools maintainers run: the pre-commit hooks are local (nothing cloned offline) and run what ``make lint`` runs,
``make lint`` and ``make test-fast`` run what they say, ``make test`` and ``make test-pure`` run on both cores
(pytest-xdist), and the linters in the venv are the versions pyproject.toml pins (a new ruff may format
differently)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT

BIN = Path(sys.executable).parent
CONFIG = ROOT / ".pre-commit-config.yaml"


def _dry_run(target: str) -> str:
    """The commands ``make -n <target>`` would run (recursive makes are dry too); skips without make."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("needs make")
    done = subprocess.run([make, "-n", "--no-print-directory", target], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_pre_commit_accepts_the_config():
    done = subprocess.run(
        [str(BIN / "pre-commit"), "validate-config", str(CONFIG)], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_pre_commit_refuses_a_broken_config(tmp_path):
    """The validation above can fail: a hook without its language is refused."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("repos:\n  - repo: local\n    hooks:\n      - id: x\n        name: x\n        entry: x\n")
    done = subprocess.run([str(BIN / "pre-commit"), "validate-config", str(broken)], capture_output=True, text=True)
    assert done.returncode != 0 and "language" in done.stdout + done.stderr


def test_every_hook_is_local_and_runs_the_venv_s_tools():
    config = yaml.safe_load(CONFIG.read_text())
    assert [repo["repo"] for repo in config["repos"]] == ["local"]
    hooks = {hook["id"]: hook for hook in config["repos"][0]["hooks"]}
    assert set(hooks) == {"ruff-check", "ruff-format", "mypy"}
    assert {hook["language"] for hook in hooks.values()} == {"system"}
    assert hooks["ruff-check"]["entry"].startswith(".venv/bin/ruff check")
    assert hooks["ruff-format"]["entry"].startswith(".venv/bin/ruff format")
    # mypy runs as make lint runs it, on the whole package (not on the files staged: mypy needs the package)
    assert hooks["mypy"]["entry"] == "make --no-print-directory mypy" and hooks["mypy"]["pass_filenames"] is False


def test_make_lint_runs_ruff_repo_wide_and_mypy_on_the_package_with_its_adapters():
    commands = _dry_run("lint")
    assert re.search(r"^\S*ruff check \.$", commands, re.M), commands
    assert re.search(r"^\S*ruff format --check \.$", commands, re.M), commands
    assert "mypy --config-file" in commands and "-p rag_eval" in commands
    assert "ln -s" in commands and "/adapters build/mypy/rag_eval/adapters" in commands
    assert "sed -e 's|^rag_eval/adapters/|adapters/|'" in commands  # error paths name the checkout's files


def test_make_test_fast_leaves_out_the_marked_tests():
    commands = _dry_run("test-fast")
    fast = "not slow and not browser and not notebook and not sigkill and not wheel and not ray"
    assert f'pytest -q -m "{fast}"' in commands
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert {m.split(":")[0] for m in markers} == {"slow", "browser", "notebook", "sigkill", "wheel", "ray"}


def test_make_test_pure_runs_every_test_of_the_twins_on_the_pure_python_paths():
    """The pure pass runs a subset (the whole fast suite twice would take CI past 30 minutes): every test file that
    names the twins (``_accel``, ``speedups``, the ``reader`` fixture) must be in it, with the fast markers."""
    commands = _dry_run("test-pure")
    line = next(c for c in commands.splitlines() if "pytest" in c)
    assert line.startswith("RAG_EVAL_PURE_PYTHON=1 ") and '-m "not slow and not browser' in line
    listed = set(re.findall(r"tests/test_\w+\.py", line))
    assert all((ROOT / name).is_file() for name in listed), listed
    naming_twins = {
        f"tests/{path.name}"
        for path in (ROOT / "tests").glob("test_*.py")
        if path.name not in ("test_layers.py", "test_tooling.py")  # _accel as a module of layer 0; this test
        and re.search(r"_accel|speedups|\breader\b", path.read_text("utf-8"))
    }
    assert len(naming_twins) >= 8
    assert naming_twins - listed == set()
    assert "make test-pure" in (ROOT / ".ci" / "run").read_text()


def test_make_test_and_test_pure_run_on_both_cores_and_the_ray_tests_one_at_a_time():
    """The main suite (each file whole on one worker: its module fixtures, such as the demo run, made once) and the
    pure pass (test by test) run on two pytest-xdist workers; the Ray tests of `make test` stay in one process."""
    main = [c for c in _dry_run("test").splitlines() if "pytest" in c]
    assert re.search(r'pytest -q -m "not ray and not browser" -n 2 --dist loadfile$', main[0]), main
    assert re.search(r"pytest -q -m browser$", main[1]), main  # the browser tests apart, in one process
    ray = [c for c in main[2:] if "-m ray tests/test_ray.py" in c]  # in its namespace (unshare -n) or not
    assert ray and not any(re.search(r"-n (\d+|auto)\b|--numprocesses|--dist", c) for c in ray), ray
    pure = next(c for c in _dry_run("test-pure").splitlines() if "pytest" in c)
    assert " -n 2 --dist worksteal " in pure, pure
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    assert any(d.startswith("pytest-xdist") for d in dev)


def test_each_install_step_says_what_it_does_and_how_long_it_took():
    """`make demo` and `make test` install through the venv's stamp and the browser target: every install command
    runs inside the Makefile's STEP, which prints a line before it and one with its time after it (or its failure),
    so that no step is silent for minutes (issue 30). The step's shell function is run here on two commands."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("needs make")
    done = subprocess.run(
        [make, "-n", "-B", "--no-print-directory", ".venv/.installed"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    commands = done.stdout.replace("\\\n", " ")  # a command continued over lines is one
    installs = [c for c in commands.splitlines() if re.search(r"-m venv |pip install|pip uninstall|pip download", c)]
    what = [re.search(r'; step "([^"]+)"', c) for c in installs]
    assert all(what), installs  # each inside a step, named
    named = [w.group(1) for w in what if w]
    assert len(named) == 7 and any(n.startswith("torch 2.13.0") for n in named)
    assert any(n.startswith("the project, editable") for n in named)
    browser = _dry_run("browser")
    assert "step \"Debian's chromium" in browser and "(nothing to install)" in browser
    for target in ("demo", "test"):
        assert re.search(rf"^{target}: \$\(STAMP\)", (ROOT / "Makefile").read_text(), re.M)  # they install first
    assert "make .venv/.installed browser" in (ROOT / ".ci" / "run").read_text()
    # the step itself, on a command that works and one that fails
    function = commands.splitlines()[0].split("; step ")[0] + "; step"
    ran = subprocess.run(
        ["bash", "-c", f'{function} "a pause" true; {function} "a fault" false'], capture_output=True, text=True
    )
    assert ran.returncode == 1
    lines = ran.stdout.splitlines()
    assert lines[0] == "set-up: a pause ..." and lines[2] == "set-up: a fault ..." and len(lines) == 4
    assert re.fullmatch(r"set-up: a pause: done in \d+ s", lines[1]), lines
    assert re.fullmatch(r"set-up: a fault: failed after \d+ s", lines[3]), lines


def test_the_linters_are_the_pinned_versions():
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    pins = dict(d.split("==") for d in dev if "==" in d)
    assert version("ruff") == pins["ruff"] and version("mypy") == pins["mypy"]
