"""When a long-lived subscriber listens again: one policy for ``mcpsubd``'s links and
``mcpsubctl probe --follow``, as a table-driven state machine in the shape of
:mod:`service.mcp.listen` (which judges one stream's frames; this judges the streams one
after another).

Theory of operation
-------------------
Nothing is replayed after a listen stream ends, so a subscriber listens again and re-reads.
*When* it listens again is the whole policy::

    READY --listening--> LISTENING --acknowledged(something honored)--> OPEN  (listening and
                                                                              acknowledged
                                                                              again: a
                                                                              replacement)
      ^                     |   \\--acknowledged(nothing honored)------> NOT_HONORED
      |                     |                                              |
      |                     +--failed (refused, timeout, connect)--+       | wanted changed,
      |                                                            v       | recheck
      +--------------------------------(the delay passes)------ WAITING <--+-- (READY)
                                                                   ^
    OPEN --ended(closed | lost)--> at once, or WAITING while streams keep dying young
    OPEN --ended(failed)---------> WAITING (backoff, like a failed connect)

* A stream that *lived* (at least ``min_lifetime_s`` after its ack) and then ended, by the
  server's graceful result or a drop, is not a failure: proxies cut long responses every
  30-100 s. Listen again at once, after a small random pause (``relisten_jitter_s``) so that
  a server closing every stream at once is not hit by every subscriber together.
* A stream that dies *young* once is treated the same. While streams keep dying young (a
  server or gateway that ends every stream right after its ack: a rolling deploy, an
  overloaded proxy), the pause grows: the n-th young death in a row waits a draw from the
  upper half of the exponential ceiling (``ceiling/2 + uniform(0, ceiling/2)``, the
  ceiling ``base_s * 2**(n-1)`` capped at ``cap_s``): jittered, capped, and never near zero,
  so five listens can never land within a second. A stream that lives resets the count.
* Failing to get an acknowledgement (connect error, refusal, timeout) and a stream that
  breaks the protocol after its ack back off with full jitter (:class:`Backoff`); a stream
  that lived, or ended without breaking a rule, resets that count (an acknowledgement alone
  does not: a server that acks and then breaks the protocol at once is backed off too).
* An acknowledgement that honors none of the wanted URIs is final for that listen: the
  subscriber closes the stream (there is nothing it could carry) and does not listen again
  until the wanted set changes or someone asks for a recheck (``recheck``) or, for a daemon,
  a slow retry (``not_honored_retry_s``).
* Whatever the reason, at most ``listens_per_minute`` listens are sent per minute
  (:class:`ListenBudget`): the last guard against a loop nobody foresaw.

The machine never sleeps, reads a clock or touches a socket: the caller passes ``now`` and
performs the delays it is told about. Calls the current phase does not allow raise
:class:`PolicyError` (a bug in the caller, never the server's doing).
"""

from __future__ import annotations

import dataclasses
import enum
import random
from collections.abc import Collection
from dataclasses import dataclass

from service.backoff import Backoff, ListenBudget

_SHARED_RNG = random.Random()
"""The jitter's source for every policy not given one: a ``random.Random`` each was a
Mersenne Twister's 2.5 kB of state per link (tracemalloc), for draws that need no stream of
their own."""

MIN_LIFETIME_S = 1.0
"""A stream acknowledged less than this long before it ended died young."""


class Phase(enum.StrEnum):
    READY = "ready"
    """Nothing sent; the next listen may go (subject to the budget)."""
    LISTENING = "listening"
    """A listen is out; no acknowledgement yet."""
    OPEN = "open"
    """Acknowledged with at least one wanted URI honored."""
    WAITING = "waiting"
    """Pausing before the next listen (``Next.delay_s``)."""
    NOT_HONORED = "not_honored"
    """The last acknowledgement honored nothing wanted; parked until something changes."""


class End(enum.StrEnum):
    """How an acknowledged stream ended."""

    CLOSED = "closed"
    """The server's graceful result for the listen."""
    LOST = "lost"
    """EOF or reset without a result, or the keep-alive watchdog gave up."""
    FAILED = "failed"
    """An error answer or a broken rule after the ack (a frame over a bound, say)."""


class PolicyError(RuntimeError):
    """The caller asked for a transition the current phase does not have."""


@dataclass(frozen=True, slots=True)
class Next:
    """What to do after a stream ended or a listen failed: wait ``delay_s``, then listen."""

    delay_s: float
    why: str
    """``relisten`` (at once), ``young`` (streams keep dying young), ``failed`` (backoff)."""
    young_streak: int
    failures: int

    @property
    def backing_off(self) -> bool:
        return self.why != "relisten"


