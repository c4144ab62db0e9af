"""service.mcp.classify: response parsing, discover failures, network error codes."""

from __future__ import annotations

import errno
import itertools
import json
import socket
import ssl
from typing import Any

import pytest

from service.mcp.classify import (
    discover_failure,
    iter_causes,
    network_error_code,
    parse_json_message,
    parse_response,
)
from service.mcp.errors import (
    EndpointNotFound,
    HttpStatusError,
    JsonRpcError,
    ListenLost,
    McpError,
    ProtocolUnsupported,
    ProtocolViolation,
    TransportError,
)

JSON = "application/json"
SSE = "text/event-stream"


def body(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


def ok(rid: Any, res: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"ok": True} if res is None else res}


def err(rid: Any, code: int, message: str = "m", data: Any = None) -> dict[str, Any]:
    e: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        e["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": e}


PROGRESS = {
    "jsonrpc": "2.0",
    "method": "notifications/progress",
    "params": {"progressToken": "abc", "progress": 50, "total": 100},
}


def sse(*messages: dict[str, Any], eol: str = "\n") -> bytes:
    out = ""
    for m in messages:
        out += f"event: message{eol}data: {json.dumps(m)}{eol}{eol}"
    return out.encode()


# ---- parse_response --------------------------------------------------------------------
def test_json_result() -> None:
    assert parse_response(200, JSON, body(ok(1)), 1, "tools/list") == {"ok": True}


def test_json_result_with_charset() -> None:
    ct = "Application/JSON; charset=utf-8"
    assert parse_response(200, ct, body(ok("a", {"x": 1})), "a", "m") == {"x": 1}


@pytest.mark.parametrize(
    ("status", "code"), [(200, -32603), (400, -32602), (400, -32022), (404, -32601)]
)
def test_json_error_any_status(status: int, code: int) -> None:
    with pytest.raises(JsonRpcError) as info:
        parse_response(status, JSON, body(err(3, code, "bad", {"k": 1})), 3, "tools/call")
    exc = info.value
    assert (exc.code, exc.rpc_message, exc.data) == (code, "bad", {"k": 1})
    assert exc.http_status == status
    assert exc.method == "tools/call"
    assert exc.error_code == "INTERNAL_ERROR"


def test_json_error_with_non_int_code_is_internal_error() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "message": "m"}}
    with pytest.raises(JsonRpcError) as info:
        parse_response(200, JSON, body(message), 1, "m")
    assert info.value.code == -32603


def test_json_error_without_id_is_still_read() -> None:
    with pytest.raises(JsonRpcError) as info:
        parse_response(400, JSON, body(err(None, -32700, "Parse error")), 1, "m")
    assert info.value.code == -32700


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_sse_progress_then_response(eol: str) -> None:
    payload = sse(PROGRESS, ok(5, {"tools": []}), eol=eol)
    assert parse_response(200, SSE, payload, 5, "tools/list") == {"tools": []}


def test_sse_response_without_final_blank_line() -> None:
    payload = b'data: {"jsonrpc":"2.0","id":1,"result":{"v":2}}'
    assert parse_response(200, SSE, payload, 1, "m") == {"v": 2}


def test_sse_ignores_comments_and_other_event_types() -> None:
    payload = b': ping\n\nevent: other\ndata: {"id":1,"result":{"no":1}}\n\n' + sse(ok(1))
    assert parse_response(200, SSE, payload, 1, "m") == {"ok": True}


def test_sse_error_response() -> None:
    with pytest.raises(JsonRpcError) as info:
        parse_response(200, SSE, sse(PROGRESS, err(2, -32602, "Unknown tool")), 2, "tools/call")
    assert info.value.code == -32602


def test_sse_without_response_is_violation() -> None:
    with pytest.raises(ProtocolViolation, match="ended without a response"):
        parse_response(200, SSE, sse(PROGRESS), 1, "tools/list")


def test_sse_with_only_other_ids_is_violation() -> None:
    with pytest.raises(ProtocolViolation):
        parse_response(200, SSE, sse(ok(2), ok("1")), 1, "tools/list")


