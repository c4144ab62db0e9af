"""service.mcp.relisten without sockets or clocks: every phase against every event, then the
policy's promises (at once after a stream that lived, a growing, capped, jittered pause while
streams keep dying young, a final not-honored ack, the per-minute budget)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from service.backoff import Backoff
from service.mcp.relisten import MIN_LIFETIME_S, End, Phase, PolicyError, RelistenPolicy

WANTED = ["a://1", "a://2"]


def policy(**kw: object) -> RelistenPolicy:
    return RelistenPolicy(Backoff(base_s=1.0, cap_s=30.0), rng=random.Random(7), **kw)  # type: ignore[arg-type]


def in_phase(phase: Phase) -> RelistenPolicy:
    """A policy brought to ``phase`` through its own transitions."""
    p = policy()
    if phase is Phase.READY:
        return p
    p.listening(0.0)
    if phase is Phase.LISTENING:
        return p
    if phase is Phase.NOT_HONORED:
        p.acknowledged(0.0, WANTED, [])
        return p
    p.acknowledged(0.0, WANTED, WANTED)
    if phase is Phase.OPEN:
        return p
    p.ended(10.0, End.CLOSED)
    assert phase is Phase.WAITING
    return p


EVENTS: dict[str, Callable[[RelistenPolicy], object]] = {
    "listening": lambda p: p.listening(100.0),
    "acknowledged": lambda p: p.acknowledged(100.0, WANTED, WANTED),
    "acknowledged-nothing": lambda p: p.acknowledged(100.0, WANTED, []),
    "ended-closed": lambda p: p.ended(100.0, End.CLOSED),
    "ended-lost": lambda p: p.ended(100.0, End.LOST),
    "ended-failed": lambda p: p.ended(100.0, End.FAILED),
    "failed": lambda p: p.failed(),
    "changed": lambda p: p.changed(),
    "recheck": lambda p: p.recheck(),
}
# (phase, event) -> the phase after it; a pair not listed raises PolicyError.
TABLE: dict[tuple[Phase, str], Phase] = {}
for _phase in Phase:
    TABLE[(_phase, "listening")] = Phase.LISTENING
    TABLE[(_phase, "failed")] = Phase.WAITING
    settled = Phase.READY if _phase in (Phase.NOT_HONORED, Phase.WAITING) else _phase
    TABLE[(_phase, "changed")] = settled
    TABLE[(_phase, "recheck")] = settled
for _phase in (Phase.LISTENING, Phase.OPEN):
    TABLE[(_phase, "acknowledged")] = Phase.OPEN
    TABLE[(_phase, "acknowledged-nothing")] = Phase.NOT_HONORED
for _event in ("ended-closed", "ended-lost", "ended-failed"):
    TABLE[(Phase.OPEN, _event)] = Phase.WAITING


@pytest.mark.parametrize("phase", list(Phase))
@pytest.mark.parametrize("event", list(EVENTS))
def test_every_phase_against_every_event(phase: Phase, event: str) -> None:
    p = in_phase(phase)
    expected = TABLE.get((phase, event))
    if expected is None:
        with pytest.raises(PolicyError):
            EVENTS[event](p)
        assert p.phase is phase, "a refused event leaves the phase alone"
    else:
        EVENTS[event](p)
        assert p.phase is expected


def test_a_stream_that_lived_is_relistened_at_once_every_time() -> None:
    p = policy(relisten_jitter_s=0.25)
    now = 0.0
    for _ in range(50):
        assert p.listening(now) == 0.0
        p.acknowledged(now, WANTED, WANTED)
        now += MIN_LIFETIME_S  # a proxy cutting long responses
        decided = p.ended(now, End.LOST)
        assert decided.why == "relisten" and not decided.backing_off
        assert 0.0 <= decided.delay_s <= 0.25
        assert decided.young_streak == 0
        now += 60.0  # keep clear of the per-minute budget


def test_streams_dying_young_back_off_jittered_capped_and_never_near_zero() -> None:
    p = policy(relisten_jitter_s=0.25)
    now, delays = 0.0, []
    for _ in range(12):
        p.listening(now)
        p.acknowledged(now, WANTED, WANTED)
        now += 0.01  # closed 10 ms after the ack
        decided = p.ended(now, End.CLOSED)
        delays.append(decided)
        now += decided.delay_s + 60.0
    assert delays[0].why == "relisten" and delays[0].delay_s <= 0.25  # once is not a pattern
    for n, decided in enumerate(delays[1:], start=2):
        ceiling = min(30.0, 2.0 ** (n - 1))
        assert decided.why == "young" and decided.young_streak == n
        assert ceiling / 2 <= decided.delay_s <= ceiling
    assert delays[-1].delay_s <= 30.0
    # Five listens can never land within one second (the lab's "tight re-listen loop").
    assert sum(d.delay_s for d in delays[:4]) > 1.0
    # A stream that lives resets the streak: at once again.
    p.listening(now)
    p.acknowledged(now, WANTED, WANTED)
    assert p.ended(now + MIN_LIFETIME_S, End.CLOSED).why == "relisten"
    assert p.young_streak == 0


def test_jitter_spreads_the_young_pauses() -> None:
    draws = set()
    for seed in range(20):
        p = RelistenPolicy(Backoff(1.0, 30.0), rng=random.Random(seed))
        for _ in range(3):
            p.listening(0.0)
            p.acknowledged(0.0, WANTED, WANTED)
            decided = p.ended(0.0, End.CLOSED)
        draws.add(round(decided.delay_s, 6))
    assert len(draws) == 20


def test_failures_back_off_with_full_jitter_and_a_stream_that_works_resets_them() -> None:
    p = policy()
    for n in range(1, 6):
        p.listening(float(n))
        decided = p.failed()
        assert decided.why == "failed" and decided.failures == n
        assert 0.0 <= decided.delay_s <= min(30.0, 2.0**n)
    p.listening(10.0)
    p.acknowledged(10.0, WANTED, WANTED)
    broke = p.ended(20.0, End.FAILED)  # lived, then broke the protocol: a first failure
    assert broke.why == "failed" and broke.failures == 1
    p.listening(21.0)
    p.acknowledged(21.0, WANTED, WANTED)
    closed = p.ended(21.1, End.CLOSED)  # ended by the rules, however young: it works
    assert closed.failures == 0


def test_acks_that_break_the_protocol_at_once_keep_backing_off() -> None:
    """A server that acks, then breaks a rule in the same breath (an oversize frame after
    every ack), is a failing server: the ack alone resets nothing, so the waits grow."""
    p = policy()
    now = 0.0
    for n in range(1, 6):
        p.listening(now)
        p.acknowledged(now, WANTED, WANTED)
        decided = p.ended(now + 0.01, End.FAILED)
        assert decided.why == "failed" and decided.failures == n
        now += 1.0


def test_an_ack_that_honors_nothing_is_final_and_a_partial_one_is_kept() -> None:
    p = policy()
    p.listening(0.0)
    ack = p.acknowledged(0.0, WANTED, ["a://elsewhere"])
    assert not ack.keep and ack.honored == frozenset()
    assert ack.not_honored == frozenset(WANTED)
    assert p.phase is Phase.NOT_HONORED
    with pytest.raises(PolicyError):
        p.ended(1.0, End.CLOSED)  # nothing is held, so nothing can end
    p.changed()
    assert p.phase is Phase.READY
    p.listening(1.0)
    partial = p.acknowledged(1.0, WANTED, ["a://1"])
    assert partial.keep and partial.honored == {"a://1"} and partial.not_honored == {"a://2"}


def test_the_per_minute_budget_is_the_last_guard() -> None:
    p = policy(listens_per_minute=3)
    for now in (0.0, 0.1, 0.2):
        assert p.listening(now) == 0.0
        p.acknowledged(now, WANTED, WANTED)
        p.ended(now + MIN_LIFETIME_S, End.CLOSED)
    wait = p.listening(10.0)
    assert wait == pytest.approx(50.0)
    assert p.phase is Phase.WAITING, "a throttled listen does not move the phase"
    assert p.listening(60.0) == 0.0


def test_recheck_forgets_the_streaks() -> None:
    p = policy()
    for _ in range(3):
        p.listening(0.0)
        p.acknowledged(0.0, WANTED, WANTED)
        p.ended(0.0, End.CLOSED)
    p.failed()
    p.recheck()
    assert (p.young_streak, p.failures, p.phase) == (0, 0, Phase.READY)


def test_policies_share_one_jitter_source_unless_given_their_own() -> None:
    """A ``random.Random`` per policy was 2.5 kB of Mersenne Twister state per daemon link."""
    backoff = Backoff(base_s=1.0, cap_s=60.0)
    mine = random.Random(7)
    assert RelistenPolicy(backoff).rng is RelistenPolicy(backoff).rng
    assert RelistenPolicy(backoff, rng=mine).rng is mine
