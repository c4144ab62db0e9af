"""The one async MCP 2026-07-28 client every front door uses (probe, call, daemon).

This is the thin I/O shell around the pure modules: :mod:`wire` builds messages and
headers, :mod:`classify` reads answers, :mod:`listen` judges listen frames, :mod:`sse`
decodes bytes. Bytes move through one :class:`~service.mcp.transports.base.Transport` (lean
llhttp on plain ``http://``, httpx otherwise), chosen once when the client is made; this module never
asks which one it holds, and never imports httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, NoReturn

from service._version import __version__
from service.jsonencode import json_bytes
from service.mcp import wire
from service.mcp.classify import discover_failure, parse_json_message, parse_response
from service.mcp.coding import ContentDecoder
from service.mcp.deadline import within
from service.mcp.errors import (
    HttpStatusError,
    JsonRpcError,
    McpError,
    ProtocolUnsupported,
    ProtocolViolation,
    TransportError,
    redact_error,
)
from service.mcp.listen import (
    Acknowledged,
    Closed,
    Failed,
    ListenEvent,
    ListenMachine,
    Lost,
    honored_uris,
)
from service.mcp.sse import Comment, Event, EventTooLarge, SSEDecoder
from service.mcp.transports.base import MAX_BODY_BYTES, BodyRefused, StreamAnswer, Transport
from service.mcp.transports.choose import make_transport
from service.safetext import known_secrets, url_credentials

DEFAULT_CLIENT_NAME = "mcpsub"
MAX_RESPONSE_BYTES = MAX_BODY_BYTES
"""A single JSON-RPC response larger than this (decoded) is refused rather than buffered."""
IDEMPOTENT_METHODS = frozenset(
    {wire.DISCOVER, wire.RESOURCES_LIST, wire.RESOURCES_TEMPLATES_LIST, wire.RESOURCES_READ}
)
"""Safe to send again when a kept-alive connection was found dead (see :mod:`lean`)."""
STREAM_PIECE_BYTES = 16 * 1024
"""A listen stream is decoded this much at a time (one event-loop turn at most ~16 KiB)."""
MAX_LIST_PAGES = 1000
"""``resources/list`` pages we follow before deciding the server's cursor loops."""


@dataclass(frozen=True, slots=True)
class DiscoverResult:
    supported_versions: list[str]
    capabilities: dict[str, Any]
    server_info: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False)

    @property
    def resources_capability(self) -> dict[str, Any] | None:
        value = self.capabilities.get("resources")
        return value if isinstance(value, dict) else None


