"""What an open link keeps for its session's life: a daemon holds thousands of links, so each
byte a link keeps is thousands (docs/benchmarks.md, issue 37).

A link is run in memory here: its server answers through :class:`MemoryTransport` (discover,
a listen stream that stays open, reads) and its store is a stand-in that records the reads."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import AsyncIterator
from typing import Any, cast

from service.daemon.config import Settings
from service.daemon.link import ServerLink
from service.daemon.linkstatus import LinkState
from service.mcp import wire
from service.mcp.transports.base import Answer
from service.mcp.transports.memory import MemoryStream, MemoryTransport
from service.store import Store
from service.store.linkstate import Acknowledgement

URL = "http://mcp.test/mcp"
URIS = [f"test://doc/{i}" for i in range(3)]
MARKER = "a-server-info-name-only-the-discover-answer-has"


class _Store:
    """The store calls an open link makes, answered in memory."""

    def __init__(self) -> None:
        self.reads: list[int] = []
        self.generation = 0

    async def stored_discover(self, server_id: int) -> str | None:
        return None

    async def listen_acknowledged(
        self, server_id: int, generation: int, changes: list[Any], discovered: str | None
    ) -> Acknowledgement:
        self.generation = generation + 1
        return Acknowledgement(self.generation, [], frozenset(range(len(URIS))))

    def submit_read(self, subscription_id: int, *args: Any, **kwargs: Any) -> asyncio.Future[None]:
        """Committed at once (nothing new: the link's reader sees no revision)."""
        self.reads.append(subscription_id)
        committed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        committed.set_result(None)
        return committed


class _Server:
    """Discover (with a server info only its answer carries), listen, read."""

    def __init__(self) -> None:
        self.frames: asyncio.Queue[bytes] = asyncio.Queue()

    async def __call__(self, content: bytes, headers: dict[str, str]) -> Answer | MemoryStream:
        request = json.loads(content)
        method, rid = request["method"], request["id"]
        if method == wire.DISCOVER:
            result: dict[str, Any] = {
                "supportedVersions": [wire.PROTOCOL_VERSION],
                "capabilities": {"resources": {"subscribe": True}},
                "_meta": {wire.META_SERVER_INFO: {"name": MARKER, "version": "1"}},
            }
            return _json({"jsonrpc": "2.0", "id": rid, "result": result})
        if method == wire.LISTEN:
            honored = request["params"]["notifications"]
            params = {"_meta": {wire.META_SUBSCRIPTION_ID: rid}, "notifications": honored}
            ack = {"jsonrpc": "2.0", "method": wire.ACKNOWLEDGED, "params": params}
            await self.frames.put(b"data: " + json.dumps(ack).encode() + b"\n\n")
            return MemoryStream(200, {"content-type": "text/event-stream"}, self._stream())
        uri = request["params"]["uri"]
        contents = [{"uri": uri, "mimeType": "text/plain", "text": "x"}]
        return _json({"jsonrpc": "2.0", "id": rid, "result": {"contents": contents}})

    async def _stream(self) -> AsyncIterator[bytes]:
        while True:
            yield await self.frames.get()


def _json(message: dict[str, Any]) -> Answer:
    return Answer(200, {"content-type": "application/json"}, json.dumps(message).encode())


async def _open_link() -> tuple[ServerLink, _Store]:
    """A link open on ``URIS``, every first read stored."""
    store = _Store()
    server = _Server()
    link = ServerLink(
        1,
        URL,
        cast(Store, store),
        Settings(),
        lambda url: MemoryTransport(url, server),
        asyncio.Semaphore(4),
        {},
    )
    for i, uri in enumerate(URIS):
        link.want(uri, i)
    link.start()
    async with asyncio.timeout(10):
        while link.state is not LinkState.OPEN or len(store.reads) < len(URIS):
            await asyncio.sleep(0.01)
    return link, store


def test_an_open_link_keeps_the_discovers_resources_capability_not_its_answer() -> None:
    async def run() -> tuple[list[dict[str, Any]], Any, dict[str, Any] | None]:
        link, _ = await _open_link()
        try:
            gc.collect()
            kept = [o for o in gc.get_objects() if isinstance(o, dict) and o.get("name") == MARKER]
            return kept, link._client and link._client.discovered, link.capabilities
        finally:
            await link.stop()

    kept, client_kept, capabilities = asyncio.run(run())
    assert capabilities == {"subscribe": True}, "what wait and the status show"
    assert client_kept is None
    assert kept == [], "the parsed discover answer outlived the start of the session"


def test_an_open_links_snapshot_shares_the_links_sets() -> None:
    async def run() -> tuple[bool, bool, list[str], list[str]]:
        link, _ = await _open_link()
        try:
            snapshot = link.snapshot()
            status = link.status()
            return (
                snapshot.honored is link.machine.honored,
                snapshot.wanted is link.machine.honored,
                status["honoredUris"],
                status["uris"],
            )
        finally:
            await link.stop()

    honored_shared, wanted_shared, honored, uris = asyncio.run(run())
    assert honored_shared and wanted_shared, "a copy of each set per link in the status cache"
    assert honored == uris == sorted(URIS)
