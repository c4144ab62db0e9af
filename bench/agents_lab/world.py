"""One lab run's world: a scripted model, a lab server, ``mcpsubd``, and a private HOME.

Everything binds 127.0.0.1 or a unix socket, inside the private network namespace
(:mod:`bench.agents_lab.netns`). The daemon runs with ``HOME`` set to the world's own home and
no ``MCPSUB_*`` settings, so the agent CLIs find it exactly as a user's would: through the
default state directory (``~/.local/state/mcpsub``), with the config the docs show
(``mcpsubctl mcp`` on ``PATH``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.agents_lab.model import Script, ScriptedModel
from bench.harness import BIN, REPO_ROOT, Children, Lab, Mcpsubd

NODE_BIN = REPO_ROOT / "bench" / "agents_lab" / "node_modules" / ".bin"
URI = "test://agents/board"
SERVER_NAME = "mcpsub"


def free_port() -> int:
    """A loopback port nothing listens on now (the daemon's TCP API)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def base_env(home: Path) -> dict[str, str]:
    """The environment every process of a world gets: its own HOME, no user settings, no
    proxies, and the telemetry and update switches of each CLI off."""
    keep = ("LANG", "LC_ALL", "TERM", "TZ", "USER", "LOGNAME")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(
        {
            "HOME": str(home),
            "PATH": os.pathsep.join(
                [str(BIN), str(NODE_BIN), "/usr/local/bin", "/usr/bin", "/bin"]
            ),
            "TMPDIR": str(home / "tmp"),
            "NO_COLOR": "1",
            "CI": "true",
            # Claude Code
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            # Gemini CLI
            "GEMINI_TELEMETRY_ENABLED": "false",
            "GEMINI_CLI_DISABLE_AUTO_UPDATE": "true",
            # OpenCode, Copilot
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            "COPILOT_DISABLE_TELEMETRY": "1",
        }
    )
    return env


class World:
    """Start with :meth:`start`, stop with :meth:`stop` (or use as a context manager)."""

    def __init__(
        self, script: Script | None = None, *, keep: bool = False, tcp: bool = False
    ) -> None:
        # a short path: the daemon's socket path must stay under 108 bytes
        self.root = Path(tempfile.mkdtemp(prefix="al", dir="/tmp"))
        self.home = self.root / "h"
        self.work = self.root / "w"
        for d in (self.home / "tmp", self.work):
            d.mkdir(parents=True)
        self.env = base_env(self.home)
        self.model = ScriptedModel(script)
        self.children = Children()
        self.lab: Lab | None = None
        self.daemon: Mcpsubd | None = None
        self.keep = keep
        self.tcp_url = f"http://127.0.0.1:{free_port()}" if tcp else ""
        """The daemon's API on loopback TCP (for ``/mcp`` over HTTP), else its unix socket."""

    # ---- lifecycle ----------------------------------------------------------------------
    def start(self, *, daemon: bool = True) -> World:
        self.model.start()
        lab = Lab(0, {"MCP_TEST_LOG_LEVEL": "info", "HOME": str(self.home)})
        self.children.add(lab)
        lab.wait_ready()
        self.lab = lab
        self.put("board: v0\nstate: waiting for review")
        if daemon:
            self.start_daemon()
        return self

    def start_daemon(self) -> None:
        state = self.home / ".local" / "state" / "mcpsub"
        if self.tcp_url:
            self.env["MCPSUB_API"] = self.tcp_url
        daemon = Mcpsubd(state)
        # the default state directory, found through HOME as a user's agent finds it
        daemon.env = {**self.env, "MCPSUB_LOG_FORMAT": "json"}
        self.children.add(daemon)
        self.daemon = daemon
        if not self.tcp_url:
            daemon.wait_ready()
            return
        deadline = time.monotonic() + 60
        while self.ctl("status", "--json").returncode != 0:
            if time.monotonic() > deadline or not daemon.alive():
                raise RuntimeError(f"mcpsubd did not become ready:\n{daemon.output()}")
            time.sleep(0.1)

    def stop(self) -> None:
        self.model.stop()
        self.children.stop_all()
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> World:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- the lab's resource -------------------------------------------------------------
    def put(self, text: str, uri: str = URI) -> float:
        """Set the lab resource's text; returns the time just before the request was sent."""
        assert self.lab is not None
        t = time.time()
        with httpx.Client(base_url=self.lab.base_url, timeout=10, trust_env=False) as http:
            http.put("/lab/resources", json={"uri": uri, "text": text}).raise_for_status()
        return t

    def lab_report(self) -> dict[str, Any]:
        assert self.lab is not None
        with httpx.Client(base_url=self.lab.base_url, timeout=10, trust_env=False) as http:
            result: dict[str, Any] = http.get("/lab/report").json()
            return result

    def lab_log(self) -> list[dict[str, Any]]:
        assert self.lab is not None
        with httpx.Client(base_url=self.lab.base_url, timeout=10, trust_env=False) as http:
            entries: list[dict[str, Any]] = http.get("/lab/log").json()["entries"]
            return entries

    # ---- the daemon ---------------------------------------------------------------------
    def ctl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "mcpsubctl"), *args],
            env=self.env,
            cwd=self.work,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def subscribe(self, uri: str = URI) -> None:
        assert self.lab is not None
        done = self.ctl("subscribe", "--url", self.lab.url, "--uri", uri)
        if done.returncode != 0:
            raise RuntimeError(f"mcpsubctl subscribe: {done.returncode} {done.stderr}")

    def last_event_id(self) -> int:
        done = self.ctl("status", "--json")
        return int(json.loads(done.stdout)["lastEventId"] or 0)

    def read(self, uri: str = URI) -> str:
        return self.ctl("read", "--uri", uri).stdout

    def wait_content(self, needle: str, timeout: float = 20) -> None:
        """Until the daemon holds a revision with ``needle`` (bounded)."""
        deadline = time.monotonic() + timeout
        while needle not in self.read():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the daemon never held {needle!r}")
            time.sleep(0.05)
