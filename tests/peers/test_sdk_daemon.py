"""mcpsubd (with mcpsubctl) against servers we did not write the protocol for.

* ``servers/sdk_modern.py`` (the official MCP Python SDK 2.x): subscribe waits for the first
  read; a change published through the SDK's ``ctx.notify_resource_updated`` is what
  ``wait`` returns, with the baseline as ``initialText``.
* ``servers/legacy_mimic.py`` (python ``mcp`` 1.x answers, spec §1.6): the daemon's link
  parks in ``error`` with ``PROTOCOL_UNSUPPORTED`` and ``subscribe`` exits 4.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.peers.peer import PeerServer
from tests.support.cli import finish, run_cli, spawn_cli
from tests.support.daemon import daemon_factory  # noqa: F401

URI = "test://review/status"


def test_daemon_follows_an_sdk_server(daemon_factory: Any) -> None:  # noqa: F811
    with PeerServer("sdk_modern.py", "--auto-update-delay", "0") as server:
        d = daemon_factory()
        sub = d.ctl("subscribe", "--url", server.url, "--uri", URI, "--json")
        assert sub.code == 0, sub
        (row,) = sub.json["subscriptions"]
        assert (row["state"], row["revision"]) == ("active", 1)
        baseline = d.api("GET", "/v1/content", params={"uri": URI}).json()
        assert baseline["text"] == "status: pending\nversion: 1\n"
        proc = spawn_cli(
            "mcpsubctl", "wait", "--uri", URI, "--after", str(baseline["eventId"]), "--json",
            "--timeout-ms", "20000", env={"MCPSUB_STATE_DIR": str(d.state_dir)},
        )  # fmt: skip
        call = run_cli("mcpsubctl", "call", "--url", server.url, "--tool", "complete_review")
        assert call.code == 0, call
        result = finish(proc)
        assert result.code == 0, result
        body = result.json
        assert body["initialText"] == "status: pending\nversion: 1\n"
        assert body["finalText"] == "status: reviewed\nversion: 2\n"
        assert body["notificationReceived"] is True and body["revision"] == 2
        link = d.api("GET", "/v1/status").json()["links"][0]
        assert link["state"] == "open" and link["capabilities"]["subscribe"] is True


@pytest.mark.parametrize("variant", ["stateful", "stateless", "method-not-found"])
def test_daemon_parks_a_legacy_sdk_server(daemon_factory: Any, variant: str) -> None:  # noqa: F811
    with PeerServer("legacy_mimic.py", "--variant", variant) as server:
        d = daemon_factory()
        result = d.ctl("subscribe", "--url", server.url, "--uri", URI, "--json")
        assert result.code == 4, result
        assert result.json["errorCode"] == "PROTOCOL_UNSUPPORTED"
        link = d.api("GET", "/v1/status").json()["links"][0]
        assert link["state"] == "error" and link["lastErrorCode"] == "PROTOCOL_UNSUPPORTED"
        posts = [line for line in server.lines if line.startswith("POST ")]
        assert posts == ["POST server/discover 2026-07-28"], posts
