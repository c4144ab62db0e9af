"""service.toolcall.call_tool_once: discovery and the call share one deadline (seed #112).

A loopback server that accepts the connection and never answers: the call must fail as a
``timeout`` in about the requested time, not after a library default."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from service.mcp.errors import TransportError
from service.toolcall import call_tool_once

pytestmark = pytest.mark.anyio


@pytest.fixture
async def silent_url() -> AsyncIterator[str]:
    held: list[asyncio.StreamWriter] = []

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # read nothing, answer nothing

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}/mcp"
    for writer in held:
        writer.close()
    server.close()
    await server.wait_closed()


async def test_a_silent_server_fails_as_a_timeout_within_the_deadline(silent_url: str) -> None:
    started = time.monotonic()
    with pytest.raises(TransportError) as caught:
        await call_tool_once(silent_url, "echo", {}, token=None, timeout_s=0.5)
    elapsed = time.monotonic() - started
    assert caught.value.kind == "timeout"
    assert "within 500 ms" in str(caught.value)
    assert silent_url in str(caught.value)
    assert elapsed < 3.0  # the deadline, not a library default
