"""An idle open link is one task: its own. Its listen stream is followed in the socket's
callback on the lean transport (``ListenStream.follow``), not by a reader task of its own: a
daemon holds thousands of idle links, and a task with its chain of coroutine frames was
~1.8 kB of each (docs/benchmarks.md, issue 37). An update still reaches the link's reads,
and a stream the server ends is listened again.

The server is a raw HTTP/1.1 server on 127.0.0.1 (port 0): discover and reads answered with
JSON on kept-alive connections, a listen answered with a chunked event stream the test
writes to."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import time
from collections.abc import AsyncIterator
from typing import Any, cast

from service.daemon.config import Settings
from service.daemon.link import ServerLink
from service.daemon.linkstatus import LinkState
from service.mcp import wire
from service.mcp.transports.lean import LeanHttp
from service.store import Store
from tests.support.poll import until_async
from tests.support.rawhttp import chunk, read_json_request, sse_frame
from tests.unit.service.daemon.test_link_memory import URIS, _Store


class _Peer:
    def __init__(self) -> None:
        self.streams: list[tuple[asyncio.StreamWriter, Any]] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(
            ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError
        ):
            while True:
                request = await read_json_request(reader)
                method, rid = request["method"], request["id"]
                if method == wire.LISTEN:
                    honored = request["params"]["notifications"]
                    params = {"_meta": {wire.META_SUBSCRIPTION_ID: rid}, "notifications": honored}
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                        b"transfer-encoding: chunked\r\n\r\n"
                        + chunk(_frame({"method": wire.ACKNOWLEDGED, "params": params}))
                    )
                    self.streams.append((writer, rid))
                    await reader.read()  # held until the client closes
                    return
                if method == wire.DISCOVER:
                    result: dict[str, Any] = {
                        "supportedVersions": [wire.PROTOCOL_VERSION],
                        "capabilities": {"resources": {"subscribe": True}},
                    }
                else:
                    uri = request["params"]["uri"]
                    result = {"contents": [{"uri": uri, "mimeType": "text/plain", "text": "x"}]}
                body = json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(body), body)
                )

    def update(self, uri: str) -> None:
        writer, rid = self.streams[-1]
        params = {"_meta": {wire.META_SUBSCRIPTION_ID: rid}, "uri": uri}
        writer.write(chunk(_frame({"method": wire.RESOURCE_UPDATED, "params": params})))

    def end(self) -> None:
        """End the current stream's body without a result: a lost stream."""
        writer, _ = self.streams[-1]
        writer.write(b"0\r\n\r\n")


def _frame(message: dict[str, Any]) -> bytes:
    return sse_frame({"jsonrpc": "2.0", **message})


@contextlib.asynccontextmanager
async def _peer() -> AsyncIterator[tuple[_Peer, str]]:
    peer = _Peer()
    server = await asyncio.start_server(peer.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield peer, f"http://127.0.0.1:{port}/mcp"
    finally:
        server.close()


def _others(mine: set[asyncio.Task[Any]]) -> set[asyncio.Task[Any]]:
    """The live tasks that are neither the test's nor the server's (one per connection)."""
    return {
        t
        for t in asyncio.all_tasks()
        if not t.done() and t not in mine and t.get_coro().__name__ != "serve"
    }


def test_an_idle_open_link_is_one_task_and_still_reads_and_relistens() -> None:
    async def run() -> None:
        async with _peer() as (peer, url):
            mine = {t for t in asyncio.all_tasks() if not t.done()}
            store = _Store()
            stats: dict[str, int] = {}
            link = ServerLink(
                1,
                url,
                cast(Store, store),
                Settings(),
                lambda url: LeanHttp(url),
                asyncio.Semaphore(4),
                stats,
            )
            for i, uri in enumerate(URIS):
                link.want(uri, i)
            link.start()
            try:
                await until_async(
                    "open, every first read stored",
                    lambda: link.state is LinkState.OPEN and len(store.reads) == len(URIS),
                )

                def idle_tasks() -> set[asyncio.Task[Any]]:
                    link.tick(time.monotonic())  # retires the reads' idle workers
                    return _others(mine)

                await until_async("the reads' workers retired", lambda: len(idle_tasks()) <= 1)
                assert _others(mine) == {link._task}
                assert link._task is not None
                chain = []
                coro: Any = link._task.get_coro()
                while inspect.iscoroutine(coro):
                    chain.append(coro.cr_code.co_name)
                    coro = coro.cr_await
                # The session awaited from the task's own coroutine: each frame in the chain
                # is kept by every idle link.
                assert chain == ["run", "_session", "_serve", "first_of"]

                peer.update(URIS[1])
                await until_async("the update was read", lambda: len(store.reads) > len(URIS))
                assert store.reads[-1] == 1

                peer.end()
                await until_async("listened again", lambda: stats.get("streams_opened_total") == 2)
                await until_async("the reads' workers retired", lambda: len(idle_tasks()) <= 1)
                assert _others(mine) == {link._task}
            finally:
                await link.stop()

    asyncio.run(run())
