"""The last answer of a read, served when the database does not answer in time.

``/v1/status`` and ``/metrics`` are how an operator finds out that something is wrong: they
must answer when the database does not. A frozen PostgreSQL (SIGSTOP, a VM pause, a lost
network) fails no statement, it never answers it; awaited without a deadline both routes
hung until the pool gave up and logged a ``TimeoutError`` traceback. Here a read that has
been in flight for :data:`JOIN_AFTER_S` is shared (a caller waits on it instead of taking
another connection: a frozen database holds one, not one per request), the caller waits at
most its deadline, and then gets the last answer and how old it is. A younger read is not
shared: a caller that just wrote must not get counts read before its write.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
JOIN_AFTER_S = 1.0


@dataclass(frozen=True, slots=True)
class Answer(Generic[T]):
    value: T
    fresh: bool
    """False: ``value`` is the last answer (or the empty one) because this read failed or
    did not finish within the deadline."""
    at: float | None
    """Wall-clock time ``value`` was read (None: never)."""
    error: BaseException | None = None
    """Why the read is not fresh: its exception, or a ``TimeoutError``."""


class Remembered(Generic[T]):
    def __init__(self, read: Callable[[], Awaitable[T]], empty: T) -> None:
        self._read = read
        self._last = empty
        self._at: float | None = None
        self._task: asyncio.Task[T] | None = None
        self._started = 0.0

    async def get(self, deadline_s: float) -> Answer[T]:
        task = self._task
        if task is None or time.monotonic() - self._started < JOIN_AFTER_S:
            task = self._task = asyncio.get_running_loop().create_task(self._run())
            self._started = time.monotonic()
            task.add_done_callback(self._settled)
        done, _ = await asyncio.wait({task}, timeout=deadline_s)
        if not done:
            late = TimeoutError(f"the database did not answer within {deadline_s:g} s")
            return Answer(self._last, False, self._at, late)
        error = task.exception()
        if error is not None:
            return Answer(self._last, False, self._at, error)
        return Answer(task.result(), True, self._at)

    async def _run(self) -> T:
        value = await self._read()
        self._last, self._at = value, time.time()
        return value

    def _settled(self, task: asyncio.Task[T]) -> None:
        if self._task is task:
            self._task = None
        if not task.cancelled():
            with contextlib.suppress(BaseException):
                task.exception()  # retrieved: a late failure is not "never retrieved"
