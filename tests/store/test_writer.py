"""The SQLite writer thread (service/store/writer.py): in order, errors to their caller, a
caller that left before its turn not run, a clean stop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from service.store.writer import WriterThread

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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
