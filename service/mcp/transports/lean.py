"""The lean transport: HTTP/1.1 POSTs on h11 over an asyncio protocol, keep-alive.

The daemon re-reads a resource for every update it is told about. Through httpx each of
those requests cost 1.2–1.6 ms of CPU on this project's bench machine (httpx's models and
auth flow, httpcore's pool, anyio's cancel scopes around every await) where the exchange
itself, h11 on a kept-alive socket, needs a fraction of that. So on plain ``http://`` URLs
with no proxy configured :func:`~service.mcp.transports.choose.make_transport` chooses this module
for *every* exchange of a client: requests, listen streams (:meth:`LeanHttp.open_stream`, a
POST whose answer is read piece by piece on a connection of its own that closing ends) and
webhook POSTs. The one-shot probe then never imports httpx (a third of its start-up), and an
idle listen stream costs nothing between keep-alive frames (httpcore re-registered each
socket with the selector around every frame: half of the daemon's idle CPU at 1,000 links).
TLS and proxies go through :mod:`service.mcp.transports.viahttpx`.

Theory of operation. One :class:`_Connection` is one socket: an ``asyncio.Protocol`` whose
``data_received`` keeps the bytes until the reader asks (:meth:`_Connection.next_event`, the
one read loop: h11 event, or more bytes into h11). Past :data:`HIGH_WATER` unread bytes the
socket stops being read, so a server flooding a listen stream fills its own send buffer
(back-pressure), as asyncio's ``StreamReader`` would; we do not use ``StreamReader`` because
telling whether a kept-alive connection received stray bytes while idle needs its private
buffer, where our protocol knows it.

Scope, on purpose: one origin per instance, POST only, ``Content-Length`` request bodies,
responses framed by h11 (length or chunked), a body cap on the decoded bytes. We ask for
``Accept-Encoding: identity``, but a server that compresses anyway (some frameworks and
proxies gzip every JSON answer) is still understood: one layer of gzip/deflate is undone
through :class:`~service.mcp.coding.LimitedBody`, the same bounded decoder as the httpx path,
so a bomb is refused the same way. A kept-alive connection the server closed while idle is
noticed before reuse, and an idempotent request that found such a connection dead before any
byte of the answer is sent again once on a fresh one.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Mapping
from urllib.parse import unquote, urlsplit

import h11

from service.mcp.coding import BodyRefused, BodyTooLarge, LimitedBody, codings
from service.mcp.errors import ProtocolViolation, TransportError
from service.mcp.transports.base import MAX_BODY_BYTES, Answer, invalid_host, lean_usable
from service.netguard import AddressCheck, connect_checked
from service.safetext import redact_urls

HIGH_WATER = 128 * 1024
"""Unread bytes past which the socket is paused (asyncio's StreamReader: 2 × its 64 KiB)."""

__all__ = ["BodyRefused", "LeanHttp", "LeanStream", "lean_usable"]


def _basic_auth(username: str | None, password: str | None) -> str | None:
    """The ``Authorization`` value for a URL's userinfo (percent-decoded), or None. Pure."""
    if username is None:
        return None
    pair = f"{unquote(username)}:{unquote(password or '')}".encode()
    return "Basic " + base64.b64encode(pair).decode("ascii")


def _error(kind: str, url: str, exc: BaseException) -> TransportError:
    detail = str(exc) or type(exc).__name__
    return TransportError(f"{kind} error talking to {redact_urls(url)}: {detail}", kind=kind)


class _Connection(asyncio.Protocol):
    """One socket and its h11 state; the bytes it received wait here until read."""

    __slots__ = (
        "_drained",
        "_eof",
        "_lost",
        "_paused",
        "_received",
        "_size",
        "_waiter",
        "h11",
        "received_bytes",
        "transport",
        "url",
    )

    def __init__(self, url: str) -> None:
        self.url = url
        self.h11 = h11.Connection(h11.CLIENT)
        self.transport: asyncio.Transport | None = None
        self._received: list[bytes] = []
        self._size = 0
        self._paused = False
        self._eof = False
        self._lost: Exception | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self.received_bytes = 0
        """Bytes read in the current exchange: none means a reused connection was dead."""

    # ---- asyncio.Protocol -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._received.append(data)
        self._size += len(data)
        if self._size > HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._lost = exc
        self._wake()
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    def pause_writing(self) -> None:
        if self._drained is None:
            self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # ---- used by LeanHttp -------------------------------------------------------------
    async def write(self, data: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("connection closed")
        self.transport.write(data)
        if self._drained is not None:
            await self._drained

    async def _receive(self) -> bytes:
        """The bytes received so far (waiting for some); ``b""`` at the end of the stream."""
        while not self._received:
            if self._eof:
                if self._lost is not None:
                    raise self._lost
                return b""
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        data = b"".join(self._received)  # one chunk: the same object, no copy
        self._received.clear()
        self._size = 0
        self.received_bytes += len(data)
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return data

    async def next_event(self) -> h11.Event:
        """The next h11 event of the answer, reading as much as that takes (the one read
        loop). A broken or closed connection raises :class:`TransportError` (kind read)."""
        machine = self.h11
        try:
            while True:
                event = machine.next_event()
                if event is h11.NEED_DATA:
                    machine.receive_data(await self._receive())
                    continue
                if type(event) is h11.ConnectionClosed:
                    raise ConnectionError("server closed the connection")
                return event  # type: ignore[return-value]  # not a sentinel past the checks
        except (OSError, h11.RemoteProtocolError) as exc:
            raise _error("read", self.url, exc) from exc

    def idle_ok(self) -> bool:
        """Still usable after sitting idle: not closed, no EOF or stray bytes from them."""
        return (
            self.transport is not None
            and not self.transport.is_closing()
            and not self._eof
            and not self._received
        )

    @property
    def is_closed(self) -> bool:
        return self.transport is None or self.transport.is_closing()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class LeanStream:
    """An answer read as it arrives (:class:`~service.mcp.transports.base.StreamAnswer`)."""

    __slots__ = ("_conn", "headers", "status")

    def __init__(self, conn: _Connection, status: int, headers: dict[str, str]) -> None:
        self._conn = conn
        self.status = status
        self.headers: Mapping[str, str] = headers

    async def chunks(self) -> AsyncIterator[bytes]:
        while True:
            event = await self._conn.next_event()
            if type(event) is h11.Data:
                yield bytes(event.data)
            elif type(event) is h11.EndOfMessage:
                return

    async def read_all(self, limit: int) -> bytes:
        body = LimitedBody(self.headers.get("content-encoding"), limit)
        async for data in self.chunks():
            body.feed(data)
        return body.finish()

    async def aclose(self) -> None:
        self._conn.close()

    @property
    def is_closed(self) -> bool:
        return self._conn.is_closed


class _Stale(Exception):
    """A reused connection was found closed before any byte of the answer arrived."""


class LeanHttp:
    """Keep-alive POSTs to one ``http://host:port``; at most ``max_idle`` idle connections."""

    accept_encoding = "identity"

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float | None = 30.0,
        max_idle: int = 2,
        max_body: int = MAX_BODY_BYTES,
        address_check: AddressCheck | None = None,
    ) -> None:
        """``address_check``: resolve the host ourselves, refuse the connection if any of its
        addresses fails the check (:mod:`service.netguard`, webhook targets) and connect to
        the address that was judged."""
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"lean HTTP serves plain http:// URLs only, not {url!r}")
        self.url = url
        self.host = parts.hostname
        self.port = parts.port or 80
        self.host_header = parts.netloc.rpartition("@")[2]
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.basic_auth = _basic_auth(parts.username, parts.password)
        """``user:password@`` in the URL, sent as Basic credentials (as httpx does)."""
        self.connect_timeout = connect_timeout
        self.max_idle = max_idle
        self.max_body = max_body
        self.address_check = address_check
        self._idle: list[_Connection] = []
        self._closed = False

    async def post(
        self, content: bytes, headers: dict[str, str], *, idempotent: bool = True
    ) -> Answer:
        conn, reused = await self._acquire()
        try:
            try:
                return await self._exchange(conn, content, headers, reused and idempotent)
            except _Stale:
                conn.close()
                conn = await self._connect()
                return await self._exchange(conn, content, headers, False)
        except BaseException:
            conn.close()
            raise

    async def open_stream(self, content: bytes, headers: dict[str, str]) -> LeanStream:
        conn = await self._connect()
        try:
            response = await self._send(conn, content, headers, False)
            return LeanStream(conn, response.status_code, _fields(response))
        except BaseException:
            conn.close()
            raise

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # ---- internals ------------------------------------------------------------------------
    async def _acquire(self) -> tuple[_Connection, bool]:
        while self._idle:
            conn = self._idle.pop()
            if conn.idle_ok():
                conn.received_bytes = 0
                return conn, True
            conn.close()
        return await self._connect(), False

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        conn = _Connection(self.url)
        try:
            async with asyncio.timeout(self.connect_timeout):
                if self.address_check is None:
                    await loop.create_connection(lambda: conn, self.host, self.port)
                else:
                    await connect_checked(
                        self.host,
                        self.port,
                        self.address_check,
                        lambda address: loop.create_connection(lambda: conn, address, self.port),
                    )
        except TimeoutError as exc:
            raise _error("timeout", self.url, exc) from exc
        except OSError as exc:
            raise _error("connect", self.url, exc) from exc
        except UnicodeError as exc:  # the resolver cannot encode the host (IDNA)
            raise invalid_host(self.url, exc) from exc
        return conn

    async def _send(
        self, conn: _Connection, content: bytes, headers: dict[str, str], may_be_stale: bool
    ) -> h11.Response:
        """Write the request and read up to the response head (its body stays in h11).
        ``may_be_stale``: a reused connection that gave no byte back raises :class:`_Stale`."""
        machine = conn.h11
        request_headers = [("Host", self.host_header), ("Content-Length", str(len(content)))]
        request_headers += list(headers.items())
        if self.basic_auth and not any(k.lower() == "authorization" for k in headers):
            request_headers.append(("Authorization", self.basic_auth))
        try:
            data = (
                machine.send(
                    h11.Request(method="POST", target=self.target, headers=request_headers)
                )
                + machine.send(h11.Data(data=content))
                + machine.send(h11.EndOfMessage())
            )
        except h11.LocalProtocolError as exc:  # a header value h11 refuses (e.g. a newline)
            raise ProtocolViolation(f"cannot send this request: {exc}") from exc
        try:
            await conn.write(data)
        except OSError as exc:
            if may_be_stale:
                raise _Stale from exc
            raise _error("read", self.url, exc) from exc
        try:
            while True:
                event = await conn.next_event()
                if type(event) is h11.Response:
                    return event
        except TransportError:
            if may_be_stale and conn.received_bytes == 0:
                raise _Stale from None
            raise

    async def _exchange(
        self, conn: _Connection, content: bytes, headers: dict[str, str], may_be_stale: bool
    ) -> Answer:
        response = await self._send(conn, content, headers, may_be_stale)
        fields = _fields(response)
        decoded: LimitedBody | None = None
        body = bytearray()
        if codings(fields.get("content-encoding")):  # identity stays on the plain loop
            decoded = LimitedBody(fields.get("content-encoding"), self.max_body)
        while True:
            event = await conn.next_event()
            if type(event) is h11.Data:
                if decoded is not None:
                    decoded.feed(event.data)
                    continue
                body += event.data
                if len(body) > self.max_body:
                    raise BodyTooLarge(self.max_body)
            elif type(event) is h11.EndOfMessage:
                break
        if decoded is not None:
            body = bytearray(decoded.finish())
        self._release(conn)
        return Answer(response.status_code, fields, bytes(body))

    def _release(self, conn: _Connection) -> None:
        machine = conn.h11
        if (
            self._closed
            or len(self._idle) >= self.max_idle
            or machine.our_state is not h11.DONE
            or machine.their_state is not h11.DONE
            or machine.trailing_data[0]  # bytes past the answer: not the next answer's
        ):
            conn.close()
            return
        machine.start_next_cycle()
        self._idle.append(conn)


def _fields(response: h11.Response) -> dict[str, str]:
    """Header names lower-cased (h11 already did); a repeated header keeps its last value."""
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in response.headers}
