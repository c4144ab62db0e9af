"""The command blocks of docs/*.md, run as written (README.md's walkthrough has its own test).

The convention (docs/doc-tests.md): every fenced ```bash or ```sh block in docs/ is run,
unless the line right before its fence is ``<!-- not run: REASON -->`` (a synopsis with
placeholders, a command that runs until Ctrl-C, needs root, systemd or macOS, installs
something, or reaches another machine). Other fences (``text``, ``json``, ``toml``, bare
output) are never run.

A doc's runnable blocks go, in order, into one ``bash -e`` script, run with what the docs
assume: the commands on ``PATH``, a lab server on 127.0.0.1:8089 (the real port is
substituted), and ``mcpsubd`` running with its default state directory under ``HOME``
(a temporary directory), so ``~/.local/state/mcpsub/api.sock`` is where the docs say.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import BIN, REPO_ROOT, cli_env
from tests.support.daemon import Daemon
from tests.support.lab import LabServer

DOCS = REPO_ROOT / "docs"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SKIP = re.compile(r"<!-- not run: (.+?) -->\n$")
SHELL = {"bash", "sh"}
EXPECTED = {
    # What the commands print when they did what the doc says (curl -s exits 0 on any answer).
    "agents.md": ["additionalContext", "test://demo/agents is now revision 2"],
    "api.md": ['"uri":"test://review/status"', '"type":"resource.updated"'],
    "labserver.md": ['"supportedVersions":["2026-07-28"]', '"contents":[{"uri":"test://review'],
    "operations.md": ["(dry run: nothing written)", "[Service]", "mcpsub_ready 1"],
    "agents-face.md": ['"protocolVersion":"2025-11-25"', '"structuredContent":{"subscriptions":'],
    "verification-guide.md": [
        "route subscription",
        "Verdict: **passed**",
        "mcp-resource-subscribe-probe-client passed",
    ],
    "triggers.md": ['"type":"resource.updated"', "attempt 1: exit 0", "keep-changes"],
    "protocol-migration.md": ['"code":-32022', "Verdict: **failed** · protocol: 2025 only"],
}


def shell_blocks(text: str) -> list[tuple[str, str | None]]:
    """Every shell block of a document with its not-run reason (None: it is run)."""
    blocks = []
    for match in FENCE.finditer(text):
        if match.group(1) not in SHELL:
            continue
        before = text[: match.start()]
        last_line = before[before.rstrip("\n").rfind("\n") + 1 :]
        skip = SKIP.search(last_line)
        blocks.append((match.group(2), skip.group(1).strip() if skip else None))
    return blocks


def runnable(path: Path) -> list[str]:
    return [block for block, reason in shell_blocks(path.read_text()) if reason is None]


DOCS_WITH_COMMANDS = sorted(p.name for p in DOCS.glob("*.md") if runnable(p))


def test_the_convention_is_applied() -> None:
    """Every marker sits right before a shell fence, and says why; some blocks do run."""
    for path in DOCS.glob("*.md"):
        text = path.read_text()
        markers = len(re.findall(r"^<!-- not run:", text, re.M))
        reasons = [r for _, r in shell_blocks(text) if r is not None]
        assert markers == len(reasons), f"{path.name}: a not-run marker is not before a shell fence"
        assert all(len(r) > 5 for r in reasons), path.name
    assert {
        "api.md",
        "labserver.md",
        "operations.md",
        "verification-guide.md",
        "protocol-migration.md",
    } <= set(DOCS_WITH_COMMANDS)


def test_shell_blocks_parse() -> None:
    """Even blocks that are not run are shell, not prose: ``bash -n`` accepts them."""
    for path in DOCS.glob("*.md"):
        for block, _ in shell_blocks(path.read_text()):
            proc = subprocess.run(["bash", "-n"], input=block, capture_output=True, text=True)
            assert proc.returncode == 0, f"{path.name}:\n{block}\n{proc.stderr}"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[dict[str, str], LabServer]]:
    home = tmp_path / "home"
    home.mkdir()
    with LabServer({"MCP_TEST_UPDATE_DELAY_SECONDS": "1"}) as lab:
        daemon = Daemon(home / ".local" / "state" / "mcpsub", {"HOME": str(home)}).start()
        try:
            env = cli_env({"HOME": str(home), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
            for name in ("XDG_STATE_HOME", "XDG_RUNTIME_DIR", "MCPSUB_STATE_DIR", "MCPSUB_API"):
                env.pop(name, None)
            yield env, lab
        finally:
            daemon.stop()


@pytest.mark.parametrize("doc", DOCS_WITH_COMMANDS)
def test_doc_commands_run_as_written(doc: str, world: tuple[dict[str, str], LabServer]) -> None:
    env, lab = world
    blocks = runnable(DOCS / doc)
    script = "\n".join(["set -e", *(b.replace("8089", str(lab.port)) for b in blocks)])
    proc = subprocess.run(
        ["bash", "-c", script],
        env=env,
        cwd=str(REPO_ROOT),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, f"{doc}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    for expected in EXPECTED.get(doc, ()):
        assert expected in proc.stdout, f"{doc}: {expected!r} not in\n{proc.stdout}"
