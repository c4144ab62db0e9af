"""The validation ladder over real HTTP: every status, code and the request-id echo."""

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.labserver.helpers import VERSION, body, call, headers, meta
from tests.support.lab import LabServer


@pytest.fixture(scope="module")
def lab() -> Iterator[LabServer]:
    """One server for this module: every test here is a stateless request."""
    with LabServer({"MCP_TEST_MAX_BODY_BYTES": "2048"}) as server:
        yield server


def post(lab: LabServer, payload: Any, hdrs: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(lab.url, json=payload, headers=hdrs or {}, timeout=10)


def error(response: httpx.Response, status: int, code: int, rid: Any) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["x-accel-buffering"] == "no"
    assert response.headers["content-type"].startswith("application/json")
    payload = response.json()
    assert payload["jsonrpc"] == "2.0"
    assert payload["id"] == rid
    assert payload["error"]["code"] == code
    err: dict[str, Any] = payload["error"]
    return err


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_non_post_is_405_with_allow_post(lab: LabServer, method: str) -> None:
    response = httpx.request(method, lab.url, timeout=10)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.headers["x-accel-buffering"] == "no"


def test_foreign_origin_is_403_and_echoes_id(lab: LabServer) -> None:
    hdrs = {**headers("server/discover"), "Origin": "http://evil.example"}
    error(post(lab, body("server/discover", request_id=41), hdrs), 403, -32600, 41)


def test_localhost_origin_is_served(lab: LabServer) -> None:
    hdrs = {**headers("server/discover"), "Origin": "http://localhost:5173"}
    assert post(lab, body("server/discover"), hdrs).status_code == 200


def test_body_over_the_limit_is_413(lab: LabServer) -> None:
    payload = body("server/discover", {"padding": "x" * 4096})
    response = post(lab, payload, headers("server/discover"))
    assert response.status_code == 413
    assert response.headers["x-accel-buffering"] == "no"


def test_unparseable_json_is_32700_with_null_id(lab: LabServer) -> None:
    response = httpx.post(
        lab.url, content=b'{"id": 9, ', headers=headers("server/discover"), timeout=10
    )
    error(response, 400, -32700, None)


def test_batch_is_32600(lab: LabServer) -> None:
    error(post(lab, [body("server/discover")], headers("server/discover")), 400, -32600, None)


def test_request_without_method_is_32600_and_echoes_id(lab: LabServer) -> None:
    error(post(lab, {"jsonrpc": "2.0", "id": "x1"}, headers("server/discover")), 400, -32600, "x1")


@pytest.mark.parametrize("with_method_header", [True, False])
def test_notification_post_is_202_with_empty_body(lab: LabServer, with_method_header: bool) -> None:
    hdrs = {"Content-Type": "application/json"}
    if with_method_header:
        hdrs = headers("notifications/cancelled")
    payload = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    response = post(lab, payload, hdrs)
    assert response.status_code == 202
    assert response.content == b""


@pytest.mark.parametrize("header_version", [None, "2025-06-18"])
def test_legacy_initialize_is_32022_naming_2026(lab: LabServer, header_version: str | None) -> None:
    hdrs = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if header_version:
        hdrs["MCP-Protocol-Version"] = header_version
    payload = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "old", "version": "1"},
        },
    }
    err = error(post(lab, payload, hdrs), 400, -32022, 0)
    assert err["data"] == {"supported": ["2026-07-28"], "requested": "2025-06-18"}
    assert "2026-07-28" in err["message"]


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}},
        {"_meta": {"io.modelcontextprotocol/protocolVersion": VERSION}},
        {"_meta": "nope"},
    ],
    ids=["no-meta", "no-version", "no-capabilities", "meta-not-object"],
)
def test_incomplete_meta_is_32602(lab: LabServer, params: dict[str, Any]) -> None:
    payload = {"jsonrpc": "2.0", "id": 12, "method": "server/discover", "params": params}
    error(post(lab, payload, headers("server/discover")), 400, -32602, 12)


def _without(hdrs: dict[str, str], name: str) -> dict[str, str]:
    return {k: v for k, v in hdrs.items() if k != name}


