"""service.mcp.transports.lean against real loopback servers that misbehave in the ways that matter.

Each server here is a raw asyncio socket server on 127.0.0.1 (port 0) scripted per test,
because the cases are about framing and connection reuse, which no well-behaved peer shows
on demand: a keep-alive connection closed while idle, a chunked body, an oversized body, a
compressed body nobody asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from service.mcp.classify import malformed_http
from service.mcp.client import McpClient
from service.mcp.errors import ProtocolViolation, TransportError
from service.mcp.transports import lean as lean_module
from service.mcp.transports.base import Transport
from service.mcp.transports.choose import make_transport
from service.mcp.transports.lean import (
    HIGH_WATER,
    MAX_HEAD_BYTES,
    BodyRefused,
    LeanHttp,
    lean_usable,
)
from service.mcp.transports.viahttpx import HttpxTransport

Make = Callable[..., Transport]
"""Makes the transport under test for a URL (keyword arguments: ``max_body``)."""


@pytest.fixture(params=["lean", "httpx"])
def make(request: pytest.FixtureRequest) -> Make:
    if request.param == "lean":
        return LeanHttp
    return HttpxTransport


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]
OK_BODY = b'{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","contents":[]}}'


async def read_request(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head + await reader.readexactly(length)


def reply(body: bytes, extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n" + extra
        + b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )  # fmt: skip


@contextlib.asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A server; yields its URL and the list of connection numbers that sent a request."""
    connections = 0
    served: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        number = connections
        try:
            while await read_request(reader) is not None:
                served.append(number)
                await handler(reader, writer, number)
                if writer.is_closing():
                    return
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp?link=1", served
    finally:
        server.close()


async def keep_alive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
    writer.write(reply(OK_BODY))
    await writer.drain()


def test_requests_reuse_one_connection(make: Make) -> None:
    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(reply(OK_BODY))

    async def scenario() -> list[int]:
        async with serve(record) as (url, served):
            lean = make(url)
            for _ in range(3):
                response = await lean.post(b"{}", {"Content-Type": "application/json"})
                assert response.status == 200 and response.body == OK_BODY
                assert response.headers["content-type"] == "application/json"
            await lean.aclose()
            return served

    assert asyncio.run(scenario()) == [1, 1, 1]


def test_a_connection_closed_while_idle_is_replaced_and_the_request_sent_again(make: Make) -> None:
    async def close_after_answer(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int
    ) -> None:
        # Answers with keep-alive framing, then closes without saying so: the client only
        # finds out when it next uses the connection.
        writer.write(reply(OK_BODY))
        await writer.drain()
        writer.close()

    async def scenario() -> list[int]:
        async with serve(close_after_answer) as (url, served):
            lean = make(url)
            for _ in range(3):
                assert (await lean.post(b"{}", {})).body == OK_BODY
            await lean.aclose()
            return served

    assert asyncio.run(scenario()) == [1, 2, 3]


def test_chunked_answers_are_reassembled(make: Make) -> None:
    async def chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        half = len(OK_BODY) // 2
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
            + f"{half:x}\r\n".encode() + OK_BODY[:half] + b"\r\n"
            + f"{len(OK_BODY) - half:x}\r\n".encode() + OK_BODY[half:] + b"\r\n0\r\n\r\n"
        )  # fmt: skip

    async def scenario() -> bytes:
        async with serve(chunked) as (url, _):
            lean = make(url)
            body = (await lean.post(b"{}", {})).body
            body += (await lean.post(b"{}", {})).body  # and the connection stays usable
            await lean.aclose()
            return body

    assert asyncio.run(scenario()) == OK_BODY * 2


