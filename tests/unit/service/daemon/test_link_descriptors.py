"""A read whose connection fails for want of a file descriptor (EMFILE) asks the supervisor
to close the links' idle read connections (``FdBudget.relieve_now``, rate-limited), so its
retry finds one. A cold start of 10,000 links filled the table with idle read connections
(kept 15 s each) and every read after that failed to connect."""

from __future__ import annotations

import asyncio
import errno
from typing import cast

import pytest

from service.daemon.config import Settings
from service.daemon.fdbudget import FdBudget
from service.daemon.link import ServerLink
from service.mcp.errors import TransportError
from service.mcp.transports.base import Answer
from service.mcp.transports.memory import MemoryTransport
from service.store import Store


def link_whose_connects_fail(error: OSError) -> ServerLink:
    async def handler(content: bytes, headers: dict[str, str]) -> Answer:
        raise TransportError(f"connect error: {error}", kind="connect") from error

    return ServerLink(
        1,
        "http://127.0.0.1:1/mcp",
        cast(Store, object()),
        Settings(),
        lambda url: MemoryTransport(url, handler),
        asyncio.Semaphore(4),
        {},
    )


@pytest.mark.parametrize(
    ("error", "relieved"),
    [
        (OSError(errno.EMFILE, "Too many open files"), True),
        (OSError(errno.ENFILE, "Too many open files in system"), True),
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), False),
    ],
)
def test_a_read_out_of_descriptors_relieves_the_budget(error: OSError, relieved: bool) -> None:
    asked: list[int] = []
    budget = FdBudget(1024, 0, 0, count=lambda: 10, relieve=lambda: asked.append(1))
    link = link_whose_connects_fail(error)
    link.descriptors_short = budget.relieve_now

    async def run() -> None:
        for _ in range(3):
            with pytest.raises(TransportError):
                await link.read("test://a")

    asyncio.run(run())
    assert asked == ([1] if relieved else []), "once however many reads failed (rate-limited)"
