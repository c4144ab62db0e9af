"""One classifier for every front door: an exception in, a stable (errorCode, hint) out.

``mcp-resource-subscriber`` (``compat=True``) keeps the TypeScript CLI's codes exactly,
quirks included; ``mcpsubctl`` and ``mcpsubd`` (``compat=False``) name every class. The
daemon uses the very same function for its links and reads (issue 10 §4), so ``status``,
``show``, events, logs and ``wait`` hints carry the codes ``mcpsubctl probe`` prints, and
``INTERNAL_ERROR`` means a bug in mcpsub and nothing else. Exit codes stay a front door's
decision (``cli/failures.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from service.mcp import wire
from service.mcp.classify import NETWORK_HINTS, network_error_code
from service.mcp.errors import (
    PROTOCOL_UNSUPPORTED_HINT,
    EndpointNotFound,
    HttpStatusError,
    JsonRpcError,
    McpError,
    ProtocolUnsupported,
    ProtocolViolation,
    TransportError,
)

AUTH_CODES = frozenset(
    {"AUTH_LOGIN_REQUIRED", "AUTH_TIMEOUT", "AUTH_REFRESH_FAILED", "AUTH_FAILED"}
)
TOOL_REJECTED_HINT = (
    "the server rejected tools/call before running the tool (unknown tool name or invalid "
    "arguments); check --tool and --args against the server's tools/list"
)
RESOURCE_NOT_FOUND_HINT = (
    "the server does not know this URI (resources/read answered -32602); check the URI with "
    "`mcpsubctl probe --url URL --uri URI`, or unsubscribe"
)


@dataclass(frozen=True)
class Failure:
    code: str
    hint: str | None
    message: str


def _auth_code(exc: BaseException) -> str | None:
    code = getattr(exc, "error_code", None)
    if isinstance(code, str) and code in AUTH_CODES - {"AUTH_FAILED"}:
        return code
    return None


def classify(exc: BaseException, *, mode: str, compat: bool) -> Failure:
    """``mode`` is ``subscribe`` or ``call``; ``compat`` selects the drop-in's codes."""
    message = str(exc) or type(exc).__name__
    hint = getattr(exc, "hint", None)
    auth = _auth_code(exc)
    if auth is not None:
        return Failure(auth, hint, message)
    http_auth = getattr(exc, "error_code", None) == "AUTH_FAILED"
    if http_auth and (mode == "call" or not compat):
        return Failure(
            "AUTH_FAILED",
            hint or "the server refused the credentials; check --auth-token or run --login",
            message,
        )
    if isinstance(exc, ProtocolUnsupported):
        if compat or not isinstance(exc, EndpointNotFound):
            # The drop-in keeps the original's verdict for a plain 404 too.
            return Failure("PROTOCOL_UNSUPPORTED", PROTOCOL_UNSUPPORTED_HINT, message)
        return Failure(exc.error_code, exc.hint, message)
    if (
        mode == "call"
        and isinstance(exc, JsonRpcError)
        and exc.code in (wire.INVALID_PARAMS, wire.METHOD_NOT_FOUND)
        and not http_auth
    ):
        return Failure("TOOL_REQUEST_REJECTED", TOOL_REJECTED_HINT, message)
    network = network_error_code(exc)
    if network is not None:
        return Failure(network, NETWORK_HINTS[network], message)
    fallback = "CALL_FAILED" if mode == "call" else "INTERNAL_ERROR"
    if compat:
        return Failure(fallback, None, message)
    if isinstance(exc, TransportError):
        if exc.kind == "timeout":
            return Failure("REQUEST_TIMEOUT", "the server did not answer in time", message)
        return Failure("NETWORK_ERROR", "the connection to the server failed; retry later", message)
    if isinstance(exc, TimeoutError) or getattr(exc, "error_code", None) == "NOTIFICATION_TIMEOUT":
        return Failure(
            "REQUEST_TIMEOUT", "--timeout-ms elapsed before the server answered", message
        )
    if isinstance(exc, ProtocolViolation):
        return Failure(
            "PROTOCOL_ERROR",
            "the server broke MCP 2026-07-28; report it to its maintainers with this message",
            message,
        )
    if isinstance(exc, McpError) and exc.error_code != "INTERNAL_ERROR":
        return Failure(exc.error_code, hint, message)
    if isinstance(exc, (JsonRpcError, HttpStatusError)):
        return Failure("SERVER_ERROR", hint, message)
    return Failure(fallback, None, message)


def classify_read_failure(exc: BaseException) -> Failure:
    """A failed ``resources/read`` in the daemon: an unknown URI is ``RESOURCE_NOT_FOUND``.

    2026-07-28 answers an unknown URI with ``-32602`` (2025 used ``-32002``); anything else
    is classified as for a probe.
    """
    if (
        isinstance(exc, JsonRpcError)
        and exc.code in (wire.INVALID_PARAMS, -32002)
        and exc.error_code != "AUTH_FAILED"
    ):
        return Failure("RESOURCE_NOT_FOUND", RESOURCE_NOT_FOUND_HINT, str(exc))
    return classify(exc, mode="subscribe", compat=False)