def test_sse_without_response_at_error_status_is_http_error() -> None:
    with pytest.raises(HttpStatusError) as info:
        parse_response(503, SSE, b": bye\n\n", 1, "m")
    assert info.value.status == 503


def test_sse_with_invalid_json_is_violation() -> None:
    with pytest.raises(ProtocolViolation, match="invalid JSON"):
        parse_response(200, SSE, b"data: {nope\n\n", 1, "m")


@pytest.mark.parametrize("rid", [2, "1", None])
def test_json_result_with_mismatched_id_is_violation(rid: Any) -> None:
    with pytest.raises(ProtocolViolation, match="does not match request"):
        parse_response(200, JSON, body(ok(rid)), 1, "tools/list")


def test_non_json_502_is_http_status_error() -> None:
    with pytest.raises(HttpStatusError) as info:
        parse_response(502, "text/html", b"<h1>Bad Gateway</h1>", 1, "m")
    exc = info.value
    assert exc.status == 502
    assert exc.body == "<h1>Bad Gateway</h1>"
    assert exc.error_code == "INTERNAL_ERROR"
    assert str(exc) == "HTTP 502: <h1>Bad Gateway</h1>"


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize(("ctype", "payload"), [("text/plain", b"Unauthorized"), (JSON, b"")])
def test_auth_status_is_auth_failed(status: int, ctype: str, payload: bytes) -> None:
    with pytest.raises(HttpStatusError) as info:
        parse_response(status, ctype, payload, 1, "m", www_authenticate="Bearer x")
    assert info.value.status == status
    assert info.value.error_code == "AUTH_FAILED"
    assert info.value.www_authenticate == "Bearer x"


def test_401_with_oauth_error_body_is_auth_failed() -> None:
    payload = b'{"error":"invalid_token","error_description":"expired"}'
    with pytest.raises(HttpStatusError) as info:
        parse_response(401, JSON, payload, 1, "server/discover", www_authenticate="Bearer x")
    assert info.value.error_code == "AUTH_FAILED"


def test_jsonrpc_error_at_401_is_auth_failed() -> None:
    with pytest.raises(JsonRpcError) as info:
        parse_response(401, JSON, body(err(1, -32001, "Unauthorized")), 1, "m")
    assert info.value.error_code == "AUTH_FAILED"


def test_result_at_error_status_is_http_error() -> None:
    with pytest.raises(HttpStatusError) as info:
        parse_response(500, JSON, body(ok(1)), 1, "m")
    assert info.value.status == 500


@pytest.mark.parametrize("payload", [b"", b"not json", b"[1,2]", b'{"jsonrpc":"2.0","id":1}'])
def test_200_without_jsonrpc_response_is_violation(payload: bytes) -> None:
    with pytest.raises(ProtocolViolation):
        parse_response(200, JSON, payload, 1, "m")


def test_result_must_be_an_object() -> None:
    with pytest.raises(ProtocolViolation, match="neither a result object nor an error"):
        parse_response(200, JSON, b'{"jsonrpc":"2.0","id":1,"result":[1]}', 1, "m")


@pytest.mark.parametrize("text", ["[]", "1", '"s"', "null"])
def test_parse_json_message_requires_object(text: str) -> None:
    with pytest.raises(ProtocolViolation):
        parse_json_message(text)


# ---- discover_failure ------------------------------------------------------------------
def rpc(code: int, data: Any = None, status: int | None = 200, message: str = "m") -> JsonRpcError:
    return JsonRpcError(code, message, data, http_status=status, method="server/discover")


def test_method_not_found_is_unsupported() -> None:
    original = rpc(-32601, status=404, message="Method not found")
    mapped = discover_failure(original)
    assert isinstance(mapped, ProtocolUnsupported)
    assert mapped.error_code == "PROTOCOL_UNSUPPORTED"
    assert mapped.__cause__ is original
    assert "2026-07-28" in (mapped.hint or "")


