"""Debian's /usr/bin/chromium under Playwright, started one way for every browser test and for
docs/screenshots/take.py (docs/html-report.md): never a browser that Playwright downloads.

:func:`chromium` yields a launched browser, or calls ``missing`` with the reason when chromium, the Python package
playwright or the start fails; the tests pass :func:`missing_in_test` (a skip, a failure under CI=true).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INSTALL = "apt-get install -y chromium; pip install -e '.[dev]' (playwright)"


def missing_in_test(reason: str) -> NoReturn:
    """Skip the test with ``reason`` and what to install; under CI=true, fail it."""
    import pytest

    message = f"the browser test needs Debian's chromium and Playwright: {reason} (install: {INSTALL})"
    if os.environ.get("CI") == "true":
        pytest.fail(message + "; CI=true, so this is a failure")
    pytest.skip(message)


@contextlib.contextmanager
def chromium(missing: Callable[[str], NoReturn] = missing_in_test) -> Iterator[Any]:
    """A headless Chromium (Playwright's ``Browser``) on :data:`CHROMIUM` with :data:`CHROMIUM_ARGS` and a fresh
    profile; closed on exit."""
    if not CHROMIUM.exists():
        missing(f"{CHROMIUM} is missing")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("the Python package playwright is not installed")
    manager = sync_playwright().start()
    try:
        try:
            launched = manager.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, timeout=30_000)
        except Exception as exc:  # noqa: BLE001 - any failure to start the browser is reported, not raised
            missing(f"{CHROMIUM} does not start under Playwright ({' '.join(str(exc).split())[:300]})")
        try:
            yield launched
        finally:
            launched.close()
    finally:
        manager.stop()