@dataclass(frozen=True, slots=True)
class Ack:
    """The acknowledgement's verdict: what is honored, what is not, and whether the stream
    is worth holding (False: close it, nothing wanted can ever arrive on it)."""

    honored: frozenset[str]
    not_honored: frozenset[str]
    keep: bool


class RelistenPolicy:
    """One subscriber's listen-again decisions (one per daemon link, one per follow)."""

    def __init__(
        self,
        backoff: Backoff,
        *,
        listens_per_minute: int = 60,
        relisten_jitter_s: float = 0.25,
        min_lifetime_s: float = MIN_LIFETIME_S,
        rng: random.Random | None = None,
    ) -> None:
        self.backoff = backoff
        self.young_backoff = dataclasses.replace(backoff, jitter=0.5)
        """The same schedule drawn from the upper half of each ceiling: never near zero."""
        self.budget = ListenBudget(listens_per_minute)
        self.relisten_jitter_s = relisten_jitter_s
        self.min_lifetime_s = min_lifetime_s
        self.rng = rng or _SHARED_RNG
        self.phase = Phase.READY
        self.failures = 0
        """Listens in a row that got no acknowledgement (or streams that broke after it)."""
        self.young_streak = 0
        """Acknowledged streams in a row that ended within ``min_lifetime_s``."""
        self.acked_at: float | None = None
        self.last_lifetime_s: float | None = None

    # -- the table ------------------------------------------------------------------------
    def listening(self, now: float) -> float:
        """A listen is about to be sent: 0.0 and the phase moves to LISTENING, or the seconds
        to wait first because the per-minute budget is spent (the phase does not move).

        Allowed in every phase: from OPEN it is a make-before-break replacement, from
        LISTENING the previous listen was abandoned unanswered (cancelled), from NOT_HONORED
        the caller's slow retry."""
        wait = self.budget.wait_s(now)
        if wait > 0:
            return wait
        self.budget.record(now)
        self.phase = Phase.LISTENING
        return 0.0

    def acknowledged(self, now: float, wanted: Collection[str], honored: Collection[str]) -> Ack:
        self._require("acknowledged", Phase.LISTENING, Phase.OPEN)
        kept = frozenset(u for u in honored if u in wanted)
        missing = frozenset(u for u in wanted if u not in kept)
        # ``failures`` is not reset here but when the stream has shown it works (it lived,
        # or ended without breaking a rule): a server that acks and then breaks the protocol
        # at once would otherwise be re-listened at the first backoff step forever.
        self.acked_at = now
        if not kept and wanted:
            self.phase = Phase.NOT_HONORED
            return Ack(kept, missing, keep=False)
        self.phase = Phase.OPEN
        return Ack(kept, missing, keep=True)

    def ended(self, now: float, end: End) -> Next:
        """The acknowledged stream ended: when to listen again."""
        self._require("ended", Phase.OPEN)
        assert self.acked_at is not None
        lifetime = max(0.0, now - self.acked_at)
        self.last_lifetime_s = lifetime
        self.phase = Phase.WAITING
        if lifetime >= self.min_lifetime_s:
            self.failures = 0
        if end is End.FAILED:
            return self._failed()
        self.failures = 0
        if lifetime >= self.min_lifetime_s:
            self.young_streak = 0
        else:
            self.young_streak += 1
        if self.young_streak <= 1:
            delay = self.rng.uniform(0.0, self.relisten_jitter_s)
            return Next(delay, "relisten", self.young_streak, self.failures)
        delay = self.young_backoff.delay(self.young_streak - 1, rng=self.rng)
        return Next(delay, "young", self.young_streak, self.failures)

    def failed(self) -> Next:
        """No acknowledgement came (connect error, refusal, timeout, a 5xx): back off."""
        self.phase = Phase.WAITING
        return self._failed()

    def changed(self) -> None:
        """The wanted set changed, or a person asked for a recheck: a parked subscriber may
        listen now, and the counts start over."""
        if self.phase in (Phase.NOT_HONORED, Phase.WAITING):
            self.phase = Phase.READY

    def recheck(self) -> None:
        """``resubscribe``/SIGHUP: forget the failures and young deaths, listen now."""
        self.failures = 0
        self.young_streak = 0
        self.changed()

    # -- helpers --------------------------------------------------------------------------
    def _failed(self) -> Next:
        self.failures += 1
        delay = self.backoff.delay(self.failures - 1, rng=self.rng)  # attempt 0: the first
        return Next(delay, "failed", self.young_streak, self.failures)

    def _require(self, event: str, *phases: Phase) -> None:
        if self.phase not in phases:
            raise PolicyError(f"{event} is not allowed in phase {self.phase.value}")