@pytest.mark.parametrize(
    "data",
    [None, {}, {"supported": ["2025-11-25"]}, {"supported": "2026-07-28"}, ["2026-07-28"]],
)
def test_unsupported_version_without_ours_is_unsupported(data: Any) -> None:
    assert isinstance(discover_failure(rpc(-32022, data, 400)), ProtocolUnsupported)


def test_unsupported_version_with_ours_is_unchanged() -> None:
    original = rpc(-32022, {"supported": ["2025-11-25", "2026-07-28"], "requested": "x"}, 400)
    assert discover_failure(original) is original


@pytest.mark.parametrize("status", [400, 404, 405, 406, 415])
def test_plain_4xx_is_unsupported(status: int) -> None:
    original = HttpStatusError(status, "Bad Request")
    mapped = discover_failure(original)
    assert isinstance(mapped, ProtocolUnsupported)
    assert mapped.__cause__ is original


@pytest.mark.parametrize("status", [401, 403, 500, 502])
def test_other_http_statuses_are_unchanged(status: int) -> None:
    original = HttpStatusError(status)
    assert discover_failure(original) is original


@pytest.mark.parametrize("code", [-32601, -32022, -32600, -32001])
def test_401_jsonrpc_is_unchanged(code: int) -> None:
    original = rpc(code, status=401)
    assert discover_failure(original) is original
    assert original.error_code == "AUTH_FAILED"


def test_missing_session_id_is_unsupported() -> None:
    mapped = discover_failure(rpc(-32600, status=400, message="Bad Request: Missing session ID"))
    assert isinstance(mapped, ProtocolUnsupported)
    assert "Missing session ID" in str(mapped)


@pytest.mark.parametrize("code", [-32000, -32600, -32602, -32603, -32020, -32021, -32001])
@pytest.mark.parametrize("status", [200, 400, 404, 405, None])
def test_every_other_jsonrpc_error_is_unsupported(code: int, status: int | None) -> None:
    """The SDKs' denylist: any JSON-RPC error to discover is evidence of a pre-2026 server."""
    original = rpc(code, status=status)
    mapped = discover_failure(original)
    assert type(mapped) is ProtocolUnsupported
    assert mapped.__cause__ is original


def test_typescript_sdk_1x_not_initialized_is_unsupported() -> None:
    """TS SDK 1.x stateful transport: 400, -32000, id null (parse_response keeps the error)."""
    body = b'{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}'
    with pytest.raises(JsonRpcError) as caught:
        parse_response(400, JSON, body, 1, "server/discover")
    mapped = discover_failure(caught.value)
    assert mapped.error_code == "PROTOCOL_UNSUPPORTED"
    assert "Server not initialized" in str(mapped)


@pytest.mark.parametrize("status", [500, 502, 503, 408, 429])
def test_jsonrpc_errors_on_retry_statuses_are_unchanged(status: int) -> None:
    original = rpc(-32603, status=status)
    assert discover_failure(original) is original


def test_plain_404_is_endpoint_not_found() -> None:
    original = HttpStatusError(404, "Not Found")
    mapped = discover_failure(original)
    assert isinstance(mapped, EndpointNotFound)
    assert isinstance(mapped, ProtocolUnsupported)
    assert mapped.error_code == "ENDPOINT_NOT_FOUND"
    assert "path" in (mapped.hint or "")
    assert mapped.__cause__ is original


@pytest.mark.parametrize("status", [400, 402, 405, 406, 409, 410, 413, 415, 421, 422, 451])
def test_every_plain_4xx_but_auth_and_404_is_unsupported(status: int) -> None:
    mapped = discover_failure(HttpStatusError(status))
    assert type(mapped) is ProtocolUnsupported


@pytest.mark.parametrize("status", [408, 429])
def test_transient_4xx_is_unchanged(status: int) -> None:
    original = HttpStatusError(status)
    assert discover_failure(original) is original


def test_non_http_errors_are_unchanged() -> None:
    for original in (TransportError("refused"), ProtocolViolation("x"), ListenLost("y")):
        assert discover_failure(original) is original


