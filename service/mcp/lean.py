"""A lean HTTP/1.1 POST for plain ``http://`` reads: h11 on asyncio streams, keep-alive.

The daemon re-reads a resource for every update it is told about. Through httpx each of
those requests cost 1.2–1.6 ms of CPU on this project's bench machine (httpx's models and
auth flow, httpcore's pool, anyio's cancel scopes around every await) where the exchange
itself, h11 on a kept-alive socket, needs a fraction of that. So for the idempotent request
methods on plain ``http://`` URLs with no proxy configured, :class:`McpClient` sends through
this module instead; TLS, proxies and listen streams stay with httpx.

:meth:`LeanHttp.open_stream` does the same for a listen stream (a POST whose answer is read
piece by piece for as long as it lasts, on a connection of its own that closing ends): the
one-shot probe then never imports httpx on plain ``http://`` (a third of its start-up), and
the daemon's idle listen streams are read by asyncio's own stream reader, which does not
re-register the socket with the selector around every keep-alive frame as httpcore does.

Scope, on purpose: one origin per instance, POST only, ``Content-Length`` request bodies,
responses framed by h11 (length or chunked), a body cap on the decoded bytes. The shared
path asks for ``Accept-Encoding: identity``, but a server that compresses anyway (some
frameworks and proxies gzip every JSON answer) is still understood: one layer of
gzip/deflate is undone through :class:`~service.mcp.coding.LimitedBody`, the same bounded
decoder as the httpx path, so a bomb is refused the same way and nothing else changes. A kept-alive
connection the server closed while idle is noticed before reuse, and a request that found
such a connection dead before any byte of the answer is sent again once on a fresh one
(only idempotent methods come here).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import h11

from service.mcp.coding import LimitedBody, codings
from service.mcp.errors import ProtocolViolation, TransportError
from service.netguard import AddressCheck, resolve_checked
from service.safetext import redact_urls

PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")
READ_CHUNK = 65536


def _basic_auth(username: str | None, password: str | None) -> str | None:
    """The ``Authorization`` value for a URL's userinfo (percent-decoded), or None. Pure."""
    if username is None:
        return None
    pair = f"{unquote(username)}:{unquote(password or '')}".encode()
    return "Basic " + base64.b64encode(pair).decode("ascii")


def lean_usable(url: str) -> bool:
    """Plain ``http://`` with no proxy variable that httpx would honour for it."""
    return urlsplit(url).scheme == "http" and not any(os.environ.get(k) for k in PROXY_VARIABLES)


@dataclass(frozen=True, slots=True)
class LeanResponse:
    status: int
    headers: dict[str, str]
    """Lower-cased names; a repeated header keeps its last value."""
    body: bytes


class LeanStream:
    """An answer read as it arrives: status and headers now, the body through :meth:`chunks`."""

    __slots__ = ("_conn", "_url", "headers", "status")

    def __init__(self, conn: _Connection, url: str, status: int, headers: dict[str, str]) -> None:
        self._conn = conn
        self._url = url
        self.status = status
        self.headers = headers

    async def chunks(self) -> AsyncIterator[bytes]:
        """Raw body bytes until the answer ends; :class:`TransportError` if the stream breaks."""
        machine = self._conn.h11
        while True:
            try:
                event = machine.next_event()
                if event is h11.NEED_DATA:
                    machine.receive_data(await self._conn.reader.read(READ_CHUNK))
                    continue
            except (OSError, h11.RemoteProtocolError) as exc:
                detail = str(exc) or type(exc).__name__
                raise TransportError(
                    f"read error talking to {redact_urls(self._url)}: {detail}", kind="read"
                ) from exc
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return
            elif isinstance(event, h11.ConnectionClosed):
                raise TransportError(
                    f"read error talking to {redact_urls(self._url)}: server closed the connection",
                    kind="read",
                )

    async def read_all(self, limit: int) -> bytes:
        """The whole (short) body, decoded and refused past ``limit`` bytes (as httpx's path)."""
        body = LimitedBody(self.headers.get("content-encoding"), limit)
        async for data in self.chunks():
            body.feed(data)
        return body.finish()

    def close(self) -> None:
        """Close the connection: for a listen stream that is the unsubscribe."""
        self._conn.close()

    @property
    def is_closed(self) -> bool:
        return self._conn.writer.is_closing()


class BodyRefused(ProtocolViolation):
    """The body's content coding (stacked, unknown, broken) or decoded size was refused."""


class _Stale(Exception):
    """A reused connection was found closed before any byte of the answer arrived."""


