"""A run that skips ends with one line naming each skipped group and the command that
brings it (tests/support/skips.py, tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import skips
from tests.support.cli import REPO_ROOT


def test_summary_counts_each_group_and_names_its_command() -> None:
    reasons = [
        "Skipped: " + skips.because("zsh", "zsh is not installed"),
        "Skipped: " + skips.because("zsh", "zsh is not installed"),
        "Skipped: " + skips.because("npm-trees", "bench/compat's packages are not installed"),
        "Skipped: something else",
    ]
    assert skips.summary(reasons) == (
        "skipped: npm-trees (1: make node-deps); other (1: see the skip reasons above); "
        "zsh (2: make test-deps)"
    )
    assert skips.summary([]) is None


def test_a_run_without_zsh_ends_with_the_group_and_its_command() -> None:
    env = {**os.environ, "PATH": str(REPO_ROOT / ".venv" / "bin")}
    env.pop("CI", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q",
         "tests/unit/cli/test_zsh_completion.py", "-k", "zsh_parses"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "skipped: zsh (1: make test-deps)", done.stdout
