"""Reconnect delays as one pure function: full-jitter exponential backoff.

Full jitter (a uniform draw between zero and the exponential ceiling) spreads reconnects of
many clients after a server restart instead of synchronising them (AWS architecture blog,
"Exponential Backoff and Jitter"). A server's own hint (``retry:`` or ``Retry-After``) wins
when it asks for more patience than we would have shown.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    base_s: float = 1.0
    cap_s: float = 300.0

    def ceiling(self, attempt: int) -> float:
        return float(min(self.cap_s, self.base_s * (2 ** min(attempt, 62))))

    def delay(
        self, attempt: int, *, hint_s: float | None = None, rng: random.Random | None = None
    ) -> float:
        draw = (rng or random).uniform(0.0, self.ceiling(attempt))
        if hint_s is not None and hint_s > draw:
            return float(min(hint_s, self.cap_s))
        return draw


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
