"""``mcpsubctl mcp`` on stdio with raw JSON-RPC: bounds under attack, starting the daemon on
first use, and a daemon restart under a live session (2026-07-28 listens and channel
messages are in test_face_sdk_stdio.py, on the SDK test's daemon)."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any

from service.face import protocol as p
from service.face.stdio import MAX_IN_FLIGHT, MAX_MESSAGE_BYTES
from tests.face.stdio_peer import StdioPeer
from tests.support.daemon import Daemon

DOC = "test://face/doc"
META = {"_meta": {p.META_VERSION: p.MODERN, p.META_CAPS: {}}}


def put(lab: Any, uri: str, text: str) -> None:
    lab.control("PUT", "/lab/resources", json={"uri": uri, "text": text}).raise_for_status()


def test_stdio_bounds_under_attack(daemon_factory: Any) -> None:
    d: Daemon = daemon_factory()
    peer = StdioPeer(d.state_dir)
    try:
        peer.request(0, "initialize", {"protocolVersion": "2025-03-26"})
        assert peer.answer(0)["result"]["protocolVersion"] == "2025-03-26"
        peer.write(
            b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"'
            + b"a" * MAX_MESSAGE_BYTES
            + b'"}}\n'
        )
        too_big = peer.next()
        assert too_big["id"] is None and too_big["error"]["code"] == p.PARSE_ERROR
        peer.write(b"not json\n")
        assert peer.next()["error"]["code"] == p.PARSE_ERROR
        for n in range(MAX_IN_FLIGHT):
            peer.request(
                100 + n,
                "tools/call",
                {"name": "wait_for_change", "arguments": {"timeoutSeconds": 60}},
            )
        peer.request(999, "tools/call", {"name": "wait_for_change", "arguments": {}})
        refused = peer.answer(999)
        assert "requests in flight" in refused["error"]["message"]
        peer.request(2, "ping")
        assert "requests in flight" in peer.answer(2)["error"]["message"]
        for n in range(MAX_IN_FLIGHT):
            peer.send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": 100 + n},
                }
            )
        peer.request(2, "ping")
        assert peer.answer(2)["result"] == {}
        peer.request(3, "tools/call", {"name": "list_subscriptions", "arguments": {}})
        assert peer.answer(3)["result"]["structuredContent"] == {"subscriptions": []}
        peer.request(4, "tools/call", {"name": "nope", "arguments": {}})
        assert peer.answer(4)["error"]["code"] == p.INVALID_PARAMS
        peer.request(5, "tools/call", {"name": "read", "arguments": {"uri": 5}})
        bad = peer.answer(5)["result"]
        assert bad["isError"] and bad["structuredContent"]["errorCode"] == "INVALID_ARGUMENT"
    finally:
        assert peer.close() == 0
    assert d.api("GET", "/healthz").status_code == 200


def test_mcp_starts_the_daemon_on_first_use_unless_told_not_to(tmp_path: Path) -> None:
    state = tmp_path / "state"
    off = StdioPeer(state, "--no-autostart")
    try:
        off.request(1, "tools/call", {"name": "read", "arguments": {"uri": DOC}})
        result = off.answer(1)["result"]
        assert (
            result["isError"] and result["structuredContent"]["errorCode"] == "DAEMON_UNAVAILABLE"
        )
        assert "mcpsubd" in result["structuredContent"]["hint"]
    finally:
        assert off.close() == 0
    assert any("no daemon answers" in line for line in off.stderr)
    assert not (state / "api.sock").exists()

    peer = StdioPeer(state)
    pid = None
    try:
        peer.request(1, "tools/call", {"name": "list_subscriptions", "arguments": {}})
        answer = peer.answer(1, timeout=30)
        assert answer["result"]["isError"] is False, answer
        started = [line for line in peer.stderr if "started mcpsubd" in line]
        assert started, peer.stderr
        match = re.search(r"pid (\d+)", started[0])
        assert match is not None
        pid = int(match.group(1))
    finally:
        assert peer.close() == 0
        if pid is not None:
            os.kill(pid, signal.SIGTERM)


def test_a_face_started_without_a_daemon_initializes_and_follows_one_that_starts_later(
    lab_server_factory: Any, tmp_path: Path
) -> None:
    """``initialize`` must not answer -32603 DAEMON_UNAVAILABLE when no daemon runs."""
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    put(lab, DOC, "one\n")
    state = tmp_path / "state"
    peer = StdioPeer(state, "--no-autostart")
    d = Daemon(state)
    try:
        peer.request(0, "initialize", {"protocolVersion": "2025-11-25"})
        init = peer.answer(0)
        assert init["result"]["protocolVersion"] == "2025-11-25", init
        peer.request(1, "tools/list")
        assert {tool["name"] for tool in peer.answer(1)["result"]["tools"]} >= {"wait_for_change"}
        peer.request(2, "tools/call", {"name": "list_subscriptions", "arguments": {}})
        down = peer.answer(2)["result"]
        assert down["isError"] and down["structuredContent"]["errorCode"] == "DAEMON_UNAVAILABLE"
        assert "mcpsubd" in down["structuredContent"]["hint"]

        d.start()  # the same face, no restart: it follows the daemon that appeared
        assert d.ctl("subscribe", "--url", lab.url, "--uri", DOC, "--json").code == 0
        peer.request(3, "resources/subscribe", {"uri": DOC})
        assert peer.answer(3, timeout=30)["result"] == {}
        peer.request(4, "tools/call", {"name": "list_subscriptions", "arguments": {}})
        assert peer.answer(4)["result"]["isError"] is False
        # resources/subscribe found the daemon and handed the follower its cursor (without
        # it, the follower's own look comes at most 1 s later): the change after it is told.
        put(lab, DOC, "one\ntwo\n")
        updated = peer.until(lambda m: m.get("method") == "notifications/resources/updated", 30)
        assert updated["params"] == {"uri": DOC}
    finally:
        assert peer.close() == 0
        d.stop()


def test_stdio_session_survives_a_daemon_restart(
    lab_server_factory: Any, daemon_factory: Any
) -> None:
    """The face keeps no state: after the daemon restarts, the same stdio session still
    answers, and a change made while it was down is notified from the stored cursor."""
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    put(lab, DOC, "one\n")
    d: Daemon = daemon_factory()
    assert d.ctl("subscribe", "--url", lab.url, "--uri", DOC, "--json").code == 0
    peer = StdioPeer(d.state_dir, "--no-autostart")
    try:
        peer.request(0, "initialize", {"protocolVersion": "2025-11-25"})
        peer.answer(0)
        peer.request(1, "resources/subscribe", {"uri": DOC})
        assert peer.answer(1)["result"] == {}
        assert d.stop() == 0
        peer.request(2, "tools/call", {"name": "read", "arguments": {"uri": DOC}})
        down = peer.answer(2)["result"]
        assert down["structuredContent"]["errorCode"] == "DAEMON_UNAVAILABLE"
        d.start()
        put(lab, DOC, "one\ntwo\n")
        updated = peer.until(lambda m: m.get("method") == "notifications/resources/updated", 30)
        assert updated["params"] == {"uri": DOC}
        peer.request(3, "tools/call", {"name": "read", "arguments": {"uri": DOC}})
        assert peer.answer(3)["result"]["structuredContent"]["revision"] == 2
    finally:
        assert peer.close() == 0


def test_wait_for_change_from_memory_or_the_api_misses_nothing(
    lab_server_factory: Any, daemon_factory: Any
) -> None:
    """Each change is returned once, in order, with the right sides, whether the face
    describes it from the revisions its stream carried (both sides held) or asks the API
    (the revision before came before the session; a text too big to ride along; the
    change after that one)."""
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    put(lab, DOC, "one\n")
    d: Daemon = daemon_factory()
    assert d.ctl("subscribe", "--url", lab.url, "--uri", DOC, "--json").code == 0
    peer = StdioPeer(d.state_dir, "--no-autostart")
    big = "big\n" * (12 * 1024)  # over the stream's 32 KiB inline bound
    texts = ["one\n", "two\n", "three\n", big, "five\n", "six\n"]
    try:
        peer.request(0, "initialize", {"protocolVersion": "2025-11-25"})
        peer.answer(0)
        args0 = {"uri": DOC, "timeoutSeconds": 0}
        peer.request(1, "tools/call", {"name": "wait_for_change", "arguments": args0})
        first = peer.answer(1)["result"]["structuredContent"]
        assert first["changed"] is False  # revision 1 was stored before: the cursor is past it
        cursor = first["cursor"]
        for n, text in enumerate(texts[1:], start=2):
            put(lab, DOC, text)
            args = {"uri": "test://face/*", "after": cursor, "timeoutSeconds": 30}
            peer.request(n, "tools/call", {"name": "wait_for_change", "arguments": args})
            body = peer.answer(n, timeout=40)["result"]["structuredContent"]
            assert body["changed"] is True and body["revision"] == n, body
            assert (body["initialText"], body["finalText"]) == (texts[n - 2], text)
            assert body["previousRevision"] == n - 1 and body["eventId"] > cursor
            cursor = body["cursor"]
        peer.request(
            9,
            "tools/call",
            {"name": "wait_for_change", "arguments": {"after": cursor, "timeoutSeconds": 0.2}},
        )
        assert peer.answer(9)["result"]["structuredContent"]["changed"] is False
    finally:
        assert peer.close() == 0
