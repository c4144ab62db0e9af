"""The agent policy (who may subscribe where, who may remove what) and when a new
subscription's first state is known (pure)."""

from __future__ import annotations

import pytest

from service.app import policy
from service.app.errors import AgentError
from service.app.firststate import first_state_json, verdict
from service.failures import state_hint


def test_policy_defaults_to_the_watched_origins() -> None:
    policy.check("http://127.0.0.1:1/other", None, ["http://127.0.0.1:1/mcp"])
    with pytest.raises(AgentError) as info:
        policy.check("http://127.0.0.1:2/mcp", None, ["http://127.0.0.1:1/mcp"])
    assert info.value.error_code == "AGENT_ORIGIN_NOT_ALLOWED" and info.value.hint
    allowed = policy.parse_setting("http://LOCALHOST, https://example.test")
    assert allowed == ("http://localhost:80", "https://example.test:443")
    policy.check("https://example.test/mcp", allowed, [])
    with pytest.raises(AgentError):
        policy.check("http://127.0.0.1:1/mcp", allowed, ["http://127.0.0.1:1/mcp"])
    assert policy.parse_setting("") is None and policy.parse_setting("*") == ("*",)
    policy.check("http://anything.test/mcp", ("*",), [])
    with pytest.raises(AgentError):
        policy.check("file:///etc/passwd", ("*",), [])
    with pytest.raises(ValueError):
        policy.parse_setting("ftp://x")


def test_first_state_waits_for_the_state_that_goes_with_the_first_read() -> None:
    assert verdict({"state": "pending", "revision": 0}, None) == (False, None, None)
    assert verdict({"state": "pending", "revision": 1}, None) == (False, None, None)
    assert verdict({"state": "active", "revision": 1}, {"state": "open"}) == (True, None, None)
    known, code, hint = verdict({"state": "error", "stateCode": "RESOURCE_NOT_FOUND"}, None)
    assert (known, code) == (True, "RESOURCE_NOT_FOUND") and hint and "probe" in hint
    link = {"state": "backoff", "lastErrorCode": "CONNECTION_REFUSED", "lastErrorHint": "start it"}
    assert verdict({"state": "pending", "revision": 0}, link) == (
        True, "CONNECTION_REFUSED", "start it; the daemon keeps retrying",
    )  # fmt: skip


def test_a_failed_first_state_shows_the_hint_its_code_shows_everywhere() -> None:
    """One table of hints: the first state's hint for a code is the ``stateHint`` that code
    shows on the subscription (and so in ``mcpsubctl subscribe``, which renders this)."""
    for code in ("RESOURCE_NOT_FOUND", "SUBSCRIPTION_NOT_HONORED", "AUTH_LOGIN_REQUIRED"):
        sub = {"state": "error", "stateCode": code, "revision": 0}
        link = {"state": "open", "lastErrorCode": code, "lastErrorHint": "the link's words"}
        assert verdict(sub, link) == (True, code, state_hint(code)), code
    unknown = {"state": "error", "stateCode": "SOMETHING_NEW"}
    link = {"lastErrorCode": "SOMETHING_NEW", "lastErrorHint": "the link's words"}
    assert first_state_json(unknown, link) == {
        "known": True, "errorCode": "SOMETHING_NEW", "hint": "the link's words",
    }  # fmt: skip
    assert first_state_json({"state": "pending"}, None) == {
        "known": False, "errorCode": None, "hint": None,
    }  # fmt: skip
