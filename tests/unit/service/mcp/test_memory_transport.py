"""The MCP client over the in-memory transport: what it sends and how it reads answers and a
listen stream, decided without a socket (service/mcp/transports/memory.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from service.mcp import wire
from service.mcp.client import McpClient
from service.mcp.errors import ProtocolViolation
from service.mcp.listen import Notified
from service.mcp.transports.base import Answer
from service.mcp.transports.memory import MemoryStream, MemoryTransport

URL = "http://mcp.test/mcp"


def _json(message: dict[str, Any]) -> Answer:
    return Answer(200, {"content-type": "application/json"}, json.dumps(message).encode())


def _frame(message: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(message).encode() + b"\n\n"


def test_a_read_sends_the_wire_headers_and_returns_the_result() -> None:
    async def handler(content: bytes, headers: dict[str, str]) -> Answer:
        request = json.loads(content)
        return _json({"jsonrpc": "2.0", "id": request["id"], "result": {"contents": []}})

    async def scenario() -> tuple[dict[str, Any], MemoryTransport]:
        transport = MemoryTransport(URL, handler)
        async with McpClient(URL, transport=transport) as client:
            return await client.read_resource("test://a"), transport

    result, transport = asyncio.run(scenario())
    assert result == {"contents": []}
    ((content, headers),) = transport.sent
    sent = {k.lower(): v for k, v in headers.items()}
    assert sent["mcp-method"] == "resources/read"
    assert sent["mcp-protocol-version"] == wire.PROTOCOL_VERSION
    assert json.loads(content)["params"]["uri"] == "test://a"
    assert not transport.closed, "a transport the caller gave stays the caller's to close"


def test_a_listen_stream_is_read_frame_by_frame() -> None:
    frames: asyncio.Queue[bytes | None] = asyncio.Queue()

    async def body() -> AsyncIterator[bytes]:
        while (frame := await frames.get()) is not None:
            yield frame

    async def handler(content: bytes, headers: dict[str, str]) -> MemoryStream:
        listen_id = json.loads(content)["id"]
        meta = {wire.META_SUBSCRIPTION_ID: listen_id}
        honored = {"resourceSubscriptions": ["test://a"]}
        await frames.put(
            _frame(
                {
                    "jsonrpc": "2.0",
                    "method": wire.ACKNOWLEDGED,
                    "params": {"_meta": meta, "notifications": honored},
                }
            )
        )
        await frames.put(
            _frame(
                {
                    "jsonrpc": "2.0",
                    "method": wire.RESOURCE_UPDATED,
                    "params": {"_meta": meta, "uri": "test://a"},
                }
            )
        )
        return MemoryStream(200, {"content-type": "text/event-stream"}, body())

    async def scenario() -> tuple[Any, Any]:
        client = McpClient(URL, transport=MemoryTransport(URL, handler))
        async with client, client.listen({"resourceSubscriptions": ["test://a"]}) as stream:
            return stream.honored_uris, await stream.next_event()

    honored, event = asyncio.run(scenario())
    assert honored == ["test://a"]
    assert isinstance(event, Notified) and event.uri == "test://a"


def test_an_open_stream_keeps_the_requests_strings_not_the_acknowledgements() -> None:
    """The daemon holds every stream for its life: the honored URIs it keeps are the strings
    it asked with (one copy per link), and nothing else of the parsed acknowledgement."""
    asked = ["test://a", "test://b"]

    async def handler(content: bytes, headers: dict[str, str]) -> MemoryStream:
        meta = {wire.META_SUBSCRIPTION_ID: json.loads(content)["id"]}
        honored = {"resourceSubscriptions": ["test://a", "test://c"], "x": {"big": "y" * 500}}
        ack = {
            "jsonrpc": "2.0",
            "method": wire.ACKNOWLEDGED,
            "params": {"_meta": meta, "notifications": honored},
        }
        return MemoryStream(200, {"content-type": "text/event-stream"}, [_frame(ack)])

    async def scenario() -> Any:
        client = McpClient(URL, transport=MemoryTransport(URL, handler))
        async with client, client.listen({"resourceSubscriptions": asked}) as stream:
            assert stream.acknowledged and stream.machine is not None
            assert stream.honored_uris == ["test://a", "test://c"]
            assert stream.honored_uris[0] is asked[0]
            assert not hasattr(stream, "honored")
            assert not hasattr(stream.machine, "honored")

    asyncio.run(scenario())


def test_a_frame_of_another_listen_is_a_protocol_error() -> None:
    async def handler(content: bytes, headers: dict[str, str]) -> MemoryStream:
        foreign = {wire.META_SUBSCRIPTION_ID: "someone-else"}
        ack = {"jsonrpc": "2.0", "method": wire.ACKNOWLEDGED, "params": {"_meta": foreign}}
        return MemoryStream(200, {"content-type": "text/event-stream"}, [_frame(ack)])

    async def scenario() -> None:
        client = McpClient(URL, transport=MemoryTransport(URL, handler))
        async with client, client.listen({"resourceSubscriptions": ["test://a"]}):
            pass

    with pytest.raises(ProtocolViolation, match="not this listen's"):
        asyncio.run(scenario())


SECRET_URL = "http://bob:pass-mem-1@mcp.test/mcp?api_key=key-mem-2"


@pytest.mark.parametrize("status", [200, 500])
def test_an_error_that_echoes_the_request_loses_what_the_client_sent(status: int) -> None:
    """A JSON-RPC error (message and data) or an HTTP error body quoting the request: the
    error the client raises, and the errors it was raised from, carry none of its secrets."""

    async def handler(content: bytes, headers: dict[str, str]) -> Answer:
        request = json.loads(content)
        echo = f"at /mcp?api_key=key-mem-2 with {headers['Authorization']} (bearer-mem-3)"
        if status != 200:
            return Answer(status, {"content-type": "text/plain"}, echo.encode())
        error = wire.error_response(request["id"], -32603, echo, {"seen": [echo]})
        return _json(error)

    async def scenario() -> BaseException:
        transport = MemoryTransport(SECRET_URL, handler)
        async with McpClient(SECRET_URL, transport=transport, token="bearer-mem-3") as client:
            try:
                await client.read_resource("test://a")
            except Exception as exc:
                return exc
        raise AssertionError("no error")

    exc = asyncio.run(scenario())
    texts = [str(exc), repr(getattr(exc, "data", None)), str(getattr(exc, "body", ""))]
    assert "at /mcp?api_key=*** with Bearer *** (***)" in str(exc)
    for secret in ("pass-mem-1", "key-mem-2", "bearer-mem-3"):
        assert not [text for text in texts if secret in text], texts


def test_a_paced_stream_reads_each_chunk_in_the_turn_that_brought_it() -> None:
    """Below its rate a listen stream yields to the loop only between pieces of one chunk:
    an event that arrives on its own (a notification, a keep-alive) costs the wake-up that
    brought it and no second turn (the daemon's idle CPU is one keep-alive per stream)."""
    events = 50

    async def scenario() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        turns = 0

        async def body(listen_id: Any) -> AsyncIterator[bytes]:
            meta = {wire.META_SUBSCRIPTION_ID: listen_id}
            yield _frame(
                {
                    "jsonrpc": "2.0",
                    "method": wire.ACKNOWLEDGED,
                    "params": {"_meta": meta, "notifications": {"resourceSubscriptions": []}},
                }
            )
            updated = {"jsonrpc": "2.0", "method": wire.RESOURCE_UPDATED}
            for _ in range(events):
                arrived = loop.create_future()  # each chunk comes in a turn of its own
                loop.call_soon(arrived.set_result, None)
                await arrived
                yield _frame(updated | {"params": {"_meta": meta, "uri": "test://a"}})

        async def handler(content: bytes, headers: dict[str, str]) -> MemoryStream:
            return MemoryStream(
                200, {"content-type": "text/event-stream"}, body(json.loads(content)["id"])
            )

        original = loop.call_soon

        def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal turns
            turns += 1
            return original(*args, **kwargs)

        async with McpClient(URL, transport=MemoryTransport(URL, handler)) as client:
            stream = client.listen({"resourceSubscriptions": ["test://a"]}, max_frames_per_s=10_000)
            await stream.open()
            loop.call_soon = counted  # type: ignore[method-assign]
            try:
                received = 0
                for _ in range(events):
                    if isinstance(await stream.next_event(), Notified):
                        received += 1
            finally:
                del loop.call_soon
            await stream.aclose()
        return received, turns

    received, turns = asyncio.run(scenario())
    assert received == events
    # Per event: the arrival's callback and the reader's wake-up; no third turn.
    assert turns == 2 * events, turns


def test_clients_of_one_name_share_their_client_info() -> None:
    """A daemon makes a client per link: the same ``clientInfo`` object, not a dict each."""
    one = McpClient(URL, client_name="mcpsubd", transport=MemoryTransport(URL, None))  # type: ignore[arg-type]
    two = McpClient(URL, client_name="mcpsubd", transport=MemoryTransport(URL, None))  # type: ignore[arg-type]
    assert one.client_info is two.client_info
    assert one.client_info["name"] == "mcpsubd"
