"""What a link's share of the supervisor's tick closes: its read connections once idle.

An idle link holds its listen stream's socket and nothing else: at 10,000 links two kept
read connections each were 20,000 descriptors more than a 20,000 limit allows, and their
buffers most of a link's memory after the stream's."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from service.daemon.config import Settings
from service.daemon.link import IDLE_CONNECTION_S, ServerLink
from service.mcp.transports.memory import MemoryTransport
from service.store import Store


class _Recording(MemoryTransport):
    def __init__(self, url: str) -> None:
        super().__init__(url, self._refuse)
        self.cuts: list[float] = []

    @staticmethod
    async def _refuse(content: bytes, headers: dict[str, str]) -> Any:
        raise AssertionError("the tick sends nothing")

    def close_idle(self, before: float) -> None:
        self.cuts.append(before)


def test_the_tick_closes_the_links_idle_read_connections_in_every_state() -> None:
    async def run() -> list[float]:
        made: list[_Recording] = []

        def new_transport(url: str) -> _Recording:
            made.append(_Recording(url))
            return made[-1]

        link = ServerLink(
            1,
            "http://127.0.0.1:1/mcp",
            cast(Store, None),  # the tick touches no storage
            Settings(),
            new_transport,
            asyncio.Semaphore(4),
            {},
        )
        link.tick(1000.0)  # not open (idle): still closes what it kept
        link.tick(2000.0)
        link.close_idle(2001.0)  # the descriptor budget's relief: everything idle now
        return made[0].cuts

    assert asyncio.run(run()) == [
        1000.0 - IDLE_CONNECTION_S,
        2000.0 - IDLE_CONNECTION_S,
        2001.0,
    ]
