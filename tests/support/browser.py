"""Headless Chromium from Debian's package, driven by Playwright's Python API.

Playwright's own browser download is never used (``executable_path`` points at the system
Chromium, which ``.ci/run`` installs when missing). One browser per test module (not per
session: Playwright's sync API keeps its own event loop running on the worker's main thread
while it is open, and the asyncio tests that the same xdist worker runs next then fail with
"another loop is running"); each test gets a fresh context (its own cookies). Under ``CI=true`` a missing Chromium fails the tests
instead of skipping them, as the PostgreSQL tests do.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import skips

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 800}
NARROW = {"width": 420, "height": 800}


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium_path()
    if executable is None:
        skips.unavailable("chromium", "Chromium is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the tests save a screenshot of each page: ``MCPSUB_SCREENSHOTS`` (e.g.
    ``docs/console`` to refresh the documentation's images) or the session's tmp dir."""
    chosen = os.environ.get("MCPSUB_SCREENSHOTS")
    path = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path
