"""A descriptor budget: new server links wait when the API and the database would run short.

Every server link holds sockets (its listen stream and pooled reads). Opened without a
bound, links would take the last descriptors, and then the API could not accept and
SQLite could not open its WAL: everything fails at once. The budget keeps
``reserve + api_connections`` descriptors free for those two; a link that would dip into
them does not connect, and shows ``RESOURCE_LIMIT`` (state ``backoff``, retried with the
link's backoff) instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from service.mcp.errors import McpError

FD_DIRS = ("/proc/self/fd", "/dev/fd")


def open_descriptors() -> int | None:
    """How many descriptors this process has open (None where we cannot tell)."""
    for path in FD_DIRS:
        try:
            return len(os.listdir(path)) - 1  # listdir's own descriptor
        except OSError:
            continue
    return None


class ResourceLimit(McpError):
    error_code = "RESOURCE_LIMIT"
    hint = "raise the open-file limit (LimitNOFILE=, ulimit -n) or watch fewer servers"


@dataclass
class FdBudget:
    soft_limit: int
    reserve: int
    api_connections: int
    """The API's connection cap: descriptors it may need at any time."""
    api_open: Callable[[], int] = lambda: 0
    count: Callable[[], int | None] = open_descriptors

    def free_for_links(self) -> int | None:
        """Descriptors links may still open (negative when over budget; None: unknown)."""
        used = self.count()
        if used is None or self.soft_limit <= 0:
            return None
        # The API's open connections are inside its own share, not the links'.
        others = used - self.api_open()
        return self.soft_limit - others - self.reserve - self.api_connections

    def check(self) -> None:
        free = self.free_for_links()
        if free is not None and free < 1:
            raise ResourceLimit(
                f"not enough file descriptors for a new server connection "
                f"(limit {self.soft_limit}, {self.reserve + self.api_connections} kept for "
                f"the API and the database)"
            )
