"""A link's reads: at most READS_PER_LINK in flight, and a read waiting for its link holds
none of the daemon-wide slots (another link's read takes them)."""

from __future__ import annotations

import asyncio

import pytest

from service.daemon.link import READS_PER_LINK, _ReadSlot

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_link_reads_at_most_its_share_and_leaves_the_global_slots_to_others() -> None:
    shared = asyncio.Semaphore(READS_PER_LINK + 1)
    link_a = _ReadSlot(asyncio.Semaphore(READS_PER_LINK), shared)
    link_b = _ReadSlot(asyncio.Semaphore(READS_PER_LINK), shared)
    release = asyncio.Event()
    in_flight = {"a": 0, "b": 0}
    most = {"a": 0, "b": 0}

    async def read(slot: _ReadSlot, name: str) -> None:
        async with slot:
            in_flight[name] += 1
            most[name] = max(most[name], in_flight[name])
            await release.wait()
            in_flight[name] -= 1

    a_reads = [asyncio.create_task(read(link_a, "a")) for _ in range(10)]
    for _ in range(5):
        await asyncio.sleep(0)
    # ten reads of link A: two run, eight wait for A's slots without taking shared ones
    assert in_flight["a"] == READS_PER_LINK
    b_read = asyncio.create_task(read(link_b, "b"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert in_flight["b"] == 1  # the one shared slot A's waiting reads did not hold
    release.set()
    await asyncio.gather(*a_reads, b_read)
    assert most == {"a": READS_PER_LINK, "b": 1}
    assert in_flight == {"a": 0, "b": 0}


async def test_a_cancelled_wait_gives_its_link_slot_back() -> None:
    shared = asyncio.Semaphore(1)
    slot = _ReadSlot(asyncio.Semaphore(1), shared)
    await shared.acquire()  # every shared slot busy elsewhere
    waiting = asyncio.create_task(slot.__aenter__())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    shared.release()
    async with asyncio.timeout(5):  # bounded: a leaked link slot would hang here
        async with slot:
            pass