@pytest.mark.parametrize(
    ("method", "params", "hdrs"),
    [
        ("server/discover", {}, _without(headers("server/discover"), "MCP-Protocol-Version")),
        ("server/discover", {}, headers("server/discover", version="2025-11-25")),
        ("server/discover", {}, _without(headers("server/discover"), "Mcp-Method")),
        ("server/discover", {}, headers("resources/list")),
        ("resources/read", {"uri": "test://review/status"}, headers("resources/read")),
        ("resources/read", {"uri": "test://review/status"}, headers("resources/read", "test://x")),
        ("tools/call", {"name": "echo_tool"}, headers("tools/call", "get_review_status")),
        ("tools/call", {"name": "echo_tool"}, headers("tools/call")),
    ],
    ids=[
        "no-version-header",
        "version-differs",
        "no-method-header",
        "method-differs",
        "read-no-name",
        "read-name-differs",
        "call-name-differs",
        "call-no-name",
    ],
)
def test_header_body_disagreement_is_32020(
    lab: LabServer, method: str, params: dict[str, Any], hdrs: dict[str, str]
) -> None:
    error(post(lab, body(method, params, request_id=77), hdrs), 400, -32020, 77)


def test_base64_mcp_name_is_decoded(lab: LabServer) -> None:
    response = post(
        lab,
        body("resources/read", {"uri": "test://review/status"}),
        headers("resources/read", "=?base64?dGVzdDovL3Jldmlldy9zdGF0dXM=?="),
    )
    assert response.status_code == 200, response.text


def test_header_mismatch_wins_over_unsupported_version(lab: LabServer) -> None:
    payload = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "server/discover",
        "params": {"_meta": meta("v999.0.0")},
    }
    error(post(lab, payload, headers("server/discover")), 400, -32020, 5)


def test_unsupported_version_is_32022_echoing_requested(lab: LabServer) -> None:
    payload = {
        "jsonrpc": "2.0",
        "id": "v",
        "method": "server/discover",
        "params": {"_meta": meta("v999.0.0")},
    }
    err = error(
        post(lab, payload, headers("server/discover", version="v999.0.0")), 400, -32022, "v"
    )
    assert err["data"] == {"supported": ["2026-07-28"], "requested": "v999.0.0"}


@pytest.mark.parametrize(
    "method",
    [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "unknown/method",
    ],
)
def test_removed_and_unknown_methods_are_404_32601(lab: LabServer, method: str) -> None:
    params: dict[str, Any] = {"name": "p"} if method == "prompts/get" else {}
    if method == "resources/subscribe":
        params = {"uri": "test://review/status"}
    response = call(lab.url, method, params, request_id=f"m-{method}")
    error(response, 404, -32601, f"m-{method}")


def test_unknown_resource_is_32602_with_uri(lab: LabServer) -> None:
    uri = "test://nonexistent-resource-for-conformance-testing"
    err = error(call(lab.url, "resources/read", {"uri": uri}, request_id=3), 400, -32602, 3)
    assert err["message"] == f"Unknown resource URI: {uri}"
    assert err["data"] == {"uri": uri}


def test_unknown_tool_is_32602(lab: LabServer) -> None:
    err = error(call(lab.url, "tools/call", {"name": "nope"}, request_id=8), 400, -32602, 8)
    assert err["message"] == "Unknown tool: nope"


def test_listen_without_filter_is_32602(lab: LabServer) -> None:
    error(call(lab.url, "subscriptions/listen", {}, request_id="l"), 400, -32602, "l")


def test_bad_echo_arguments_are_32602(lab: LabServer) -> None:
    response = call(lab.url, "tools/call", {"name": "echo_tool", "arguments": {"message": 5}})
    error(response, 400, -32602, 1)


def test_errors_are_logged_with_status_and_code(lab: LabServer) -> None:
    since = lab.log()[-1]["seq"] if lab.log() else 0
    call(lab.url, "ping", request_id=1)
    entry = lab.wait_event("http.error", since=since)[0]
    assert (entry["status"], entry["code"]) == (404, -32601)


def test_auth_token_is_required_when_configured(lab_server_factory: Any) -> None:
    lab = lab_server_factory({"MCP_TEST_AUTH_TOKEN": "s3cret"})
    response = call(lab.url, "server/discover", request_id=2)
    err = error(response, 401, -32600, 2)
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert "token" in err["message"]
    wrong = httpx.post(
        lab.url,
        json=body("server/discover"),
        headers={**headers("server/discover"), "Authorization": "Bearer nope"},
    )
    assert wrong.status_code == 401
    ok = httpx.post(
        lab.url,
        json=body("server/discover"),
        headers={**headers("server/discover"), "Authorization": "Bearer s3cret"},
    )
    assert ok.status_code == 200
    # The control surface is not behind the token, and the token can be changed at runtime.
    lab.configure(authToken=None)
    assert call(lab.url, "server/discover").status_code == 200
