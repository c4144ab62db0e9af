"""The events one ``/v1/events/stream`` connection delivered, kept so ``mcpsubctl mcp``
answers "events after this cursor" from memory instead of a request (pure).

The daemon's stream sends every committed event after the cursor it was opened with, in id
order, so everything received since then is complete: the ring answers for any cursor at or
after its ``start`` and says ``None`` otherwise (the caller then asks the API). Events not
received yet are simply not there; the caller waits for the stream and asks again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, Final

RING_SIZE: Final = 4096


class EventRing:
    def __init__(self, size: int = RING_SIZE) -> None:
        self.size = size
        self.start: int | None = None
        """Every event with an id above this was received (None: nothing is proven)."""
        self.items: deque[dict[str, Any]] = deque()

    def reset(self, start: int | None) -> None:
        """A new stream from ``start`` (None when the stream is gone or was reset)."""
        self.start = start
        self.items.clear()

    def add(self, event: dict[str, Any]) -> None:
        if self.start is None:
            return
        event_id = int(event["id"])
        if event_id <= (int(self.items[-1]["id"]) if self.items else self.start):
            return  # a repeat (the stream resumed): already held or before the start
        self.items.append(event)
        if len(self.items) > self.size:
            self.start = int(self.items.popleft()["id"])

    def after(
        self, cursor: int, limit: int, types: Sequence[str] | None = None
    ) -> list[dict[str, Any]] | None:
        if self.start is None or cursor < self.start:
            return None
        found: list[dict[str, Any]] = []
        for event in reversed(self.items):  # a caught-up follower needs only the last few
            if int(event["id"]) <= cursor:
                break
            found.append(event)
        found.reverse()
        if types:
            found = [e for e in found if e.get("type") in types]
        return found[:limit]
