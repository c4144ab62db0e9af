"""service.http.listener.ConsoleListener: the console's loopback listener, opened once on
demand with the daemon's token, closed with the daemon. A tiny app stands in for the API."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI

from service.http.listener import ConsoleListener
from service.http.sessions import BrowserSessions
from tests.support.poll import until_async

pytestmark = pytest.mark.anyio


def app_factory(made: list[str]) -> object:
    def make_app(token: str) -> FastAPI:
        made.append(token)
        app = FastAPI()
        app.sessions = BrowserSessions(token)  # type: ignore[attr-defined]  # as the guard

        @app.get("/ping")
        def ping() -> dict[str, str]:
            return {"token": token}

        return app

    return make_app


async def refused(url: str) -> bool:
    try:
        async with httpx.AsyncClient() as http:
            await http.get(url + "/ping", timeout=1.0)
    except httpx.ConnectError:
        return True
    return False


async def test_opened_once_on_loopback_with_the_token_then_closed() -> None:
    made: list[str] = []
    tokens = iter(["tok-1", "tok-2"])
    listener = ConsoleListener(app_factory(made), lambda: next(tokens))  # type: ignore[arg-type]
    (url, sessions), (again, same) = await asyncio.gather(listener.open(), listener.open())
    assert url == again and sessions is same and made == ["tok-1"]
    assert url.startswith("http://127.0.0.1:")
    assert sessions.token_matches("tok-1")
    async with httpx.AsyncClient() as http:
        assert (await http.get(url + "/ping")).json() == {"token": "tok-1"}
    await listener.close()
    assert await refused(url)
    await listener.close()  # a second close is harmless


async def test_closed_when_the_daemon_stops() -> None:
    listener = ConsoleListener(app_factory([]), lambda: "tok")  # type: ignore[arg-type]
    url, _ = await listener.open()
    stopping = asyncio.Event()
    listener.close_when(stopping)
    assert not await refused(url)
    stopping.set()
    await until_async("the listener closed", lambda: refused(url), timeout=10)


async def test_close_before_open_does_nothing() -> None:
    listener = ConsoleListener(app_factory([]), lambda: "tok")  # type: ignore[arg-type]
    await listener.close()
    assert listener.url is None
