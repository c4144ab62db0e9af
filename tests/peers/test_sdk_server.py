"""Peer checks: both CLIs against servers we did not write the protocol for.

(a) ``servers/sdk_modern.py`` is built only from the official MCP Python SDK 2.x
    (``MCPServer`` + its ``ListenHandler`` + ``InMemorySubscriptionBus``), stateless
    Streamable HTTP. If our client and the SDK disagree about 2026-07-28, it shows here.
(b) ``servers/legacy_mimic.py`` answers like a 2025-era-only server (python ``mcp`` 1.x, spec
    §1.6). The SDK 2.x cannot run legacy-only: its session manager hands every request with a
    non-handshake ``MCP-Protocol-Version`` header to the modern handler, so a mimic it is.
    Both CLIs must say ``PROTOCOL_UNSUPPORTED`` and never fall back to ``initialize``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.peers.peer import PeerServer
from tests.support.cli import finish, run_cli, spawn_cli

PROG = "mcp-resource-subscriber"
URI = "test://review/status"


def _version(text: str | None) -> int:
    assert text is not None
    for line in text.splitlines():
        if line.startswith("version: "):
            return int(line.removeprefix("version: "))
    raise AssertionError(f"no version line in {text!r}")


# ---- (a) a modern server built on the official SDK -------------------------------------------


@pytest.fixture(scope="module")
def sdk_server() -> Iterator[PeerServer]:
    """The resource changes 0.3 s after each listen stream opens, and says so on the bus."""
    with PeerServer("sdk_modern.py", "--auto-update-delay", "0.3") as server:
        yield server


def test_subscriber_json_sees_the_sdk_update(sdk_server: PeerServer) -> None:
    result = run_cli(PROG, "--url", sdk_server.url, "--uri", URI, "--json", "--timeout-ms", "10000")
    assert result.code == 0, result
    data = result.json
    assert data["errorCode"] is None
    assert data["route"] == "subscription"
    assert data["listenAcknowledged"] is True
    assert data["honoredUris"] == [URI]
    assert data["notificationCount"] == 1
    assert data["closeReason"] == "local"
    assert data["finalText"].startswith("status: reviewed")
    assert _version(data["finalText"]) == _version(data["initialText"]) + 1


def test_subscriber_lines_show_the_sdk_capabilities(sdk_server: PeerServer) -> None:
    result = run_cli(PROG, "--url", sdk_server.url, "--uri", URI, "--timeout-ms", "10000")
    assert result.code == 0, result
    # MCPServer advertises subscribe/listChanged = "listen is served" on the modern era.
    capabilities = json.loads(result.field("capabilities"))
    assert capabilities["subscribe"] is True
    assert result.field("resource-found") == "true"
    assert result.field("route") == "subscription"
    assert result.field("notification") == URI
    assert result.stdout.splitlines()[-1] == (
        f"phase-summary route=subscription url={sdk_server.url} uri={URI}"
    )


def test_ctl_probe_sees_the_sdk_update(sdk_server: PeerServer) -> None:
    result = run_cli(
        "mcpsubctl",
        "probe",
        "--url",
        sdk_server.url,
        "--uri",
        URI,
        "--json",
        "--timeout-ms",
        "10000",
    )
    assert result.code == 0, result
    data = result.json
    assert data["route"] == "subscription"
    assert data["notificationUri"] == URI
    assert _version(data["finalText"]) == _version(data["initialText"]) + 1


def test_tool_call_publishes_through_ctx_notify_resource_updated() -> None:
    """The documented publisher path: a tool calls ``ctx.notify_resource_updated(uri)``."""
    with PeerServer("sdk_modern.py", "--auto-update-delay", "0") as server:
        proc = spawn_cli(PROG, "--url", server.url, "--uri", URI, "--json", "--timeout-ms", "15000")
        try:
            server.wait_for_count("LISTEN opened", timeout=15)
        except TimeoutError:
            proc.kill()
            raise
        call = run_cli(PROG, "call", "--url", server.url, "--tool", "complete_review", "--json")
        assert call.code == 0, call
        assert call.json["content"] == [{"type": "text", "text": "version 2"}]
        result = finish(proc)
    assert result.code == 0, result
    data = result.json
    assert data["errorCode"] is None
    assert data["initialText"] == "status: pending\nversion: 1\n"
    assert data["finalText"] == "status: reviewed\nversion: 2\n"
    # "LISTEN opened" is printed when the SDK subscribes the stream, just *before* its ack: the
    # update can land before our post-ack re-read, and then reading it first and counting the
    # notification a moment later is the honest pre-completion outcome (seed §3.5 step 7).
    assert data["route"] in ("subscription", "pre-completion")


def test_sdk_json_response_mode_still_streams_listen() -> None:
    """``json_response=True``: plain JSON answers for requests, SSE only for the listen."""
    with PeerServer("sdk_modern.py", "--json-response") as server:
        result = run_cli(PROG, "--url", server.url, "--uri", URI, "--json", "--timeout-ms", "10000")
    assert result.code == 0, result
    assert result.json["route"] == "subscription"
    assert result.json["finalText"] == "status: reviewed\nversion: 2\n"


@pytest.fixture(scope="module")
def sdk_server_without_listen() -> Iterator[PeerServer]:
    with PeerServer("sdk_modern.py", "--no-listen") as server:
        yield server


def test_sdk_server_without_listen_is_not_asked_to_listen(
    sdk_server_without_listen: PeerServer,
) -> None:
    """The SDK server without a listen handler advertises no ``resources.subscribe``: seed 003
    says a client then sends no subscription request; both CLIs say SUBSCRIPTION_NOT_HONORED
    at once instead of provoking the server's -32601."""
    url = sdk_server_without_listen.url
    result = run_cli(PROG, "--url", url, "--uri", URI, "--json", "--timeout-ms", "5000")
    assert result.code == 1, result
    data = result.json
    assert data["errorCode"] == "SUBSCRIPTION_NOT_HONORED"
    assert data["route"] == "timeout"
    assert data["listenAcknowledged"] is False
    assert data["closeReason"] is None
    assert data["initialText"] == "status: pending\nversion: 1\n"
    assert "resources.subscribe" in result.stderr
    ctl = run_cli(
        "mcpsubctl", "probe", "--url", url, "--uri", URI, "--json", "--timeout-ms", "5000"
    )
    assert ctl.code == 8, ctl
    assert ctl.json["errorCode"] == "SUBSCRIPTION_NOT_HONORED"


