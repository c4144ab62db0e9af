"""cli.failures: exception → (errorCode, hint), and the exit-code tables (seed §2)."""

from __future__ import annotations

import socket
import ssl

import pytest

from cli.failures import (
    CTL_EXIT_CODES,
    TOOL_REJECTED_HINT,
    classify,
    classify_read_failure,
    ctl_exit_code,
    dropin_call_exit_code,
)
from service.failures import url_problem
from service.mcp.errors import (
    PROTOCOL_UNSUPPORTED_HINT,
    EndpointNotFound,
    HttpStatusError,
    JsonRpcError,
    ListenClosed,
    ListenLost,
    McpError,
    ProtocolUnsupported,
    ProtocolViolation,
    TransportError,
)
from service.probe import ProbeTimeout, ResourceNotText


class LoginRequired(McpError):
    error_code = "AUTH_LOGIN_REQUIRED"


class AuthTimeout(McpError):
    error_code = "AUTH_TIMEOUT"


class RefreshFailed(McpError):
    error_code = "AUTH_REFRESH_FAILED"


def caused(outer: BaseException, inner: BaseException) -> BaseException:
    outer.__cause__ = inner
    return outer


def refused() -> TransportError:
    return caused(TransportError("connect failed"), ConnectionRefusedError())  # type: ignore[return-value]


# ---- compat (mcp-resource-subscriber) ----------------------------------------------------
@pytest.mark.parametrize("status", [401, 403])
def test_compat_http_auth_in_subscribe_is_internal_error(status: int) -> None:
    failure = classify(HttpStatusError(status), mode="subscribe", compat=True)
    assert failure.code == "INTERNAL_ERROR"
    assert failure.hint is None
    assert failure.message == f"HTTP {status}"


@pytest.mark.parametrize(
    "exc", [HttpStatusError(401), HttpStatusError(403), JsonRpcError(-32001, "x", http_status=401)]
)
def test_compat_http_auth_in_call_is_auth_failed(exc: McpError) -> None:
    failure = classify(exc, mode="call", compat=True)
    assert failure.code == "AUTH_FAILED"
    assert failure.hint and "--auth-token" in failure.hint
    assert dropin_call_exit_code(failure.code) == 2


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (LoginRequired("expired"), "AUTH_LOGIN_REQUIRED"),
        (AuthTimeout("slow"), "AUTH_TIMEOUT"),
        (RefreshFailed("503"), "AUTH_REFRESH_FAILED"),
    ],
)
@pytest.mark.parametrize("mode", ["subscribe", "call"])
@pytest.mark.parametrize("compat", [True, False])
def test_auth_codes_come_first(exc: McpError, code: str, mode: str, compat: bool) -> None:
    exc.__cause__ = ConnectionRefusedError()
    assert classify(exc, mode=mode, compat=compat).code == code


def test_auth_failed_beats_tool_rejection_in_call() -> None:
    exc = JsonRpcError(-32602, "bad", http_status=401)
    assert classify(exc, mode="call", compat=True).code == "AUTH_FAILED"


@pytest.mark.parametrize("code", [-32602, -32601])
def test_compat_call_rejection_is_tool_request_rejected(code: int) -> None:
    failure = classify(
        JsonRpcError(code, "Unknown tool: x", http_status=400), mode="call", compat=True
    )
    assert failure.code == "TOOL_REQUEST_REJECTED"
    assert failure.hint == TOOL_REJECTED_HINT
    assert "--tool" in failure.hint
    assert dropin_call_exit_code(failure.code) == 3


def test_rejection_in_subscribe_is_internal_error() -> None:
    failure = classify(JsonRpcError(-32602, "bad uri"), mode="subscribe", compat=True)
    assert failure.code == "INTERNAL_ERROR"


@pytest.mark.parametrize("mode", ["subscribe", "call"])
@pytest.mark.parametrize("compat", [True, False])
def test_protocol_unsupported(mode: str, compat: bool) -> None:
    exc = ProtocolUnsupported("server supports ['2025-11-25']")
    failure = classify(exc, mode=mode, compat=compat)
    assert failure.code == "PROTOCOL_UNSUPPORTED"
    assert failure.hint is not None and "2026-07-28" in failure.hint
    assert "upgrade" in failure.hint


