"""docs/agents.md's "Try it" on its own: it must not assume `mcpsubctl` on PATH or a daemon
running (the README's walkthrough stops its own), or its `until` loop never ends. Run here as a newcomer pastes it: from the repository's root, with
nothing on PATH but the system's, no lab, no daemon, a fresh HOME; it must start what it
needs, show the change through the hook, stop everything and leave nothing behind, in
bounded time. (tests/demo/test_docs.py runs it too, beside a running lab and daemon.)"""

from __future__ import annotations

import re
import socket
import subprocess
from pathlib import Path

from tests.demo.test_docs import shell_blocks
from tests.support.cli import REPO_ROOT, cli_env


def try_it() -> str:
    text = (REPO_ROOT / "docs" / "agents.md").read_text()
    section = text[
        text.index("Try it from the repository's root") : text.index("## Client by client")
    ]
    blocks = [block for block, reason in shell_blocks(section) if reason is None]
    assert len(blocks) == 1, blocks
    return blocks[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_try_it_runs_alone_from_the_clone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = cli_env({"HOME": str(home), "TMPDIR": str(scratch), "PATH": "/usr/bin:/bin"})
    for name in ("MCPSUB_STATE_DIR", "MCPSUB_API", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"):
        env.pop(name, None)
    script = "set -e\n" + try_it().replace("8089", str(free_port()))
    proc = subprocess.run(
        ["bash", "-c", script], env=env, cwd=str(REPO_ROOT), capture_output=True, text=True,
        timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "test://demo/agents is now revision 2" in proc.stdout, proc.stdout
    assert list(scratch.iterdir()) == []  # its state directory is gone
    assert not (home / ".local" / "state" / "mcpsub").exists()  # the real one untouched
    # Its loop is bounded: no `until` without an end.
    assert not re.search(r"^\s*until ", try_it(), re.M)