class _Connection:
    __slots__ = ("h11", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.CLIENT)

    def idle_ok(self) -> bool:
        """Still usable after sitting idle: not closed by us, no EOF or stray bytes from them."""
        return (
            not self.writer.is_closing()
            and not self.reader.at_eof()
            and not len(
                self.reader._buffer  # type: ignore[attr-defined]  # stray bytes: not reusable
            )
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class LeanHttp:
    """Keep-alive POSTs to one ``http://host:port``; at most ``max_idle`` idle connections."""

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float | None = 30.0,
        max_idle: int = 2,
        max_body: int = 16 * 1024 * 1024,
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

    async def post(self, content: bytes, headers: dict[str, str]) -> LeanResponse:
        """POST ``content``; raises :class:`TransportError` (kind connect/read) on failure.

        A body with a content coding is decoded piece by piece with :class:`LimitedBody`
        (refusals raise :class:`BodyRefused`), whether or not the request asked for one:
        a server that ignores ``Accept-Encoding: identity`` is answered, not failed.
        """
        conn, reused = await self._acquire()
        try:
            try:
                return await self._exchange(conn, content, headers, reused)
            except _Stale:
                conn.close()
                conn, reused = await self._connect(), False
                return await self._exchange(conn, content, headers, reused)
        except BaseException:
            conn.close()
            raise

    async def open_stream(self, content: bytes, headers: dict[str, str]) -> LeanStream:
        """POST ``content`` on a fresh connection of its own; return once the headers are in.

        Never pooled and never sent twice (a listen is not idempotent): the caller reads the
        body from :meth:`LeanStream.chunks` and closes the stream when done.
        """
        conn = await self._connect()
        try:
            response = await self._send(conn, content, headers)
            fields = {
                name.decode("latin-1"): value.decode("latin-1") for name, value in response.headers
            }
            return LeanStream(conn, self.url, response.status_code, fields)
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
                return conn, True
            conn.close()
        return await self._connect(), False

    async def _connect(self) -> _Connection:
        try:
            async with asyncio.timeout(self.connect_timeout):
                if self.address_check is None:
                    reader, writer = await asyncio.open_connection(self.host, self.port)
                else:
                    reader, writer = await self._connect_checked(self.address_check)
        except TimeoutError as exc:
            raise self._error("timeout", exc) from exc
        except OSError as exc:
            raise self._error("connect", exc) from exc
        return _Connection(reader, writer)

    async def _connect_checked(
        self, check: AddressCheck
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Connect to an address of the host that passed ``check`` (AddressRefused, an
        OSError, when any did not); each is tried in turn, as open_connection would."""
        failure: OSError | None = None
        for address in await resolve_checked(self.host, self.port, check):
            try:
                return await asyncio.open_connection(address, self.port)
            except OSError as exc:
                failure = exc
        assert failure is not None  # getaddrinfo never answers with no address
        raise failure

    def _error(self, kind: str, exc: BaseException) -> TransportError:
        detail = str(exc) or type(exc).__name__
        return TransportError(
            f"{kind} error talking to {redact_urls(self.url)}: {detail}", kind=kind
        )

    async def _send(
        self, conn: _Connection, content: bytes, headers: dict[str, str], reused: bool = False
    ) -> h11.Response:
        """Write the request and read up to the response head (its body stays in h11)."""
        machine = conn.h11
        request_headers = [("Host", self.host_header), ("Content-Length", str(len(content)))]
        request_headers += list(headers.items())
        if self.basic_auth and not any(k.lower() == "authorization" for k in headers):
            request_headers.append(("Authorization", self.basic_auth))
        try:
            conn.writer.write(
                machine.send(
                    h11.Request(method="POST", target=self.target, headers=request_headers)
                )
                + machine.send(h11.Data(data=content))
                + machine.send(h11.EndOfMessage())
            )
            if conn.writer.transport.get_write_buffer_size() > READ_CHUNK:
                await conn.writer.drain()
        except (ConnectionError, OSError) as exc:
            if reused:
                raise _Stale from exc
            raise self._error("read", exc) from exc
        except h11.LocalProtocolError as exc:  # a header value h11 refuses (e.g. a newline)
            raise ProtocolViolation(f"cannot send this request: {exc}") from exc
        received = False
        try:
            while True:
                event = machine.next_event()
                if event is h11.NEED_DATA:
                    data = await conn.reader.read(READ_CHUNK)
                    if not data and not received and reused:
                        raise _Stale
                    received = True
                    machine.receive_data(data)
                    continue
                if isinstance(event, h11.Response):
                    return event
                if isinstance(event, h11.ConnectionClosed):
                    raise self._error("read", ConnectionError("server closed the connection"))
        except ConnectionError as exc:
            if reused and not received:
                raise _Stale from exc
            raise self._error("read", exc) from exc
        except OSError as exc:
            raise self._error("read", exc) from exc
        except h11.RemoteProtocolError as exc:
            raise self._error("read", exc) from exc

    async def _exchange(
        self,
        conn: _Connection,
        content: bytes,
        headers: dict[str, str],
        reused: bool,
    ) -> LeanResponse:
        response = await self._send(conn, content, headers, reused)
        fields = {
            name.decode("latin-1"): value.decode("latin-1") for name, value in response.headers
        }
        decoded: LimitedBody | None = None
        if codings(fields.get("content-encoding")):  # identity stays on the plain loop below
            try:
                decoded = LimitedBody(fields.get("content-encoding"), self.max_body)
            except ProtocolViolation as exc:
                raise BodyRefused(str(exc)) from exc
        machine = conn.h11
        body = bytearray()
        try:
            while True:
                event = machine.next_event()
                if event is h11.NEED_DATA:
                    machine.receive_data(await conn.reader.read(READ_CHUNK))
                    continue
                if isinstance(event, h11.Data):
                    if decoded is not None:
                        try:
                            decoded.feed(event.data)
                        except ProtocolViolation as exc:
                            raise BodyRefused(str(exc)) from exc
                        continue
                    body += event.data
                    if len(body) > self.max_body:
                        raise ProtocolViolation(f"response larger than {self.max_body} bytes")
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    raise self._error("read", ConnectionError("server closed the connection"))
        except OSError as exc:
            raise self._error("read", exc) from exc
        except h11.RemoteProtocolError as exc:
            raise self._error("read", exc) from exc
        if decoded is not None:
            try:
                body = bytearray(decoded.finish())
            except ProtocolViolation as exc:
                raise BodyRefused(str(exc)) from exc
        self._release(conn)
        return LeanResponse(response.status_code, fields, bytes(body))

    def _release(self, conn: _Connection) -> None:
        machine = conn.h11
        if (
            self._closed
            or len(self._idle) >= self.max_idle
            or machine.our_state is not h11.DONE
            or machine.their_state is not h11.DONE
        ):
            conn.close()
            return
        machine.start_next_cycle()
        self._idle.append(conn)