@pytest.mark.parametrize("mode", ["subscribe", "call"])
def test_plain_404_keeps_the_originals_code_in_the_drop_in(mode: str) -> None:
    exc = caused(EndpointNotFound("404"), HttpStatusError(404, "Not Found"))
    failure = classify(exc, mode=mode, compat=True)
    assert failure.code == "PROTOCOL_UNSUPPORTED"
    assert failure.hint == PROTOCOL_UNSUPPORTED_HINT


def test_plain_404_is_endpoint_not_found_in_mcpsubctl() -> None:
    exc = caused(EndpointNotFound("404"), HttpStatusError(404, "Not Found"))
    failure = classify(exc, mode="subscribe", compat=False)
    assert failure.code == "ENDPOINT_NOT_FOUND"
    assert failure.hint is not None and "path" in failure.hint
    assert ctl_exit_code(failure.code) == 7


def test_protocol_unsupported_beats_tool_rejection_and_network() -> None:
    exc = caused(ProtocolUnsupported("x"), JsonRpcError(-32601, "Method not found"))
    exc.__cause__.__cause__ = ConnectionRefusedError()  # type: ignore[union-attr]
    assert classify(exc, mode="call", compat=True).code == "PROTOCOL_UNSUPPORTED"


@pytest.mark.parametrize(
    ("inner", "code", "needles"),
    [
        (
            ssl.SSLCertVerificationError("verify failed"),
            "TLS_CERT_UNTRUSTED",
            ["SSL_CERT_FILE", "--ca-cert"],
        ),
        (
            socket.gaierror(-2, "Name or service not known"),
            "DNS_LOOKUP_FAILED",
            ["hostname", "--url"],
        ),
        (ConnectionRefusedError(), "CONNECTION_REFUSED", ["--url", "running"]),
    ],
)
@pytest.mark.parametrize("mode", ["subscribe", "call"])
@pytest.mark.parametrize("compat", [True, False])
def test_network_codes_with_hints(
    inner: BaseException, code: str, needles: list[str], mode: str, compat: bool
) -> None:
    exc = caused(TransportError("fetch failed"), caused(RuntimeError("wrapped"), inner))
    failure = classify(exc, mode=mode, compat=compat)
    assert failure.code == code
    for needle in needles:
        assert needle in (failure.hint or ""), needle
    assert dropin_call_exit_code(failure.code) == 3


@pytest.mark.parametrize(
    "exc",
    [
        TransportError("timed out", kind="timeout"),
        ProtocolViolation("bad frame"),
        HttpStatusError(502, "Bad Gateway"),
        JsonRpcError(-32603, "internal"),
        ResourceNotText("Expected text resource content"),
        ValueError("boom"),
    ],
)
def test_compat_fallbacks(exc: BaseException) -> None:
    assert classify(exc, mode="subscribe", compat=True).code == "INTERNAL_ERROR"
    call = classify(exc, mode="call", compat=True)
    assert call.code == "CALL_FAILED"
    assert call.hint is None


def test_message_falls_back_to_type_name() -> None:
    assert classify(ValueError(), mode="call", compat=True).message == "ValueError"
    assert classify(ValueError("why"), mode="call", compat=True).message == "why"


# ---- mcpsubctl (compat=False) ------------------------------------------------------------
@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (HttpStatusError(401), "AUTH_FAILED"),
        (ProtocolViolation("bad frame"), "PROTOCOL_ERROR"),
        (TransportError("timed out", kind="timeout"), "REQUEST_TIMEOUT"),
        (TransportError("reset", kind="read"), "NETWORK_ERROR"),
        (TimeoutError(), "REQUEST_TIMEOUT"),
        (ProbeTimeout("--timeout-ms elapsed"), "REQUEST_TIMEOUT"),
        (ListenLost("eof"), "SUBSCRIPTION_DISCONNECTED"),
        (ListenClosed("bye"), "SUBSCRIPTION_CLOSED"),
        (HttpStatusError(502), "SERVER_ERROR"),
        (JsonRpcError(-32603, "internal"), "SERVER_ERROR"),
        (ResourceNotText("x"), "INTERNAL_ERROR"),
        (ValueError("x"), "INTERNAL_ERROR"),
    ],
)
def test_ctl_subscribe_codes(exc: BaseException, code: str) -> None:
    failure = classify(exc, mode="subscribe", compat=False)
    assert failure.code == code
    if code in {"PROTOCOL_ERROR", "REQUEST_TIMEOUT", "NETWORK_ERROR", "AUTH_FAILED"}:
        assert failure.hint


