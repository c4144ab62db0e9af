"""``mcpsubctl``'s exit codes, one per class of failure, read from the one table of codes
(:mod:`service.errorcodes`; ``docs/cli.md`` shows the same table, and a test keeps them equal).

A module of its own because every command needs the table and the daemon commands must not
pay for the classifier (:mod:`service.failures` imports the MCP client's error tree) just to
turn ``DAEMON_UNAVAILABLE`` into 10.
"""

from __future__ import annotations

from service.errorcodes import (
    CODES,
    EXIT_AUTH,
    EXIT_DAEMON_UNAVAILABLE,
    EXIT_DISCONNECTED,
    EXIT_INTERNAL,
    EXIT_NETWORK,
    EXIT_NOT_FOUND,
    EXIT_NOT_HONORED,
    EXIT_NOT_MCPSUBD,
    EXIT_OK,
    EXIT_PROTOCOL,
    EXIT_TIMEOUT,
    EXIT_TOOL_ERROR,
    EXIT_USAGE,
)
from service.errorcodes import exit_code as ctl_exit_code

__all__ = [
    "CTL_EXIT_CODES",
    "EXIT_AUTH",
    "EXIT_DAEMON_UNAVAILABLE",
    "EXIT_DISCONNECTED",
    "EXIT_INTERNAL",
    "EXIT_NETWORK",
    "EXIT_NOT_FOUND",
    "EXIT_NOT_HONORED",
    "EXIT_NOT_MCPSUBD",
    "EXIT_OK",
    "EXIT_PROTOCOL",
    "EXIT_TIMEOUT",
    "EXIT_TOOL_ERROR",
    "EXIT_USAGE",
    "ctl_exit_code",
]

CTL_EXIT_CODES: dict[str, int] = {code: row.exit for code, row in CODES.items()}
