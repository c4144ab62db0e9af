"""What a link's stream readers hand to the link: a bounded, coalescing inbox.

Why not an ``asyncio.Queue``: a server sending ``notifications/resources/updated`` as fast as
TCP allows fills an unbounded queue faster than the link drains it, without limit. But the
link only needs to know *which* URIs to re-read, and a re-read reads the latest content
whatever the number of notifications before it. So:

* an update for a URI already pending adds nothing (coalescing; counted);
* at most ``capacity`` distinct URIs are pending; a reader that wants to add one more waits
  until the link drained the inbox, so it stops reading its socket and the server's writes
  block (back-pressure, not buffering);
* the end of a stream (closed, failed, lost, broken) is kept per reader generation, so the
  link can tell a current stream's end from a replaced one's.

The readers filter first: only URIs the link re-reads reach the inbox, so a flood of
notifications for other URIs costs a counter, not memory.
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

End = TypeVar("End")

DEFAULT_CAPACITY = 1024


class LeanEvent:
    """:class:`asyncio.Event`'s semantics (set, clear, is_set, wait) without its per-instance
    waiter deque: a deque allocates a 64-slot block up front, and every link holds four (its
    own two, its inbox's two) that nearly always have no waiter (docs/benchmarks.md has the
    memory it cost). Waiters live in a list made on the
    first wait and dropped when the last one leaves."""

    __slots__ = ("_flag", "_waiters")

    def __init__(self) -> None:
        self._flag = False
        self._waiters: list[asyncio.Future[None]] | None = None

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        if not self._flag:
            self._flag = True
            for waiter in self._waiters or ():
                if not waiter.done():
                    waiter.set_result(None)

    def clear(self) -> None:
        self._flag = False

    async def wait(self) -> bool:
        if self._flag:
            return True
        await first_of(self)
        return True

    def _add(self, waiter: asyncio.Future[None]) -> None:
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)

    def _discard(self, waiter: asyncio.Future[None]) -> None:
        waiters = self._waiters
        if waiters is not None and waiter in waiters:
            waiters.remove(waiter)
            if not waiters:
                self._waiters = None


async def first_of(*events: LeanEvent) -> None:
    """Until one of ``events`` is set: one future, in each event's waiters.

    A link waits for its inbox or a change of its URI set, nearly always for a long while.
    Through ``asyncio.wait`` that was a task per event, their coroutines, and the wait's own
    future and callbacks, made again on every turn and held by every idle link; one future
    is what waiting needs."""
    if any(event.is_set() for event in events):
        return
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    for event in events:
        event._add(waiter)
    try:
        await waiter
    finally:
        for event in events:
            event._discard(waiter)


class LinkInbox(Generic[End]):
    # Slots, not an attribute dict: every link's session holds one (a dict was ~300 bytes).
    __slots__ = ("_ends", "_ready", "_space", "_updates", "capacity")

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._updates: dict[str, None] = {}
        self._ends: list[tuple[int, End]] = []
        """A list, not a deque: only appended and taken whole (a deque allocates a block first)."""
        self._ready = LeanEvent()
        self._space = LeanEvent()
        self._space.set()

    def __len__(self) -> int:
        return len(self._updates) + len(self._ends)

    async def put_update(self, uri: str) -> bool:
        """Add ``uri`` to the pending re-reads (False: it was pending); waits while full."""
        while True:
            if uri in self._updates:
                return False
            if len(self._updates) < self.capacity:
                self._updates[uri] = None
                self._ready.set()
                return True
            self._space.clear()
            await self._space.wait()

    def put_end(self, generation: int, end: End) -> None:
        """A reader's last word. Each reader puts exactly one, so this cannot grow unbounded."""
        self._ends.append((generation, end))
        self._ready.set()

    async def wait(self) -> None:
        """Return once something is pending."""
        while not self._updates and not self._ends:
            self._ready.clear()
            await self._ready.wait()

    def ready(self) -> LeanEvent:
        """The event the next put sets, for :func:`first_of` beside other events: cleared
        first while nothing is pending, so it is set exactly when something is."""
        if not self._updates and not self._ends:
            self._ready.clear()
        return self._ready

    def take(self) -> tuple[list[str], list[tuple[int, End]]]:
        """Everything pending, oldest first; the inbox is empty afterwards."""
        updates = list(self._updates)
        ends = list(self._ends)
        self._updates.clear()
        self._ends.clear()
        self._ready.clear()
        self._space.set()
        return updates, ends
