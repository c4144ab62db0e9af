"""Wake waiters when the store commits an event, and keep the last few in memory.

The event table is the source of truth (ids are cursors that survive restarts); this hub
tells in-process waiters (SSE streams, long-poll ``wait``) that there is something new, so
nobody polls the database on a timer. It also keeps a ring of the most recent committed
events, so a live follower that is caught up reads the next events from memory instead of
querying (two queries per wake-up through the async engine cost more than the rest of a
revision's delivery).

The ring only ever answers when it can *prove* it is complete: it holds consecutive ids
(an id that does not follow the previous one, because an event was published late, out of
order or not at all, empties it and starts it again), and it must reach back to the caller's
cursor and up to the newest id published. Otherwise :meth:`EventHub.recent_after` says
``None`` and the caller queries the table, as before.

Waiting costs one future per wait and no timer of its own: the waiters' deadlines share one
loop timer, armed for the earliest and re-armed only when it fires (a follower's keep-alive
wait began and ended a few hundred times a second at rate, each with an ``asyncio.timeout``
that scheduled and cancelled a timer: a fifth of the event stream's CPU).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence

from service.store.records import Event

RING_SIZE = 4096
"""Events kept in memory: a follower further behind than this reads from the table."""


class EventHub:
    def __init__(self, last_id: int = 0, ring_size: int = RING_SIZE) -> None:
        self.last_id = last_id
        self._ring: deque[Event] = deque(maxlen=ring_size)
        self._waiters: dict[asyncio.Future[bool], float | None] = {}
        """Each waiting caller's future -> its deadline (loop time; None: none)."""
        self._timer: asyncio.TimerHandle | None = None
        """The one timer for all deadlines: due at or before the earliest."""
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self.ring_hits = 0
        """Reads answered from memory (``/metrics``)."""
        self.ring_misses = 0
        """Reads that had to query the table."""

    def publish(self, event: Event) -> None:
        """Store callback; runs in the event loop right after the commit."""
        ring = self._ring
        if ring and event.id != ring[-1].id + 1:
            ring.clear()  # a gap or a late event: completeness can no longer be proven
        ring.append(event)
        self.last_id = max(self.last_id, event.id)
        self._wake()

    def seen(self, event_id: int) -> None:
        """Another replica committed ``event_id`` (LISTEN/NOTIFY): wake the waiters; they
        query the table, since the ring cannot prove it holds that event."""
        if event_id <= self.last_id:
            return
        self.last_id = event_id
        self._wake()

    def recent_after(
        self,
        after: int,
        *,
        types: Sequence[str] | None = None,
        uri: str | None = None,
        subscription_ids: Sequence[int] | None = None,
    ) -> tuple[list[Event], int] | None:
        """Every committed event with id > ``after`` that matches, and the id it covers up to;
        ``None`` when memory cannot prove it has them all (then query the table).

        The filters mean what :meth:`Store.events_after`'s do.
        """
        ring = self._ring
        if not ring or ring[-1].id != self.last_id or ring[0].id > after + 1:
            self.ring_misses += 1
            return None
        self.ring_hits += 1
        newest = ring[-1].id
        if after >= newest:
            return [], newest
        items: list[Event] = []
        for event in reversed(ring):  # a caught-up follower needs only the last few
            if event.id <= after:
                break
            items.append(event)
        items.reverse()
        if types:
            items = [e for e in items if e.type in types]
        if uri is not None:
            items = [e for e in items if e.uri == uri]
        if subscription_ids is not None:
            wanted = set(subscription_ids)
            items = [e for e in items if e.subscription_id in wanted]
        return items, newest

    async def wait_beyond(self, after: int, timeout: float | None) -> bool:
        """Wait until an event with id > ``after`` was committed; False on timeout."""
        if self.last_id > after:
            return True
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            waiter: asyncio.Future[bool] = loop.create_future()
            self._waiters[waiter] = deadline  # a publish replaces the dict: look it up anew
            if deadline is not None:
                timer = self._timer
                # a timer of another loop (one closed since) would never fire here
                if timer is None or timer.when() > deadline or self._timer_loop is not loop:
                    self._arm(loop, deadline)
            try:
                woken = await waiter
            finally:
                # a publish swapped the dict out; a timeout or a cancel leaves it here
                self._waiters.pop(waiter, None)
            if self.last_id > after:
                return True
            if not woken:
                return False

    @property
    def waiting(self) -> int:
        """Callers waiting now (tests: nobody is left behind)."""
        return len(self._waiters)

    def _wake(self) -> None:
        """Every waiter at once: each checks the new id against its own cursor."""
        waiters = self._waiters
        if not waiters:
            return
        self._waiters = {}
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(True)

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(when, self._expire, loop)
        self._timer_loop = loop

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        """The shared timer: end the waits that are due, then arm it for the earliest left
        (a deadline met by a publish first is simply gone from the waiters)."""
        self._timer = None
        now = loop.time()
        earliest: float | None = None
        for waiter, deadline in list(self._waiters.items()):
            if deadline is None:
                continue
            if deadline <= now:
                del self._waiters[waiter]
                if not waiter.done():
                    waiter.set_result(False)
            elif earliest is None or deadline < earliest:
                earliest = deadline
        if earliest is not None:
            self._arm(loop, earliest)
