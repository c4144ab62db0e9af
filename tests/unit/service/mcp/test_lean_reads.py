"""The lean transport reads its sockets into a buffer of its own (a buffered protocol):
asyncio reads a plain protocol with ``recv(256 KiB)``, a fresh 256 KiB object per read (an
mmap, an mremap and a munmap for every 300-byte answer of ``probe --follow``). The buffer is
shared by the thread's connections, so answers that arrive in many reads, and on several
connections at once, must still come out whole and each on its own connection.

The server is a raw asyncio server on 127.0.0.1 (port 0): each request's JSON body names the
answer's size; an answer larger than the buffer arrives in several reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tracemalloc
from collections.abc import AsyncIterator

import pytest

from service.mcp.transports.lean import READ_BUFFER_BYTES, LeanHttp

pytestmark = pytest.mark.anyio


def body_of(tag: str, size: int) -> bytes:
    unit = tag.encode()
    return (unit * (size // len(unit) + 1))[:size]


class Answering(asyncio.BufferedProtocol):
    """The server's side of a connection: a buffered protocol too, so that what the test
    measures is the client's allocations (the server runs in the same process)."""

    def __init__(self) -> None:
        self.buffer = bytearray(4096)
        self.pending = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> bytearray:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.pending += self.buffer[:nbytes]
        while b"\r\n\r\n" in self.pending:
            head, _, rest = bytes(self.pending).partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            if len(rest) < length:
                return
            asked = json.loads(rest[:length])
            self.pending = bytearray(rest[length:])
            body = body_of(asked["tag"], asked["size"])
            assert self.transport is not None
            self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body))
            self.transport.write(body)


@contextlib.asynccontextmanager
async def serve() -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Answering, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.close()


async def ask(http: LeanHttp, tag: str, size: int) -> bytes:
    content = json.dumps({"tag": tag, "size": size}).encode()
    answer = await http.post(content, {"content-type": "application/json"})
    return answer.body


async def test_small_answers_allocate_no_read_buffer_per_read() -> None:
    async with serve() as url:
        http = LeanHttp(url)
        try:
            assert await ask(http, "warm", 300) == body_of("warm", 300)
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                for n in range(20):
                    assert await ask(http, f"n{n}", 300) == body_of(f"n{n}", 300)
                peak = tracemalloc.get_traced_memory()[1] - before
            finally:
                tracemalloc.stop()
        finally:
            await http.aclose()
    assert peak < 128 * 1024, f"{peak} bytes at once for 300-byte answers"


async def test_answers_larger_than_the_buffer_on_several_connections_at_once() -> None:
    size = 3 * READ_BUFFER_BYTES + 123
    async with serve() as url:
        clients = [LeanHttp(url) for _ in range(3)]
        try:
            bodies = await asyncio.gather(
                *(ask(http, tag, size) for http, tag in zip(clients, "abc", strict=True))
            )
        finally:
            for http in clients:
                await http.aclose()
    assert bodies == [body_of(tag, size) for tag in "abc"]