# ---- network_error_code ----------------------------------------------------------------
def chain(*excs: BaseException) -> BaseException:
    """``excs[0]`` raised from ``excs[1]`` raised from ... (outermost first)."""
    for outer, inner in itertools.pairwise(excs):
        outer.__cause__ = inner
    return excs[0]


def raised_chain() -> BaseException:
    try:
        try:
            try:
                raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
            except OSError as exc:
                raise RuntimeError("httpcore.ConnectError") from exc
        except RuntimeError as exc:
            raise TransportError("connect failed") from exc
    except TransportError as exc:
        return exc
    raise AssertionError("unreachable")


def errno_refused() -> OSError:
    exc = OSError("connect")
    exc.errno = errno.ECONNREFUSED
    return exc


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (ConnectionRefusedError(), "CONNECTION_REFUSED"),
        (OSError(errno.ECONNREFUSED, "Connection refused"), "CONNECTION_REFUSED"),
        (errno_refused(), "CONNECTION_REFUSED"),
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "DNS_LOOKUP_FAILED"),
        (socket.gaierror("x"), "DNS_LOOKUP_FAILED"),
        (ssl.SSLCertVerificationError("certificate verify failed"), "TLS_CERT_UNTRUSTED"),
        (ssl.SSLError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] boom"), "TLS_CERT_UNTRUSTED"),
        (RuntimeError("[SSL: CERTIFICATE_VERIFY_FAILED] flattened"), "TLS_CERT_UNTRUSTED"),
        (RuntimeError("[Errno -2] Name or service not known"), "DNS_LOOKUP_FAILED"),
        (RuntimeError("Temporary failure in name resolution"), "DNS_LOOKUP_FAILED"),
        (RuntimeError("All connection attempts failed: Connection refused"), "CONNECTION_REFUSED"),
    ],
)
def test_direct_network_errors(exc: BaseException, code: str) -> None:
    assert network_error_code(exc) == code


def test_raise_from_three_deep() -> None:
    assert network_error_code(raised_chain()) == "CONNECTION_REFUSED"


@pytest.mark.parametrize(
    ("inner", "code"),
    [
        (socket.gaierror(-2, "x"), "DNS_LOOKUP_FAILED"),
        (ssl.SSLCertVerificationError("x"), "TLS_CERT_UNTRUSTED"),
        (ConnectionRefusedError(), "CONNECTION_REFUSED"),
    ],
)
def test_unrelated_outer_exceptions_do_not_stop_the_walk(inner: BaseException, code: str) -> None:
    exc = chain(TransportError("fetch failed"), ValueError("ERR_FETCH_FAILED"), OSError("x"), inner)
    assert network_error_code(exc) == code


def test_implicit_context_is_walked() -> None:
    try:
        try:
            raise socket.gaierror(-2, "boom")
        except OSError:
            raise RuntimeError("wrapper") from None
    except RuntimeError as exc:
        assert network_error_code(exc) == "DNS_LOOKUP_FAILED"


def test_unrelated_is_none() -> None:
    assert network_error_code(chain(RuntimeError("a"), ValueError("b"), KeyError("c"))) is None
    assert network_error_code(ValueError("no cause")) is None
    assert network_error_code(OSError(errno.ECONNRESET, "reset")) is None
    assert network_error_code(TimeoutError()) is None


def test_cycles_do_not_loop() -> None:
    a, b, c = RuntimeError("a"), RuntimeError("b"), RuntimeError("c")
    a.__cause__, b.__cause__, c.__cause__ = b, c, a
    assert network_error_code(a) is None
    assert iter_causes(a) == [a, b, c]
    self_loop = RuntimeError("self")
    self_loop.__cause__ = self_loop
    assert iter_causes(self_loop) == [self_loop]


def test_cause_walk_is_bounded() -> None:
    excs = [RuntimeError(str(i)) for i in range(500)]
    deep = chain(*excs)
    assert 3 < len(iter_causes(deep)) < 50
    assert iter_causes(deep)[:3] == excs[:3]


def test_iter_causes_starts_with_the_exception() -> None:
    exc = McpError("x")
    assert iter_causes(exc) == [exc]
