"""The face's events stream is read through the one bounded SSE decoder.

A loopback server stands in for a broken daemon: it answers ``/v1/events/stream`` with a
line that never ends. Before, ``aiter_lines`` buffered the whole line and only then compared
its length, so the face held megabytes and never reconnected; now the decoder gives up past
``MAX_SSE_EVENT`` bytes, the face says so on stderr and reconnects."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from service.face import remote
from service.face.remote import ApiBackend
from service.localclient import Endpoint
from tests.support.poll import until_async

ENDLESS_BYTES = 8 * 1024 * 1024
"""What the server writes of its one line before it holds the connection open."""


async def _endless_line(state: dict[str, Any], reader: Any, writer: Any) -> None:
    state["connections"] += 1
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: "
        )
        block = b"x" * 65536
        for _ in range(ENDLESS_BYTES // len(block)):
            writer.write(block)
            await writer.drain()
        await reader.read()  # no newline, ever: wait for the face to give up
    writer.close()


def test_an_endless_line_is_not_buffered_past_the_bound(capsys: pytest.CaptureFixture[str]) -> None:
    async def go() -> None:
        state: dict[str, Any] = {"connections": 0}
        server = await asyncio.start_server(lambda r, w: _endless_line(state, r, w), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        backend = ApiBackend(Endpoint(host="127.0.0.1", port=port))
        try:
            assert await backend.wait_beyond(0, 0.01) is False  # starts the follower
            await until_async("the face reconnects", lambda: state["connections"] >= 2, 15)
        finally:
            await backend.aclose()
            server.close()

    asyncio.run(go())
    err = capsys.readouterr().err
    assert f"SSE line longer than {remote.MAX_SSE_EVENT} bytes" in err
    assert "mcpsubctl mcp: events stream from http://127.0.0.1:" in err
