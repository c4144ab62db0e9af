"""Pure protocol decisions of the lab server: validation ladder, filters, config, cursors."""

import json
from typing import Any

import pytest

from labserver.console import should_print
from labserver.hub import filter_error, honored_filter
from labserver.labconfig import ConfigError, LabConfig, apply_patch
from labserver.resources import InvalidCursor, decode_cursor, encode_cursor, review_text
from labserver.validation import (
    McpRequest,
    Rejection,
    check_http,
    check_request,
    parse_message,
)

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
KNOWN = {"server/discover", "resources/read", "tools/call"}


def _headers(
    method: str, name: str | None = None, version: str = "2026-07-28"
) -> list[tuple[str, str]]:
    pairs = [("mcp-protocol-version", version), ("mcp-method", method)]
    if name is not None:
        pairs.append(("mcp-name", name))
    return pairs


def _check(message: dict[str, Any], headers: list[tuple[str, str]]) -> Rejection | McpRequest:
    parsed = parse_message(json.dumps(message).encode())
    assert not isinstance(parsed, Rejection)
    return check_request(parsed, headers, KNOWN)


def test_review_text_is_three_lines_without_trailing_newline() -> None:
    assert review_text("pending", 1) == (
        "status: pending\nversion: 1\nmessage: Waiting for simulated review result."
    )
    assert review_text("reviewed", 2) == (
        "status: reviewed\nversion: 2\nmessage: Simulated review result is now available."
    )


def test_http_layer_order_405_before_403_before_401_before_413() -> None:
    bad_origin = [("origin", "http://evil.example")]
    assert check_http("GET", bad_origin, None, auth_token="t").status == 405  # type: ignore[union-attr]
    assert check_http("POST", bad_origin, None, auth_token="t").status == 403  # type: ignore[union-attr]
    assert check_http("POST", [], None, auth_token="t").status == 401  # type: ignore[union-attr]
    good = [("authorization", "Bearer t")]
    assert check_http("POST", good, None, auth_token="t").status == 413  # type: ignore[union-attr]
    assert check_http("POST", good, b"{}", auth_token="t") is None


@pytest.mark.parametrize(
    "origin",
    ["http://localhost", "http://localhost:3000", "https://127.0.0.1:8443", "http://[::1]:9"],
)
def test_loopback_origins_are_allowed(origin: str) -> None:
    assert check_http("POST", [("origin", origin)], b"{}", auth_token=None) is None


@pytest.mark.parametrize(
    "origin", ["http://localhost.evil.com", "null", "http://10.0.0.1", "ftp://localhost"]
)
def test_foreign_origins_are_refused(origin: str) -> None:
    rejection = check_http("POST", [("origin", origin)], b'{"id":5}', auth_token=None)
    assert rejection is not None and rejection.status == 403 and rejection.request_id == 5


def test_bearer_scheme_is_case_insensitive_but_token_is_exact() -> None:
    assert check_http("POST", [("authorization", "bearer t")], b"{}", auth_token="t") is None
    refused = check_http("POST", [("authorization", "Bearer T")], b"{}", auth_token="t")
    assert refused is not None and refused.status == 401


def test_header_mismatch_runs_before_the_version_check() -> None:
    message = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "server/discover",
        "params": {"_meta": {**META, "io.modelcontextprotocol/protocolVersion": "v999.0.0"}},
    }
    result = _check(message, _headers("server/discover"))
    assert isinstance(result, Rejection) and result.code == -32020
    result = _check(message, _headers("server/discover", version="v999.0.0"))
    assert isinstance(result, Rejection) and result.code == -32022
    assert result.data == {"supported": ["2026-07-28"], "requested": "v999.0.0"}


def test_duplicated_header_is_a_mismatch() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}}
    result = _check(message, [*_headers("server/discover"), ("mcp-method", "server/discover")])
    assert isinstance(result, Rejection) and result.code == -32020


