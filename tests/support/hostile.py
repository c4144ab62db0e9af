"""A small hostile MCP server: each URL path is one attack.

Raw asyncio over TCP rather than an ASGI app, because the attacks are about bytes an
honest framework would never send: stacked ``Content-Encoding``, a 200,000-deep frame, a
body trickled one byte at a time, notifications as fast as TCP takes them. Every response
closes its connection (no keep-alive), so each request is its own little story.

``http://127.0.0.1:PORT/<mode>/mcp`` speaks MCP 2026-07-28 (discover, list, read, listen)
with one resource, ``hostile://<mode>/doc``; ``<mode>`` picks the misbehaviour:

==================  ==========================================================================
``healthy``         behaves (a control)
``flood``           after the ack: FLOOD notifications, half for the doc (coalescible), half
                    for distinct unsubscribed URIs; then the text becomes ``final`` + one more
``keepalive-flood`` after the ack: FLOOD keep-alive comments, then ``final`` + a notification
``bomb``            reads answer ``Content-Encoding: gzip, gzip`` inflating to BOMB_MB MiB
``bomb1``           reads answer one gzip layer inflating to BOMB_MB MiB
``deep``            after the ack: one DEEP-deep JSON frame
``deep-read``       reads answer a DEEP-deep JSON body
``oversize``        after the ack: one frame of OVERSIZE_MB MiB
``trickle``         after the ack: one byte per TRICKLE_S of a frame that never ends
``trickle-discover`` every answer trickles one byte per TRICKLE_S and never ends
``wrong-ids``       reads answer with another id; notifications carry another subscriptionId
``no-ack``          listen streams send keep-alives but never acknowledge
``flaky``           every read of a new text fails with -32603 FLAKY times, then succeeds
``notfound``        reads answer -32602 (unknown URI)
``gzip``            behaves, but every JSON answer is gzipped (one layer) whatever the
                    request's ``Accept-Encoding`` says (``identity`` included)
``deflate``         the same with raw deflate (no zlib wrapper), as some servers send it
``sse-read``        reads answer ``text/event-stream`` with one event of OVERSIZE_MB MiB
``hang-read``       reads are never answered (the connection stays open, silent)
``second-ack``      listen streams send the acknowledgement twice
``second-ack-late`` the same, the second 0.2 s after the first (another read for the client)
``wrong-ack-id``    the acknowledgement carries another subscriptionId (reads behave)
``wrong-listen-id`` the listen is answered with a JSON-RPC error for another request id
``huge-header``     every answer carries a HUGE_HEADER_KB KiB response header
``echo``            discover behaves; listens and reads are refused with a JSON-RPC error
                    whose message and data echo the request (its target with the query, its
                    ``Authorization`` header, and the credentials in it decoded), as servers
                    that quote their request in errors do; a path's query is ignored for
                    routing (``/echo/mcp?token=…``)
==================  ==========================================================================

``GET`` on any path naming ``bomb``, ``bomb1`` or ``deep-read`` (OAuth discovery: the RFC 9728
probe and the well-known documents) answers with that mode's read attack.

Control (tests): ``POST /control/set`` ``{"mode", "text"}`` sets the doc's text and notifies
open listen streams of that mode; ``GET /control/stats`` returns counters.
Knobs are env vars ``HOSTILE_<NAME>`` (FLOOD, BOMB_MB, DEEP, OVERSIZE_MB, TRICKLE_S, FLAKY,
KEEPALIVE_S, HUGE_HEADER_KB). Run: ``python -m tests.support.hostile`` (prints ``listening on URL``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import gzip
import json
import os
import re
import sys
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.mcp import wire
from tests.support.process import ServerProcess

REPO_ROOT = Path(__file__).resolve().parents[2]
_LISTENING = re.compile(r"^listening on (?P<scheme>https?)://127\.0\.0\.1:(?P<port>\d+)$")


def _knob(name: str, default: float) -> float:
    return float(os.environ.get(f"HOSTILE_{name}", default))


FLOOD = int(_knob("FLOOD", 20000))
BOMB_MB = int(_knob("BOMB_MB", 512))
DEEP = int(_knob("DEEP", 200_000))
OVERSIZE_MB = _knob("OVERSIZE_MB", 5)
TRICKLE_S = _knob("TRICKLE_S", 0.05)
FLAKY = int(_knob("FLAKY", 2))
KEEPALIVE_S = _knob("KEEPALIVE_S", 0.5)
HUGE_HEADER_KB = int(_knob("HUGE_HEADER_KB", 1024))


def frame(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"


def gzip_repeating(head: bytes, block: bytes, count: int, tail: bytes) -> bytes:
    """gzip of ``head + block * count + tail``, built in milliseconds, not seconds.

    After a full flush the compressor forgets its history, so every flushed copy of the
    same block compresses to the same bytes: compress it once and repeat the result.
    """
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    first = packer.compress(head) + packer.flush(zlib.Z_FULL_FLUSH)
    segment = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    last = packer.compress(tail) + packer.flush()
    crc = zlib.crc32(head)
    for _ in range(count):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(tail, crc)
    size = (len(head) + len(block) * count + len(tail)) & 0xFFFFFFFF
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    trailer = crc.to_bytes(4, "little") + size.to_bytes(4, "little")
    return header + first + segment * count + last + trailer


def bomb_body(request_id: Any, layers: int, megabytes: int) -> bytes:
    """A read answer whose JSON text is ``megabytes`` MiB of ``A``, gzipped ``layers`` times."""
    head = json.dumps({"jsonrpc": "2.0", "id": request_id})[:-1].encode()
    head += b', "result": {"contents": [{"uri": "hostile://bomb/doc", "text": "'
    body = gzip_repeating(head, b"A" * (1 << 20), megabytes, b'"}]}}')
    for _ in range(layers - 1):
        body = gzip.compress(body, 9)
    return body


_CODING: contextvars.ContextVar[str | None] = contextvars.ContextVar("coding", default=None)
_ECHO: contextvars.ContextVar[str] = contextvars.ContextVar("echo", default="")


def _echo_of(target: str, authorization: str) -> str:
    """What ``echo`` answers: the request as a careless server quotes it in an error."""
    scheme, _, value = authorization.partition(" ")
    plain = value
    if scheme.lower() == "basic":
        with contextlib.suppress(ValueError):
            plain = base64.b64decode(value).decode("utf-8", "replace")
    return f"internal error at {target} auth={authorization} (credentials {plain})"


"""The content coding the current request's JSON answers get (modes ``gzip``/``deflate``)."""
_HUGE_HEADER: contextvars.ContextVar[bool] = contextvars.ContextVar("huge_header", default=False)
"""Mode ``huge-header``: every answer carries one oversized header line."""


