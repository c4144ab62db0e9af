"""A descriptor budget: new server links wait when the API and the database would run short.

Every server link holds sockets (its listen stream and pooled reads). Opened without a
bound, links would take the last descriptors, and then the API could not accept and
SQLite could not open its WAL: everything fails at once. The budget keeps
``reserve + api_connections`` descriptors free for those two; a link that would dip into
them does not connect, and shows ``RESOURCE_LIMIT`` (state ``backoff``, retried with the
link's backoff) instead.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from service.mcp.errors import McpError

FD_DIRS = ("/proc/self/fd", "/dev/fd")


def open_descriptors() -> int | None:
    """How many descriptors this process has open (None where we cannot tell).

    Linux 6.2 and later give the count as the size of ``/proc/self/fd``: one ``stat``. Listing
    the directory builds a name per descriptor, 119 ms at 19,000 of them, and a daemon of
    10,000 links counted that way on every ``/metrics`` scrape and every second of its start
    (the budget's recount). Older kernels report 0 there, and other systems have no such
    directory: they list it."""
    with contextlib.suppress(OSError):
        size = os.stat(FD_DIRS[0]).st_size
        if size > 0:
            return size
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
    per_link: int = 4
    """Descriptors one link may open: its listen stream, its read slots and a discover."""
    recount_s: float = 1.0
    relieve: Callable[[], None] | None = None
    """Called when a link is refused: close what holds descriptors and can be made again (the
    links' idle read connections), so the refused link's retry finds them free. At most once
    per ``relieve_every_s``: a cold start refuses many links in a row."""
    relieve_every_s: float = 1.0
    _relieved_at: float = field(default=-float("inf"), init=False)
    _counted_free: int | None = field(default=None, init=False)
    _counted_at: float = field(default=0.0, init=False)
    _admitted_since: int = field(default=0, init=False)

    def free_for_links(self) -> int | None:
        """Descriptors links may still open (negative when over budget; None: unknown)."""
        used = self.count()
        if used is None or self.soft_limit <= 0:
            return None
        # The API's open connections are inside its own share, not the links'.
        others = used - self.api_open()
        return self.soft_limit - others - self.reserve - self.api_connections

    def relieve_now(self) -> None:
        """Descriptors ran short (a link refused, or a read's connection failed with EMFILE):
        close what can be made again, at most once per ``relieve_every_s``, and count again
        at the next check."""
        self._counted_free = None
        now = time.monotonic()
        if self.relieve is not None and now - self._relieved_at >= self.relieve_every_s:
            self._relieved_at = now
            self.relieve()

    def check(self) -> None:
        """Admit one more link, or raise :class:`ResourceLimit`.

        Counting means listing ``/proc/self/fd``: at 1,000 links a cold start would list a
        million entries. So a count is reused for ``recount_s`` while what it left free
        still covers every link admitted since at ``per_link`` descriptors each, which is
        as strict as counting each time (a link opens no more than that); near the limit,
        or once the count is old, it counts again."""
        now = time.monotonic()
        if (
            self._counted_free is not None
            and now - self._counted_at < self.recount_s
            and self._counted_free - self.per_link * (self._admitted_since + 1) >= 1
        ):
            self._admitted_since += 1
            return
        free = self.free_for_links()
        self._counted_free, self._counted_at, self._admitted_since = free, now, 1
        if free is not None and free < 1:
            self.relieve_now()
            raise ResourceLimit(
                f"not enough file descriptors for a new server connection "
                f"(limit {self.soft_limit}, {self.reserve + self.api_connections} kept for "
                f"the API and the database)"
            )
