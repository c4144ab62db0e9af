"""The event hub's ring: it answers from memory only when it can prove it holds every event.

A follower that gets an answer from the ring skips the database, so a wrong "complete"
would silently lose events: each case here is one way the ring could be incomplete.
"""

from __future__ import annotations

import asyncio
from typing import Any

from service.store.eventhub import EventHub
from service.store.records import Event


def _event(
    event_id: int, type_: str = "resource.updated", uri: str = "test://a", sub: int = 1
) -> Event:
    return Event(
        id=event_id, type=type_, subscription_id=sub, server_url="http://x/mcp", uri=uri,
        revision_id=None, revision=None, data={}, created_at=0.0,
    )  # fmt: skip


def _hub(*ids: int, last_id: int = 0, ring_size: int = 4096) -> EventHub:
    hub = EventHub(last_id, ring_size=ring_size)

    async def publish() -> None:  # publish() runs in the loop, as after a commit
        for event_id in ids:
            hub.publish(_event(event_id))

    asyncio.run(publish())
    return hub


def _ids(answer: tuple[list[Event], int] | None) -> tuple[list[int], int] | None:
    return None if answer is None else ([e.id for e in answer[0]], answer[1])


def test_consecutive_events_are_served_from_memory() -> None:
    hub = _hub(5, 6, 7, last_id=4)
    assert _ids(hub.recent_after(4)) == ([5, 6, 7], 7)
    assert _ids(hub.recent_after(6)) == ([7], 7)
    assert _ids(hub.recent_after(7)) == ([], 7)
    assert hub.ring_hits == 3 and hub.ring_misses == 0


def test_a_cursor_before_the_ring_needs_the_table() -> None:
    hub = _hub(5, 6, last_id=4)
    assert hub.recent_after(3) is None  # event 4 was committed before the hub saw anything
    assert hub.ring_misses == 1


def test_an_empty_ring_needs_the_table() -> None:
    assert EventHub(10).recent_after(10) is None


def test_a_gap_empties_the_ring() -> None:
    # 6 was committed but never published (or published late): nothing before 7 is provable
    hub = _hub(4, 5, 7, last_id=3)
    assert hub.recent_after(3) is None
    assert hub.recent_after(5) is None
    assert _ids(hub.recent_after(6)) == ([7], 7)


def test_a_late_event_empties_the_ring_until_it_is_consecutive_again() -> None:
    hub = _hub(4, 5, 7, 6, last_id=3)  # 6 published after 7
    assert hub.recent_after(6) is None  # the ring ends at 6 but 7 is the newest
    hub = _hub(4, 5, 7, 6, 8, last_id=3)
    assert hub.recent_after(6) is None  # 8 does not follow 6: emptied again
    assert _ids(hub.recent_after(7)) == ([8], 8)


def test_the_ring_is_bounded() -> None:
    hub = _hub(*range(1, 11), ring_size=4)
    assert hub.recent_after(5) is None  # 6 fell out
    assert _ids(hub.recent_after(6)) == ([7, 8, 9, 10], 10)


def test_filters_match_the_tables() -> None:
    hub = EventHub(0)

    async def publish() -> None:
        hub.publish(_event(1, "subscription.created", "test://a", 1))
        hub.publish(_event(2, "resource.updated", "test://a", 1))
        hub.publish(_event(3, "resource.updated", "test://b", 2))

    asyncio.run(publish())
    assert _ids(hub.recent_after(0, types=["resource.updated"])) == ([2, 3], 3)
    assert _ids(hub.recent_after(0, uri="test://b")) == ([3], 3)
    assert _ids(hub.recent_after(0, subscription_ids=[1])) == ([1, 2], 3)
    assert _ids(hub.recent_after(0, types=["resource.updated"], subscription_ids=[1])) == ([2], 3)


def test_wait_beyond_wakes_on_publish_and_times_out_otherwise() -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        hub = EventHub(1)
        waiter = asyncio.create_task(hub.wait_beyond(1, 5.0))
        await asyncio.sleep(0)
        hub.publish(_event(2))
        woke = await asyncio.wait_for(waiter, 5.0)
        timed_out = await hub.wait_beyond(2, 0.01)
        already = await hub.wait_beyond(1, 0.0)
        return woke, timed_out, already

    assert asyncio.run(scenario()) == (True, False, True)


def test_waits_share_one_timer_and_end_each_at_its_own_deadline() -> None:
    """A follower waits again after every event, each wait with its keep-alive deadline:
    the waits schedule no timer each (``asyncio.timeout`` did), yet each still ends when its
    own deadline passes, earliest first, whatever order they began in."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        scheduled = 0
        real_call_at = loop.call_at

        def counting_call_at(when: float, callback: Any, *args: Any, **kw: Any) -> Any:
            nonlocal scheduled
            scheduled += 1
            return real_call_at(when, callback, *args, **kw)

        loop.call_at = counting_call_at  # type: ignore[method-assign]
        hub = EventHub(0)
        for n in range(1, 201):  # a follower at rate: wait, woken, wait again
            waiter = asyncio.create_task(hub.wait_beyond(n - 1, 30.0))
            await asyncio.sleep(0)
            hub.publish(_event(n))
            assert await waiter is True
        assert scheduled <= 2, scheduled
        assert hub.waiting == 0

        ended: list[str] = []

        async def wait(name: str, timeout: float) -> None:
            assert await hub.wait_beyond(200, timeout) is False
            ended.append(name)

        await asyncio.gather(wait("late", 0.2), wait("early", 0.02), wait("middle", 0.1))
        assert ended == ["early", "middle", "late"]
        assert hub.waiting == 0

    asyncio.run(scenario())


def test_a_woken_waiter_whose_cursor_is_still_ahead_waits_on_to_its_deadline() -> None:
    async def scenario() -> tuple[bool, bool]:
        hub = EventHub(5)
        ahead = asyncio.create_task(hub.wait_beyond(8, 0.05))
        behind = asyncio.create_task(hub.wait_beyond(5, 5.0))
        await asyncio.sleep(0)
        hub.publish(_event(6))  # wakes both: only `behind` has its event
        return await behind, await ahead

    assert asyncio.run(scenario()) == (True, False)


def test_a_cancelled_wait_leaves_nothing_behind() -> None:
    """A client that disconnects while its stream waits (no event for hours): its future is
    gone from the hub at once, not kept until the next event."""

    async def scenario() -> None:
        hub = EventHub(0)
        tasks = [asyncio.create_task(hub.wait_beyond(0, None)) for _ in range(50)]
        tasks += [asyncio.create_task(hub.wait_beyond(0, 60.0)) for _ in range(50)]
        await asyncio.sleep(0)
        assert hub.waiting == 100
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert hub.waiting == 0
        assert await hub.wait_beyond(0, 0.01) is False  # the shared timer still works

    asyncio.run(scenario())


def test_a_hub_outliving_its_loop_still_times_out_on_the_next() -> None:
    """The shared timer belongs to a loop: a wait on a new loop must not count on a timer
    left armed on one that has closed (it would never fire)."""
    hub = EventHub(0)

    async def leave_a_timer() -> None:
        task = asyncio.create_task(hub.wait_beyond(0, 0.01))  # due before the next wait's
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(leave_a_timer())

    async def wait_on_a_new_loop() -> bool:
        return await asyncio.wait_for(hub.wait_beyond(0, 0.05), 5.0)

    assert asyncio.run(wait_on_a_new_loop()) is False