class McpClient:
    """A client for one MCP endpoint. Cheap to create; owns its transport unless given one."""

    def __init__(
        self,
        url: str,
        *,
        transport: Transport | None = None,
        token: str | None = None,
        client_name: str = DEFAULT_CLIENT_NAME,
        client_version: str = __version__,
        capabilities: dict[str, Any] | None = None,
        ca_cert: str | None = None,
        timeout: float | None = 30.0,
    ) -> None:
        """``transport``: one the caller keeps (a daemon link reuses its connections across
        sessions); otherwise :func:`~service.mcp.transports.choose.make_transport` makes one for
        ``url`` (``ca_cert``, ``timeout``) and :meth:`aclose` closes it."""
        self.url = url
        self.token = token
        self._owns_transport = transport is None
        self.transport: Transport = transport or make_transport(
            url, ca_cert=ca_cert, timeout=timeout
        )
        self.client_info = _client_info(client_name, client_version)
        """Shared by every client of the same name and version (a daemon makes one client
        per link): never changed in place."""
        self.capabilities = dict(capabilities or {})
        self._ids = itertools.count(1)
        self.timeout = timeout
        """Deadline for one whole request (not per socket read: a trickling server resets those)."""
        self.discovered: DiscoverResult | None = None
        self._secrets: tuple[tuple[str, str | None], tuple[str, ...]] | None = None

    @property
    def secrets(self) -> tuple[str, ...]:
        """What this client sends that a peer must not get shown back: the URL's userinfo
        and secret parameters, the Basic credentials they make, the bearer token."""
        key = (self.url, self.token)
        if self._secrets is None or self._secrets[0] != key:
            self._secrets = key, known_secrets(*url_credentials(self.url), self.token)
        return self._secrets[1]

    def redact(self, exc: BaseException) -> None:
        """Every error that leaves the client passes here: a server's text that echoes what
        it was sent (its URL, its ``Authorization``) loses it (:func:`redact_error`)."""
        redact_error(exc, self.secrets)

    async def __aenter__(self) -> McpClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_transport:
            await self.transport.aclose()

    # ---- building -------------------------------------------------------------------------
    def _message(
        self, method: str, params: dict[str, Any] | None
    ) -> tuple[Any, dict[str, Any], dict[str, str]]:
        request_id = next(self._ids)
        body_params = dict(params or {})
        body_params["_meta"] = wire.request_meta(self.client_info, self.capabilities)
        headers = wire.request_headers(method, body_params)
        headers["Accept-Encoding"] = self.transport.accept_encoding
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body_params}
        return request_id, message, headers

    # ---- plain requests -------------------------------------------------------------------
    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request and return its result (raises an :class:`McpError`).

        The whole exchange is bounded by ``timeout``: httpx's timeouts apply per socket
        operation, so a server that sends one byte every few seconds never trips them. One
        deadline per exchange, on the timer the client's exchanges share (:mod:`.deadline`).
        """
        try:
            if self.timeout is None:
                return await self._request(method, params)
            try:
                async with within(self.timeout):
                    return await self._request(method, params)
            except TimeoutError as exc:
                raise TransportError(
                    f"{method}: no complete answer from {self.url} within "
                    f"{round(self.timeout, 1):g} s",
                    kind="timeout",
                ) from exc
        except McpError as exc:
            self.redact(exc)
            raise

    async def _request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        request_id, message, headers = self._message(method, params)
        content = json_bytes(message)
        try:
            answer = await self.transport.post(
                content, headers, idempotent=method in IDEMPOTENT_METHODS
            )
        except BodyRefused as exc:
            raise ProtocolViolation(f"{method}: {exc}") from exc
        return _result_of(answer.status, answer.headers, answer.body, request_id, method)

    async def discover(self) -> DiscoverResult:
        """``server/discover``; a server that cannot serve 2026-07-28 raises ProtocolUnsupported."""
        try:
            return await self._discover()
        except McpError as exc:  # its own errors quote the server's answer too
            self.redact(exc)
            raise

    async def _discover(self) -> DiscoverResult:
        try:
            result = await self.request(wire.DISCOVER)
        except JsonRpcError as exc:
            mapped = discover_failure(exc)
            if mapped is exc and exc.code == wire.UNSUPPORTED_PROTOCOL_VERSION:
                # Spec §1.4 / conformance request-metadata: a server may reject the first
                # request while listing 2026-07-28; retry once with exactly that.
                try:
                    result = await self.request(wire.DISCOVER)
                except (JsonRpcError, HttpStatusError) as again:
                    raise discover_failure(again) from again
            else:
                raise mapped from exc
        except HttpStatusError as exc:
            raise discover_failure(exc) from exc
        self.discovered = _discovered(result)
        return self.discovered

    def reuse_discover(self, result: dict[str, Any]) -> DiscoverResult:
        """Take a discover result kept from an earlier session (still valid by its caching
        hints, :mod:`service.mcp.discovercache`) instead of asking again; checked as a fresh
        one is."""
        self.discovered = _discovered(result)
        return self.discovered

    async def list_resources(self) -> list[dict[str, Any]]:
        """Every resource, following ``nextCursor`` (a repeating cursor is a violation)."""
        resources: list[dict[str, Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_LIST_PAGES):
            result = await self.request(wire.RESOURCES_LIST, {"cursor": cursor} if cursor else None)
            page = result.get("resources")
            if isinstance(page, list):
                resources.extend(r for r in page if isinstance(r, dict))
            next_cursor = result.get("nextCursor")
            if not isinstance(next_cursor, str) or not next_cursor:
                return resources
            if next_cursor in seen:
                raise ProtocolViolation("resources/list: nextCursor repeats")
            seen.add(next_cursor)
            cursor = next_cursor
        raise ProtocolViolation(f"resources/list: more than {MAX_LIST_PAGES} pages")

    async def read_resource(self, uri: str) -> dict[str, Any]:
        return await self.request(wire.RESOURCES_READ, {"uri": uri})

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.request(wire.TOOLS_CALL, {"name": name, "arguments": arguments})

    def listen(
        self, notifications: dict[str, Any], *, max_frames_per_s: float | None = None
    ) -> ListenStream:
        """Open a listen stream; use as ``async with client.listen({...}) as stream``.

        ``max_frames_per_s`` paces how fast the stream is read (see :class:`ListenStream`).
        """
        return ListenStream(self, notifications, max_frames_per_s=max_frames_per_s)


def _is_event_stream(headers: Mapping[str, str]) -> bool:
    return headers.get("content-type", "").split(";")[0].strip().lower() == "text/event-stream"


def _not_a_stream(
    status: int, headers: Mapping[str, str], body: bytes, request_id: Any
) -> NoReturn:
    """A listen answered with a complete body, on either transport: the refusal or HTTP error it
    carries, else a result where a stream belongs."""
    parse_response(
        status,
        headers.get("content-type", ""),
        body,
        request_id,
        wire.LISTEN,
        www_authenticate=headers.get("www-authenticate"),
    )
    raise ProtocolViolation("subscriptions/listen was answered with a result, not a stream")


class ListenStream:
    """One open ``subscriptions/listen`` stream: the machine plus the bytes it is fed."""

    # Slots, not an attribute dict: a daemon holds one per link for the stream's life.
    __slots__ = (
        "_chunks",
        "_client",
        "_content",
        "_decoder",
        "_ended",
        "_eof",
        "_follower",
        "_on_event",
        "_pending",
        "_pieces",
        "_rate",
        "_refilled",
        "_response",
        "_tokens",
        "closed_locally",
        "honored_uris",
        "last_activity",
        "listen_id",
        "machine",
        "requested",
        "streamed",
    )

    def __init__(
        self,
        client: McpClient,
        notifications: dict[str, Any],
        *,
        max_frames_per_s: float | None = None,
    ) -> None:
        self._client = client
        self._rate = max_frames_per_s if max_frames_per_s and max_frames_per_s > 0 else None
        self._tokens = self._rate or 0.0
        self._refilled = time.monotonic()
        self.requested = dict(notifications)
        self.listen_id: Any = None
        self.machine: ListenMachine | None = None
        self.honored_uris: list[str] = []
        """The acknowledgement's honored URIs; those it shares with the request are the
        request's own strings, so an open stream keeps no part of the parsed acknowledgement
        (a daemon holds thousands of streams for their lives)."""
        self.last_activity = time.monotonic()
        self.closed_locally = False
        self.streamed = False
        """True once the server answered with an event stream (there is a stream to close)."""
        self._response: StreamAnswer | None = None
        self._pending: list[ListenEvent] = []
        """A list, not a deque: rarely more than one event, and a deque's 64-slot block would
        be kept for each listen stream's life (the daemon's RSS target)."""
        self._decoder = SSEDecoder()
        self._content: ContentDecoder | None = None
        self._pieces: Iterator[bytes] = iter(())
        self._eof = False
        self._chunks: AsyncIterator[bytes] | None = None
        self._ended: ListenEvent | None = None
        self._on_event: Callable[[ListenEvent | McpError], None] | None = None
        """Who :meth:`follow` hands the events to (None: nobody follows)."""
        self._follower: asyncio.Task[None] | None = None

    @property
    def acknowledged(self) -> bool:
        """The server's acknowledgement arrived (even if a later frame broke the rules)."""
        return self.machine is not None and self.machine.acknowledged

    async def __aenter__(self) -> ListenStream:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def open(self) -> Acknowledged:
        """POST the listen and wait for its acknowledgement (caller bounds the time)."""
        try:
            client = self._client
            request_id, message, headers = client._message(
                wire.LISTEN, {"notifications": self.requested}
            )
            self.listen_id = request_id
            self.machine = ListenMachine(request_id)
            content = json_bytes(message)
            stream = self._response = await client.transport.open_stream(content, headers)
            if not _is_event_stream(stream.headers):
                # A refusal (or an HTTP error): a complete body, not a stream.
                try:
                    body = await stream.read_all(MAX_RESPONSE_BYTES)
                finally:
                    await stream.aclose()
                _not_a_stream(stream.status, stream.headers, body, request_id)
            if stream.status >= 400:
                await stream.aclose()
                raise HttpStatusError(stream.status, "")
            return await self._stream_from(stream.headers, stream.chunks())
        except McpError as exc:
            self._client.redact(exc)
            raise

    async def _stream_from(
        self, headers: Mapping[str, str], chunks: AsyncIterator[bytes]
    ) -> Acknowledged:
        """Both transports from here on: decode the stream's content coding, await the ack."""
        self.streamed = True
        self._content = ContentDecoder(
            headers.get("content-encoding"), piece_bytes=STREAM_PIECE_BYTES
        )
        self._chunks = chunks
        return await self._acknowledged()

    async def _acknowledged(self) -> Acknowledged:
        event = await self._next()
        if isinstance(event, Acknowledged):
            content = self._content
            take = getattr(self._response, "take_quiet_pieces", None)
            if take is not None and content is not None and content.coding is None:
                take(self._quiet_piece)
            return event
        await self.aclose()
        if isinstance(event, Failed):
            raise event.error
        raise ProtocolViolation(f"listen ended before its acknowledgement ({event})")

    async def _next(self) -> ListenEvent:
        """Decode lazily: one decoded piece (at most 64 KiB) at a time, never a whole chunk.

        Pulling pieces only when the pending events are used up keeps a compressed flood
        from inflating into memory, and leaves unread bytes in the socket (back-pressure).
        ``last_activity`` moves only when a complete event or comment arrives: a server
        trickling bytes that never finish a frame must not look alive.
        """
        try:
            assert self.machine is not None and self._chunks is not None
            assert self._content is not None
            fresh = False
            while not self._pending:
                if self._ended is not None:
                    return self._ended
                piece = next(self._pieces, None)
                if piece is None:
                    if self._eof:
                        self._ended = self.machine.eof()
                        continue
                    try:
                        chunk = await self._chunks.__anext__()
                    except StopAsyncIteration:
                        self._eof = True
                        self._pieces = self._content.flush()
                        continue
                    except TransportError as exc:  # either transport's only failure
                        cause = exc.__cause__ or exc
                        self._ended = self.machine.eof(
                            f"stream broke: {str(cause) or type(cause).__name__}"
                        )
                        continue
                    self._pieces = self._content.decode(chunk)
                    fresh = True  # the read of this chunk was the loop's turn
                    continue
                try:
                    items = self._decoder.feed(piece)
                except EventTooLarge as exc:
                    raise ProtocolViolation(str(exc)) from exc
                if items:
                    self.last_activity = time.monotonic()
                    if self._rate is not None:
                        await self._pace(len(items), fresh)
                fresh = False
                for item in items:
                    if isinstance(item, Comment) or not isinstance(item, Event):
                        continue
                    if item.event != "message":
                        continue
                    event = self.machine.receive(parse_json_message(item.data))
                    if isinstance(event, Acknowledged):
                        # Here, not when open() takes it: a later frame of the same piece
                        # may break the rules first, and the probe reports what was honored.
                        self._honor(event)
                    elif isinstance(event, Failed):  # the server's own words: may echo secrets
                        self._client.redact(event.error)
                    self._pending.append(event)
                    if isinstance(event, (Closed, Failed)):
                        # The stream is over; later bytes are not read.
                        self._ended = event
                        break
            return self._pending.pop(0)
        except McpError as exc:
            self._client.redact(exc)
            raise

    def _honor(self, ack: Acknowledged) -> None:
        asked = self.requested.get("resourceSubscriptions")
        own = {u: u for u in asked if isinstance(u, str)} if isinstance(asked, list) else {}
        self.honored_uris = [own.get(u, u) for u in honored_uris(ack.honored)]
        self.requested = {}  # sent and answered: not kept for the stream's life

    def _quiet_piece(self, piece: bytes) -> bool:
        """A piece that arrived while :meth:`_next` waits for a chunk (the lean transport
        offers it before waking the reader): keep-alive comments are counted here, as
        :meth:`_next` would count them, and taken, so an idle stream's keep-alive costs no
        turn of the reading task. Anything else, or comments over the frame rate (their
        reader then paces them), is left for :meth:`_next`."""
        if self._pending or self._ended is not None:
            return False
        comments = self._decoder.comments_only(piece)
        if not comments:
            return False
        now = time.monotonic()
        if self._rate is not None:
            tokens = min(self._rate, self._tokens + (now - self._refilled) * self._rate)
            if tokens < comments:
                return False
            self._tokens = tokens - comments
            self._refilled = now
        self.last_activity = now
        return True

    async def _pace(self, frames: int, fresh: bool) -> None:
        """Token bucket over frames (events and comments) read from this stream.

        One event loop serves every link: a server flooding frames as fast as TCP allows
        must not take the CPU from the others (docs/benchmarks.md has what it did to other
        links' latency). Over the rate we sleep before reading more, the socket fills, and
        the server's writes block. Below it each decoded piece is still one turn: the first
        piece of a chunk (``fresh``) came after waiting for that chunk, the others of the
        same chunk yield first. So a keep-alive frame or a notification, one chunk each,
        costs the loop the wake-up that brought it and no second turn.
        """
        assert self._rate is not None
        now = time.monotonic()
        self._tokens = min(self._rate, self._tokens + (now - self._refilled) * self._rate)
        self._refilled = now
        self._tokens -= frames
        if self._tokens < 0:
            await asyncio.sleep(-self._tokens / self._rate)
        elif not fresh:
            await asyncio.sleep(0)

    def follow(self, on_event: Callable[[ListenEvent | McpError], None]) -> None:
        """Hand every later event of the acknowledged stream to ``on_event``: notifications,
        then the one that ends it (Closed, Failed, Lost) or the :class:`McpError` of a frame
        that broke the rules, after which nothing more comes. ``on_event`` returns at once
        (it must not wait); an exception from it ends the following like a broken frame.

        Why: a daemon follows thousands of idle streams, and a task per stream waiting in
        :meth:`next_event` is a task and its chain of coroutine frames each. On the lean
        transport, when the body is not content-coded, the stream is followed inside the
        socket's callback (:meth:`LeanStream.follow`) and no task exists; over the frame
        rate the socket is left unread for as long as a reader would have slept. Elsewhere
        one task reads as :meth:`next_event` does."""
        self._on_event = on_event
        for event in self._pending:
            if self._on_event is None:
                return
            self._deliver(event)
        self._pending = []
        if self._ended is not None:
            self._finish(self._ended)
            return
        response = self._response
        hand = getattr(response, "follow", None)
        content = self._content
        if hand is None or content is None or content.coding is not None or self._eof:
            self._follower = asyncio.get_running_loop().create_task(self._drive())
            return
        for piece in self._pieces:
            self._piece(piece)
            if self._on_event is None:
                return
        self._pieces = iter(())
        hand(self._piece, self._body_ended)

    def unfollow(self) -> None:
        """Hand nothing more to the follower (the stream stays open)."""
        self._on_event = None
        follower, self._follower = self._follower, None
        if follower is not None and follower is not asyncio.current_task():
            follower.cancel()
        hand = getattr(self._response, "follow", None)
        if hand is not None:
            hand(None, None)

    def _deliver(self, event: ListenEvent | McpError) -> None:
        on_event = self._on_event
        if on_event is None:
            return
        if isinstance(event, McpError | Closed | Failed | Lost):
            self._finish(event)
            return
        try:
            on_event(event)
        except Exception as exc:
            self._finish(McpError(f"listen reader crashed: {exc!r}"[:300]))

    def _finish(self, end: ListenEvent | McpError) -> None:
        """The last event: handed over once, then the following stops."""
        on_event = self._on_event
        if isinstance(end, McpError):
            self._client.redact(end)
        elif self._ended is None:
            self._ended = end
        self.unfollow()
        if on_event is not None:
            with contextlib.suppress(Exception):
                on_event(end)

    def _piece(self, piece: bytes) -> None:
        """One body piece of a followed stream, in the socket's callback: never raises."""
        try:
            # Keep-alive comments only: what feeding them would do (they are frames, and
            # proof of life), without decoding each into a Comment nobody reads. At 10,000
            # links that is 667 keep-alives a second (docs/benchmarks.md).
            comments = self._decoder.comments_only(piece)
            items = [] if comments else self._decoder.feed(piece)
            frames = comments or len(items)
            if not frames:
                return
            now = self.last_activity = time.monotonic()
            rate = self._rate
            if rate is not None:
                tokens = min(rate, self._tokens + (now - self._refilled) * rate) - frames
                self._tokens, self._refilled = tokens, now
                if tokens < 0:
                    pause = getattr(self._response, "pause_for", None)
                    if pause is not None:
                        pause(-tokens / rate)
            machine = self.machine
            assert machine is not None
            for item in items:
                if self._on_event is None:
                    return
                if not isinstance(item, Event) or item.event != "message":
                    continue
                event = machine.receive(parse_json_message(item.data))
                if isinstance(event, Failed):  # the server's own words: may echo secrets
                    self._client.redact(event.error)
                self._deliver(event)
        except EventTooLarge as exc:
            self._finish(ProtocolViolation(str(exc)))
        except McpError as exc:
            self._finish(exc)
        except Exception as exc:
            self._finish(McpError(f"listen reader crashed: {exc!r}"[:300]))

    def _body_ended(self, exc: BaseException | None) -> None:
        """The followed stream's body ended: cleanly (what the decoder still holds, then
        EOF), or broken."""
        try:
            machine = self.machine
            assert machine is not None and self._content is not None
            if exc is None:
                self._eof = True
                for piece in self._content.flush():
                    self._piece(piece)
                if self._on_event is not None:
                    self._finish(machine.eof())
            elif isinstance(exc, TransportError):
                cause = exc.__cause__ or exc
                self._finish(machine.eof(f"stream broke: {str(cause) or type(cause).__name__}"))
            elif isinstance(exc, McpError):
                self._finish(exc)
            else:
                self._finish(McpError(f"listen stream failed: {exc!r}"[:300]))
        except Exception as failure:
            self._finish(McpError(f"listen reader crashed: {failure!r}"[:300]))

    async def _drive(self) -> None:
        """:meth:`follow` where the transport cannot hand pieces over: one task reads."""
        try:
            while self._on_event is not None:
                self._deliver(await self._next())
        except McpError as exc:
            self._finish(exc)
        except Exception as exc:
            self._finish(McpError(f"listen reader crashed: {exc!r}"[:300]))

    async def next_event(self) -> ListenEvent:
        """The next notification, or the event that ended the stream (Closed/Failed/Lost)."""
        return await self._next()

    def __aiter__(self) -> ListenStream:
        return self

    async def __anext__(self) -> ListenEvent:
        if self._ended is not None and not self._pending:
            raise StopAsyncIteration
        return await self._next()

    async def aclose(self) -> None:
        """Close from our side; on HTTP that is the unsubscribe (spec §3.5)."""
        if self._on_event is not None or self._follower is not None:
            self.unfollow()
        response = self._response
        if response is not None and not response.is_closed:
            self.closed_locally = self._ended is None
            await response.aclose()
        if self._ended is None:
            self._ended = Lost("closed locally")


