"""A load-generating MCP 2026-07-28 server cut to the bone, so benches measure the client.

The lab server (FastAPI, validation, logs) spends ~2.5 ms of CPU per change it notifies and
serves back; on a 2-core machine that hides the subscriber's own cost. This peer answers the
few methods a subscriber uses (``server/discover``, ``resources/list``, ``resources/read``,
``subscriptions/listen``) from precomputed byte templates on a raw :class:`asyncio.Protocol`
(no HTTP library, no framework, no logging), and generates the changes itself, so one change
costs it a dict update plus one pre-built SSE chunk per listening stream.

Run: ``python -m bench.fastpeer [--port 0] [--keepalive S] [--max-streams-per-server N]``;
it prints ``listening on http://127.0.0.1:P/mcp``. Any path not under ``/ctl/`` is the MCP
endpoint (so ``/mcp?link=N`` or ``/s/N/mcp`` URLs are distinct servers to a client but one
peer: ``bench.daemonscale`` serves 10,000 servers from a few of these). Each stream gets a
``: keepalive`` comment every ``--keepalive`` seconds, the streams spread evenly over that
interval as independent servers' timers would be (not all in one burst). A server (the
request target, path and query) holds at most ``--max-streams-per-server`` listen streams at
once, as the lab's ``MCP_TEST_MAX_SUBSCRIPTIONS`` bounds a lab: one more is answered 503.
Control, JSON over HTTP/1.1:

* ``POST /ctl/run`` ``{"uris": [...], "count": N, "rate": R, "prefix": "p"}``: change
  ``uris[i % len]`` to text ``f"{prefix}{i}"`` for i < N, R per second (0: as fast as the
  loop allows, yielding every 32 changes); answers at once; ``GET /ctl/state`` tells when done.
* ``GET /ctl/state``: ``{"streams", "reads", "changes", "running"}``.
* ``GET /ctl/log``: ``[[uri, text, unix_time_sent], ...]`` of the last run.
* ``PUT /ctl/resource`` ``{"uri", "text"}``: one change now (notifies); answers with its time.

Only loopback; the process ends on SIGTERM/SIGINT or when stdin closes (so a crashed bench
never leaves it behind).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from typing import Any

PROTOCOL_VERSION = "2026-07-28"
SERVER_INFO = {"name": "bench-fastpeer", "version": "1"}
_META_SERVER = {"io.modelcontextprotocol/serverInfo": SERVER_INFO}
KEEPALIVE_S = 10.0
KEEPALIVE_TICK_S = 0.25
"""The keep-alive timer's step: each tick writes to the streams whose turn it is."""
_SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)
_KEEPALIVE_CHUNK = b"d\r\n: keepalive\n\n\r\n"


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def http_response(body: bytes, status: str = "200 OK", ctype: bytes = b"application/json") -> bytes:
    return (
        b"HTTP/1.1 " + status.encode() + b"\r\ncontent-type: " + ctype + b"\r\ncontent-length: "
        + str(len(body)).encode() + b"\r\n\r\n" + body
    )  # fmt: skip


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def sse_chunk(message: bytes) -> bytes:
    return chunk(b"event: message\ndata: " + message + b"\n\n")


