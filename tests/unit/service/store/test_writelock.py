"""The store's write lock (service/store/writelock.py): first come, first served, takeable
from a plain callback without overtaking a waiting task, and never lost to a cancellation."""

from __future__ import annotations

import asyncio

import pytest

from service.store.writelock import WriteLock

pytestmark = pytest.mark.anyio


async def test_waiters_get_the_lock_in_the_order_they_asked() -> None:
    lock = WriteLock()
    order: list[int] = []

    async def writer(n: int) -> None:
        async with lock:
            order.append(n)
            await asyncio.sleep(0)

    assert lock.try_acquire()
    tasks = [asyncio.ensure_future(writer(n)) for n in range(5)]
    await asyncio.sleep(0)  # all five wait
    lock.release()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]
    assert not lock.locked()


async def test_try_acquire_does_not_overtake_a_waiting_task() -> None:
    lock = WriteLock()
    assert lock.try_acquire()
    assert not lock.try_acquire()
    waiting = asyncio.ensure_future(lock.acquire())
    await asyncio.sleep(0)
    lock.release()  # handed to the waiter: held still, though the waiter has not run yet
    assert lock.locked() and not lock.try_acquire()
    await waiting
    lock.release()
    assert lock.try_acquire()


async def test_a_waiter_cancelled_after_it_was_handed_the_lock_passes_it_on() -> None:
    lock = WriteLock()
    assert lock.try_acquire()
    first = asyncio.ensure_future(lock.acquire())
    second = asyncio.ensure_future(lock.acquire())
    await asyncio.sleep(0)
    lock.release()  # first holds it now ...
    first.cancel()  # ... and is cancelled before it runs
    await second  # the lock went on to the next waiter
    assert first.cancelled()
    lock.release()
    assert not lock.locked()


async def test_a_waiter_cancelled_while_waiting_leaves_the_queue() -> None:
    lock = WriteLock()
    assert lock.try_acquire()
    gone = asyncio.ensure_future(lock.acquire())
    await asyncio.sleep(0)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    lock.release()
    assert not lock.locked() and lock.try_acquire()


async def test_releasing_a_free_lock_is_an_error() -> None:
    with pytest.raises(RuntimeError):
        WriteLock().release()
