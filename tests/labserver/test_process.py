"""The process: start-up line, path alias, log level, SIGTERM with open streams."""

import os
import signal
import subprocess
import sys
from typing import Any

import httpx
import pytest

from tests.labserver.helpers import REVIEW, body, call, headers, listen
from tests.support.lab import REPO_ROOT, LabServer


def test_startup_line_names_the_real_port(lab_server: LabServer) -> None:
    first = lab_server.lines[0]
    assert first == (
        f"MCP resource subscribe test server listening on http://127.0.0.1:{lab_server.port}/mcp"
    )
    assert lab_server.port != 0
    assert any("curl" in line and "server/discover" in line for line in lab_server.lines)


@pytest.mark.parametrize(
    ("raw", "alias"),
    [("mcp/subscribe-probe", "/mcp/subscribe-probe"), ("  /custom//  ", "/custom"), ("   ", None)],
)
def test_path_alias_normalization(lab_server_factory: Any, raw: str, alias: str | None) -> None:
    lab = lab_server_factory({"MCP_TEST_PATH": raw})
    assert call(lab.url, "server/discover").status_code == 200  # /mcp is always served
    if alias is not None:
        response = call(lab.base_url + alias, "server/discover")
        assert response.status_code == 200
        assert httpx.get(lab.base_url + alias).status_code == 405
    assert httpx.post(lab.base_url + "/elsewhere", json={}).status_code == 404


def test_log_level_filters(lab_server_factory: Any) -> None:
    lab = lab_server_factory({"MCP_TEST_LOG_LEVEL": "error"})
    call(lab.url, "resources/list")
    call(lab.url, "resources/read", {"uri": "test://missing"})
    lab.wait_for_line("[server/error] Unknown resource URI: test://missing")
    assert not any(line.startswith("[resources/list]") for line in lab.lines)
    quiet = lab_server_factory({"MCP_TEST_LOG_LEVEL": "silent"})
    call(quiet.url, "resources/read", {"uri": "test://missing"})
    call(quiet.url, "resources/list")
    quiet.wait_event("http.error")
    assert not any(line.startswith("[") for line in quiet.lines)


def test_sigterm_closes_open_streams_gracefully_and_exits_0(lab_server_factory: Any) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "60"})
    with listen(lab.url, request_id=99) as stream:
        assert stream.next_message()["method"] == "notifications/subscriptions/acknowledged"
        assert lab.proc is not None
        lab.proc.send_signal(signal.SIGTERM)
        final = stream.next_message()
        assert final["id"] == 99 and final["result"]["resultType"] == "complete"
        with pytest.raises(EOFError):
            stream.next_event()
        assert lab.proc.wait(timeout=10) == 0  # long before the 60 s update delay


def test_sigint_also_exits_0(lab_server_factory: Any) -> None:
    lab = lab_server_factory()
    assert lab.proc is not None
    lab.proc.send_signal(signal.SIGINT)
    assert lab.proc.wait(timeout=2) == 0


def test_port_taken_is_a_clean_error(lab_server: LabServer) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "labserver", "--port", str(lab_server.port)],
        env=env,
        capture_output=True,
        text=True,
        timeout=10,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 1
    assert "cannot listen" in done.stderr


def test_updated_status_env(lab_server_factory: Any) -> None:
    lab = lab_server_factory(
        {"MCP_TEST_INITIAL_STATUS": "queued", "MCP_TEST_UPDATED_STATUS": "approved"}
    )
    response = httpx.post(
        lab.url,
        json=body("resources/read", {"uri": REVIEW}),
        headers=headers("resources/read", REVIEW),
    )
    assert response.json()["result"]["contents"][0]["text"].startswith("status: queued\n")
    lab.control("POST", "/lab/update")
    assert lab.state()["resources"][0]["text"].startswith("status: approved\nversion: 2\n")
