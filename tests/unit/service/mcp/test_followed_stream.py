"""A followed listen stream (:meth:`ListenStream.follow`): its events are handed to the
follower as they arrive. On the lean transport that happens in the socket's callback and no
task reads the stream (a daemon follows thousands of idle streams); over the frame rate the
socket is left unread; the stream's end, or a frame that breaks the rules, is handed over
last. Elsewhere (here the in-memory transport) one task reads.

The lean server is the raw one of ``test_quiet_keepalives`` on 127.0.0.1 (port 0): each
piece is written as its own chunk once the test allows it.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from service.mcp import wire
from service.mcp.client import McpClient
from service.mcp.errors import McpError, ProtocolViolation
from service.mcp.listen import ListenEvent, Lost, Notified
from service.mcp.transports.lean import LeanHttp
from service.mcp.transports.memory import MemoryStream, MemoryTransport
from tests.support.poll import until_async
from tests.support.rawhttp import chunk, read_json_request
from tests.support.rawhttp import sse_frame as frame
from tests.unit.service.mcp.test_quiet_keepalives import KEEPALIVE, Script, serve, updated

END = b""
"""Written as the last chunk: the server ends the stream's body without a result (lost)."""


def _live() -> set[asyncio.Task[Any]]:
    return {t for t in asyncio.all_tasks() if not t.done()}


@pytest.mark.anyio
async def test_a_followed_lean_stream_is_read_without_a_task() -> None:
    script = Script([KEEPALIVE, frame(updated("test://a")), frame(updated("test://b")), END])
    seen: list[ListenEvent | McpError] = []
    async with serve(script) as url, McpClient(url, transport=LeanHttp(url)) as client:
        stream = client.listen({"resourceSubscriptions": ["test://a"]})
        await stream.open()
        before = _live()
        stream.follow(seen.append)
        assert _live() == before, "following made a task"
        stream.last_activity = 0.0
        script.allow(1)
        await until_async("the keep-alive was seen", lambda: stream.last_activity > 0)
        assert seen == []
        script.allow(1)
        script.allow(1)
        await until_async("both updates arrived", lambda: len(seen) == 2)
        assert _live() == before
        script.allow(1)
        await until_async("the end arrived", lambda: len(seen) == 3)
        await stream.aclose()
    first, second, end = seen
    assert isinstance(first, Notified) and first.uri == "test://a"
    assert isinstance(second, Notified) and second.uri == "test://b"
    assert isinstance(end, Lost)


@pytest.mark.anyio
async def test_what_arrived_before_the_following_is_handed_over_first() -> None:
    script = Script([frame(updated("test://a")) + frame(updated("test://b"))])
    seen: list[ListenEvent | McpError] = []
    async with serve(script) as url, McpClient(url, transport=LeanHttp(url)) as client:
        stream = client.listen({"resourceSubscriptions": ["test://a"]})
        await stream.open()
        script.allow(1)
        await until_async("the piece was written", lambda: script.written == 1)
        await until_async("the piece is in", lambda: stream._response._conn._chunks)  # type: ignore[union-attr]
        stream.follow(seen.append)
        uris = [e.uri for e in seen if isinstance(e, Notified)]
        await stream.aclose()
    assert uris == ["test://a", "test://b"]


@pytest.mark.anyio
async def test_a_frame_that_breaks_the_rules_is_the_last_thing_handed_over() -> None:
    foreign = updated()
    foreign["params"]["_meta"] = {wire.META_SUBSCRIPTION_ID: "someone-else"}
    script = Script([frame(foreign) + frame(updated())])
    seen: list[ListenEvent | McpError] = []
    async with serve(script) as url, McpClient(url, transport=LeanHttp(url)) as client:
        stream = client.listen({"resourceSubscriptions": ["test://a"]})
        await stream.open()
        stream.follow(seen.append)
        script.allow(1)
        await until_async("the violation arrived", lambda: seen)
        await stream.aclose()
    assert len(seen) == 1 and isinstance(seen[0], ProtocolViolation)


@pytest.mark.anyio
async def test_a_follower_that_raises_gets_the_end_and_nothing_more() -> None:
    script = Script([frame(updated()) + frame(updated())])
    seen: list[ListenEvent | McpError] = []

    def follower(event: ListenEvent | McpError) -> None:
        seen.append(event)
        if isinstance(event, Notified):
            raise RuntimeError("a bug in the follower")

    async with serve(script) as url, McpClient(url, transport=LeanHttp(url)) as client:
        stream = client.listen({"resourceSubscriptions": ["test://a"]})
        await stream.open()
        stream.follow(follower)
        script.allow(1)
        await until_async("the crash was handed over", lambda: len(seen) == 2)
        await stream.aclose()
    assert isinstance(seen[0], Notified)
    assert isinstance(seen[1], McpError) and "a bug in the follower" in str(seen[1])


@pytest.mark.anyio
async def test_over_the_frame_rate_the_socket_is_left_unread_for_a_while() -> None:
    script = Script([KEEPALIVE, KEEPALIVE, frame(updated())])
    seen: list[ListenEvent | McpError] = []
    async with serve(script) as url, McpClient(url, transport=LeanHttp(url)) as client:
        stream = client.listen({"resourceSubscriptions": ["test://a"]}, max_frames_per_s=4.0)
        await stream.open()
        transport = stream._response._conn.transport  # type: ignore[union-attr]
        stream._tokens = 1.0  # one frame left in the bucket
        stream.follow(seen.append)
        script.allow(1)
        await until_async("the first frame was seen", lambda: stream._tokens < 1.0)
        assert transport.is_reading(), "within the rate"
        script.allow(1)
        await until_async("over the rate: paused", lambda: not transport.is_reading())
        await until_async("read again once the bucket refilled", transport.is_reading)
        script.allow(1)
        await until_async("the update arrived", lambda: seen)
        await stream.aclose()
    assert isinstance(seen[0], Notified)


