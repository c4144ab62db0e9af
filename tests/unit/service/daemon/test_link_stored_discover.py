"""A link's first discover may reuse the result kept from the daemon's last run, read from the
store. That read is bounded like the discover it saves: a database that does not answer must
not hold the link (the wait was unbounded until the regression behind the replica hand-over
failures: ``Store.stored_discover`` left one link waiting forever)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from service.daemon.config import Settings
from service.daemon.link import ServerLink
from service.mcp.client import McpClient
from service.mcp.transports.memory import MemoryTransport
from service.store import Store


class _SilentStore:
    """A store whose ``stored_discover`` never answers (a frozen database)."""

    def __init__(self) -> None:
        self.asked = 0

    async def stored_discover(self, server_id: int) -> str | None:
        self.asked += 1
        await asyncio.Event().wait()
        return None


class _Client:
    def __init__(self) -> None:
        self.discovers = 0

    async def discover(self) -> Any:
        self.discovers += 1
        return type("Discovered", (), {"raw": {"capabilities": {}}})()


def test_a_stored_discover_that_never_comes_is_given_up_for_a_live_one() -> None:
    async def run() -> tuple[int, int, Any]:
        store = _SilentStore()
        link = ServerLink(
            1,
            "http://127.0.0.1:1/mcp",
            cast(Store, store),
            Settings(request_timeout_s=0.2),
            lambda url: MemoryTransport(url, None),  # type: ignore[arg-type]
            asyncio.Semaphore(4),
            {},
        )
        client = _Client()
        async with asyncio.timeout(10):  # the test's own bound: fails instead of hanging
            discovered = await link._discover(cast(McpClient, client), False)
        return store.asked, client.discovers, discovered

    asked, discovers, discovered = asyncio.run(run())
    assert (asked, discovers) == (1, 1), "asked the store once, then the server"
    assert discovered.raw == {"capabilities": {}}
