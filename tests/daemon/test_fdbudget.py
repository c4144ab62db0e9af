"""The descriptor budget's count is reused only while it provably covers the links admitted
since (the end-to-end refusal is in test_resource_limits.py)."""

from __future__ import annotations

import os

import pytest

from service.daemon.fdbudget import FD_DIRS, FdBudget, ResourceLimit, open_descriptors


class Counter:
    def __init__(self, used: int) -> None:
        self.used = used
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.used


def test_a_count_far_from_the_limit_admits_many_links_without_listing_again() -> None:
    count = Counter(used=100)
    budget = FdBudget(soft_limit=10_000, reserve=64, api_connections=64, count=count)
    for _ in range(200):
        budget.check()
    assert count.calls == 1


def test_near_the_limit_every_admission_counts_again_and_refuses_at_the_edge() -> None:
    count = Counter(used=100)
    # 10 descriptors free for links: two links at four each fit from one count, the third not.
    budget = FdBudget(soft_limit=238, reserve=64, api_connections=64, count=count)
    budget.check()
    budget.check()
    assert count.calls == 1
    budget.check()  # 10 - 4 * 3 < 1: the count cannot vouch for it, so it counts again
    assert count.calls == 2
    count.used = 228  # the links' descriptors opened meanwhile: nothing is free any more
    budget.check()  # still vouched for by the recount that admitted the link before
    with pytest.raises(ResourceLimit):
        budget.check()
    with pytest.raises(ResourceLimit):
        budget.check()  # a refusal is never cached as an admission
    assert count.calls == 4


def test_an_old_count_is_not_trusted() -> None:
    count = Counter(used=100)
    budget = FdBudget(soft_limit=10_000, reserve=64, api_connections=64, count=count)
    budget.recount_s = 0.0
    budget.check()
    budget.check()
    assert count.calls == 2


def test_a_refusal_relieves_the_budget_at_most_once_a_second() -> None:
    """Refused, the budget closes what can be made again (the links' idle read connections)
    so the refused link's retry finds descriptors; a cold start refusing many links in a row
    asks once per ``relieve_every_s``."""
    relieved: list[int] = []
    count = Counter(used=228)  # nothing free for links (238 - 228 - 64 - 64 < 1)
    budget = FdBudget(
        soft_limit=238,
        reserve=64,
        api_connections=64,
        count=count,
        relieve=lambda: relieved.append(1),
        relieve_every_s=3600.0,
    )
    for _ in range(5):
        with pytest.raises(ResourceLimit):
            budget.check()
    assert relieved == [1]
    budget.relieve_every_s = 0.0
    with pytest.raises(ResourceLimit):
        budget.check()
    assert relieved == [1, 1]
    count.used = 100  # relieved: the next link is admitted, and nothing more is closed
    budget.check()
    assert relieved == [1, 1]


def test_the_count_is_one_stat_where_the_kernel_gives_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Linux 6.2+ reports the open descriptors as ``/proc/self/fd``'s size: no listing, which
    builds a name per descriptor (119 ms at 19,000) on every scrape and recount."""
    if not os.path.isdir(FD_DIRS[0]) or os.stat(FD_DIRS[0]).st_size <= 0:
        pytest.skip("the kernel does not report the descriptor count as the directory's size")
    real_listdir = os.listdir
    listed: list[object] = []

    def watched(path: object = ".") -> list[str]:
        listed.append(path)
        return real_listdir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "listdir", watched)
    before = open_descriptors()
    pipes = [os.pipe() for _ in range(100)]
    try:
        after = open_descriptors()
    finally:
        for pipe in pipes:
            for fd in pipe:
                os.close(fd)
    assert FD_DIRS[0] not in listed and FD_DIRS[1] not in listed
    assert before is not None and after is not None
    # 200 more; other threads of a test worker may open or close a few meanwhile
    assert 180 <= after - before <= 220
