"""README.md's walkthrough, run as written: the docs cannot drift from what works.

Every ```bash block that runs a program from ``.venv/bin`` is pasted, in order, into one
``bash -e`` script (what a person pasting them gets, minus the typing pauses), with port
8089 replaced by a free port, ``HOME`` in a temporary directory (the daemon's state goes to
``~/.local/state/mcpsub``) and the lab's update delay shortened. Background jobs (the lab,
mcpsubd) are stopped at the end.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from pathlib import Path

from tests.support.cli import REPO_ROOT, cli_env

BLOCK = re.compile(r"```bash\n(.*?)```", re.S)


def walkthrough(readme: str) -> list[str]:
    return [b for b in BLOCK.findall(readme) if ".venv/bin/" in b]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_readme_walkthrough_runs_as_written(tmp_path: Path) -> None:
    blocks = walkthrough((REPO_ROOT / "README.md").read_text())
    assert blocks, "README.md has no walkthrough block"
    port = free_port()
    script = "\n".join(
        [
            "set -e",
            "trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null' EXIT",
            *(b.replace("8089", str(port)) for b in blocks),
        ]
    )
    home = tmp_path / "h"
    home.mkdir()
    env = cli_env(
        {
            "HOME": str(home),
            "MCP_TEST_UPDATE_DELAY_SECONDS": "1",
            "MCPSUB_LOG_LEVEL": "warning",
        }
    )
    for name in ("XDG_STATE_HOME", "MCPSUB_STATE_DIR", "MCPSUB_API", "MCPSUB_CONFIG"):
        env.pop(name, None)
    proc = subprocess.run(
        ["bash", "-c", script],
        env=env,
        cwd=str(REPO_ROOT),
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    out = proc.stdout
    assert proc.returncode == 0, f"README walkthrough failed:\n{out}\n{proc.stderr}"
    objects = [json.loads(line) for line in out.splitlines() if line.startswith('{"route"')]
    probe, wait = objects[0], objects[-1]
    assert probe["route"] == "subscription" and probe["errorCode"] is None, probe
    assert wait["errorCode"] is None and wait["notificationReceived"] is True, wait
    assert wait["initialText"] != wait["finalText"]
    assert (home / ".local" / "state" / "mcpsub").is_dir()
    assert os.stat(home / ".local" / "state" / "mcpsub").st_mode & 0o077 == 0
