"""README.md's walkthrough, run as written: the docs cannot drift from what works.

Every ```bash block that runs a program from ``.venv/bin`` is pasted, in order, into one
``bash -e`` script (what a person pasting them gets, minus the typing pauses), with ports
8089 (the lab) and 8090 (the webhook receiver) replaced by free ports, ``HOME`` and
``TMPDIR`` in a temporary directory and the lab's update delay shortened. The walkthrough is
self-contained: it keeps its state in a directory of its own, its webhook
receiver answers, and its last line stops everything and removes that directory, so pasting
it twice works and leaves nothing behind.
"""

from __future__ import annotations

import json
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
    home = tmp_path / "h"
    home.mkdir()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = cli_env(
        {
            "HOME": str(home),
            "TMPDIR": str(scratch),
            "MCP_TEST_UPDATE_DELAY_SECONDS": "1",
            "MCPSUB_LOG_LEVEL": "warning",
        }
    )
    for name in ("XDG_STATE_HOME", "MCPSUB_STATE_DIR", "MCPSUB_API", "MCPSUB_CONFIG"):
        env.pop(name, None)
    for paste in (1, 2):  # a second paste works the same (it added a second target before)
        script = "\n".join(
            [
                "set -e",
                # What the walkthrough left running if it failed half-way (none once it ends).
                "trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true' EXIT",
                *(
                    b.replace("8089", str(free_port())).replace("8090", str(free_port()))
                    for b in blocks
                ),
            ]
        )
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
        assert proc.returncode == 0, f"README walkthrough {paste} failed:\n{out}\n{proc.stderr}"
        objects = [json.loads(line) for line in out.splitlines() if line.startswith('{"route"')]
        probe, wait = objects[0], objects[-1]
        assert probe["route"] == "subscription" and probe["errorCode"] is None, probe
        assert wait["errorCode"] is None and wait["notificationReceived"] is True, wait
        assert wait["initialText"] != wait["finalText"]
        # The receiver answered, and the signature checked out with the documented secret.
        assert "[verified]" in out and "test://review/status revision 2" in out, out
        assert "BAD SIGNATURE" not in out
        # Its own state directory is gone, and the person's real one was never made.
        assert list(scratch.iterdir()) == [], list(scratch.iterdir())
        assert not (home / ".local" / "state" / "mcpsub").exists()
