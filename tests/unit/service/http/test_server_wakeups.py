"""service.http.server.WakeOnExitServer: an idle server does not wake its loop ten times a
second (uvicorn's own main loop does), still sends a ``Date`` header, and stops at once when
told to, from the loop or from another thread."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from service.http.server import bind_loopback, make_server
from tests.support.poll import until_async

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # counts the asyncio loop's own turns


def tiny_app() -> FastAPI:
    app = FastAPI()

    @app.get("/ping")
    def ping() -> dict[str, bool]:
        return {"ok": True}

    return app


class Started:
    def __init__(self) -> None:
        self.server = make_server(tiny_app(), graceful_s=1)
        self.sock = bind_loopback("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Started:
        self.task = asyncio.get_running_loop().create_task(self.server.serve([self.sock]))
        await until_async("the server started", lambda: self.server.started, timeout=10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.server.should_exit = True
        await asyncio.wait_for(self.task, 5)


def count_turns(loop: Any) -> list[int]:
    """Count the loop's turns from now on (the instance's ``_run_once``, wrapped)."""
    turns = [0]
    original = loop._run_once

    def counted() -> None:
        turns[0] += 1
        original()

    loop._run_once = counted
    return turns


async def test_an_idle_server_wakes_its_loop_about_once_a_second() -> None:
    async with Started():
        loop = asyncio.get_running_loop()
        turns = count_turns(loop)
        try:
            # The window is what is measured: a sleep of the loop itself, its one timer.
            await asyncio.sleep(2.0)
        finally:
            del loop._run_once
        # Our sleep costs 2 turns; the server once a second. uvicorn's own loop: ~20 more.
        assert turns[0] <= 8, turns[0]


async def test_answers_carry_a_date_header() -> None:
    async with Started() as started:
        async with httpx.AsyncClient() as http:
            answer = await http.get(started.url + "/ping", timeout=5)
        assert answer.status_code == 200
        assert answer.headers["date"].endswith(" GMT")


async def test_should_exit_from_another_thread_stops_it_at_once() -> None:
    started = Started()
    async with started:
        assert started.task is not None
        # Let the server settle into its one-second wait before telling it to exit.
        await asyncio.sleep(0.05)
        began = time.monotonic()
        thread = threading.Thread(target=setattr, args=(started.server, "should_exit", True))
        thread.start()
        await asyncio.wait_for(asyncio.shield(started.task), 0.9)
        thread.join()
        # Well under the one-second wake: the exit woke the loop, not the timer.
        assert time.monotonic() - began < 0.9
