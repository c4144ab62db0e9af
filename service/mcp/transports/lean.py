"""The lean transport: HTTP/1.1 POSTs parsed by llhttp (httptools) on an asyncio protocol.

The daemon re-reads a resource for every update it is told about. Through httpx each of
those requests cost 1.2–1.6 ms of CPU on this project's bench machine (httpx's models and
auth flow, httpcore's pool, anyio's cancel scopes around every await) where the exchange
itself, on a kept-alive socket, needs a fraction of that. So on plain ``http://`` URLs
with no proxy configured :func:`~service.mcp.transports.choose.make_transport` chooses this module
for *every* exchange of a client: requests, listen streams (:meth:`LeanHttp.open_stream`, a
POST whose answer is read piece by piece on a connection it holds until closed: an idle
kept-alive one when there is one) and
webhook POSTs. The one-shot probe then never imports httpx (a third of its start-up), and an
idle listen stream costs nothing between keep-alive frames (httpcore re-registered each
socket with the selector around every frame: half of the daemon's idle CPU at 1,000 links).
TLS and proxies go through :mod:`service.mcp.transports.viahttpx`.

Why llhttp and not h11 ("one parse per byte"): h11 keeps the received bytes in a
buffer of its own, searches it for the end of the head, splits the head into lines, matches
each with a regex, then hands the body over as events the reader pulls one by one; building
a request went through the same validation in reverse. That was ~85 µs of CPU per exchange
on the bench machine against ~3 µs for llhttp (the C parser Node.js and uvicorn use), which
reads each byte once as it arrives and calls back with the head's fields and the body's
pieces.

Theory of operation. One :class:`_Connection` is one socket: an ``asyncio.Protocol`` whose
``data_received`` feeds the bytes straight into the exchange's parser. The parser's callbacks
fill in the answer (status, headers, body) and the reader is woken only when there is
something for it: the head, the end of the answer, a failure, or (on a stream) a piece of
body. A whole answer costs one wake-up however many segments it came in. Past
:data:`HIGH_WATER` unread bytes of a stream's body the socket stops being read, so a server
flooding a listen stream fills its own send buffer (back-pressure), as asyncio's
``StreamReader`` would.

Bounds (the hostile tests attack each): the head (status line and fields) at most
:data:`MAX_HEAD_BYTES` (h11's default); a complete answer's decoded body at most ``max_body``;
one layer of gzip/deflate at most, undone through :class:`~service.mcp.coding.LimitedBody`
(the same bounded decoder as the httpx path), so a bomb is refused the same way. llhttp
itself refuses malformed framing (a bad status line, a chunk size that is not hex or
overflows, ``Content-Length`` beside ``Transfer-Encoding``) and never buffers: a long chunk
extension costs time, which the caller's deadline bounds, not memory. A listen stream's body
is bounded by :mod:`service.mcp.sse` (event and line size) above this module.

Scope, on purpose: one origin per instance, POST only, ``Content-Length`` request bodies,
responses framed by length, chunks or the end of the connection. We ask for
``Accept-Encoding: identity``, but a server that compresses anyway (some frameworks and
proxies gzip every JSON answer) is still understood. A kept-alive connection the server
closed while idle is noticed before reuse, and an idempotent request that found such a
connection dead before any byte of the answer is sent again once on a fresh one.
"""

from __future__ import annotations

import asyncio
import base64
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import cast
from urllib.parse import unquote, urlsplit

import httptools

from service.mcp.coding import BodyRefused, BodyTooLarge, LimitedBody, codings
from service.mcp.errors import ProtocolViolation, TransportError
from service.mcp.transports.base import MAX_BODY_BYTES, Answer, invalid_host, lean_usable
from service.netguard import AddressCheck, connect_checked
from service.safetext import redact_urls

HIGH_WATER = 128 * 1024
"""Unread body bytes of a stream past which the socket is paused (asyncio's StreamReader:
2 × its 64 KiB)."""
MAX_HEAD_BYTES = 16 * 1024
"""A response head (status line and header fields) larger than this is refused: h11's
default bound, which this transport had before (httpx, through httpcore, allows 100 KiB)."""

