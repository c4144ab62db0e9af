"""The agent face driven by the clients today's agents embed, installed the way
``make compat`` installs them (``bench/compat/package.json``, ``npm ci``; ``.ci/run``
installs node and npm, so in CI these tests run and never skip):

* the official TypeScript SDK 1.x client (``@modelcontextprotocol/sdk`` 1.32.x) over stdio:
  ``bench/compat/ts_sdk1_face.mjs``;
* the MCP Inspector's CLI mode (``@modelcontextprotocol/inspector --cli``) over stdio and
  over HTTP on the daemon's ``/mcp`` (2026-07-28 or 2025, as the Inspector negotiates).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import skips
from tests.support.cli import BIN
from tests.support.daemon import Daemon

COMPAT = Path(__file__).resolve().parents[2] / "bench" / "compat"
DOC = "test://face/doc"


@pytest.fixture(scope="session")
def node22() -> Path:
    """Node 22 from the pinned npm packages, which ``make test`` installs before the run
    (``make node-deps``): a test never goes to the network for them."""
    path = COMPAT / "node_modules" / ".bin" / "node"
    if not (COMPAT / "node_modules" / ".compat-installed").exists() or not path.exists():
        skips.unavailable("npm-trees", "bench/compat's pinned packages are not installed")
    return path


def put(lab: Any, uri: str, text: str) -> None:
    lab.control("PUT", "/lab/resources", json={"uri": uri, "text": text}).raise_for_status()


def subscribed(lab_server_factory: Any, daemon_factory: Any, **env: str) -> tuple[Any, Daemon]:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    put(lab, DOC, "one\n")
    d: Daemon = daemon_factory(env=env or None)
    assert d.ctl("subscribe", "--url", lab.url, "--uri", DOC, "--json").code == 0
    return lab, d


def test_typescript_sdk_1x_over_stdio(
    node22: Path, lab_server_factory: Any, daemon_factory: Any, database_url: str, tmp_path: Path
) -> None:
    lab, d = subscribed(lab_server_factory, daemon_factory)
    env = {**os.environ, "HOME": str(tmp_path), "MCPSUB_STATE_DIR": str(d.state_dir)}
    env["MCPSUB_AGENT_PROGRESS_S"] = "0.2"
    done = subprocess.run(
        [str(node22), str(COMPAT / "ts_sdk1_face.mjs"), str(BIN / "mcpsubctl"), lab.base_url,
         lab.url, DOC],
        env=env, capture_output=True, text=True, timeout=120, cwd=COMPAT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["version"].startswith("1.32.")
    assert out["subscribeCapability"] is True and out["server"]["name"] == "mcpsub"
    assert "wait_for_change" in out["tools"]
    assert (out["before"], out["resources"], out["resourceText"]) == ("one\n", [DOC], "one\n")
    assert out["updatedUri"] == DOC
    assert out["changed"] is True and out["after"] == "one\nchanged by the TS test\n"
    assert "+changed by the TS test" in out["diff"]
    assert out["quietChanged"] is False and len(out["progress"]) >= 2
    assert out["subscribeError"] is False and out["listChanged"] >= 1


def inspector(node22: Path, home: Path, *args: str) -> Any:
    done = subprocess.run(
        [str(node22), str(COMPAT / "node_modules" / ".bin" / "inspector"), "--cli", *args],
        env={**os.environ, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_inspector_cli_over_stdio_and_http(
    node22: Path, lab_server_factory: Any, daemon_factory: Any, tmp_path: Path
) -> None:
    """SQLite only: the store side is the same as the TypeScript and Python SDK tests', which
    run on both backends; this one is about the Inspector's own client."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _lab, d = subscribed(lab_server_factory, daemon_factory, MCPSUB_API=f"tcp://127.0.0.1:{port}")
    stdio = [
        str(BIN / "mcpsubctl"), "mcp", "--no-autostart", "-e", f"MCPSUB_STATE_DIR={d.state_dir}",
        "-e", f"MCPSUB_API={d.tcp_url}",
    ]  # fmt: skip
    tools = inspector(node22, tmp_path, *stdio, "--method", "tools/list")
    assert [t["name"] for t in tools["tools"]][:2] == ["subscribe", "unsubscribe"]
    read = inspector(
        node22, tmp_path, *stdio, "--method", "tools/call", "--tool-name", "read",
        "--tool-arg", f"uri={DOC}",
    )  # fmt: skip
    assert read["structuredContent"]["text"] == "one\n" and read["isError"] is False
    http = [
        f"{d.tcp_url}/mcp", "--transport", "http", "--header",
        f"Authorization: Bearer {d.token}",
    ]  # fmt: skip
    resources = inspector(node22, tmp_path, *http, "--method", "resources/list")
    assert [r["uri"] for r in resources["resources"]] == [DOC]
    contents = inspector(node22, tmp_path, *http, "--method", "resources/read", "--uri", DOC)
    assert contents["contents"][0]["text"] == "one\n"
    assert contents["_meta"]["mcpsub/revision"] == 1
