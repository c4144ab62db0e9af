"""Poll until a condition holds: the one helper for conditions nothing pushes to a test.

Prefer waiting on the event itself (a log line, an SSE event, ``/v1/wait``, a receiver's
``wait_count``); poll only what has no push (a row in the database, a link's state in
``/v1/status``). A poll is a wait with a deadline, never a sleep used as synchronisation:
it returns as soon as the condition holds, and fails with what it last saw.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

INTERVAL_S = 0.05


def until(what: str, check: Callable[[], Any], timeout: float = 20.0) -> Any:
    """``check()``'s first truthy value; AssertionError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not reached in {timeout:g} s (last: {str(last)[:2000]})")
        time.sleep(INTERVAL_S)


async def until_async(
    what: str, check: Callable[[], Any | Awaitable[Any]], timeout: float = 20.0
) -> Any:
    """:func:`until` for a test on the event loop: ``check`` may be a coroutine function, and
    the wait yields to the loop (so what is awaited can happen) instead of blocking it."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = check()
        if inspect.isawaitable(last):
            last = await last
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not reached in {timeout:g} s (last: {str(last)[:2000]})")
        await asyncio.sleep(INTERVAL_S / 5)
