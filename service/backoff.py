"""Every retry schedule of mcpsub as one policy object, :class:`Backoff`, in stamina's shape:
the first wait (``base_s``), the longest (``cap_s``), how much of each wait is drawn at random
(``jitter``), how many attempts (``attempts``), and a switch that makes every wait zero for
tests (:func:`instant`, stamina's ``set_testing``).

Full jitter (a uniform draw between zero and the exponential ceiling, ``jitter=1``) spreads
reconnects of many clients after a server restart instead of synchronising them (AWS
architecture blog, "Exponential Backoff and Jitter"); a process retrying alone its own
storage or its own daemon needs none (``jitter=0``: the ceiling itself). A server's own hint
(``retry:`` or ``Retry-After``) wins when it asks for more patience than we would have shown.

Where a rule belongs: a new retry is one ``Backoff(...)`` constant beside its loop, asked for
``delay(attempt)`` (attempt 0 is the first retry) and, when it gives up, ``spent(attempt)``.
The webhook dispatcher's schedule is the person's own table (``retry_schedule``), so it keeps
its table and draws its jitter the same way (``jittered``).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from dataclasses import dataclass

_instant = False


@contextlib.contextmanager
def instant() -> Iterator[None]:
    """Every :class:`Backoff` waits zero seconds inside (tests: the schedule's logic, not its
    clock)."""
    global _instant
    before, _instant = _instant, True
    try:
        yield
    finally:
        _instant = before


def jittered(delay_s: float, jitter: float, rng: random.Random | None = None) -> float:
    """``delay_s`` moved by up to ``jitter`` of itself either way (0 when :func:`instant`)."""
    if _instant:
        return 0.0
    return max(0.0, delay_s * (1 + (rng or random).uniform(-jitter, jitter)))


@dataclass(frozen=True, slots=True)
class Backoff:
    base_s: float = 1.0
    """The ceiling of the first retry's wait; it doubles each attempt."""
    cap_s: float = 300.0
    """The longest wait."""
    jitter: float = 1.0
    """How much of the ceiling is drawn at random: 1 full jitter (0 to the ceiling), 0 none."""
    attempts: int | None = None
    """Retries before giving up (:meth:`spent`); None retries for ever."""

    def ceiling(self, attempt: int) -> float:
        return float(min(self.cap_s, self.base_s * (2 ** min(attempt, 62))))

    def delay(
        self, attempt: int, *, hint_s: float | None = None, rng: random.Random | None = None
    ) -> float:
        """The wait before retry ``attempt`` (0 is the first)."""
        if _instant:
            return 0.0
        ceiling = self.ceiling(attempt)
        draw = (
            ceiling
            if self.jitter == 0
            else (rng or random).uniform(ceiling * (1 - self.jitter), ceiling)
        )
        if hint_s is not None and hint_s > draw:
            return float(min(hint_s, self.cap_s))
        return draw

    def spent(self, attempt: int) -> bool:
        """True when retry ``attempt`` is one too many."""
        return self.attempts is not None and attempt >= self.attempts


class ListenBudget:
    """At most ``limit`` listens per ``window_s`` seconds: the guard against a tight loop.

    A graceful close (or the loss of an acknowledged stream) is re-listened at once, without
    backoff, because proxies cut long responses every 30-100 s and that is not a failure.
    A server that acknowledges and then closes in a tight loop would turn that rule into a
    request storm; this sliding window bounds it without penalising a server that closes
    every few seconds. Pure: the caller passes the clock.
    """

    def __init__(self, limit: int, window_s: float = 60.0) -> None:
        self.limit = max(1, limit)
        self.window_s = window_s
        self._times: list[float] = []

    def _trim(self, now: float) -> None:
        cutoff = now - self.window_s
        while self._times and self._times[0] <= cutoff:
            self._times.pop(0)

    def wait_s(self, now: float) -> float:
        """Seconds until one more listen is allowed (0.0 when it is allowed now)."""
        self._trim(now)
        if len(self._times) < self.limit:
            return 0.0
        return max(0.0, self._times[0] + self.window_s - now)

    def record(self, now: float) -> None:
        self._trim(now)
        self._times.append(now)

    def used(self, now: float) -> int:
        self._trim(now)
        return len(self._times)
