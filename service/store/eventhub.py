"""Wake waiters when the store commits an event.

The event table is the source of truth (ids are cursors that survive restarts); this hub
only tells in-process waiters (SSE streams, long-poll ``wait``) that there is something new
to query, so nobody polls the database on a timer.
"""

from __future__ import annotations

import asyncio

from service.store.records import Event


class EventHub:
    def __init__(self, last_id: int = 0) -> None:
        self.last_id = last_id
        self._changed = asyncio.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None

    def publish(self, event: Event) -> None:
        """Store callback; runs in the event loop right after the commit."""
        self.last_id = max(self.last_id, event.id)
        asyncio.get_running_loop().create_task(self._wake())

    async def _wake(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_beyond(self, after: int, timeout: float | None) -> bool:
        """Wait until an event with id > ``after`` was committed; False on timeout."""
        if self.last_id > after:
            return True
        try:
            async with asyncio.timeout(timeout):
                async with self._changed:
                    await self._changed.wait_for(lambda: self.last_id > after)
        except TimeoutError:
            return False
        return True