__all__ = [
    "DiscoverResult",
    "ListenStream",
    "McpClient",
]


_CLIENT_INFOS: dict[tuple[str, str], dict[str, str]] = {}


def _client_info(name: str, version: str) -> dict[str, str]:
    info = _CLIENT_INFOS.get((name, version))
    if info is None:
        if len(_CLIENT_INFOS) >= 16:
            _CLIENT_INFOS.clear()  # a caller naming its clients freely must not grow it
        info = _CLIENT_INFOS[(name, version)] = {"name": name, "version": version}
    return info


def _discovered(result: dict[str, Any]) -> DiscoverResult:
    """A discover result, checked: it must offer this revision and carry capabilities."""
    versions = result.get("supportedVersions")
    capabilities = result.get("capabilities")
    if not isinstance(versions, list) or wire.PROTOCOL_VERSION not in versions:
        # A discover *result* that does not offer 2026-07-28 (go-sdk's stateful server
        # lists only 2025 revisions) is a legacy advertisement, as for the SDKs' probes.
        raise ProtocolUnsupported(
            f"server/discover lists {versions!r}, not {wire.PROTOCOL_VERSION}"
        )
    if not isinstance(capabilities, dict):
        raise ProtocolViolation("server/discover: result lacks capabilities")
    meta = result.get("_meta")
    info = meta.get(wire.META_SERVER_INFO) if isinstance(meta, dict) else None
    return DiscoverResult(
        [str(v) for v in versions],
        capabilities,
        info if isinstance(info, dict) else None,
        result,
    )


def _result_of(
    status: int, headers: Mapping[str, str], body: bytes, request_id: Any, method: str
) -> dict[str, Any]:
    """One answer, whichever transport carried it: the result, or the error it stands for."""
    result = parse_response(
        status,
        headers.get("content-type", ""),
        body,
        request_id,
        method,
        www_authenticate=headers.get("www-authenticate"),
    )
    if result.get("resultType", "complete") == "input_required":
        raise McpError(
            f"{method}: the server asked for client input (input_required), "
            "which this client does not provide"
        )
    return result
