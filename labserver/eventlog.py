"""The structured event log behind ``GET /lab/log`` and ``GET /lab/wait``.

Tests assert orderings ("acknowledged, then notification sent, then read again") and
await events instead of sleeping, so every entry gets a monotonically increasing ``seq``
that survives ``/lab/reset`` (which only drops the entries). The log is bounded so a
long-running lab server cannot grow without limit.

Entries recorded while an MCP request is being handled carry ``request``: the ``seq`` of
that request's ``mcp.request`` entry (see :mod:`labserver.requestinfo`), so the per-client
verdicts can tell whose read or listen an entry was. Observers (the verdict console line)
are called after each append.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from labserver.requestinfo import CURRENT_REQUEST

MAX_ENTRIES: Final = 10_000


class EventLog:
    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: deque[dict[str, Any]] = deque(maxlen=max_entries)
        self._seq = 0
        self._changed = asyncio.Event()
        self.observers: list[Callable[[dict[str, Any]], None]] = []

    def record(self, event: str, **fields: Any) -> dict[str, Any]:
        self._seq += 1
        entry = {"seq": self._seq, "time": time.time(), "event": event, **fields}
        request = CURRENT_REQUEST.get()
        if request is not None and "request" not in entry:
            entry["request"] = request
        self._entries.append(entry)
        # Wake every waiter, then arm a fresh event for the next append.
        self._changed.set()
        self._changed = asyncio.Event()
        for observer in self.observers:
            observer(entry)
        return entry

    def entries(self, since: int = 0, event: str | None = None) -> list[dict[str, Any]]:
        """Entries with ``seq > since``, optionally only those of one event name."""
        return [
            e for e in self._entries if e["seq"] > since and (event is None or e["event"] == event)
        ]

    def clear(self) -> None:
        self._entries.clear()

    async def wait_for(
        self, event: str, count: int, timeout: float, since: int = 0
    ) -> list[dict[str, Any]] | None:
        """The matching entries once at least ``count`` exist, or ``None`` after ``timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            found = self.entries(since, event)
            if len(found) >= count:
                return found
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                return None
