"""The install commands of the docs work: no ``mcpsub`` package is on the registry, so
docs/operations.md installs from a clone or from a wheel built from one; its uv
lines run here for real, offline (uv's cache holds what ``make setup`` installed; the tests
reach nothing beyond the loopback), into a temporary ``HOME``, from an export of this
checkout at ``~/src/mcpsub`` as the doc assumes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.demo.test_docs import shell_blocks
from tests.support.cli import REPO_ROOT

DOCS = {
    "README.md": REPO_ROOT / "README.md",
    "operations.md": REPO_ROOT / "docs" / "operations.md",
    "agents.md": REPO_ROOT / "docs" / "agents.md",
    "cli.md": REPO_ROOT / "docs" / "cli.md",
}
REGISTRY_INSTALL = re.compile(
    r"\b(?:uv tool install|pipx install|pip install)\s+mcpsub(?![\w./~-])"
)


def install_blocks() -> list[str]:
    text = DOCS["operations.md"].read_text()
    section = text[text.index("## Install\n") : text.index("### Man pages")]
    return [block for block, _ in shell_blocks(section)]


@pytest.mark.parametrize("doc", sorted(DOCS))
def test_no_doc_installs_mcpsub_from_a_registry(doc: str) -> None:
    """Every install command names a path or a wheel; the bare name is only ever quoted as
    what does not work."""
    for number, line in enumerate(DOCS[doc].read_text().splitlines(), 1):
        quoted = "not on a package index" in line or "find nothing" in line
        if REGISTRY_INSTALL.search(line) and not quoted:
            pytest.fail(f"{doc}:{number} installs mcpsub from a registry: {line.strip()}")


def uv_binary() -> str:
    found = shutil.which("uv") or str(REPO_ROOT / ".tools" / "bin" / "uv")
    if not os.access(found, os.X_OK):
        pytest.fail("uv is not installed: run make setup", pytrace=False)
    return found


def run_offline(script: str, home: Path) -> subprocess.CompletedProcess[str]:
    """``script`` under ``bash -e`` with ``HOME=home``, a clone at ``~/src/mcpsub`` (this
    checkout's committed files), uv offline on its real cache, and ``~/.local/bin`` on PATH."""
    uv = uv_binary()
    cache = subprocess.run(
        [uv, "cache", "dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    clone = home / "src" / "mcpsub"
    clone.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", "HEAD"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(clone)], input=archive, check=True)
    env = {
        "HOME": str(home),
        "PATH": os.pathsep.join(
            [str(home / ".local" / "bin"), str(Path(uv).parent), "/usr/bin", "/bin"]
        ),
        "UV_OFFLINE": "1",
        "UV_CACHE_DIR": cache,
        "UV_PYTHON": sys.executable,
        "UV_PYTHON_DOWNLOADS": "never",
        "LANG": "C.UTF-8",
    }
    return subprocess.run(
        ["bash", "-c", "set -e\n" + script],
        env=env,
        cwd=str(home),
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def test_install_from_the_clone_runs_as_written(tmp_path: Path) -> None:
    first = install_blocks()[0]
    # pipx and a virtualenv's pip would fetch the dependencies from the registry: not here.
    lines = [
        line for line in first.splitlines() if not line.startswith(("pipx ", "python3 -m venv"))
    ]
    assert any(line.startswith("uv tool install ~/src/mcpsub") for line in lines), first
    proc = run_offline("\n".join(lines), tmp_path / "home")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mcpsubd v" in proc.stdout and "mcpsubctl v" in proc.stdout, proc.stdout


def test_install_from_a_built_wheel_runs_as_written(tmp_path: Path) -> None:
    wheel = install_blocks()[1]
    assert "uv build --wheel" in wheel and ".whl" in wheel, wheel
    home = tmp_path / "home"
    proc = run_offline(wheel + "\nmcpsubctl --version\n", home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mcpsubctl v" in proc.stdout, proc.stdout
    assert list((home / "src" / "mcpsub" / "dist").glob("mcpsub-*-py3-none-any.whl"))