__all__ = [
    "BodyRefused",
    "IdlePool",
    "LeanHttp",
    "LeanStream",
    "RemoteProtocolError",
    "lean_usable",
]

_TOKEN = re.compile(r"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_FIELD_VALUE = re.compile(r"(?:[\x21-\x7e](?:[\x20\x21-\x7e\t]*[\x21-\x7e])?)?")
"""What a header of ours may carry (h11's rule for sending, ASCII only): no CR, LF or NUL,
so a value can never end the field it is in; no blank at either end."""
_TARGET = re.compile(r"[\x21-\x7e]+")

MAX_CHECKED_LINES = 1024
_CHECKED_LINES: dict[tuple[str, str], bytes] = {}
"""Header fields already checked, encoded: one table for every instance (the check depends on
the field alone). One per instance was ~4 kB per daemon link (tracemalloc), the same few
fields over again; cleared when full."""


class RemoteProtocolError(Exception):
    """The server's HTTP is malformed or over a bound. Named as h11's and httpx's, which
    :func:`service.mcp.classify.malformed_http` recognises by name (``PROTOCOL_ERROR``)."""


def _basic_auth(username: str | None, password: str | None) -> str | None:
    """The ``Authorization`` value for a URL's userinfo (percent-decoded), or None. Pure."""
    if username is None:
        return None
    pair = f"{unquote(username)}:{unquote(password or '')}".encode()
    return "Basic " + base64.b64encode(pair).decode("ascii")


def _error(kind: str, url: str, exc: BaseException) -> TransportError:
    detail = str(exc) or type(exc).__name__
    return TransportError(f"{kind} error talking to {redact_urls(url)}: {detail}", kind=kind)


def _head_too_large() -> RemoteProtocolError:
    return RemoteProtocolError(f"response head larger than {MAX_HEAD_BYTES} bytes")


def _chunked(headers: Mapping[str, str]) -> bool:
    coding = headers.get("transfer-encoding")
    return coding is not None and coding.rpartition(",")[2].strip().lower() == "chunked"


READ_BUFFER_BYTES = 64 * 1024
"""What one socket read takes at most (asyncio's own reads take up to 256 KiB)."""


class _ReadBuffer(threading.local):
    """The buffer every connection of a thread's loop reads into (:meth:`_Connection.get_buffer`).

    asyncio reads a plain protocol's socket with ``recv(256 KiB)``: a fresh 256 KiB bytes
    object per read, over glibc's mmap threshold, so each read of a 300-byte notification or
    answer cost an ``mmap``, an ``mremap`` and a ``munmap`` (strace of ``probe --follow``:
    three per read, ~18 µs; a plain ``recv`` of those bytes is ~4 µs). A buffered protocol
    reads into memory of its own instead. One buffer serves every connection of the thread:
    asyncio hands each read to its protocol at once, and the parser copies what it keeps
    before the next read can start; per thread, because ``recv_into`` lets go of the GIL."""

    def __init__(self) -> None:
        self.view = memoryview(bytearray(READ_BUFFER_BYTES))


_read_buffer = _ReadBuffer()


class _Connection(asyncio.BufferedProtocol):
    """One socket and the answer being read on it.

    Between exchanges ``parser`` is None and any byte that arrives is stray (the connection
    is then not reused). :meth:`begin` starts an exchange; the parser's callbacks
    (``on_header`` …) fill in the answer as bytes arrive.
    """

    __slots__ = (
        "_body",
        "_chunks",
        "_closed_by_peer",
        "_decoded",
        "_drained",
        "_eof",
        "_failure",
        "_framed_by_close",
        "_head_bytes",
        "_keep",
        "_lost",
        "_max_body",
        "_paused",
        "_size",
        "_stray",
        "_streaming",
        "_waiter",
        "complete",
        "head_done",
        "headers",
        "idle_since",
        "parser",
        "quiet",
        "received_bytes",
        "sink",
        "sink_end",
        "status",
        "transport",
        "url",
    )

    def __init__(self, url: str) -> None:
        self.url = url
        self.transport: asyncio.Transport | None = None
        self.parser: httptools.HttpResponseParser | None = None
        self._paused = False
        self._eof = False
        self._lost: Exception | None = None
        self._stray = False
        self._waiter: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self.quiet: Callable[[bytes], bool] | None = None
        """A stream's reader's offer (:meth:`LeanStream.take_quiet_pieces`): a body piece that
        arrives while the reader waits and nothing is unread is shown to it here first; True
        means it was taken, and the reader is not woken for it."""
        self.sink: Callable[[bytes], None] | None = None
        self.sink_end: Callable[[BaseException | None], None] | None = None
        """A stream followed in the callbacks (:meth:`LeanStream.follow`): every body piece
        goes to ``sink`` as it is parsed, the answer's end (None, or what ended it) to
        ``sink_end`` once; no task waits on the connection."""
        self.idle_since = 0.0
        """When the connection last went back to the idle list (``time.monotonic``)."""
        self._reset(streaming=False, max_body=0)

    def _reset(self, *, streaming: bool, max_body: int) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.head_done = False
        self._framed_by_close = False
        self.complete = False
        self._head_bytes = 0
        self._streaming = streaming
        self._max_body = max_body
        self._body = bytearray()
        self._decoded: LimitedBody | None = None
        self._chunks: list[bytes] = []
        self._size = 0
        self._failure: BaseException | None = None
        self._closed_by_peer = False
        self._keep = False
        self.received_bytes = 0
        """Bytes read in the current exchange: none means a reused connection was dead."""

    def begin(self, *, streaming: bool, max_body: int) -> None:
        """A new exchange: a fresh parser; a stream keeps its body in pieces for the reader."""
        self._reset(streaming=streaming, max_body=max_body)
        self.quiet = None
        self.sink = self.sink_end = None
        self.parser = httptools.HttpResponseParser(self)

    # ---- asyncio.Protocol -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # cast, not isinstance: uvloop's transports (the daemon's loop, service/eventloop.py)
        # have asyncio.Transport's methods without being its subclass
        self.transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        return _read_buffer.view

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(_read_buffer.view[:nbytes])

    def data_received(self, data: bytes | memoryview) -> None:
        parser = self.parser
        if parser is None or self.complete or self._failure is not None:
            self._stray = True  # nobody asked: not the next answer's
            return
        self.received_bytes += len(data)
        had_head = self.head_done
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # 101 to a request that asked for no other protocol: nothing we can read.
            self._failure = RemoteProtocolError("the server switched protocols unasked (101)")
        except httptools.HttpParserError as exc:
            if self._failure is None:
                if self.complete:
                    self._stray = True  # what followed the answer is not ours to parse
                else:
                    self._failure = RemoteProtocolError(f"malformed HTTP answer: {exc}")
        if not self.head_done and self._failure is None:
            # A head trickled in pieces: llhttp keeps nothing, httptools joins a field's
            # pieces, so the bytes of an unfinished head are what is bounded here.
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._failure = _head_too_large()
        if self._failure is not None:
            self.parser = None
            if self.transport is not None:
                self.transport.pause_reading()
            self._wake()
        elif self.complete or (self._streaming and (self._chunks or not had_head)):
            self._wake()

    def eof_received(self) -> bool:
        self._ended()
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = exc
        self._ended()
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    def _ended(self) -> None:
        self._eof = True
        if self.head_done and not self.complete and self._failure is None and self._framed_by_close:
            self._closed_by_peer = True  # the answer was framed by the close
            self.on_message_complete()
        self._wake()

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
        if self.sink_end is not None:
            self._sink_ended()

    def _sink_ended(self) -> None:
        """The followed answer's end, told once: None when it completed, else what
        :meth:`_check` would raise to a reader."""
        end = self.sink_end
        if end is None or not (self.complete or self._failure is not None or self._eof):
            return
        self.sink = self.sink_end = None
        try:
            self._check()
        except BaseException as exc:
            end(exc)
            return
        end(None)

    def follow(
        self,
        sink: Callable[[bytes], None] | None,
        end: Callable[[BaseException | None], None] | None,
    ) -> None:
        """Hand the stream's body to ``sink`` from now on: what is unread first, then each
        piece as it is parsed (None: stop)."""
        self.sink, self.sink_end = sink, end
        if sink is None:
            return
        # The head was read (the stream's reader took what it needed of it): a followed
        # stream is held for its life, its head fields need not be (the framing is a flag).
        self.headers = {}
        chunks = self._chunks
        while chunks and self.sink is sink:
            data = chunks.pop(0)
            self._size -= len(data)
            sink(data)
        if self._paused and self.sink is sink:
            self._unpause()
        self._sink_ended()

    def pause_for(self, seconds: float) -> None:
        """Read no more from the socket for ``seconds`` (a followed stream over its frame
        rate): the server's writes then block, as with a reader that sleeps."""
        transport = self.transport
        if self._paused or transport is None or transport.is_closing():
            return
        self._paused = True
        transport.pause_reading()
        asyncio.get_running_loop().call_later(seconds, self._unpause)

    def _unpause(self) -> None:
        self._paused = False
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.resume_reading()

    # ---- llhttp callbacks -------------------------------------------------------------
    def on_message_begin(self) -> None:
        if self.complete:
            # A second answer in the same bytes: nobody asked for it.
            self._stray = True
            raise RemoteProtocolError("bytes past the answer")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value) + 4
        if self._head_bytes > MAX_HEAD_BYTES:
            self._failure = _head_too_large()
            raise self._failure
        # A repeated header keeps its last value; names are looked up lower-cased.
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        assert self.parser is not None
        status = self.parser.get_status_code()
        if 100 <= status < 200:
            self.headers = {}  # informational (100 Continue): the real answer follows
            self._head_bytes = 0
            return
        self.status = status
        self.head_done = True
        headers = self.headers
        self._framed_by_close = "content-length" not in headers and not _chunked(headers)
        if not self._streaming:
            coding = self.headers.get("content-encoding")
            if codings(coding):  # identity stays on the plain path
                try:
                    self._decoded = LimitedBody(coding, self._max_body)
                except BodyRefused as exc:
                    self._failure = exc
                    raise

    def on_body(self, body: bytes) -> None:
        if not self.head_done:
            return  # an informational answer has no body; llhttp sends none anyway
        if self._streaming:
            sink = self.sink
            if sink is not None:
                sink(body)
                return
            quiet, waiter = self.quiet, self._waiter
            if (
                quiet is not None
                and not self._chunks
                and waiter is not None
                and not waiter.done()
                and quiet(body)
            ):
                return
            self._chunks.append(body)
            self._size += len(body)
            if self._size > HIGH_WATER and not self._paused and self.transport is not None:
                self._paused = True
                self.transport.pause_reading()
            return
        try:
            if self._decoded is not None:
                self._decoded.feed(body)
                return
            self._body += body
            if len(self._body) > self._max_body:
                raise BodyTooLarge(self._max_body)
        except BodyRefused as exc:
            self._failure = exc
            raise

    def on_message_complete(self) -> None:
        if self.head_done:
            self.complete = True
            parser = self.parser
            self._keep = parser is not None and parser.should_keep_alive()

    # ---- used by LeanHttp -------------------------------------------------------------
    async def write(self, data: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("connection closed")
        self.transport.write(data)
        if self._drained is not None:
            await self._drained

    def _check(self) -> None:
        """Raise what ended the exchange early: a refused body as itself, malformed HTTP or
        a closed connection as :class:`TransportError` (kind read)."""
        failure = self._failure
        if failure is not None:
            if isinstance(failure, BodyRefused):
                raise failure
            raise _error("read", self.url, failure) from failure
        if self._eof and not self.complete:
            cause: Exception = self._lost or ConnectionError("server closed the connection")
            raise _error("read", self.url, cause) from cause

    async def _wait(self) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    async def head(self) -> None:
        """Until the answer's head is in (status and headers)."""
        while not self.head_done:
            self._check()
            await self._wait()

    async def body(self) -> bytes:
        """Until the whole answer is in: its body, decoded, within the bound."""
        while not self.complete:
            self._check()
            await self._wait()
        if self._failure is not None:
            self._check()
        self.parser = None
        if self._decoded is not None:
            return self._decoded.finish()
        return bytes(self._body)

    async def next_chunk(self) -> bytes | None:
        """The body bytes received so far (waiting for some); None at the answer's end."""
        while not self._chunks:
            if self.complete:
                return None
            self._check()
            await self._wait()
        chunks = self._chunks
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        self._size = 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return data

    def rest(self) -> None:
        """Between exchanges: drop the last answer's parser, head and body buffer (what the
        caller keeps is its own copy), so an idle connection holds its socket only."""
        self.parser = None
        self._body = bytearray()
        self.headers = {}

    @property
    def reusable(self) -> bool:
        """The answer is complete and the connection may carry the next exchange."""
        return (
            self.complete
            and self._keep
            and not self._stray
            and not self._closed_by_peer
            and self._failure is None
        )

    def idle_ok(self) -> bool:
        """Still usable after sitting idle: not closed, no EOF or stray bytes from them."""
        return (
            self.transport is not None
            and not self.transport.is_closing()
            and not self._eof
            and not self._stray
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

    def __init__(self, conn: _Connection) -> None:
        self._conn = conn
        self.status = conn.status
        self.headers: Mapping[str, str] = conn.headers

    def take_quiet_pieces(self, take: Callable[[bytes], bool] | None) -> None:
        """Let ``take`` see each body piece that arrives while :meth:`chunks` waits with
        nothing unread, before the reader is woken for it; ``take`` returning True consumes
        the piece. A listen stream takes its keep-alive comments this way: an idle stream's
        frame then costs the socket's callback and not a turn of the reading task. ``take``
        runs inside the protocol's callback, so it must be quick and never raise."""
        self._conn.quiet = take

    def follow(
        self,
        sink: Callable[[bytes], None] | None,
        end: Callable[[BaseException | None], None] | None,
    ) -> None:
        """Hand each body piece to ``sink`` inside the socket's callback, and the answer's end
        to ``end`` (None when it completed, else the :class:`TransportError` a reader of
        :meth:`chunks` would get): a followed stream needs no task reading it. What arrived
        unread is handed over first. ``sink`` and ``end`` run inside the protocol's
        callbacks: they must never raise. None stops it."""
        self._conn.follow(sink, end)
        if sink is not None:
            self.headers = self._conn.headers

    def pause_for(self, seconds: float) -> None:
        """A followed stream over its rate: leave the socket unread for ``seconds``."""
        self._conn.pause_for(seconds)

    def chunks(self) -> AsyncIterator[bytes]:
        return _Chunks(self._conn)

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


class IdlePool:
    """Kept-alive connections shared by every :class:`LeanHttp` of one daemon, per origin.

    Why: a transport per link kept its own idle connections, so 10,000 links on a few
    servers' origins (a gateway serving many MCP servers under one ``host:port``, and the
    scale bench's peers) opened a read connection or two per link at a cold start although
    only ``read_concurrency`` reads run at once: ~20,000 connects, asyncio's connect path a
    third of the start's CPU, and descriptors short (10,000 listens plus two idle read
    connections each pass a 20,000 limit). Shared per origin, a link's read takes the
    connection another link's read just left, and a listen the one a discover left. A
    request carries its own ``Authorization`` and ``Host``, so a connection is bound to
    neither the link nor its credential (as in any HTTP client's pool).

    Bounded by ``max_idle`` in all, sized by the daemon to its descriptor limit: past it the
    connection idle longest (of any origin) is closed, so a busy link keeps its warm one.
    Within an origin the newest idle connection is taken first and the oldest closed first.
    """

    __slots__ = ("_by_origin", "_order", "max_idle")

    def __init__(self, max_idle: int) -> None:
        self.max_idle = max_idle
        self._by_origin: dict[tuple[str, int], list[_Connection]] = {}
        """Origin -> its idle connections, oldest first."""
        self._order: dict[_Connection, tuple[str, int]] = {}
        """Every idle connection -> its origin, oldest first (a dict keeps insertion order)."""

    def __len__(self) -> int:
        return len(self._order)

    def take(self, origin: tuple[str, int]) -> _Connection | None:
        idle = self._by_origin.get(origin)
        if not idle:
            return None
        conn = idle.pop()
        del self._order[conn]
        if not idle:
            del self._by_origin[origin]
        return conn

    def put(self, origin: tuple[str, int], conn: _Connection) -> None:
        if self.max_idle <= 0:
            conn.close()
            return
        while len(self._order) >= self.max_idle:
            oldest, its_origin = next(iter(self._order.items()))
            self._remove_oldest(its_origin)
            oldest.close()
        self._by_origin.setdefault(origin, []).append(conn)
        self._order[conn] = origin

    def close_idle(self, origin: tuple[str, int], before: float) -> None:
        """Close ``origin``'s connections idle since before ``before`` (the oldest are first)."""
        idle = self._by_origin.get(origin)
        while idle and idle[0].idle_since < before:
            self._remove_oldest(origin).close()

    def close_all(self) -> None:
        conns, self._order, self._by_origin = self._order, {}, {}
        for conn in conns:
            conn.close()

    def _remove_oldest(self, origin: tuple[str, int]) -> _Connection:
        idle = self._by_origin[origin]
        conn = idle.pop(0)
        del self._order[conn]
        if not idle:
            del self._by_origin[origin]
        return conn


class _Chunks:
    """A stream's body chunks as they arrive. Not an async generator: a listen stream keeps
    its iterator for its life, and a suspended generator's frame kept the last chunk it
    yielded (the acknowledgement's bytes, on a followed stream) besides itself."""

    __slots__ = ("_conn",)

    def __init__(self, conn: _Connection) -> None:
        self._conn = conn

    def __aiter__(self) -> _Chunks:
        return self

    async def __anext__(self) -> bytes:
        data = await self._conn.next_chunk()
        if data is None:
            raise StopAsyncIteration
        return data


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
        pool: IdlePool | None = None,
    ) -> None:
        """``address_check``: resolve the host ourselves, refuse the connection if any of its
        addresses fails the check (:mod:`service.netguard`, webhook targets) and connect to
        the address that was judged. ``pool``: keep idle connections there, shared with the
        other transports of the same origin (``max_idle`` then does not apply); never with
        ``address_check``, whose connections were judged for this transport alone."""
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
        self._pool = pool if address_check is None else None
        self._origin = (self.host.lower(), self.port)
        self._closed = False
        self._sendable = bool(
            _TARGET.fullmatch(self.target) and _FIELD_VALUE.fullmatch(self.host_header)
        )
        """Both ASCII without blanks or controls; else every request is refused (a host no
        resolver takes is found first, by connecting: InvalidUrl)."""
        self._request_line = (
            f"POST {self.target} HTTP/1.1\r\nHost: {self.host_header}\r\n".encode("ascii")
            if self._sendable
            else b""
        )

    async def post(
        self, content: bytes, headers: dict[str, str], *, idempotent: bool = True
    ) -> Answer:
        conn, reused = await self._acquire()  # first: a host no resolver takes is InvalidUrl
        try:
            data = self._request(content, headers)
            try:
                return await self._exchange(conn, data, reused and idempotent)
            except _Stale:
                conn.close()
                conn = await self._connect()
                return await self._exchange(conn, data, False)
        except BaseException:
            conn.close()
            raise

    async def open_stream(self, content: bytes, headers: dict[str, str]) -> LeanStream:
        """A POST whose answer is read as it arrives, on an idle kept-alive connection when
        there is one (the discover's, at a link's start): the stream then holds it until
        closed, so a link's start costs the listen no connection of its own. A reused
        connection found dead before any byte of the answer is replaced and the request sent
        again, as for an idempotent POST: the server never saw it, or saw its stream end."""
        conn, reused = await self._acquire()
        try:
            data = self._request(content, headers)
            try:
                await self._send(conn, data, reused, streaming=True)
            except _Stale:
                conn.close()
                conn = await self._connect()
                await self._send(conn, data, False, streaming=True)
            return LeanStream(conn)
        except BaseException:
            conn.close()
            raise

    def close_idle(self, before: float) -> None:
        """Close the idle connections released before ``before`` (the oldest are first); with
        a shared pool, those of this transport's origin."""
        if self._pool is not None:
            self._pool.close_idle(self._origin, before)
            return
        idle = self._idle
        while idle and idle[0].idle_since < before:
            idle.pop(0).close()

    async def aclose(self) -> None:
        """Close this transport's idle connections; those in a shared pool are the pool's
        (another transport of the origin may take them; its owner closes it)."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # ---- internals ------------------------------------------------------------------------
    def _request(self, content: bytes, headers: dict[str, str]) -> bytes:
        """The request's bytes. A field that could end its line early (CR, LF, NUL), a name
        that is not a token, or anything outside ASCII is refused, never sent. A field once
        checked is kept encoded (the same few on every request of a client)."""
        if not self._sendable:
            raise ProtocolViolation(f"cannot send this request to {redact_urls(self.url)}")
        lines = _CHECKED_LINES
        parts = [self._request_line, b"Content-Length: %d\r\n" % len(content)]
        for field in headers.items():
            line = lines.get(field)
            if line is None:
                name, value = field
                if not (_TOKEN.fullmatch(name) and _FIELD_VALUE.fullmatch(value)):
                    raise ProtocolViolation(f"cannot send this request: bad header {name!r}")
                if len(lines) >= MAX_CHECKED_LINES:
                    lines.clear()  # a token or a URI per request would grow it without end
                line = lines[field] = f"{name}: {value}\r\n".encode("ascii")  # checked: ASCII
            parts.append(line)
        if self.basic_auth and not any(name.lower() == "authorization" for name in headers):
            parts.append(f"Authorization: {self.basic_auth}\r\n".encode("ascii"))
        parts.append(b"\r\n")
        parts.append(content)
        return b"".join(parts)

    async def _acquire(self) -> tuple[_Connection, bool]:
        pool = self._pool
        if pool is not None:
            while (conn := pool.take(self._origin)) is not None:
                if conn.idle_ok():
                    conn.url = self.url  # its errors now name this transport's URL
                    return conn, True
                conn.close()
            return await self._connect(), False
        while self._idle:
            conn = self._idle.pop()
            if conn.idle_ok():
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
        self, conn: _Connection, data: bytes, may_be_stale: bool, *, streaming: bool
    ) -> bytes | None:
        """Write the request and read the answer: a stream up to its head (its body follows
        through :meth:`_Connection.next_chunk`), otherwise whole (the body is returned).
        ``may_be_stale``: a reused connection that gave no byte back raises :class:`_Stale`."""
        conn.begin(streaming=streaming, max_body=self.max_body)
        try:
            await conn.write(data)
        except OSError as exc:
            if may_be_stale:
                raise _Stale from exc
            raise _error("read", self.url, exc) from exc
        try:
            if streaming:
                await conn.head()
                return None
            return await conn.body()
        except TransportError:
            if may_be_stale and conn.received_bytes == 0:
                raise _Stale from None
            raise

    async def _exchange(self, conn: _Connection, data: bytes, may_be_stale: bool) -> Answer:
        body = await self._send(conn, data, may_be_stale, streaming=False)
        assert body is not None
        answer = Answer(conn.status, conn.headers, body)
        self._release(conn)
        return answer

    def _release(self, conn: _Connection) -> None:
        pool = self._pool
        if self._closed or not conn.reusable or (pool is None and len(self._idle) >= self.max_idle):
            conn.close()
            return
        conn.idle_since = time.monotonic()
        conn.rest()
        if pool is not None:
            pool.put(self._origin, conn)
        else:
            self._idle.append(conn)