# ---- (b) 2025-era-only servers -----------------------------------------------------------------

LEGACY_VARIANTS = {
    "stateful": "Missing session ID",
    "stateless": "Unsupported protocol version: 2026-07-28",
    "method-not-found": "Method not found",
}


@pytest.fixture(scope="module", params=sorted(LEGACY_VARIANTS))
def legacy_server(request: pytest.FixtureRequest) -> Iterator[PeerServer]:
    with PeerServer("legacy_mimic.py", "--variant", request.param) as server:
        yield server


def _only_discover_was_sent(server: PeerServer, before: int) -> None:
    posts = [line for line in server.lines if line.startswith("POST ")][before:]
    assert posts == ["POST server/discover 2026-07-28"], posts


def _posts(server: PeerServer) -> int:
    return server.count("POST ")


def test_legacy_subscriber_json(legacy_server: PeerServer) -> None:
    before = _posts(legacy_server)
    result = run_cli(PROG, "--url", legacy_server.url, "--uri", URI, "--json")
    assert result.code == 1, result
    data = result.json
    assert data["route"] == "failed"
    assert data["errorCode"] == "PROTOCOL_UNSUPPORTED"
    assert "2026-07-28" in data["recommendedNextAction"]
    assert "upgrade the server" in data["recommendedNextAction"]
    variant = legacy_server.argv[-1]
    assert LEGACY_VARIANTS[variant] in result.stderr
    _only_discover_was_sent(legacy_server, before)


def test_legacy_subscriber_lines(legacy_server: PeerServer) -> None:
    result = run_cli(PROG, "--url", legacy_server.url, "--uri", URI)
    assert result.code == 1, result
    assert result.field("error-code") == "PROTOCOL_UNSUPPORTED"
    assert result.stdout.splitlines()[-1] == (
        f"phase-summary route=failed url={legacy_server.url} uri={URI} "
        "error-code=PROTOCOL_UNSUPPORTED"
    )


def test_legacy_call_mode_exits_3(legacy_server: PeerServer) -> None:
    before = _posts(legacy_server)
    result = run_cli(PROG, "call", "--url", legacy_server.url, "--tool", "echo", "--json")
    assert result.code == 3, result
    data = result.json
    assert data["errorCode"] == "PROTOCOL_UNSUPPORTED"
    assert data["content"] is None
    _only_discover_was_sent(legacy_server, before)


def test_legacy_ctl_probe_exits_4(legacy_server: PeerServer) -> None:
    before = _posts(legacy_server)
    result = run_cli("mcpsubctl", "probe", "--url", legacy_server.url, "--uri", URI, "--json")
    assert result.code == 4, result
    assert result.json["errorCode"] == "PROTOCOL_UNSUPPORTED"
    _only_discover_was_sent(legacy_server, before)
