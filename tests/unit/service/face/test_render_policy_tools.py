"""Naming across servers, text renderings, the agent policy and tool arguments (pure)."""

from __future__ import annotations

import pytest

from service.face import policy, render, tools
from service.face.backend import FaceError


def sub(sub_id: int, uri: str, url: str = "http://127.0.0.1:1/mcp") -> dict[str, object]:
    return {"id": sub_id, "uri": uri, "serverUrl": url, "state": "active", "revision": 1}


def test_a_uri_on_two_servers_is_named_apart_and_a_unique_one_keeps_its_name() -> None:
    subs = [sub(1, "a:x"), sub(2, "a:x", "http://127.0.0.1:2/mcp"), sub(3, "b:y")]
    names = render.face_names(subs)
    assert names == {1: "mcpsub://1/a:x", 2: "mcpsub://2/a:x", 3: "b:y"}
    assert [s["id"] for s in render.resolve("mcpsub://2/a:x", subs)] == [2]
    assert [s["id"] for s in render.resolve("a:x", subs)] == [1, 2]
    assert render.resolve("mcpsub://3/a:x", subs) == []


def test_patterns_match_the_original_or_the_face_name() -> None:
    assert render.matches("test://face/*", "test://face/doc")
    assert render.matches("mcpsub://2/*", "a:x", "mcpsub://2/a:x")
    assert not render.matches("test://other/*", "test://face/doc")
    assert render.matches(None, None)


def test_renderings_escape_server_text() -> None:
    text = render.content_text("u:\x1b[31m", {"revision": 1, "eventId": 2, "text": "a\x1b[2Jb\nc"})
    assert "\x1b" not in text and "\nc" in text
    diff = render.unified_diff("u", "a\n", "a\nb\n", 1, 2)
    assert diff is not None and "+b" in diff
    assert render.unified_diff("u", None, "x", 1, 2) is None
    assert render.unified_diff("u", "a" * render.MAX_DIFF_CHARS, "b", 1, 2) is None


def test_policy_defaults_to_the_watched_origins() -> None:
    policy.check("http://127.0.0.1:1/other", None, ["http://127.0.0.1:1/mcp"])
    with pytest.raises(FaceError) as info:
        policy.check("http://127.0.0.1:2/mcp", None, ["http://127.0.0.1:1/mcp"])
    assert info.value.code == "AGENT_ORIGIN_NOT_ALLOWED" and info.value.hint
    allowed = policy.parse_setting("http://LOCALHOST, https://example.test")
    assert allowed == ("http://localhost:80", "https://example.test:443")
    policy.check("https://example.test/mcp", allowed, [])
    with pytest.raises(FaceError):
        policy.check("http://127.0.0.1:1/mcp", allowed, ["http://127.0.0.1:1/mcp"])
    assert policy.parse_setting("") is None and policy.parse_setting("*") == ("*",)
    policy.check("http://anything.test/mcp", ("*",), [])
    with pytest.raises(FaceError):
        policy.check("file:///etc/passwd", ("*",), [])
    with pytest.raises(ValueError):
        policy.parse_setting("ftp://x")


def test_tool_arguments() -> None:
    assert tools.subscribe_args({"url": "u", "uri": ["a:1", "a:1"]}).uris == ["a:1"]
    assert tools.cursor({"after": "42"}) == 42
    for bad in ({"after": -1}, {"after": True}, {"after": "x"}):
        with pytest.raises(tools.ToolArgError):
            tools.cursor(bad)
    with pytest.raises(tools.ToolArgError):
        tools.wait_args({"timeoutSeconds": tools.MAX_WAIT_S + 1})
    with pytest.raises(tools.ToolArgError):
        tools.subscribe_args({"url": "u", "uri": ["a:1"] * (tools.MAX_URIS + 1)})
    assert tools.wait_args({}).timeout_s == tools.DEFAULT_WAIT_S < 30
    names = [t["name"] for t in tools.TOOLS]
    assert names == [
        "subscribe", "unsubscribe", "list_subscriptions", "read", "wait_for_change",
        "changes_since",
    ]  # fmt: skip
    assert all(t["inputSchema"]["type"] == "object" for t in tools.TOOLS)


def test_first_state_waits_for_the_state_that_goes_with_the_first_read() -> None:
    from service.face.firststate import verdict

    assert verdict({"state": "pending", "revision": 0}, None) == (False, None, None)
    assert verdict({"state": "pending", "revision": 1}, None) == (False, None, None)
    assert verdict({"state": "active", "revision": 1}, {"state": "open"}) == (True, None, None)
    known, code, hint = verdict({"state": "error", "stateCode": "RESOURCE_NOT_FOUND"}, None)
    assert (known, code) == (True, "RESOURCE_NOT_FOUND") and hint and "probe" in hint
    link = {"state": "backoff", "lastErrorCode": "CONNECTION_REFUSED", "lastErrorHint": "start it"}
    assert verdict({"state": "pending", "revision": 0}, link) == (
        True, "CONNECTION_REFUSED", "start it; the daemon keeps retrying",
    )  # fmt: skip
