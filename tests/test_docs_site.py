"""The documentation as a site (mkdocs.yml, `make docs`): a short README that links into it, every page in the
navigation, an API page of public names only, and a build that is strict in CI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import rag_eval

from .conftest import ROOT

DOCS = ROOT / "docs"
CONFIG = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_the_readme_is_at_most_10_kb():
    assert (ROOT / "README.md").stat().st_size <= 10_000


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists():
    """A page outside the navigation is found by nobody (and `--strict` refuses it too: omitted_files: warn)."""
    in_nav = set(re.findall(r"^\s+- (?:[^\n:]+: |\"[^\"]+\": )?([\w/-]+\.md)\s*$", CONFIG, flags=re.M))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert in_nav == pages


def test_the_api_page_documents_public_names_only():
    """The API page names `rag_eval.X` for X of `rag_eval.__all__` only, never a module path that may move."""
    names = re.findall(r"^::: (\S+)$", (DOCS / "api.md").read_text(encoding="utf-8"), flags=re.M)
    assert names, "docs/api.md renders docstrings"
    assert all(n.startswith("rag_eval.") and n.count(".") == 1 for n in names), names
    assert {n.split(".")[1] for n in names} <= set(rag_eval.__all__)


def test_the_site_is_built_strictly_in_ci():
    """`make docs` builds with --strict, and without --quiet (which hides the warnings --strict counts); .ci/run
    runs it as a step of its own."""
    recipe = re.search(r"^docs: .*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(encoding="utf-8"), flags=re.M)
    assert recipe and "mkdocs build --strict" in recipe.group(1) and "--quiet" not in recipe.group(1)
    assert 'step "docs" make docs' in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^site_dir: build/", CONFIG, flags=re.M)  # build/ is git-ignored


@pytest.mark.slow
def test_the_site_builds_with_strict(tmp_path):
    """The build itself: no broken link or anchor, no page outside the nav, every API name found; offline (the
    tests refuse the network)."""
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": str(Path(sys.executable).parent)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert 'id="rag_eval.evaluate"' in api and 'id="rag_eval.Report"' in api
    assert "fonts.googleapis.com" not in (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
