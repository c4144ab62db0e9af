"""The SQLite writer thread (service/store/writer.py): in order, errors to their caller, a
caller that left before its turn not run, a clean stop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from service.store.writer import WriterThread

pytestmark = pytest.mark.anyio


async def test_calls_run_in_order_on_one_thread_and_errors_reach_their_caller() -> None:
    writer = WriterThread("test-writer")
    ran: list[tuple[int, str]] = []

    def job(n: int) -> int:
        ran.append((n, threading.current_thread().name))
        if n == 3:
            raise ValueError("three")
        return n * 10

    try:
        results = await asyncio.gather(
            *(writer.run(lambda n=n: job(n)) for n in range(6)), return_exceptions=True
        )
    finally:
        writer.shutdown()
    assert [n for n, _ in ran] == list(range(6))
    assert {name for _, name in ran} == {"test-writer"}
    assert results[:3] == [0, 10, 20] and results[4:] == [40, 50]
    assert isinstance(results[3], ValueError)
    writer.shutdown()  # idempotent


async def test_a_call_whose_caller_left_before_it_started_is_not_run() -> None:
    writer = WriterThread("test-writer")
    release = threading.Event()
    ran: list[str] = []
    try:
        busy = writer.run(release.wait)  # holds the thread until released
        left = writer.run(lambda: ran.append("left"))
        kept = writer.run(lambda: ran.append("kept"))
        left.cancel()
        release.set()
        await busy
        await kept
    finally:
        writer.shutdown()
    assert ran == ["kept"]


async def test_commits_that_finish_while_the_loop_is_busy_wake_it_once() -> None:
    """Each wake-up from the thread is a write to the loop's self-pipe and a loop turn: the
    outcomes of calls that finished before the loop ran again are handed over together."""
    writer = WriterThread("test-writer")
    loop = asyncio.get_running_loop()
    wakeups: list[object] = []
    original = loop.call_soon_threadsafe

    def counted(callback: object, *args: object, **kwargs: object) -> object:
        wakeups.append(callback)
        return original(callback, *args, **kwargs)  # type: ignore[arg-type]

    release, reached, finish = threading.Event(), threading.Event(), threading.Event()

    def last() -> None:
        reached.set()
        finish.wait(10)

    loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
    try:
        futures = [writer.run(release.wait)]
        futures += [writer.run(lambda n=n: n) for n in range(1, 5)]
        futures.append(writer.run(last))
        release.set()
        # The first five ran and were handed back while this loop was held up here.
        assert reached.wait(10)
        woken = len(wakeups)
        finish.set()
        results = await asyncio.gather(*futures)
    finally:
        del loop.call_soon_threadsafe
        writer.shutdown()
    assert results == [True, 1, 2, 3, 4, None]
    assert woken == 1


async def test_submit_hands_each_outcome_to_its_callback_on_the_loop() -> None:
    """The group commit's way in: no future, a callback run by the loop's delivery; a
    callback that raises goes to the loop's exception handler, not the next outcome."""
    writer = WriterThread("test-writer")
    loop = asyncio.get_running_loop()
    got: list[tuple[object, object, bool]] = []
    errors: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    done = asyncio.Event()

    def on_done(n: int) -> Callable[[object, BaseException | None], None]:
        def settle(result: object, error: BaseException | None) -> None:
            got.append((result, error, threading.current_thread() is threading.main_thread()))
            if n == 1:
                raise RuntimeError("a defective callback")
            if n == 2:
                done.set()

        return settle

    def fail() -> None:
        raise ValueError("nope")

    try:
        writer.submit(lambda: "zero", on_done(0))
        writer.submit(lambda: "one", on_done(1))
        writer.submit(fail, on_done(2))
        await asyncio.wait_for(done.wait(), 10)
    finally:
        loop.set_exception_handler(None)
        writer.shutdown()
    assert [(r, type(e).__name__, on_loop) for r, e, on_loop in got] == [
        ("zero", "NoneType", True),
        ("one", "NoneType", True),
        (None, "ValueError", True),
    ]
    assert len(errors) == 1 and isinstance(errors[0]["exception"], RuntimeError)