def test_base64_name_is_decoded_before_comparing() -> None:
    uri = "test://ünï code"
    encoded = "=?base64?dGVzdDovL8O8bsOvIGNvZGU=?="
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "resources/read",
        "params": {"_meta": META, "uri": uri},
    }
    assert isinstance(_check(message, _headers("resources/read", encoded)), McpRequest)
    broken = _check(message, _headers("resources/read", "=?base64?***?="))
    assert isinstance(broken, Rejection) and broken.code == -32020


def test_notification_is_framed_as_such() -> None:
    parsed = parse_message(b'{"jsonrpc":"2.0","method":"notifications/cancelled"}')
    assert not isinstance(parsed, Rejection) and parsed.is_notification


@pytest.mark.parametrize(
    ("raw", "code", "rid"),
    [
        (b"{nope", -32700, None),
        (b"[]", -32600, None),
        (b'[{"jsonrpc":"2.0","id":1,"method":"server/discover"}]', -32600, None),
        (b'{"jsonrpc":"1.0","id":4,"method":"x"}', -32600, 4),
        (b'{"jsonrpc":"2.0","id":4}', -32600, 4),
        (b'{"jsonrpc":"2.0","id":true,"method":"x"}', -32600, None),
        (b'{"jsonrpc":"2.0","id":null,"method":"x"}', -32600, None),
    ],
)
def test_framing_errors(raw: bytes, code: int, rid: Any) -> None:
    result = parse_message(raw)
    assert isinstance(result, Rejection)
    assert (result.status, result.code, result.request_id) == (400, code, rid)


def test_honored_filter_follows_capabilities() -> None:
    asked = {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourcesListChanged": True,
        "resourceSubscriptions": ["a", "b"],
    }
    assert honored_filter(asked, advertise_subscribe=True, advertise_list_changed=True) == {
        "resourcesListChanged": True,
        "resourceSubscriptions": ["a", "b"],
    }
    assert honored_filter(asked, advertise_subscribe=False, advertise_list_changed=False) == {}
    assert honored_filter(
        asked, advertise_subscribe=True, advertise_list_changed=False, dishonored=["b"]
    ) == {"resourceSubscriptions": ["a"]}
    assert (
        honored_filter(
            {"resourcesListChanged": False}, advertise_subscribe=True, advertise_list_changed=True
        )
        == {}
    )


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [],
        "x",
        {"toolsListChanged": "yes"},
        {"resourceSubscriptions": "a"},
        {"resourceSubscriptions": [1]},
    ],
)
def test_filter_errors(bad: Any) -> None:
    assert filter_error(bad) is not None


def test_config_patch_is_validated_and_all_or_nothing() -> None:
    config = LabConfig()
    patched = apply_patch(
        config,
        {
            "ackDelayMs": 5,
            "legacyMode": "missing-session",
            "failMethods": {"tools/call": 503},
            "dropAfterAckMs": None,
        },
    )
    assert patched.ack_delay_ms == 5 and patched.legacy_mode == "missing-session"
    assert patched.to_json()["failMethods"] == {"tools/call": 503}
    for mode in ("not-initialized", "discover-2025", "not-found"):
        assert apply_patch(config, {"legacyMode": mode}).legacy_mode == mode
    for bad in (
        {"ackDelayMs": -1},
        {"ackDelayMs": True},
        {"legacyMode": "old"},
        {"nope": 1},
        {"pageSize": 0},
        {"keepaliveSeconds": 0},
        {"dishonorUris": "x"},
        {"failMethods": {"x": 42}},
        [1],
    ):
        with pytest.raises(ConfigError):
            apply_patch(config, bad)
    assert config == LabConfig()


def test_cursor_round_trip_and_garbage() -> None:
    assert decode_cursor(encode_cursor(50)) == 50
    for bad in ("garbage!", 12, encode_cursor(0)[:-4] + "AAAA", "e30="):
        with pytest.raises(InvalidCursor):
            decode_cursor(bad)


def test_log_level_ladder() -> None:
    assert should_print("info", "debug") and should_print("error", "info")
    assert not should_print("debug", "info")
    assert not should_print("info", "error")
    assert not should_print("error", "silent")