def test_without_the_transports_hook_one_task_follows() -> None:
    frames: asyncio.Queue[bytes | None] = asyncio.Queue()

    async def body() -> AsyncIterator[bytes]:
        while (piece := await frames.get()) is not None:
            yield piece

    async def handler(content: bytes, headers: dict[str, str]) -> MemoryStream:
        meta = {wire.META_SUBSCRIPTION_ID: json.loads(content)["id"]}
        ack = {"jsonrpc": "2.0", "method": wire.ACKNOWLEDGED, "params": {"_meta": meta}}
        await frames.put(b"data: " + json.dumps(ack).encode() + b"\n\n")
        update = {"jsonrpc": "2.0", "method": wire.RESOURCE_UPDATED}
        update["params"] = {"_meta": meta, "uri": "test://a"}
        await frames.put(b"data: " + json.dumps(update).encode() + b"\n\n")
        await frames.put(None)
        return MemoryStream(200, {"content-type": "text/event-stream"}, body())

    async def scenario() -> tuple[list[ListenEvent | McpError], int]:
        url = "http://mcp.test/mcp"
        seen: list[ListenEvent | McpError] = []
        client = McpClient(url, transport=MemoryTransport(url, handler))
        async with client, client.listen({"resourceSubscriptions": ["test://a"]}) as stream:
            before = len(_live())
            stream.follow(seen.append)
            tasks = len(_live()) - before
            await until_async("the end arrived", lambda: len(seen) == 2)
        return seen, tasks

    seen, tasks = asyncio.run(scenario())
    assert tasks == 1
    assert isinstance(seen[0], Notified) and isinstance(seen[1], Lost)


@pytest.mark.anyio
async def test_a_followed_stream_keeps_no_head_fields_and_a_cut_one_still_broke() -> None:
    """The head's fields are dropped once the stream is followed (held for its life); the
    framing they told is kept: a chunked stream cut by the server's close is a broken stream,
    not one that ended cleanly."""
    cut = asyncio.Event()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await read_json_request(reader)
        meta = {wire.META_SUBSCRIPTION_ID: request["id"]}
        ack = {"jsonrpc": "2.0", "method": wire.ACKNOWLEDGED, "params": {"_meta": meta}}
        body = frame(ack)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-padding: "
            + b"p" * 200
            + b"\r\ntransfer-encoding: chunked\r\n\r\n"
            + chunk(body)
        )
        await writer.drain()
        await cut.wait()
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
    seen: list[ListenEvent | McpError] = []
    try:
        async with McpClient(url, transport=LeanHttp(url)) as client:
            stream = client.listen({"resourceSubscriptions": ["test://a"]})
            await stream.open()
            stream.follow(seen.append)
            response = stream._response
            assert response is not None
            assert dict(response.headers) == {}
            assert response._conn.headers == {}  # type: ignore[attr-defined]
            cut.set()
            await until_async("the end arrived", lambda: seen)
            await stream.aclose()
    finally:
        server.close()
    (end,) = seen
    assert isinstance(end, Lost) and end.reason.startswith("stream broke")


@pytest.mark.anyio
async def test_a_followed_stream_keeps_no_chunk_it_read() -> None:
    """The stream's chunk iterator is kept for the stream's life: it must not hold the last
    chunk it gave (the acknowledgement's bytes, ~0.4 kB per link)."""
    script = Script([])
    async with serve(script) as url, McpClient(url, transport=LeanHttp(url)) as client:
        stream = client.listen({"resourceSubscriptions": ["test://a"]})
        await stream.open()
        stream.follow(lambda event: None)
        held = gc.get_referents(stream._chunks)
        held += [r for o in held for r in gc.get_referents(o)]
        await stream.aclose()
    assert not [r for r in held if isinstance(r, bytes) and wire.ACKNOWLEDGED.encode() in r]


@pytest.mark.anyio
async def test_a_followed_streams_keep_alives_are_counted_not_decoded() -> None:
    """An idle daemon's streams carry only keep-alives (667 a second at 10,000 links): they
    move ``last_activity`` as a decoded comment would, without a ``Comment`` each."""
    script = Script([KEEPALIVE, KEEPALIVE, frame(updated("test://a"))])
    seen: list[ListenEvent | McpError] = []
    async with serve(script) as url, McpClient(url, transport=LeanHttp(url)) as client:
        stream = client.listen({"resourceSubscriptions": ["test://a"]})
        await stream.open()
        fed: list[bytes] = []
        decoder = stream._decoder
        feed = decoder.feed

        def counted(piece: bytes) -> Any:
            fed.append(piece)
            return feed(piece)

        decoder.feed = counted  # type: ignore[method-assign]
        stream.follow(seen.append)
        for _ in range(2):
            stream.last_activity = 0.0
            script.allow(1)
            await until_async("the keep-alive was seen", lambda: stream.last_activity > 0)
        assert fed == [] and seen == []
        script.allow(1)
        await until_async("the update arrived", lambda: seen)
        await stream.aclose()
    assert len(fed) == 1
    assert isinstance(seen[0], Notified) and seen[0].uri == "test://a"
