"""The face's JSON-RPC and era rules, without a socket."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from service.face import protocol as p
from service.face.session import (
    channel_message,
    known,
    listen_filter,
    methods_in,
    progress_reporter,
)

MODERN_META = {p.META_VERSION: p.MODERN, p.META_CAPS: {}}


def test_decode_sorts_requests_notifications_and_responses() -> None:
    req = p.decode(b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}')
    assert (req.method, req.id, req.has_id, req.params) == ("tools/list", 7, True, {})
    note = p.decode('{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert not note.has_id
    assert p.decode('{"jsonrpc":"2.0","id":"a","result":{}}').is_response


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"{", p.PARSE_ERROR),
        (b"[1]", p.INVALID_REQUEST),
        (b'{"id":1,"method":"x"}', p.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":true,"method":"x"}', p.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1,"method":5}', p.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}', p.INVALID_PARAMS),
        (b"[" * 1000 + b"]" * 1000, p.PARSE_ERROR),
    ],
)
def test_decode_refuses(raw: bytes, code: int) -> None:
    with pytest.raises(p.RpcError) as info:
        p.decode(raw)
    assert info.value.code == code


def test_negotiate_keeps_a_known_version_and_offers_the_newest_otherwise() -> None:
    assert p.negotiate("2025-03-26") == "2025-03-26"
    assert p.negotiate("2024-11-05") == "2025-11-25"
    assert p.negotiate(None) == "2025-11-25"


@pytest.mark.parametrize(
    ("params", "header", "code"),
    [
        ({}, None, p.INVALID_PARAMS),
        ({"_meta": {p.META_CAPS: {}}}, None, p.INVALID_PARAMS),
        ({"_meta": {p.META_VERSION: p.MODERN}}, None, p.INVALID_PARAMS),
        ({"_meta": {**MODERN_META, p.META_VERSION: "v999"}}, p.MODERN, p.HEADER_MISMATCH),
        ({"_meta": {**MODERN_META, p.META_VERSION: "v999"}}, "v999", p.UNSUPPORTED_VERSION),
    ],
)
def test_envelope_ladder(params: dict[str, Any], header: str | None, code: int) -> None:
    with pytest.raises(p.RpcError) as info:
        p.check_envelope(params, header)
    assert info.value.code == code
    if code == p.UNSUPPORTED_VERSION:
        assert info.value.data["requested"] == "v999"
        assert info.value.data["supported"] == [p.MODERN]  # a subset of discover's


def test_removed_methods_are_not_found_in_2026_and_listen_is_not_in_2025() -> None:
    for method in ("initialize", "ping", "resources/subscribe", "logging/setLevel"):
        with pytest.raises(p.RpcError) as info:
            known(method, modern=True)
        assert info.value.code == p.METHOD_NOT_FOUND and p.HTTP_STATUS[info.value.code] == 404
    with pytest.raises(p.RpcError):
        known("subscriptions/listen", modern=False)
    known("server/discover", modern=True)


def test_channel_mode_refuses_every_2026_request_so_claude_code_sends_initialize() -> None:
    """Claude Code 2.1.328 picks 2026-07-28 whenever ``server/discover`` answers, and then
    skips channels; -32601 leads it to ``initialize`` (2025-11-25), where they register."""
    for method in ("server/discover", "tools/list", "subscriptions/listen"):
        with pytest.raises(p.RpcError) as info:
            known(method, modern=True, channel=True)
        assert info.value.code == p.METHOD_NOT_FOUND
        assert info.value.data == {"supportedVersions": list(p.HANDSHAKE_VERSIONS)}
    known("initialize", modern=False, channel=True)
    known("resources/subscribe", modern=False, channel=True)


def test_capabilities_per_era_and_channel() -> None:
    legacy = p.initialize_result("2025-06-18", methods_in("2025-06-18"), channel=True)
    assert legacy["protocolVersion"] == "2025-06-18"
    assert legacy["capabilities"]["resources"] == {"subscribe": True, "listChanged": True}
    assert legacy["capabilities"]["experimental"] == {"claude/channel": {}}
    discover = p.discover_result(methods_in(p.MODERN))
    assert discover["supportedVersions"] == [p.MODERN] and "logging" not in discover["capabilities"]
    assert discover["ttlMs"] == 0 and discover["cacheScope"] == "private"
    stamped = p.stamp_modern({"tools": []})
    assert stamped["resultType"] == "complete" and p.META_SERVER in stamped["_meta"]


def test_listen_honors_only_resources() -> None:
    listen, ack = listen_filter(
        "L1",
        {
            "notifications": {
                "toolsListChanged": True,
                "resourcesListChanged": True,
                "resourceSubscriptions": ["a:1", "a:1", "b:2"],
            }
        },
    )
    assert ack["params"]["notifications"] == {
        "resourcesListChanged": True,
        "resourceSubscriptions": ["a:1", "b:2"],
    }
    assert ack["params"]["_meta"][p.META_SUBSCRIPTION] == "L1"
    assert listen.uris == {"a:1", "b:2"} and listen.list_changed
    with pytest.raises(p.RpcError):
        listen_filter(1, {})
    with pytest.raises(p.RpcError) as info:
        listen_filter(1, {"notifications": {"resourceSubscriptions": ["u:x"] * 1001}})
    assert info.value.message.startswith("Subscription limit reached")


def test_channel_message_escapes_control_characters() -> None:
    change = {
        "changed": True,
        "uri": "test://x\x1b[2J",
        "serverUrl": "http://127.0.0.1:1/mcp",
        "revision": 3,
        "eventId": 9,
        "cursor": 9,
        "finalText": "evil \x1b]0;title\x07 text\n",
        "diff": None,
    }
    message = channel_message(change)
    assert message["method"] == "notifications/claude/channel"
    params = message["params"]
    assert "\x1b" not in params["content"] and "\x07" not in params["content"]
    assert "\x1b" not in params["meta"]["uri"]
    assert set(params["meta"]) == {"uri", "server_url", "revision", "event_id"}
    assert all(isinstance(v, str) for v in params["meta"].values())


def test_progress_only_increases_whatever_the_handler_reports() -> None:
    """The spec: the progress value MUST increase with each notification. A handler reports
    seconds waited, rounded: the same value twice, or a smaller one, still goes up."""
    progression = p.Progression("tok")
    reported = [0.0, 0.0, 5.0, 5.0, 4.2, 5.0005, 10.0, -1.0, float("nan"), 12.5]
    sent = [progression.notification(v, 25.0, "waiting") for v in reported]
    values = [n["params"]["progress"] for n in sent]
    assert all(b > a for a, b in itertools.pairwise(values)), values
    assert values[0] > 0 and values[2] == 5.0 and values[6] == 10.0 and values[-1] == 12.5
    assert sent[0] == p.notification(
        "notifications/progress",
        {"progressToken": "tok", "progress": values[0], "total": 25.0, "message": "waiting"},
    )
    assert "total" not in p.Progression(7).notification(1.0, None, "m")["params"]


def test_both_transports_report_progress_through_one_reporter() -> None:
    """stdio and HTTP hand ``progress_reporter`` their bounded send: what it sends only
    increases, and a full queue (send says False) does not stop the next report."""

    sent: list[dict[str, Any]] = []

    def send(message: dict[str, Any]) -> bool:
        sent.append(message)
        return len(sent) % 2 == 0  # every other one dropped

    async def go() -> None:
        report = progress_reporter(3, send)
        for value in (1.0, 1.0, 0.5, 2.0):
            await report(value, None, "waiting for a change")

    asyncio.run(go())
    values = [m["params"]["progress"] for m in sent]
    assert len(values) == 4 and values == sorted(set(values)), values
    assert {m["params"]["progressToken"] for m in sent} == {3}
