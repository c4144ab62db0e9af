"""A listen stream on the lean transport takes its keep-alive comments in the socket's
callback: an idle stream's frame does not wake the reading task, ``last_activity`` still
moves, and nothing else is taken that way (an event split around a comment, a flood over the
frame rate, a compressed stream).

The server is a raw asyncio server on 127.0.0.1 (port 0) writing each frame as its own chunk
and waiting for the test between frames, so each frame arrives in a callback of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from service.mcp import wire
from service.mcp.client import McpClient
from service.mcp.listen import Notified
from service.mcp.transports import lean as lean_module
from service.mcp.transports.lean import LeanHttp
from tests.support.poll import until_async
from tests.support.rawhttp import chunk, read_json_request
from tests.support.rawhttp import sse_frame as frame

KEEPALIVE = b": keepalive\n\n"
LISTEN_ID = 1


class Script:
    """What the server writes after the acknowledgement: each entry once the test lets it."""

    def __init__(self, pieces: list[bytes], *, gzip_head: bool = False) -> None:
        self.pieces = pieces
        self.gzip_head = gzip_head
        self.go = asyncio.Queue[int]()
        self.written = 0

    def allow(self, count: int) -> None:
        self.go.put_nowait(count)


@contextlib.asynccontextmanager
async def serve(script: Script) -> AsyncIterator[str]:
    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await read_json_request(reader)
        assert request["id"] == LISTEN_ID
        meta = {wire.META_SUBSCRIPTION_ID: request["id"]}
        ack = {
            "jsonrpc": "2.0",
            "method": wire.ACKNOWLEDGED,
            "params": {"_meta": meta, "notifications": {"resourceSubscriptions": ["test://a"]}},
        }
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n" + chunk(frame(ack))
        )
        await writer.drain()
        for piece in script.pieces:
            await script.go.get()
            writer.write(chunk(piece))
            await writer.drain()
            script.written += 1
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            await reader.read()  # until the client closes
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.close()


def updated(uri: str = "test://a") -> dict[str, Any]:
    """The update for the first listen of a client (its request id is 1)."""
    meta = {wire.META_SUBSCRIPTION_ID: LISTEN_ID}
    return {
        "jsonrpc": "2.0",
        "method": wire.RESOURCE_UPDATED,
        "params": {"_meta": meta, "uri": uri},
    }


@pytest.fixture
def wakes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a waiting reader of the lean transport was woken."""
    count = [0]
    original = lean_module._Connection._wake

    def counted(self: Any) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            count[0] += 1
        original(self)

    monkeypatch.setattr(lean_module._Connection, "_wake", counted)
    return count


async def run_stream(
    script: Script, wakes: list[int], *, rate: float = 5000.0, keepalives: int = 0
) -> tuple[int, float, Any]:
    """Open a stream, let ``keepalives`` pieces through one at a time (each seen before the
    next), then the rest; returns the reader's wakes over the keep-alives, whether
    ``last_activity`` moved, and the first event."""
    async with serve(script) as url, McpClient(url, transport=LeanHttp(url)) as client:
        stream = client.listen({"resourceSubscriptions": ["test://a"]}, max_frames_per_s=rate)
        await stream.open()
        reading = asyncio.get_running_loop().create_task(stream.next_event())
        await asyncio.sleep(0)  # the reader waits for its next chunk
        before = wakes[0]
        moved = 0.0
        for n in range(keepalives):
            stream.last_activity = 0.0
            script.allow(1)
            await until_async("the piece was written", lambda n=n: script.written > n)
            await until_async(
                "the piece was seen", lambda: stream.last_activity > 0 or reading.done()
            )
            moved = stream.last_activity
        woken = wakes[0] - before
        for _ in range(len(script.pieces) - keepalives):
            script.allow(1)
        event = await asyncio.wait_for(reading, 10)
        await stream.aclose()
        return woken, moved, event


@pytest.mark.anyio
async def test_keepalives_move_last_activity_without_waking_the_reader(wakes: list[int]) -> None:
    script = Script([KEEPALIVE] * 20 + [frame(updated())])
    woken, moved, event = await run_stream(script, wakes, keepalives=20)
    assert woken == 0
    assert moved > 0
    assert isinstance(event, Notified) and event.uri == "test://a"


@pytest.mark.anyio
async def test_an_event_around_a_comment_is_read_whole(wakes: list[int]) -> None:
    """The data line came first: the decoder is inside an event, so the comment and its
    blank line are fed (the blank line dispatches the event)."""
    data = frame(updated())[:-1]  # "data: {...}\n" without the blank line
    script = Script([data, KEEPALIVE])
    _, _, event = await run_stream(script, wakes)
    assert isinstance(event, Notified) and event.uri == "test://a"


@pytest.mark.anyio
async def test_comments_over_the_frame_rate_go_to_the_reader(wakes: list[int]) -> None:
    """One frame a second: the first keep-alive is taken quietly, the next ones are over the
    rate and reach the reader, which paces them."""
    script = Script([KEEPALIVE] * 3 + [frame(updated())])
    async with serve(script) as url, McpClient(url, transport=LeanHttp(url)) as client:
        stream = client.listen({"resourceSubscriptions": ["test://a"]}, max_frames_per_s=1.0)
        await stream.open()
        stream._tokens = 1.0  # a full bucket of one
        reading = asyncio.get_running_loop().create_task(stream.next_event())
        await asyncio.sleep(0)
        before = wakes[0]
        script.allow(1)
        await until_async("the first piece was written", lambda: script.written == 1)
        await until_async("the first piece was seen", lambda: stream._tokens < 1.0)
        assert wakes[0] == before  # within the rate: taken quietly
        script.allow(1)
        await until_async("the reader was woken", lambda: wakes[0] > before)
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading
        await stream.aclose()
