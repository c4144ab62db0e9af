"""The store's write lock: first come, first served, and takeable without a task.

Every write transaction of a daemon runs under it, so the events each one commits are
published before the next transaction starts (subscribers see event ids in order). The group
commit takes it from a plain loop callback (:meth:`WriteLock.try_acquire`), not from a task:
a task per batch was two of the dozen loop turns a re-read costs. ``asyncio.Lock`` can only
be taken by awaiting it.

The lock passes straight from its holder to the first waiter on release, so a callback's
``try_acquire`` never overtakes a task that was already waiting.
"""

from __future__ import annotations

import asyncio
from collections import deque
from types import TracebackType


class WriteLock:
    __slots__ = ("_held", "_waiters")

    def __init__(self) -> None:
        self._held = False
        self._waiters: deque[asyncio.Future[None]] = deque()

    def locked(self) -> bool:
        return self._held

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it or waits for it; never waits."""
        if self._held or self._waiters:
            return False
        self._held = True
        return True

    async def acquire(self) -> None:
        if self.try_acquire():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed the lock, then cancelled before using it: pass it on
            elif waiter in self._waiters:  # a release may have dropped it already
                self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        """Hand the lock to the first waiter still waiting, or free it."""
        if not self._held:
            raise RuntimeError("WriteLock released while not held")
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # it holds the lock now
                return
        self._held = False

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