def test_an_oversized_body_is_refused(make: Make) -> None:
    async def huge(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(reply(b"x" * 5000))

    async def scenario() -> None:
        async with serve(huge) as (url, _):
            lean = make(url, max_body=4096)
            with pytest.raises(ProtocolViolation, match="larger than 4096"):
                await lean.post(b"{}", {})
            await lean.aclose()

    asyncio.run(scenario())


def test_a_content_encoding_sent_anyway_is_decoded_under_the_bounds(make: Make) -> None:
    """We ask for identity; a server that gzips anyway is understood (one layer, bounded),
    while stacked layers, a body that does not inflate, and a bomb are refused."""

    async def post(body: bytes, coding: str, max_body: int = 1 << 20) -> bytes:
        async def coded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
            writer.write(reply(body, f"content-encoding: {coding}\r\n".encode()))

        async with serve(coded) as (url, _):
            lean = make(url, max_body=max_body)
            try:
                return (await lean.post(b"{}", {"accept-encoding": "identity"})).body
            finally:
                await lean.aclose()

    async def scenario() -> None:
        assert await post(gzip.compress(b'{"ok":1}'), "gzip") == b'{"ok":1}'
        assert await post(zlib.compress(b'{"ok":2}'), "deflate") == b'{"ok":2}'
        with pytest.raises(BodyRefused, match="2 stacked content codings"):
            await post(gzip.compress(gzip.compress(b"{}")), "gzip, gzip")
        with pytest.raises(BodyRefused, match="does not inflate"):
            await post(b"this is not gzip", "gzip")
        with pytest.raises(BodyRefused, match="larger than 4096 bytes"):
            await post(gzip.compress(b"A" * 5000), "gzip", max_body=4096)

    asyncio.run(scenario())


def test_a_server_that_hangs_up_mid_answer_is_a_read_error(make: Make) -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{")
        await writer.drain()
        writer.close()

    async def scenario() -> TransportError:
        async with serve(cut) as (url, _):
            lean = make(url)
            with pytest.raises(TransportError) as caught:
                await lean.post(b"{}", {})
            await lean.aclose()
            return caught.value

    error = asyncio.run(scenario())
    assert error.kind == "read" and "127.0.0.1" in str(error)


def test_connection_refused_is_a_connect_error(make: Make) -> None:
    async def scenario() -> TransportError:
        async with serve(keep_alive) as (url, _):
            pass  # closed: the port is free again
        lean = make(url)
        with pytest.raises(TransportError) as caught:
            await lean.post(b"{}", {})
        return caught.value

    assert asyncio.run(scenario()).kind == "connect"


def test_a_header_value_with_a_newline_is_not_sent(make: Make) -> None:
    async def scenario() -> None:
        async with serve(keep_alive) as (url, served):
            lean = make(url)
            with pytest.raises(ProtocolViolation):
                await lean.post(b"{}", {"Authorization": "Bearer x\r\nX-Evil: 1"})
            assert served == []
            await lean.aclose()

    asyncio.run(scenario())


def test_only_plain_http_without_a_proxy_goes_lean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert lean_usable("http://127.0.0.1:1/mcp")
    assert not lean_usable("https://127.0.0.1:1/mcp")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    assert not lean_usable("http://127.0.0.1:1/mcp")
    with pytest.raises(ValueError):
        LeanHttp("https://127.0.0.1:1/mcp")


def test_mcp_client_answers_the_same_through_either_transport() -> None:
    async def scenario() -> tuple[dict[str, object], dict[str, object], list[int]]:
        async with serve(keep_alive) as (url, served):
            async with McpClient(url, transport=LeanHttp(url)) as client:
                via_lean = await client.read_resource("test://a")
                await client.transport.aclose()
            async with McpClient(url, transport=HttpxTransport(url)) as client:
                via_httpx = await client.read_resource("test://a")
                await client.transport.aclose()
            return via_lean, via_httpx, served

    via_lean, via_httpx, served = asyncio.run(scenario())
    assert via_lean == via_httpx == {"resultType": "complete", "contents": []}
    assert served == [1, 2]  # one connection each: the lean one, then httpx's


def test_the_transport_is_chosen_once_by_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert isinstance(make_transport("http://127.0.0.1:1/mcp"), LeanHttp)
    assert isinstance(make_transport("https://127.0.0.1:1/mcp"), HttpxTransport)
    assert isinstance(McpClient("http://127.0.0.1:1/mcp").transport, LeanHttp)
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    assert isinstance(make_transport("http://127.0.0.1:1/mcp"), HttpxTransport)


def test_stray_bytes_after_an_answer_mean_the_connection_is_not_reused() -> None:
    """Bytes nobody asked for, in the same read as the answer or later while the connection
    sits idle: reusing it would read them as the next answer."""
    go = asyncio.Event()

    async def chatty(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        if n == 1:  # with the answer, in one write
            writer.write(reply(OK_BODY) + reply(b'{"stray":1}'))
        elif n == 2:  # later, once the client holds the connection idle
            writer.write(reply(OK_BODY))
            await go.wait()
            writer.write(reply(b'{"stray":2}'))
        else:
            writer.write(reply(OK_BODY))
        await writer.drain()

    async def scenario() -> list[int]:
        async with serve(chatty) as (url, served):
            lean = LeanHttp(url)
            assert (await lean.post(b"{}", {})).body == OK_BODY
            assert lean._idle == []  # closed at once: the parser met the stray answer
            assert (await lean.post(b"{}", {})).body == OK_BODY
            go.set()
            while lean._idle[0].idle_ok():  # poll until the stray bytes reach our side
                await asyncio.sleep(0.001)
            assert (await lean.post(b"{}", {})).body == OK_BODY
            await lean.aclose()
            return served

    assert asyncio.run(scenario()) == [1, 2, 3]


def test_a_request_that_is_not_idempotent_is_never_sent_twice(make: Make) -> None:
    """A kept-alive connection that dies with a request on it, before any byte of the answer:
    a read is sent again on a fresh connection, a ``tools/call`` is not (the server may have
    acted on it) and fails as a read error."""

    async def drop_second(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int
    ) -> None:
        answered.append(n)
        if answered.count(n) == 2:
            writer.close()  # the request arrived; no answer, the connection goes
            return
        writer.write(reply(OK_BODY))
        await writer.drain()

    answered: list[int] = []

    async def scenario(idempotent: bool) -> list[int]:
        answered.clear()
        async with serve(drop_second) as (url, served):
            lean = make(url)
            try:
                assert (await lean.post(b"{}", {})).body == OK_BODY
                assert (await lean.post(b"{}", {}, idempotent=idempotent)).body == OK_BODY
            finally:
                await lean.aclose()
            return served

    assert asyncio.run(scenario(True)) == [1, 1, 2]
    with pytest.raises(TransportError) as caught:
        asyncio.run(scenario(False))
    assert caught.value.kind == "read"
    assert answered == [1, 1]


def _raw(answer: bytes, *, close: bool = False, pieces: int = 1) -> Handler:
    """A handler that writes ``answer`` as it is (in ``pieces`` writes), then maybe closes."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        step = -(-len(answer) // pieces)
        for start in range(0, len(answer), step):
            writer.write(answer[start : start + step])
            await writer.drain()
        if close:
            writer.close()

    return handler


async def _post_once(make: Make, handler: Handler) -> tuple[bytes | None, BaseException | None]:
    async with serve(handler) as (url, _):
        lean = make(url)
        try:
            return (await lean.post(b"{}", {})).body, None
        except Exception as exc:
            return None, exc
        finally:
            await lean.aclose()


@pytest.mark.parametrize("pieces", [1, 64])
def test_a_response_head_past_the_bound_is_malformed_http(pieces: int) -> None:
    """A head over 16 KiB (one header line here, in one write or trickled in 64), the bound
    h11 had here: a read error whose cause classifies as malformed HTTP (``PROTOCOL_ERROR``),
    never buffered whole. (httpx's is httpcore's 100 KiB.)"""
    huge = b"x-huge: " + b"a" * (4 * MAX_HEAD_BYTES) + b"\r\n"
    answer = b"HTTP/1.1 200 OK\r\n" + huge + b"content-length: 2\r\n\r\n{}"
    body, error = asyncio.run(_post_once(LeanHttp, _raw(answer, pieces=pieces)))
    assert body is None and isinstance(error, TransportError), (body, error)
    assert malformed_http(error), repr(error.__cause__)


def test_a_head_just_under_the_bound_is_read(make: Make) -> None:
    fields = b"".join(b"x-f%d: %s\r\n" % (i, b"v" * 100) for i in range(100))  # ~11 KB
    answer = b"HTTP/1.1 200 OK\r\n" + fields + b"content-length: 2\r\n\r\n{}"
    assert asyncio.run(_post_once(make, _raw(answer, pieces=7))) == (b"{}", None)


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 2OO OK\r\ncontent-length: 2\r\n\r\n{}",  # status is not a number
        b"HTTP/1.1 200 OK\r\ncontent-length: 2x\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
        + b"f" * 40
        + b"\r\n{}\r\n0\r\n\r\n",  # a chunk size past 64 bits
        b"HTTP/1.1 200 OK\r\nbad header\r\ncontent-length: 2\r\n\r\n{}",
        b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n{}",
    ],
    ids=["status", "content-length", "chunk-size", "chunk-overflow", "field", "upgrade"],
)
def test_malformed_framing_is_refused(answer: bytes) -> None:
    body, error = asyncio.run(_post_once(LeanHttp, _raw(answer, close=True)))
    assert body is None and isinstance(error, TransportError), (body, error)
    assert error.kind == "read" and malformed_http(error), repr(error.__cause__)


@pytest.mark.parametrize(
    ("answer", "close"),
    [
        (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n" + OK_BODY, True),
        (reply(OK_BODY, b"connection: close\r\n"), False),
    ],
    ids=["framed-by-the-close", "connection-close"],
)
def test_an_answer_that_ends_its_connection_is_read_and_the_connection_not_kept(
    make: Make, answer: bytes, close: bool
) -> None:
    async def scenario() -> list[int]:
        async with serve(_raw(answer, close=close, pieces=3)) as (url, served):
            lean = make(url)
            for _ in range(2):
                assert (await lean.post(b"{}", {})).body == OK_BODY
            await lean.aclose()
            return served

    assert asyncio.run(scenario()) == [1, 2]


def test_an_informational_answer_is_skipped(make: Make) -> None:
    answer = b"HTTP/1.1 100 Continue\r\n\r\n" + reply(OK_BODY)
    assert asyncio.run(_post_once(make, _raw(answer, pieces=5))) == (OK_BODY, None)


def test_a_stream_is_read_in_pieces_and_pauses_the_socket_past_the_high_water_mark() -> None:
    """A listen-like answer: the head is returned at once, the body as it comes; a server
    writing faster than we read stops being read past HIGH_WATER unread bytes."""
    block = b"x" * 65536
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(head)
        for _ in range(64):  # 4 MiB, far more than the socket buffers hold
            writer.write(b"%x\r\n" % len(block) + block + b"\r\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def scenario() -> tuple[int, int]:
        async with serve(flood) as (url, _):
            lean = LeanHttp(url)
            stream = await lean.open_stream(b"{}", {})
            assert stream.status == 200 and stream.headers["content-type"] == "text/event-stream"
            conn = stream._conn
            while not conn._paused:  # the flood reaches us; nobody reads
                await asyncio.sleep(0.01)
            held = conn._size
            total = 0
            async for data in stream.chunks():
                total += len(data)
            await stream.aclose()
            return held, total

    held, total = asyncio.run(scenario())
    # At most one socket read (asyncio's 256 KiB) past the mark before reading stops.
    assert HIGH_WATER < held <= HIGH_WATER + 256 * 1024, held
    assert total == 64 * 65536


SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


def test_a_stream_opens_on_the_idle_connection_a_request_left(make: Make) -> None:
    """A link's start (discover, then listen) connects once: the listen takes the discover's
    kept-alive connection instead of opening one of its own."""
    answers = [reply(OK_BODY), SSE_HEAD + b"6\r\n: hi\n\n\r\n"]

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(answers.pop(0))
        await writer.drain()

    async def scenario() -> list[int]:
        async with serve(answer) as (url, served):
            lean = make(url)
            assert (await lean.post(b"{}", {})).body == OK_BODY
            stream = await lean.open_stream(b"{}", {})
            assert stream.status == 200
            await stream.aclose()
            await lean.aclose()
            return served

    assert asyncio.run(scenario()) == [1, 1]


def test_a_stream_on_an_idle_connection_the_server_closed_is_sent_again_on_a_new_one(
    make: Make,
) -> None:
    async def answer_then_close(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int
    ) -> None:
        if n == 1:  # keep-alive framing, then closed while idle
            writer.write(reply(OK_BODY))
            await writer.drain()
            writer.close()
            return
        writer.write(SSE_HEAD + b"6\r\n: hi\n\n\r\n")
        await writer.drain()

    async def scenario() -> list[int]:
        async with serve(answer_then_close) as (url, served):
            lean = make(url)
            assert (await lean.post(b"{}", {})).body == OK_BODY
            stream = await lean.open_stream(b"{}", {})
            assert stream.status == 200
            await stream.aclose()
            await lean.aclose()
            return served

    assert asyncio.run(scenario()) == [1, 2]


def test_idle_connections_are_closed_once_idle_long_enough() -> None:
    """``close_idle``: what went idle before the cut is closed (the next request connects
    again); what went idle after it is kept."""

    async def scenario() -> list[int]:
        async with serve(keep_alive) as (url, served):
            lean = LeanHttp(url)
            assert (await lean.post(b"{}", {})).body == OK_BODY
            lean.close_idle(time.monotonic() - 60.0)  # idle for less than a minute: kept
            assert (await lean.post(b"{}", {})).body == OK_BODY
            lean.close_idle(time.monotonic() + 1.0)  # everything idle now is older: closed
            assert (await lean.post(b"{}", {})).body == OK_BODY
            await lean.aclose()
            return served

    assert asyncio.run(scenario()) == [1, 1, 2]


def test_an_idle_connection_keeps_no_answer_and_checked_fields_are_shared_and_bounded() -> None:
    """Memory per daemon link: an idle connection holds its socket, not the last answer's
    parser, head and body buffer; header fields checked once serve every transport, and a
    new value per request (a token, a URI) cannot grow the table past its bound."""

    async def scenario() -> None:
        async with serve(keep_alive) as (url, _served):
            lean = LeanHttp(url)
            answer = await lean.post(b"{}", {"X-Kept": "yes"})
            assert answer.body == OK_BODY and answer.headers["content-type"] == "application/json"
            (idle,) = lean._idle
            assert idle.parser is None and not idle._body and not idle.headers
            assert (await lean.post(b"{}", {})).body == OK_BODY  # still reused
            other = LeanHttp(url.replace("link=1", "link=2"))
            before = len(lean_module._CHECKED_LINES)
            other._request(b"{}", {"X-Kept": "yes"})
            assert len(lean_module._CHECKED_LINES) == before, "checked by the first transport"
            for n in range(2 * lean_module.MAX_CHECKED_LINES):
                other._request(b"{}", {"Mcp-Name": f"test://{n}"})
                assert len(lean_module._CHECKED_LINES) <= lean_module.MAX_CHECKED_LINES
            await lean.aclose()
            await other.aclose()

    asyncio.run(scenario())


def test_transports_of_one_origin_share_a_pool_and_errors_name_their_own_url() -> None:
    """Links on one ``host:port`` (a gateway's servers under distinct paths) share idle
    connections through an ``IdlePool``: the second link's read takes the connection the
    first's left instead of connecting. A failure then names the URL of the transport that
    used the connection, not the one that opened it."""

    async def answer_then_hang_up(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int
    ) -> None:
        if len(served) <= 3:  # the fourth answer breaks off
            writer.write(reply(OK_BODY))
            await writer.drain()
        else:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n{")
            await writer.drain()
            writer.close()

    served: list[int] = []

    async def scenario() -> tuple[list[int], str]:
        nonlocal served
        async with serve(answer_then_hang_up) as (url, served_here):
            served = served_here
            base = url.split("/mcp")[0]
            pool = lean_module.IdlePool(max_idle=8)
            one = LeanHttp(f"{base}/s/1/mcp", pool=pool)
            two = LeanHttp(f"{base}/s/2/mcp", pool=pool)
            alone = LeanHttp(f"{base}/s/3/mcp")  # no pool: its own connection
            assert (await one.post(b"{}", {})).body == OK_BODY
            assert (await two.post(b"{}", {})).body == OK_BODY
            assert (await alone.post(b"{}", {})).body == OK_BODY
            with pytest.raises(TransportError) as failed:
                await two.post(b"{}", {}, idempotent=False)
            await one.aclose()
            await two.aclose()
            await alone.aclose()
            pool.close_all()
            return list(served), str(failed.value)

    served_by, message = asyncio.run(scenario())
    assert served_by == [1, 1, 2, 1]
    assert "/s/2/mcp" in message and "/s/1/mcp" not in message


def test_a_transport_with_an_address_check_keeps_its_connections_out_of_a_shared_pool() -> None:
    """A webhook target's connection was judged for that target's host alone."""

    async def scenario() -> tuple[int, list[int]]:
        async with serve(keep_alive) as (url, served):
            pool = lean_module.IdlePool(max_idle=8)
            checked = LeanHttp(url, pool=pool, address_check=lambda address: None)
            assert (await checked.post(b"{}", {})).body == OK_BODY
            assert (await checked.post(b"{}", {})).body == OK_BODY
            kept = len(pool)
            await checked.aclose()
            return kept, served

    assert asyncio.run(scenario()) == (0, [1, 1])