class Peer:
    """Resource texts, open listen streams and counters; shared by every connection."""

    def __init__(self, max_streams_per_server: int = 0) -> None:
        self.max_streams_per_server = max_streams_per_server
        self.per_server: dict[str, int] = {}
        """Open listen streams by request target (one server per target)."""
        self.refused = 0
        self.all_streams: dict[Stream, None] = {}
        """Every open stream, in the order opened (the keep-alive timer's round)."""
        self.texts: dict[str, str] = {}
        self.fragments: dict[str, bytes] = {}
        """uri -> the ``contents`` JSON of its read result, rebuilt only when it changes."""
        self.streams: dict[str, set[Stream]] = {}
        self.stream_count = 0
        self.reads = 0
        self.changes = 0
        self.running = False
        self.sent: list[tuple[str, str, float]] = []

    def fragment(self, uri: str) -> bytes:
        frag = self.fragments.get(uri)
        if frag is None:
            text = self.texts.setdefault(uri, "v0")
            frag = _json([{"uri": uri, "mimeType": "text/plain", "text": text}])
            self.fragments[uri] = frag
        return frag

    def change(self, uri: str, text: str) -> float:
        self.texts[uri] = text
        self.fragments.pop(uri, None)
        self.changes += 1
        for stream in self.streams.get(uri, ()):
            stream.notify(uri)
        return time.time()

    async def run(self, uris: list[str], count: int, rate: float, prefix: str) -> None:
        self.running = True
        self.sent = []
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            for i in range(count):
                if rate > 0:
                    delay = start + i / rate - loop.time()
                    if delay > 0:
                        await asyncio.sleep(delay)
                elif i % 32 == 31:
                    await asyncio.sleep(0)
                uri, text = uris[i % len(uris)], f"{prefix}{i}"
                self.sent.append((uri, text, self.change(uri, text)))
        finally:
            self.running = False


class Stream:
    """One ``subscriptions/listen`` response: pre-built notification chunks per URI."""

    def __init__(
        self, transport: asyncio.Transport, listen_id: Any, uris: list[str], target: str = ""
    ) -> None:
        self.transport = transport
        self.target = target
        meta = {"io.modelcontextprotocol/subscriptionId": listen_id}
        self.frames = {
            uri: sse_chunk(
                _json(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/resources/updated",
                        "params": {"_meta": meta, "uri": uri},
                    }
                )
            )
            for uri in uris
        }
        self.ack = sse_chunk(
            _json(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/subscriptions/acknowledged",
                    "params": {"_meta": meta, "notifications": {"resourceSubscriptions": uris}},
                }
            )
        )

    def notify(self, uri: str) -> None:
        self.transport.write(self.frames[uri])


