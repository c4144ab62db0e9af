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

from cli.exitcodes import (
    CTL_EXIT_CODES,
    EXIT_AUTH,
    EXIT_DAEMON_UNAVAILABLE,
    EXIT_DISCONNECTED,
    EXIT_INTERNAL,
    EXIT_NETWORK,
    EXIT_NOT_FOUND,
    EXIT_NOT_HONORED,
    EXIT_OK,
    EXIT_PROTOCOL,
    EXIT_TIMEOUT,
    EXIT_TOOL_ERROR,
    EXIT_USAGE,
    ctl_exit_code,
)
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
    "EXIT_AUTH",
    "EXIT_DAEMON_UNAVAILABLE",
    "EXIT_DISCONNECTED",
    "EXIT_INTERNAL",
    "EXIT_NETWORK",
    "EXIT_NOT_FOUND",
    "EXIT_NOT_HONORED",
    "EXIT_OK",
    "EXIT_PROTOCOL",
    "EXIT_TIMEOUT",
    "EXIT_TOOL_ERROR",
    "EXIT_USAGE",
    "RESOURCE_NOT_FOUND_HINT",
    "TOOL_REJECTED_HINT",
    "Failure",
    "classify",
    "classify_read_failure",
    "ctl_exit_code",
    "dropin_call_exit_code",
]


def dropin_call_exit_code(code: str | None) -> int:
    """``mcp-resource-subscriber call``'s exit code, as the original's: 0 done, 1 the tool
    said error, 2 authentication, 3 anything else."""
    if code is None:
        return 0
    if code == "TOOL_ERROR":
        return 1
    return 2 if code in AUTH_CODES else 3
