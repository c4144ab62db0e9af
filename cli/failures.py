"""Turn an exception into the (errorCode, hint) a front door prints, and into an exit code.

Two classification orders exist because two contracts exist (seed-behaviour §2):

* ``mcp-resource-subscriber`` keeps the TypeScript CLI's codes exactly, including its
  quirks (401/403 and protocol violations are ``INTERNAL_ERROR`` in subscribe mode), and
  its flat exit codes (subscribe: 0 or 1; call: 0/1/2/3).
* ``mcpsubctl`` names every class (``AUTH_FAILED``, ``PROTOCOL_ERROR``, ``REQUEST_TIMEOUT``)
  and gives each class its own exit code (:data:`CTL_EXIT_CODES`, documented in
  ``docs/cli.md``).

The classifier itself lives in :mod:`service.failures` because the daemon uses it too.
"""

from __future__ import annotations

from service.failures import (
    AUTH_CODES,
    RESOURCE_NOT_FOUND_HINT,
    TOOL_REJECTED_HINT,
    Failure,
    classify,
    classify_read_failure,
)

__all__ = [
    "AUTH_CODES",
    "CTL_EXIT_CODES",
    "RESOURCE_NOT_FOUND_HINT",
    "TOOL_REJECTED_HINT",
    "Failure",
    "classify",
    "classify_read_failure",
    "ctl_exit_code",
    "seed_call_exit_code",
]

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
    "RESPONSE_TOO_LARGE": EXIT_PROTOCOL,
    "TOOL_REQUEST_REJECTED": EXIT_PROTOCOL,
    "SERVER_ERROR": EXIT_PROTOCOL,
    "CONNECTION_REFUSED": EXIT_NETWORK,
    "DNS_LOOKUP_FAILED": EXIT_NETWORK,
    "TLS_CERT_UNTRUSTED": EXIT_NETWORK,
    "TLS_HANDSHAKE_FAILED": EXIT_NETWORK,
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
