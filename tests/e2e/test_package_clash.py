"""Another distribution's package named like one of ours (``cli``, ``service``,
``labserver``, ``migrations``) is detected at start-up: one line naming it, the hint to
install in an environment of its own, exit 70, no traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.cli import REPO_ROOT, SHIMS, run_cli


@pytest.mark.parametrize(
    ("program", "package"),
    [
        ("mcpsubctl", "cli"),
        ("mcp-resource-subscriber", "cli"),
        ("mcpsubd", "service"),
        ("mcp-lab-server", "labserver"),
    ],
)
def test_a_foreign_package_of_the_same_name_is_named(
    tmp_path: Path, program: str, package: str
) -> None:
    foreign = tmp_path / "other-dist" / package
    foreign.mkdir(parents=True)
    (foreign / "__init__.py").write_text('"""Some other project\'s package."""\n')
    path = os.pathsep.join([str(foreign.parent), str(SHIMS), str(REPO_ROOT)])
    result = run_cli(program, "--version", env={"PYTHONPATH": path})
    assert result.code == 70, result
    first, hint = result.stderr.splitlines()
    assert first.startswith(f"{program}: another installed distribution provides")
    assert str(foreign) in first and "Traceback" not in result.stderr
    assert hint.startswith("hint: install mcpsub in an environment of its own")
    assert result.stdout == ""


def test_our_own_packages_pass() -> None:
    result = run_cli("mcpsubctl", "--version")
    assert result.code == 0 and result.stdout.startswith("mcpsubctl v")
