"""The heap is trimmed after work, never while the daemon is idle."""

from __future__ import annotations

import asyncio
import contextlib
import platform

import pytest

from service.daemon.heaptrim import find_malloc_trim, trim_after_work


@pytest.mark.anyio
async def test_trims_only_when_events_were_written_since_the_last_time() -> None:
    ids = iter([5, 5, 7, 7, 7, 9])  # the last event id at start, then at each interval
    asked: list[int] = []
    trimmed: list[int] = []
    second = asyncio.Event()

    def activity() -> int:
        asked.append(next(ids))
        return asked[-1]

    def trim(pad: int) -> int:
        trimmed.append(asked[-1])
        if len(trimmed) == 2:
            second.set()
        return 1

    task = asyncio.create_task(trim_after_work(activity, interval_s=0.001, trim=trim))
    await asyncio.wait_for(second.wait(), 10)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert trimmed == [7, 9]  # not at 5 (nothing new), not again at 7 (idle since)
    assert asked == [5, 5, 7, 7, 7, 9]


def test_glibc_has_malloc_trim_and_it_runs() -> None:
    trim = find_malloc_trim()
    if platform.libc_ver()[0] == "glibc":  # this project's Linux machines and CI
        assert trim is not None
        assert trim(0) in (0, 1)
    else:  # macOS, musl: the daemon then simply does not trim
        assert trim is None or callable(trim)
