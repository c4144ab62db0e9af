"""Turn an exception into the (errorCode, hint) a front door prints, and into an exit code.

Two classification orders exist because two contracts exist (seed-behaviour §2):

* ``mcp-resource-subscriber`` keeps the TypeScript CLI's codes exactly, including its
  quirks (401/403 and protocol violations are ``INTERNAL_ERROR`` in subscribe mode), and
  its flat exit codes (subscribe: 0 or 1; call: 0/1/2/3).
* ``mcpsubctl`` names every class (``AUTH_FAILED``, ``PROTOCOL_ERROR``, ``REQUEST_TIMEOUT``)
  and gives each class its own exit code (:data:`CTL_EXIT_CODES`, documented in
  ``docs/cli.md``).
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

# mcpsubctl exit codes, one per class of failure (docs/cli.md keeps the same table).
EXIT_OK = 0
EXIT_TOOL_ERROR = 1
EXIT_USAGE = 2
EXIT_AUTH = 3
EXIT_PROTOCOL = 4
EXIT_NETWORK = 5
EXIT_TIMEOUT = 6
EXIT_NOT_FOUND = 7
EXIT_NOT_HONORED = 8
EXIT_DISCONNECTED = 9
EXIT_DAEMON_UNAVAILABLE = 10
EXIT_INTERNAL = 70

CTL_EXIT_CODES: dict[str, int] = {
    "SERVER_URL_UNKNOWN": EXIT_USAGE,
    "USAGE_ERROR": EXIT_USAGE,
    "INVALID_ARGS": EXIT_USAGE,
    "TOOL_NAME_REQUIRED": EXIT_USAGE,
    "RESOURCE_URI_REQUIRED": EXIT_USAGE,
    "AUTH_LOGIN_REQUIRED": EXIT_AUTH,
    "AUTH_TIMEOUT": EXIT_AUTH,
    "AUTH_REFRESH_FAILED": EXIT_AUTH,
    "AUTH_FAILED": EXIT_AUTH,
    "PROTOCOL_UNSUPPORTED": EXIT_PROTOCOL,
    "ENDPOINT_NOT_FOUND": EXIT_NOT_FOUND,
    "PROTOCOL_ERROR": EXIT_PROTOCOL,
    "TOOL_REQUEST_REJECTED": EXIT_PROTOCOL,
    "SERVER_ERROR": EXIT_PROTOCOL,
    "CONNECTION_REFUSED": EXIT_NETWORK,
    "DNS_LOOKUP_FAILED": EXIT_NETWORK,
    "TLS_CERT_UNTRUSTED": EXIT_NETWORK,
    "NETWORK_ERROR": EXIT_NETWORK,
    "NOTIFICATION_TIMEOUT": EXIT_TIMEOUT,
    "REQUEST_TIMEOUT": EXIT_TIMEOUT,
    "RESOURCE_NOT_FOUND": EXIT_NOT_FOUND,
    "SUBSCRIPTION_NOT_HONORED": EXIT_NOT_HONORED,
    "SUBSCRIPTION_FAILED": EXIT_NOT_HONORED,
    "SUBSCRIPTION_DISCONNECTED": EXIT_DISCONNECTED,
    "SUBSCRIPTION_CLOSED": EXIT_DISCONNECTED,
    "TOOL_ERROR": EXIT_TOOL_ERROR,
    "DAEMON_UNAVAILABLE": EXIT_DAEMON_UNAVAILABLE,
    "NOT_READY": EXIT_DAEMON_UNAVAILABLE,
    "SUBSCRIPTION_NOT_FOUND": EXIT_NOT_FOUND,
    "NOT_WATCHED": EXIT_NOT_FOUND,
    "NO_CONTENT_YET": EXIT_NOT_FOUND,
    "INVALID_URL": EXIT_USAGE,
    "INVALID_URI": EXIT_USAGE,
    "INVALID_JSON": EXIT_USAGE,
    "INVALID_PARAMETER": EXIT_USAGE,
    "API_TOKEN_REQUIRED": EXIT_AUTH,
    "PERMISSION_DENIED": EXIT_AUTH,
    "HOST_NOT_ALLOWED": EXIT_AUTH,
    "ORIGIN_NOT_ALLOWED": EXIT_AUTH,
    "WEBHOOK_NOT_FOUND": EXIT_NOT_FOUND,
    "DELIVERY_NOT_FOUND": EXIT_NOT_FOUND,
    "INVALID_SECRET": EXIT_USAGE,
    "PRIVATE_TARGET": EXIT_USAGE,
    "DUPLICATE_HEADER": EXIT_USAGE,
    "WEBHOOK_TEST_FAILED": EXIT_NETWORK,
    "CALL_FAILED": EXIT_PROTOCOL,
    "INTERNAL_ERROR": EXIT_INTERNAL,
}


def ctl_exit_code(code: str | None) -> int:
    return EXIT_OK if code is None else CTL_EXIT_CODES.get(code, EXIT_INTERNAL)


def seed_call_exit_code(code: str | None) -> int:
    if code is None:
        return 0
    if code == "TOOL_ERROR":
        return 1
    return 2 if code in AUTH_CODES else 3


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
