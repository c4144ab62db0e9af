"""service.backoff: full-jitter exponential backoff."""

from __future__ import annotations

import random

import pytest

from service.backoff import Backoff, ListenBudget, instant, jittered


@pytest.mark.parametrize(
    ("attempt", "ceiling"),
    [(0, 1.0), (1, 2.0), (2, 4.0), (5, 32.0), (8, 256.0), (9, 300.0), (70, 300.0), (10**6, 300.0)],
)
def test_ceiling_doubles_and_caps(attempt: int, ceiling: float) -> None:
    assert Backoff(base_s=1.0, cap_s=300.0).ceiling(attempt) == ceiling


def test_ceiling_with_other_base() -> None:
    b = Backoff(base_s=0.5, cap_s=3.0)
    assert [b.ceiling(i) for i in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_delay_within_zero_and_ceiling() -> None:
    b = Backoff()
    rng = random.Random(1234)
    for attempt in range(14):
        draws = [b.delay(attempt, rng=rng) for _ in range(200)]
        assert all(0.0 <= d <= b.ceiling(attempt) for d in draws)
        # Full jitter: draws spread over the range rather than hugging the ceiling.
        assert min(draws) < b.ceiling(attempt) / 4
        assert max(draws) > b.ceiling(attempt) * 3 / 4


def test_delay_is_deterministic_for_a_seed() -> None:
    b = Backoff()
    one = [b.delay(i, rng=random.Random(9)) for i in range(10)]
    two = [b.delay(i, rng=random.Random(9)) for i in range(10)]
    assert one == two


def test_delay_uses_the_given_rng() -> None:
    b = Backoff()
    assert b.delay(8, rng=random.Random(5)) == random.Random(5).uniform(0.0, 256.0)


def test_hint_wins_when_larger() -> None:
    b = Backoff(base_s=1.0, cap_s=300.0)
    assert b.delay(0, hint_s=5.0, rng=random.Random(1)) == 5.0


def test_hint_is_capped() -> None:
    b = Backoff(base_s=1.0, cap_s=300.0)
    assert b.delay(0, hint_s=10_000.0, rng=random.Random(1)) == 300.0


def test_smaller_hint_keeps_the_draw() -> None:
    b = Backoff()
    expected = random.Random(3).uniform(0.0, 256.0)
    assert expected > 1e-3
    assert b.delay(8, hint_s=1e-3, rng=random.Random(3)) == expected


def test_listen_budget_allows_limit_per_window() -> None:
    budget = ListenBudget(3, window_s=60.0)
    for t in (0.0, 1.0, 2.0):
        assert budget.wait_s(t) == 0.0
        budget.record(t)
    assert budget.wait_s(2.5) == pytest.approx(57.5)
    assert budget.used(2.5) == 3
    # The oldest listen leaves the window at t=60: one more is allowed, not three.
    assert budget.wait_s(60.0) == 0.0
    budget.record(60.0)
    assert budget.wait_s(60.5) == pytest.approx(0.5)


def test_listen_budget_does_not_penalise_a_30s_closer() -> None:
    budget = ListenBudget(60)
    for n in range(1000):
        now = n * 30.0
        assert budget.wait_s(now) == 0.0
        budget.record(now)
    assert budget.used(1000 * 30.0) <= 2


def test_listen_budget_limit_is_at_least_one() -> None:
    assert ListenBudget(0).limit == 1


def test_no_jitter_waits_the_ceiling_and_attempts_bound_the_retries() -> None:
    b = Backoff(base_s=0.2, cap_s=5.0, jitter=0, attempts=3)
    assert [b.delay(n) for n in range(6)] == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0]
    assert [b.spent(n) for n in range(4)] == [False, False, False, True]
    assert not Backoff().spent(10**6)


def test_partial_jitter_draws_below_the_ceiling_only_that_far() -> None:
    b = Backoff(base_s=1.0, cap_s=8.0, jitter=0.25)
    rng = random.Random(3)
    draws = [b.delay(3, rng=rng) for _ in range(200)]
    assert min(draws) >= 6.0 and max(draws) <= 8.0


def test_instant_makes_every_wait_zero_and_ends_with_its_block() -> None:
    with instant():
        assert Backoff(base_s=5.0).delay(4, hint_s=60.0) == 0.0
        assert jittered(30.0, 0.2) == 0.0
    assert Backoff(base_s=5.0, jitter=0).delay(0) == 5.0


def test_jittered_moves_a_delay_both_ways_within_its_fraction() -> None:
    rng = random.Random(7)
    draws = [jittered(10.0, 0.2, rng) for _ in range(500)]
    assert 8.0 <= min(draws) < 9.0 and 11.0 < max(draws) <= 12.0
