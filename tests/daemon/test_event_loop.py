"""The loop the daemon runs on (``service/eventloop.py``): uvloop as shipped, asyncio's when
``MCPSUB_EVENT_LOOP=asyncio`` asks for it (and the daemon still does its job there), and a
clear configuration error for a name it does not know."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.support.cli import cli_env
from tests.support.daemon import BIN, FAST_ENV

REVIEW = "test://review/status"
EXIT_CONFIG = 78


def test_the_daemon_runs_on_uvloop(lab_server_factory: Any, daemon_factory: Any) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    d = daemon_factory()
    ok = d.ctl("subscribe", "--url", lab.url, "--uri", REVIEW, "--json")
    assert ok.code == 0, ok
    assert ok.json["subscriptions"][0]["state"] == "active"
    assert d.api("GET", "/v1/status").json()["eventLoop"] == "uvloop"


def test_asyncio_loop_on_request_still_reads_changes(
    lab_server_factory: Any, daemon_factory: Any
) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "1"})
    d = daemon_factory(env={"MCPSUB_EVENT_LOOP": "asyncio"})
    assert d.api("GET", "/v1/status").json()["eventLoop"] == "asyncio"
    result = d.ctl("wait", "--url", lab.url, "--uri", REVIEW, "--json", "--timeout-ms", "20000")
    assert result.code == 0, result
    assert result.json["finalText"].startswith("status: reviewed")
    assert result.json["revision"] == 2


def test_an_unknown_loop_is_a_configuration_error(tmp_path: Path) -> None:
    env = cli_env(
        {**FAST_ENV, "MCPSUB_STATE_DIR": str(tmp_path / "state"), "MCPSUB_EVENT_LOOP": "tokio"}
    )
    result = subprocess.run(
        [str(BIN / "mcpsubd")], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == EXIT_CONFIG, result
    assert result.stdout == ""
    assert (
        "mcpsubd: MCPSUB_EVENT_LOOP='tokio': expected one of uvloop, asyncio"
        in result.stderr.splitlines()
    )
    assert "Traceback" not in result.stderr
