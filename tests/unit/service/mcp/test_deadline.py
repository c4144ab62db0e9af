"""service.mcp.deadline.within: asyncio.timeout's semantics on one shared timer per duration."""

from __future__ import annotations

import asyncio

import pytest

from service.mcp import deadline
from service.mcp.deadline import within


def test_a_block_that_finishes_in_time_returns_and_leaves_nothing_behind() -> None:
    async def scenario() -> tuple[list[int], int]:
        results = []
        for n in range(100):
            async with within(30.0):
                await asyncio.sleep(0)
                results.append(n)
        return results, len(deadline._clock(30.0).live)

    results, live = asyncio.run(scenario())
    assert results == list(range(100)) and live == 0


def test_an_overdue_block_raises_timeout_error_and_the_others_go_on() -> None:
    """Blocks of one duration expire oldest first; a block entered later, or one that
    finished, is not touched when an older one expires."""

    async def scenario() -> list[str]:
        outcome: list[str] = []
        release = asyncio.Event()

        async def hang(name: str) -> None:
            try:
                async with within(0.05):
                    await asyncio.Event().wait()
            except TimeoutError:
                outcome.append(f"{name} timed out")

        async def quick(name: str) -> None:
            async with within(0.05):
                await release.wait()
            outcome.append(f"{name} done")

        first = asyncio.create_task(hang("first"))
        fast = asyncio.create_task(quick("fast"))
        await asyncio.sleep(0)
        release.set()
        await fast
        second = asyncio.create_task(hang("second"))
        await asyncio.gather(first, second)
        return outcome

    assert asyncio.run(scenario()) == ["fast done", "first timed out", "second timed out"]


def test_a_cancellation_from_outside_stays_a_cancellation() -> None:
    async def scenario() -> None:
        async def body() -> None:
            async with within(30.0):
                await asyncio.Event().wait()

        task = asyncio.create_task(body())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())


def test_expiry_and_an_outside_cancellation_together_stay_a_cancellation() -> None:
    """As asyncio.timeout: when the task was also cancelled by someone else, the
    cancellation is not swallowed into a TimeoutError."""

    async def scenario() -> None:
        async def body() -> None:
            async with within(0.01):
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    asyncio.current_task().cancel()  # type: ignore[union-attr]
                    raise

        with pytest.raises(asyncio.CancelledError):
            await asyncio.create_task(body())

    asyncio.run(scenario())


def test_each_new_loop_gets_its_own_clock() -> None:
    async def scenario() -> None:
        with pytest.raises(TimeoutError):
            async with within(0.01):
                await asyncio.Event().wait()

    asyncio.run(scenario())
    asyncio.run(scenario())  # a clock bound to the first, closed loop would never fire
