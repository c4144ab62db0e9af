"""service.daemon.without_dev_extras: structlog imported without rich, and rich still
importable after.

A fresh interpreter (what is imported is the point), in the development environment where
rich is installed (schemathesis brings it)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
import service.daemon.without_dev_extras
assert "structlog" in sys.modules, "structlog not imported"
assert "rich" not in sys.modules, "rich imported with structlog"
assert sys.modules.get("httpx._main", "absent") is None, "httpx's command-line tool not hidden"
import rich  # the marker is gone: a later import still finds it
print("ok", rich.__name__)
"""


def test_structlog_comes_without_rich_and_rich_stays_importable() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok rich"