def encode(body: bytes, coding: str) -> bytes:
    if coding == "gzip":
        return gzip.compress(body)
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)  # raw deflate
    return packer.compress(body) + packer.flush()


class Doc:
    def __init__(self) -> None:
        self.text = "initial"
        self.version = 0
        self.failures_left = FLAKY


class Hostile:
    def __init__(self) -> None:
        self.docs: dict[str, Doc] = defaultdict(Doc)
        self.streams: dict[str, set[asyncio.Queue[str]]] = defaultdict(set)
        self.stats: dict[str, int] = defaultdict(int)
        self._bombs: dict[int, bytes] = {}

    # ---- HTTP plumbing --------------------------------------------------------------------
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    name, value = line.split(":", 1)
                    headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            _ECHO.set(_echo_of(path, headers.get("authorization", "")))
            await self.route(method, path, body, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    @staticmethod
    async def respond(
        writer: asyncio.StreamWriter,
        body: bytes,
        *,
        status: int = 200,
        content_type: str = "application/json",
        extra: str = "",
    ) -> None:
        coding = _CODING.get()
        if coding is not None and content_type == "application/json":
            body, extra = encode(body, coding), extra + f"Content-Encoding: {coding}\r\n"
        if _HUGE_HEADER.get():
            extra += "X-Padding: " + "h" * (HUGE_HEADER_KB << 10) + "\r\n"
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n".encode()
            + body
        )
        await writer.drain()

    async def route(
        self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter
    ) -> None:
        if path == "/control/stats":
            await self.respond(writer, json.dumps(self.stats).encode())
            return
        if path == "/control/set":
            order = json.loads(body)
            doc = self.docs[order["mode"]]
            doc.text, doc.version, doc.failures_left = order["text"], doc.version + 1, FLAKY
            for queue in self.streams[order["mode"]]:
                queue.put_nowait(f"hostile://{order['mode']}/doc")
            await self.respond(writer, b"{}")
            return
        parts = path.partition("?")[0].strip("/").split("/")
        if method == "GET" and {"bomb", "bomb1", "deep-read"} & set(parts):
            # OAuth discovery (RFC 9728 probe and well-known documents) gets the same attacks.
            mode = next(m for m in ("bomb1", "bomb", "deep-read") if m in parts)
            await self.read(mode, None, f"hostile://{mode}/doc", writer)
            return
        if len(parts) != 2 or parts[1] != "mcp" or method != "POST":
            await self.respond(writer, b"not found", status=404, content_type="text/plain")
            return
        mode = parts[0]
        if mode in ("gzip", "deflate"):
            _CODING.set(mode)
        if mode == "huge-header":
            _HUGE_HEADER.set(True)
        message = json.loads(body)
        self.stats[f"{mode}.{message.get('method')}"] += 1
        if mode == "trickle-discover":
            await self.trickle(writer, b'{"jsonrpc": "2.0", "id": ' + b"1" * 10_000)
            return
        rpc = message.get("method")
        rid = message.get("id")
        if mode == "echo" and rpc in (wire.RESOURCES_READ, wire.LISTEN):
            echo = _ECHO.get()
            error = wire.error_response(rid, wire.INTERNAL_ERROR, echo, {"request": echo})
            await self.respond(writer, json.dumps(error).encode())
            return
        if rpc == wire.DISCOVER:
            result = {
                "supportedVersions": [wire.PROTOCOL_VERSION],
                "capabilities": {"resources": {"subscribe": True}},
                "_meta": {wire.META_SERVER_INFO: {"name": "hostile", "version": "0"}},
            }
            await self.answer(writer, rid, result)
        elif rpc == wire.RESOURCES_LIST:
            await self.answer(writer, rid, {"resources": [{"uri": f"hostile://{mode}/doc"}]})
        elif rpc == wire.RESOURCES_READ:
            await self.read(mode, rid, message["params"]["uri"], writer)
        elif rpc == wire.LISTEN:
            await self.listen(mode, rid, message["params"]["notifications"], writer)
        else:
            await self.respond(
                writer, json.dumps(wire.error_response(rid, wire.METHOD_NOT_FOUND, "no")).encode()
            )

    async def answer(self, writer: asyncio.StreamWriter, rid: Any, result: dict[str, Any]) -> None:
        await self.respond(writer, json.dumps(wire.result_response(rid, result)).encode())

    async def trickle(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000\r\nConnection: close\r\n\r\n"
        )
        for byte in data:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(TRICKLE_S)

    # ---- reads ----------------------------------------------------------------------------
    async def read(self, mode: str, rid: Any, uri: str, writer: asyncio.StreamWriter) -> None:
        doc = self.docs[mode]
        if mode in ("bomb", "bomb1"):
            layers = 2 if mode == "bomb" else 1
            # Built once (about 2 s for 512 MiB) with id null: a client that inflated it all
            # would refuse it for the id, but by then the damage is done.
            if layers not in self._bombs:
                self._bombs[layers] = await asyncio.to_thread(bomb_body, None, layers, BOMB_MB)
            encoding = ", ".join(["gzip"] * layers)
            await self.respond(
                writer, self._bombs[layers], extra=f"Content-Encoding: {encoding}\r\n"
            )
            return
        if mode == "deep-read":
            await self.respond(writer, b"[" * DEEP + b"]" * DEEP)
            return
        if mode == "sse-read":
            big = b"data: " + b"x" * int(OVERSIZE_MB * (1 << 20)) + b"\n\n"
            await self.respond(writer, big, content_type="text/event-stream")
            return
        if mode == "hang-read":
            self.stats["hang-read.hung"] += 1
            await asyncio.Event().wait()  # never answered; ends when the client goes away
        if mode == "wrong-ids":
            rid = f"not-{rid}"
        if mode == "notfound":
            error = wire.error_response(rid, wire.INVALID_PARAMS, f"Unknown resource: {uri}")
            await self.respond(writer, json.dumps(error).encode())
            return
        if mode == "flaky" and doc.failures_left > 0:
            doc.failures_left -= 1
            self.stats["flaky.failed"] += 1
            error = wire.error_response(rid, wire.INTERNAL_ERROR, "transient backend error")
            await self.respond(writer, json.dumps(error).encode())
            return
        self.stats[f"{mode}.served"] += 1
        await self.answer(writer, rid, {"contents": [{"uri": uri, "text": doc.text}]})

    # ---- listen streams -------------------------------------------------------------------
    async def listen(
        self, mode: str, rid: Any, requested: dict[str, Any], writer: asyncio.StreamWriter
    ) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Cache-Control: no-store\r\nConnection: close\r\n\r\n"
        )
        tag = rid if mode != "wrong-ids" else f"other-{rid}"
        meta = {wire.META_SUBSCRIPTION_ID: tag}
        uris = list(requested.get("resourceSubscriptions") or [])
        if mode == "no-ack":
            while True:
                writer.write(b": waiting\n\n")
                await writer.drain()
                await asyncio.sleep(KEEPALIVE_S)
        if mode == "wrong-listen-id":
            writer.write(frame(wire.error_response(f"other-{rid}", wire.INTERNAL_ERROR, "no")))
            await writer.drain()
            return
        ack_meta = {wire.META_SUBSCRIPTION_ID: rid if mode != "wrong-ack-id" else f"other-{rid}"}
        ack = wire.notification(
            wire.ACKNOWLEDGED, {"_meta": ack_meta, "notifications": {"resourceSubscriptions": uris}}
        )
        writer.write(frame(ack))
        if mode == "second-ack":
            writer.write(frame(ack))
        elif mode == "second-ack-late":  # the same, in a later TCP segment than the first
            await writer.drain()
            await asyncio.sleep(0.2)
            writer.write(frame(ack))
        await writer.drain()
        doc_uri = f"hostile://{mode}/doc"

        def updated(uri: str) -> bytes:
            return frame(wire.notification(wire.RESOURCE_UPDATED, {"uri": uri, "_meta": meta}))

        if mode == "flood":
            doc = self.docs[mode]
            doc.text = "flooding"
            for n in range(FLOOD):
                writer.write(updated(doc_uri if n % 2 else f"hostile://flood/other/{n}"))
                if n % 64 == 0:
                    await writer.drain()
            doc.text = "final"
            writer.write(updated(doc_uri))
            await writer.drain()
            self.stats["flood.done"] += 1
        elif mode == "keepalive-flood":
            for n in range(FLOOD):
                writer.write(b": ka\n")
                if n % 256 == 0:
                    await writer.drain()
            self.docs[mode].text = "final"
            writer.write(updated(doc_uri))
            await writer.drain()
            self.stats["keepalive-flood.done"] += 1
        elif mode == "deep":
            deep = b"[" * DEEP + b"]" * DEEP
            writer.write(b"data: " + deep + b"\n\n")
        elif mode == "oversize":
            writer.write(b"data: " + b"x" * int(OVERSIZE_MB * (1 << 20)) + b"\n\n")
        elif mode == "trickle":
            writer.write(b"data: ")
            await writer.drain()
            while True:
                writer.write(b"x")
                await writer.drain()
                await asyncio.sleep(TRICKLE_S)
        elif mode == "wrong-ids":
            writer.write(updated(doc_uri))
        await writer.drain()
        queue: asyncio.Queue[str] = asyncio.Queue()
        self.streams[mode].add(queue)
        try:
            while True:
                try:
                    uri = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    writer.write(b": keep-alive\n\n")
                else:
                    writer.write(updated(uri))
                await writer.drain()
        finally:
            self.streams[mode].discard(queue)


