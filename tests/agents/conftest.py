"""Real agent CLIs (bench/agents_lab's pinned npm packages) against a scripted model, each in
a private loopback-only network namespace. ``.ci/run`` installs the CLIs (``npm install`` in
bench/agents_lab) and runs as root, so under ``CI=true`` a missing CLI or a missing
``unshare`` fails these tests instead of skipping them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.agents_lab import netns
from tests.support import skips

LAB = Path(__file__).resolve().parents[2] / "bench" / "agents_lab"
BINARIES = {"claude-code": "claude", "codex": "codex", "gemini": "gemini", "opencode": "opencode"}
SCENARIO_TIMEOUT_S = 240


def unavailable(cli: str, needs: tuple[str, ...] = ()) -> str | None:
    for program in needs:
        if shutil.which(program) is None:
            return skips.because("agent-lab", f"`{program}` is not installed")
    binary = LAB / "node_modules" / ".bin" / BINARIES[cli]
    if not binary.exists():
        return skips.because("npm-trees", f"{binary} is missing")
    reason = netns.missing()
    return skips.because("agent-lab", reason) if reason else None


@pytest.fixture
def scenario() -> Callable[..., dict[str, Any]]:
    """Run ``python -m bench.agents_lab scenario NAME --cli CLI …`` (it enters its own
    namespace) and return its facts."""

    def run(name: str, cli: str, *args: str, needs: tuple[str, ...] = ()) -> dict[str, Any]:
        reason = unavailable(cli, needs)
        if reason:
            if os.environ.get("CI") == "true":
                pytest.fail(f"CI must be able to run {cli} in the agent lab: {reason}")
            pytest.skip(reason)
        done = subprocess.run(
            [sys.executable, "-m", "bench.agents_lab", "scenario", name, "--cli", cli, *args],
            cwd=LAB.parents[1],
            capture_output=True,
            text=True,
            timeout=SCENARIO_TIMEOUT_S,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        facts: dict[str, Any] = json.loads(done.stdout)
        return facts

    return run