class Connection(asyncio.Protocol):
    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.stream: Stream | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self.stream is not None:
            for uri in self.stream.frames:
                self.peer.streams.get(uri, set()).discard(self.stream)
            self.peer.stream_count -= 1
            self.peer.all_streams.pop(self.stream, None)
            left = self.peer.per_server.get(self.stream.target, 1) - 1
            if left > 0:
                self.peer.per_server[self.stream.target] = left
            else:
                self.peer.per_server.pop(self.stream.target, None)
            self.stream = None

    def data_received(self, data: bytes) -> None:
        if self.stream is not None:
            return  # a listen stream: the client only ever closes it
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            body = bytes(self.buffer[end + 4 : end + 4 + length])
            del self.buffer[: end + 4 + length]
            method, target = head.split(" ", 2)[:2]
            self.handle(method, target, body)
            if self.stream is not None:
                return

    def handle(self, method: str, target: str, body: bytes) -> None:
        assert self.transport is not None
        if target.startswith("/ctl/"):
            self.transport.write(http_response(self.control(method, target, body)))
            return
        try:
            message = json.loads(body)
            rpc, rid, params = message["method"], message.get("id"), message.get("params") or {}
        except (ValueError, KeyError, TypeError):
            self.transport.write(http_response(b'{"error":"bad request"}', "400 Bad Request"))
            return
        head = b'{"jsonrpc":"2.0","id":' + _json(rid) + b',"result":'
        if rpc == "resources/read":
            self.peer.reads += 1
            result = (
                b'{"resultType":"complete","contents":' + self.peer.fragment(str(params["uri"]))
                + b',"ttlMs":0,"cacheScope":"private","_meta":' + _META_SERVER_JSON + b"}"
            )  # fmt: skip
        elif rpc == "subscriptions/listen":
            peer = self.peer
            held = peer.per_server.get(target, 0)
            if peer.max_streams_per_server and held >= peer.max_streams_per_server:
                peer.refused += 1
                payload = b'{"error":"too many listen streams for this server"}'
                self.transport.write(http_response(payload, "503 Service Unavailable"))
                return
            requested = params.get("notifications") or {}
            uris = [str(u) for u in requested.get("resourceSubscriptions") or []]
            stream = Stream(self.transport, rid, uris, target)
            for uri in uris:
                peer.fragment(uri)
                peer.streams.setdefault(uri, set()).add(stream)
            peer.stream_count += 1
            peer.per_server[target] = held + 1
            peer.all_streams[stream] = None
            self.stream = stream
            self.transport.write(_SSE_HEAD + stream.ack)
            return
        elif rpc == "server/discover":
            result = _DISCOVER
        elif rpc == "resources/list":
            listing = [{"uri": u, "name": u, "mimeType": "text/plain"} for u in self.peer.texts]
            result = _json({"resultType": "complete", "resources": listing, "_meta": _META_SERVER})
        else:
            error = {"code": -32601, "message": f"Method not found: {rpc}"}
            payload = b'{"jsonrpc":"2.0","id":' + _json(rid) + b',"error":' + _json(error) + b"}"
            self.transport.write(http_response(payload, "404 Not Found"))
            return
        self.transport.write(http_response(head + result + b"}"))

    def control(self, method: str, target: str, body: bytes) -> bytes:
        peer = self.peer
        if target.startswith("/ctl/run") and method == "POST":
            spec = json.loads(body)
            for uri in spec["uris"]:
                peer.fragment(uri)
            asyncio.get_running_loop().create_task(
                peer.run(spec["uris"], int(spec["count"]), float(spec["rate"]), spec["prefix"])
            )
            peer.running = True
            return b'{"started":true}'
        if target.startswith("/ctl/resource") and method == "PUT":
            spec = json.loads(body)
            return _json({"sentAt": peer.change(spec["uri"], spec["text"])})
        if target.startswith("/ctl/log"):
            return _json(peer.sent)
        return _json(
            {
                "streams": peer.stream_count,
                "servers": len(peer.per_server),
                "refused": peer.refused,
                "reads": peer.reads,
                "changes": peer.changes,
                "running": peer.running,
            }
        )


_META_SERVER_JSON = _json(_META_SERVER)
_DISCOVER = _json(
    {
        "resultType": "complete",
        "supportedVersions": [PROTOCOL_VERSION],
        "capabilities": {"resources": {"subscribe": True, "listChanged": False}},
        "ttlMs": 0,
        "cacheScope": "public",
        "_meta": _META_SERVER,
    }
)


async def serve(port: int, keepalive_s: float = KEEPALIVE_S, max_streams: int = 0) -> None:
    loop = asyncio.get_running_loop()
    peer = Peer(max_streams)
    server = await loop.create_server(lambda: Connection(peer), "127.0.0.1", port, backlog=1024)
    bound = server.sockets[0].getsockname()[1]
    print(f"listening on http://127.0.0.1:{bound}/mcp", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # stdin closing (the bench went away) also stops us
    loop.add_reader(sys.stdin.fileno(), lambda: stop.set() if not sys.stdin.read(1) else None)

    async def keepalive() -> None:
        # Stream k of the round gets its comment on tick k mod steps: every stream once per
        # interval, a 1/steps share of them per tick.
        steps = max(1, round(keepalive_s / KEEPALIVE_TICK_S))
        tick = 0
        while True:
            await asyncio.sleep(keepalive_s / steps)
            turn = tick % steps
            tick += 1
            for stream in list(peer.all_streams)[turn::steps]:
                stream.transport.write(_KEEPALIVE_CHUNK)

    ticker = loop.create_task(keepalive())
    await stop.wait()
    ticker.cancel()
    server.close()
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(server.wait_closed(), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--keepalive", type=float, default=KEEPALIVE_S, help="seconds")
    parser.add_argument(
        "--max-streams-per-server", type=int, default=0, help="0: no bound (the default)"
    )
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.keepalive, args.max_streams_per_server))


if __name__ == "__main__":
    main()
