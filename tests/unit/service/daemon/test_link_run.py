"""The link's task (``ServerLink.run``): what ends a session and what follows, with the
session scripted and the store a stand-in. The loop, its crash boundary and the session's
failure handling are one coroutine (an idle link keeps every frame of its chain), so each
way out is checked here: a failed session goes down and tries again, a fenced write in the
session or in writing the link down gives the link up, a crash is shown and restarted."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

from service.daemon.config import Settings
from service.daemon.inbox import LeanEvent
from service.daemon.link import LeaseLost, ServerLink
from service.daemon.linkstatus import LinkState
from service.mcp.errors import TransportError
from service.mcp.transports.memory import MemoryTransport
from service.store import Store


class _Store:
    def __init__(self, held: bool = True) -> None:
        self.held = held
        self.states: list[tuple[str, str | None]] = []

    async def set_server_state(self, server_id: int, state: str, **kw: Any) -> bool:
        self.states.append((state, kw.get("error_code")))
        return self.held

    async def set_subscription_state(self, *args: Any, **kw: Any) -> None:
        return None


class _BrokenOnce(LeanEvent):
    """The link's wake-up event, broken the first time the link clears it (a bug)."""

    __slots__ = ("broken",)

    def __init__(self) -> None:
        super().__init__()
        self.broken = False

    def clear(self) -> None:
        if not self.broken:
            self.broken = True
            raise RuntimeError("a bug")
        super().clear()


class _Scripted(ServerLink):
    sessions: list[BaseException]

    async def _session(self) -> None:
        self.machine.connect()
        raise self.sessions.pop(0) if self.sessions else asyncio.CancelledError()


def _link(store: _Store, sessions: list[BaseException]) -> tuple[_Scripted, list[int]]:
    settings = Settings(backoff_base_s=0.0, backoff_cap_s=0.0)
    link = _Scripted(
        1,
        "http://127.0.0.1:1/mcp",
        cast(Store, store),
        settings,
        lambda url: MemoryTransport(url, None),  # type: ignore[arg-type]
        asyncio.Semaphore(1),
        {},
    )
    link.sessions = sessions
    lost: list[int] = []
    link.on_lease_lost = lost.append
    link.want("test://a", 1)
    return link, lost


def test_a_failed_session_goes_down_and_tries_again() -> None:
    async def run() -> tuple[list[tuple[str, str | None]], dict[str, int]]:
        store = _Store()
        link, _ = _link(store, [TransportError("refused", kind="connect")] * 2)
        with contextlib.suppress(asyncio.CancelledError):
            await link.run()
        return store.states, link.stats

    states, stats = asyncio.run(run())
    assert [s for s, _ in states] == ["backoff", "backoff"]
    assert stats["reconnects_total"] == 2


def test_a_fenced_write_in_the_session_gives_the_link_up() -> None:
    async def run() -> tuple[list[int], LinkState, list[tuple[str, str | None]]]:
        store = _Store()
        link, lost = _link(store, [LeaseLost("another replica")])
        await asyncio.wait_for(link.run(), 10)
        return lost, link.state, store.states

    lost, _state, states = asyncio.run(run())
    assert lost == [1]
    assert states == []


def test_a_fenced_write_of_the_link_down_gives_the_link_up() -> None:
    async def run() -> list[int]:
        store = _Store(held=False)
        link, lost = _link(store, [TransportError("refused", kind="connect")])
        await asyncio.wait_for(link.run(), 10)
        return lost

    assert asyncio.run(run()) == [1]


def test_a_crash_outside_the_session_is_shown_and_the_loop_restarted() -> None:
    async def run() -> list[tuple[str, str | None]]:
        store = _Store()
        link, _ = _link(store, [TransportError("refused", kind="connect")] * 2)
        link._wake = _BrokenOnce()
        with contextlib.suppress(asyncio.CancelledError):
            await link.run()
        return store.states

    states = asyncio.run(run())
    assert ("backoff", "INTERNAL_ERROR") in states
    assert [s for s, _ in states].count("backoff") == 3  # down, the crash, down again
