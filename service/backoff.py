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
    healthy_reset_s: float = 60.0
    """A link must stay up this long before its attempt counter goes back to zero."""

    def ceiling(self, attempt: int) -> float:
        return float(min(self.cap_s, self.base_s * (2 ** min(attempt, 62))))

    def delay(
        self, attempt: int, *, hint_s: float | None = None, rng: random.Random | None = None
    ) -> float:
        draw = (rng or random).uniform(0.0, self.ceiling(attempt))
        if hint_s is not None and hint_s > draw:
            return float(min(hint_s, self.cap_s))
        return draw

    def next_attempt(self, attempt: int, healthy_for_s: float) -> int:
        """The attempt number after a loss, given how long the link had been healthy."""
        return 0 if healthy_for_s >= self.healthy_reset_s else attempt + 1