async def serve(port: int = 0) -> None:
    hostile = Hostile()
    server = await asyncio.start_server(hostile.handle, "127.0.0.1", port, limit=1 << 20)
    bound = server.sockets[0].getsockname()[1]
    print(f"listening on http://127.0.0.1:{bound}", flush=True)
    async with server:
        await server.serve_forever()


class HostileServer(ServerProcess):
    """The hostile server as a subprocess (so its floods do not share our interpreter),
    started and stopped by the shared :class:`tests.support.process.ServerProcess`.
    ``port`` 0: any free port; a given port brings a stopped server back at its old address."""

    def __init__(self, env: dict[str, str] | None = None, port: int = 0) -> None:
        super().__init__(
            [sys.executable, "-m", "tests.support.hostile", str(port)],
            {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})},
            _LISTENING,
        )

    def url(self, mode: str) -> str:
        return f"{self.base_url}/{mode}/mcp"

    def set(self, mode: str, text: str) -> None:
        httpx.post(
            f"{self.base_url}/control/set", json={"mode": mode, "text": text}
        ).raise_for_status()

    def stats(self) -> dict[str, int]:
        result: dict[str, int] = httpx.get(f"{self.base_url}/control/stats").json()
        return result


@pytest.fixture
def hostile_factory() -> Iterator[Callable[..., HostileServer]]:
    servers: list[HostileServer] = []

    def start(env: dict[str, str] | None = None, port: int = 0) -> HostileServer:
        server = HostileServer(env, port).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def peak_rss_kib(pid: int) -> int:
    """``VmHWM`` (peak resident set) of a live process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmHWM for {pid}")


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
