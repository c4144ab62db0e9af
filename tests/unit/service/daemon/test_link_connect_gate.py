"""Links connect in turns: a session holds one of the supervisor's ``connect_concurrency``
slots from its discover to its first listen's acknowledgement (``ServerLink._connect``), and
gives it back however that ends. Without the gate a start with thousands of links queued
every discover on the loop at once, past the request deadline."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from service.daemon.config import Settings
from service.daemon.link import ServerLink
from service.mcp.transports.memory import MemoryTransport
from service.store import Store


class ScriptedLink(ServerLink):
    """A link whose connect and serve are the test's (the gate around them is the link's)."""

    connect: Any
    serve: Any

    async def _connect(self) -> Any:
        return await self.connect()

    async def _serve(self, *args: Any) -> None:
        await self.serve(*args)


def make_link(server_id: int, gate: asyncio.Semaphore) -> ScriptedLink:
    link = ScriptedLink(
        server_id,
        f"http://127.0.0.1:{server_id}/mcp",
        cast(Store, object()),
        Settings(),
        lambda url: MemoryTransport(url, None),  # type: ignore[arg-type]
        asyncio.Semaphore(4),
        {},
    )
    link.connecting = gate
    return link


def test_links_connect_one_turn_at_a_time_and_a_failed_connect_frees_its_turn() -> None:
    async def run() -> list[str]:
        gate = asyncio.Semaphore(1)
        seen: list[str] = []
        release = {1: asyncio.Event(), 2: asyncio.Event(), 3: asyncio.Event()}
        links = {n: make_link(n, gate) for n in (1, 2, 3)}

        def connect_of(n: int) -> Any:
            async def connect() -> Any:
                seen.append(f"connect {n}")
                await release[n].wait()
                if n == 1:
                    raise RuntimeError("discover failed")
                return None, None, None

            return connect

        async def serve(*_args: Any) -> None:
            seen.append("serve")

        for n, link in links.items():
            link.connect = connect_of(n)
            link.serve = serve
        sessions = [asyncio.create_task(links[n]._session()) for n in (1, 2, 3)]
        for _ in range(5):
            await asyncio.sleep(0)
        assert seen == ["connect 1"], "the others wait for the turn"
        release[1].set()  # the first fails: its turn goes to the next
        for _ in range(5):
            await asyncio.sleep(0)
        assert seen == ["connect 1", "connect 2"]
        release[2].set()
        release[3].set()
        results = await asyncio.gather(*sessions, return_exceptions=True)
        assert isinstance(results[0], RuntimeError)
        assert gate._value == 1, "every turn was given back"
        return seen

    seen = asyncio.run(run())
    assert seen == ["connect 1", "connect 2", "serve", "connect 3", "serve"]
