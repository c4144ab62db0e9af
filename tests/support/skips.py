"""Why a test cannot run on this machine, and the one command that brings what it lacks.

Every skip names a group of ``NEEDS`` (``because(group, detail)`` writes it into the reason),
and a run ends with one line naming each group that skipped and its command (``summary``,
printed by tests/conftest.py), so a newcomer's ``make test`` says how to run everything.
Under ``CI=true`` nothing may skip: ``.ci/run`` brings every group, so ``unavailable`` fails.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable

import pytest

# group -> the command that brings it. `make test` itself runs `make node-deps`; the Debian
# packages need root, which `make test-deps` asks for by name (.ci/run calls it).
NEEDS = {
    "postgresql": "make test-deps",
    "chromium": "make test-deps",
    "zsh": "make test-deps",
    "node": "make test-deps",
    "npm-trees": "make node-deps",
    "agent-lab": "make test-deps, as root",
    "root": "run the tests as root",
    "systemd": "apt-get install systemd",
    "linux": "a Linux machine",
}

_GROUP = re.compile(r"\[needs ([a-z-]+)\]")


def because(group: str, detail: str) -> str:
    """A skip reason that names its group (and so the command in the run's last line)."""
    assert group in NEEDS, group
    return f"[needs {group}] {detail}"


def unavailable(group: str, detail: str) -> None:
    """Skip the test, or fail it under CI, where nothing may skip."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must be able to run this test ({NEEDS[group]}): {detail}", pytrace=False)
    pytest.skip(because(group, detail))


def summary(reasons: Iterable[str]) -> str | None:
    """One line: each skipped group, how many tests, and the command that brings it."""
    counts = Counter(m.group(1) if (m := _GROUP.search(r)) else "other" for r in reasons)
    if not counts:
        return None
    parts = [
        f"{group} ({n}: {NEEDS.get(group, 'see the skip reasons above')})"
        for group, n in sorted(counts.items())
    ]
    return "skipped: " + "; ".join(parts)
