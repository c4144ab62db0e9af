"""``async with within(seconds)``: :func:`asyncio.timeout` for many short exchanges, one timer.

Why: every re-read is bounded by the client's request timeout (30 s), and finishes in a fraction
of a millisecond. :func:`asyncio.timeout` arms a ``TimerHandle`` on the loop's heap on the way
in and cancels it on the way out, so at 1,000 re-reads/s the loop's heap churns with timers that
never fire (docs/benchmarks.md). Here the exchanges of one duration share one timer per event
loop: entering records the task and its deadline in an insertion-ordered dict (deadlines of one
duration expire in the order they were made), leaving deletes it, and the one timer is armed for
the oldest deadline. When it fires it cancels the tasks whose deadline passed, and re-arms for
the oldest one still running; so it fires about once per duration, not per exchange.

Semantics are :func:`asyncio.timeout`'s: on expiry the task is cancelled, and the
``CancelledError`` leaving the block becomes ``TimeoutError`` unless someone else cancelled
the task too (then the cancellation goes on). Not re-entrant and not reschedulable: one
block, one deadline.
"""

from __future__ import annotations

import asyncio
import threading
from types import TracebackType

__all__ = ["within"]


class _Clock:
    """The running blocks of one duration on one loop, oldest first, and their one timer."""

    __slots__ = ("_loop", "_timer", "duration", "live")

    def __init__(self, loop: asyncio.AbstractEventLoop, duration: float) -> None:
        self._loop = loop
        self.duration = duration
        self.live: dict[_Within, float] = {}
        self._timer: asyncio.TimerHandle | None = None

    def add(self, block: _Within, when: float) -> None:
        self.live[block] = when
        if self._timer is None:
            self._timer = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer = None
        live = self.live
        now = self._loop.time()
        while live:
            block, when = next(iter(live.items()))
            if when > now:
                self._timer = self._loop.call_at(when, self._fire)
                return
            del live[block]
            block.expire()


class _Clocks(threading.local):
    """The clocks of the loop this thread runs (a thread runs one loop at a time). A new
    loop starts afresh; blocks still running on an old one keep their own clock, whose timer
    is on that loop, so nothing is lost, and a closed loop is not kept past the next one."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.by_duration: dict[float, _Clock] = {}


_clocks = _Clocks()


def _clock(duration: float) -> _Clock:
    loop = asyncio.get_running_loop()
    clocks = _clocks
    if clocks.loop is not loop:
        clocks.loop, clocks.by_duration = loop, {}
    by_duration = clocks.by_duration
    clock = by_duration.get(duration)
    if clock is None:
        if len(by_duration) >= 16:
            # Durations are a client's settings, a handful; never grow without end.
            by_duration = clocks.by_duration = {d: c for d, c in by_duration.items() if c.live}
        clock = by_duration[duration] = _Clock(loop, duration)
    return clock


class _Within:
    __slots__ = ("_cancelling", "_clock", "_expired", "_task")

    def __init__(self, clock: _Clock) -> None:
        self._clock = clock
        self._expired = False

    async def __aenter__(self) -> None:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("within() must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        clock = self._clock
        clock.add(self, clock._loop.time() + clock.duration)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._expired:
            self._clock.live.pop(self, None)
            return
        if self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc

    def expire(self) -> None:
        self._expired = True
        self._task.cancel()


def within(seconds: float) -> _Within:
    """Bound the block to ``seconds`` (> 0) like ``asyncio.timeout(seconds)``; see the module."""
    return _Within(_clock(seconds))
