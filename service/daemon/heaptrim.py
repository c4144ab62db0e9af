"""Give the C heap's free pages back to the system after a burst of work (glibc only).

A cold start of 1,000 links reads 10,000 resources at once: answers, JSON trees and SQL
parameters come and go by the hundred thousand, and glibc keeps the pages they freed in its
arenas (one per thread that allocated: the loop, the SQLite writer, the readers). The
daemon then sits at its peak RSS although Python holds less. ``malloc_trim(0)`` returns
those pages (``results/daemon-scale.md`` has the figures). It walks the free lists, a few
milliseconds at that size, so it runs at most
every ``interval_s`` and only when events were written since the last time (an idle daemon
never calls it). Where the C library has no ``malloc_trim`` (macOS, musl) nothing runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

INTERVAL_S = 30.0


def find_malloc_trim() -> Callable[[int], int] | None:
    """``malloc_trim`` of the C library this process runs on, or None."""
    try:
        import ctypes

        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (ImportError, OSError, AttributeError):
        return None
    return trim


async def trim_after_work(
    activity: Callable[[], int],
    interval_s: float = INTERVAL_S,
    trim: Callable[[int], int] | None = None,
) -> None:
    """Every ``interval_s``: if ``activity()`` (the last event id) moved, trim the heap."""
    trim = trim or find_malloc_trim()
    if trim is None:
        return
    seen = activity()
    while True:
        await asyncio.sleep(interval_s)
        now = activity()
        if now == seen:
            continue
        seen = now
        with contextlib.suppress(OSError):
            trim(0)
