"""tests/support/poll.py: the one poll-until (sync and on the event loop) returns the first
truthy value and fails naming what it waited for, so a test built on it can fail."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.poll import until, until_async


def test_until_returns_the_first_truthy_value_and_names_a_miss() -> None:
    values = iter([0, None, "found"])
    assert until("a value", lambda: next(values), 5) == "found"
    with pytest.raises(AssertionError, match=r"^the flag: not reached in 0\.1 s \(last: False\)"):
        until("the flag", lambda: False, 0.1)


def test_until_async_awaits_a_coroutine_check_and_lets_the_loop_run() -> None:
    async def scenario() -> None:
        flag = asyncio.Event()
        asyncio.get_running_loop().call_later(0.05, flag.set)  # needs the loop to run

        async def is_set() -> bool:
            return flag.is_set()

        assert await until_async("the flag", is_set, 5) is True
        with pytest.raises(AssertionError, match="never: not reached"):
            await until_async("never", lambda: 0, 0.1)

    asyncio.run(scenario())