def test_ctl_call_fallback_is_call_failed() -> None:
    assert classify(ValueError("x"), mode="call", compat=False).code == "CALL_FAILED"
    assert classify(JsonRpcError(-32602, "x"), mode="call", compat=False).code == (
        "TOOL_REQUEST_REJECTED"
    )


# ---- exit codes --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("code", "exit_code"),
    [
        (None, 0),
        ("TOOL_ERROR", 1),
        ("AUTH_LOGIN_REQUIRED", 2),
        ("AUTH_TIMEOUT", 2),
        ("AUTH_REFRESH_FAILED", 2),
        ("AUTH_FAILED", 2),
        ("SERVER_URL_UNKNOWN", 3),
        ("INTERNAL_ERROR", 3),
        ("TOOL_NAME_REQUIRED", 3),
        ("INVALID_ARGS", 3),
        ("CALL_FAILED", 3),
        ("TOOL_REQUEST_REJECTED", 3),
        ("PROTOCOL_UNSUPPORTED", 3),
        ("TLS_CERT_UNTRUSTED", 3),
        ("DNS_LOOKUP_FAILED", 3),
        ("CONNECTION_REFUSED", 3),
    ],
)
def test_dropin_call_exit_codes(code: str | None, exit_code: int) -> None:
    assert dropin_call_exit_code(code) == exit_code


@pytest.mark.parametrize(
    ("code", "exit_code"),
    [(None, 0), ("TOOL_ERROR", 1), ("AUTH_FAILED", 3), ("SOMETHING_NEW", 70), ("", 70)],
)
def test_ctl_exit_code(code: str | None, exit_code: int) -> None:
    assert ctl_exit_code(code) == exit_code


def test_every_ctl_classification_has_an_exit_code() -> None:
    samples = [
        HttpStatusError(401),
        ProtocolViolation("x"),
        ProtocolUnsupported("x"),
        TransportError("t", kind="timeout"),
        TransportError("r", kind="read"),
        refused(),
        ListenLost("x"),
        ListenClosed("x"),
        HttpStatusError(500),
        JsonRpcError(-32602, "x"),
        ProbeTimeout("x"),
    ]
    for exc in samples:
        for mode in ("subscribe", "call"):
            code = classify(exc, mode=mode, compat=False).code
            assert code in CTL_EXIT_CODES, (exc, code)
    # The call-mode fallback is not in the table and lands on the internal exit code.
    assert ctl_exit_code("CALL_FAILED") == 4


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("http://127.0.0.1:8089/mcp", True),
        ("https://mcp.example.com/mcp", True),
        ("notaurl", False),
        ("ftp://example.com/mcp", False),
        ("http:///mcp", False),
        ("http://h:0/", False),
        ("http://h:99999/", False),
        ("http://h /mcp", False),
    ],
)
def test_url_problem(url: str, ok: bool) -> None:
    assert (url_problem(url) is None) is ok


def test_tls_spoken_to_plain_http_names_the_scheme() -> None:
    exc = caused(
        TransportError("connect", kind="connect"), ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] x")
    )
    failure = classify(exc, mode="subscribe", compat=False)
    assert failure.code == "TLS_HANDSHAKE_FAILED" and "http://" in (failure.hint or "")
    # The drop-in keeps the original's classification.
    assert classify(exc, mode="subscribe", compat=True).code == "INTERNAL_ERROR"


def test_a_url_httpx_refuses_is_invalid_url() -> None:
    import httpx

    exc = caused(TransportError("read", kind="read"), httpx.UnsupportedProtocol("ftp"))
    assert classify(exc, mode="subscribe", compat=False).code == "INVALID_URL"


def test_read_of_an_unknown_uri_is_resource_not_found() -> None:
    assert (
        classify_read_failure(JsonRpcError(-32602, "Unknown resource")).code == "RESOURCE_NOT_FOUND"
    )
    assert classify_read_failure(JsonRpcError(-32603, "boom")).code == "SERVER_ERROR"
    assert classify_read_failure(TransportError("t", kind="timeout")).code == "REQUEST_TIMEOUT"


def test_a_host_no_resolver_can_encode_is_invalid_url_from_either_transport() -> None:
    from service.mcp.errors import InvalidUrl

    exc = InvalidUrl("cannot use http://…: its host is not a valid DNS name (label too long)")
    assert classify(exc, mode="subscribe", compat=False).code == "INVALID_URL"
    assert classify(exc, mode="call", compat=False).code == "INVALID_URL"
