"""The face over Streamable HTTP at ``/mcp`` on the daemon's API listeners (both eras).

The daemon's guard (``service/http/guard.py``) has already checked Host, Origin and the
bearer token before a request gets here. Routing, as the Python SDK's dual-era servers do:
a request whose ``MCP-Protocol-Version`` header is present and not a handshake-era version,
or whose ``params._meta`` carries a protocol version, is 2026-07-28 (stateless, validated by
the spec's ladder, §2.3); anything else is the handshake era (``initialize`` mints an
``Mcp-Session-Id``; ``GET`` opens the session's notification stream; ``DELETE`` ends it).

Bounds: a body of at most ``MAX_MESSAGE_BYTES`` (413), read within the shared body timeout
(``service/http/limits.py``);
``max_sessions`` handshake-era sessions (503), idle ones reaped; ``max_listens`` open
2026-07-28 listens (one more: HTTP 503 with -32603, seed 001's limit); listens and pending
waits count against the shared ``max_waiters`` (the same pool as the API's SSE streams and
long-polls); each
session's or listen's queue holds ``QUEUE_LIMIT`` notifications (a session drops and counts
the overflow; a listen that overflows is closed without its result, so the client re-listens
and refetches, as the spec's abrupt end means).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from service.app.errors import BodyTimeout, BodyTooLarge, TooBusy
from service.face import protocol as p
from service.face.handlers import Face
from service.face.session import Session, known, progress_reporter
from service.http import sse
from service.http.limits import RequestLimits
from service.jsonencode import json_bytes
from service.mcp.wire import decode_header_value

T = TypeVar("T")
MAX_MESSAGE_BYTES: Final = 1024 * 1024
QUEUE_LIMIT: Final = 1024
MAX_LISTENS: Final = 100
"""Seed 001's ``subscriptions: { max: 100 }``: concurrent listen streams."""
SESSION_IDLE_S: Final = 1800.0
SSE_HEADERS: Final = {
    "Cache-Control": "no-cache, no-transform",
    "X-Accel-Buffering": "no",
}


def _frame(message: dict[str, Any]) -> bytes:
    """A JSON-RPC message as Streamable HTTP's SSE event (type ``message``)."""
    return sse.json_event(message, event_type="message")


KEEPALIVE: Final = sse.comment("keepalive")


@dataclass
class _HttpSession:
    session: Session
    queue: asyncio.Queue[dict[str, Any]]
    last_used: float = field(default_factory=time.monotonic)
    streaming: bool = False


class FaceHttp:
    """ASGI app for ``/mcp``."""

    def __init__(
        self,
        face: Face,
        state: RequestLimits,
        *,
        max_sessions: int = 256,
        queue_limit: int = QUEUE_LIMIT,
        max_listens: int = MAX_LISTENS,
    ) -> None:
        self.face = face
        self.state = state
        self.max_sessions = max_sessions
        self.queue_limit = queue_limit
        self.max_listens = max_listens
        self.listens = 0
        self.sessions: dict[str, _HttpSession] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        response = await self.respond(request)
        await response(scope, receive, send)

    async def respond(self, request: Request) -> Response:
        if request.method == "GET":
            return self._get(request)
        if request.method == "DELETE":
            return await self._delete(request)
        if request.method != "POST":
            return Response(status_code=405, headers={"Allow": "GET, POST, DELETE"})
        try:
            raw = await self.state.read_body(request, MAX_MESSAGE_BYTES, "message")
        except (BodyTooLarge, BodyTimeout) as exc:
            err = p.RpcError(p.INVALID_REQUEST, exc.message)
            return JSONResponse(p.error(None, err), status_code=exc.status)
        try:
            msg = p.decode(raw)
        except p.RpcError as exc:
            return JSONResponse(p.error(p.request_id_of(raw), exc), status_code=400)
        header = request.headers.get("mcp-protocol-version")
        modern = (header is not None and header not in p.HANDSHAKE_VERSIONS) or (
            p.modern_meta(msg.params) is not None
        )
        if modern:
            return await self._modern(request, msg, header)
        return await self._legacy(request, msg)

    # ---- 2026-07-28 -------------------------------------------------------------------
    async def _modern(self, request: Request, msg: p.Incoming, header: str | None) -> Response:
        if msg.is_response or not msg.has_id:
            return Response(status_code=202)  # e.g. the TS client's notifications/cancelled
        try:
            self._check_headers(request, msg, header)
            p.check_envelope(msg.params, header)
            known(msg.method or "", True)
        except p.RpcError as exc:
            return _error_response(msg.id, exc)
        session = Session(self.face, lambda _m: False)
        session.version = p.MODERN
        if msg.method == "subscriptions/listen":
            return await self._listen(msg, session)
        return await self._answer(request, msg, session, modern=True)

    @staticmethod
    def _check_headers(request: Request, msg: p.Incoming, header: str | None) -> None:
        if header is None:
            raise p.RpcError(p.HEADER_MISMATCH, "MCP-Protocol-Version header is required")
        method = request.headers.getlist("mcp-method")
        if method != [msg.method]:
            raise p.RpcError(p.HEADER_MISMATCH, "Mcp-Method header must equal the method")
        wanted = None
        if msg.method in ("tools/call", "prompts/get"):
            wanted = msg.params.get("name")
        elif msg.method == "resources/read":
            wanted = msg.params.get("uri")
        names = request.headers.getlist("mcp-name")
        if wanted is None:
            if names:
                raise p.RpcError(p.HEADER_MISMATCH, "Mcp-Name is not expected for this method")
            return
        try:
            decoded = [decode_header_value(v) for v in names]
        except ValueError:
            decoded = []
        if decoded != [wanted]:
            raise p.RpcError(p.HEADER_MISMATCH, "Mcp-Name header must equal the name or uri")

    async def _listen(self, msg: p.Incoming, session: Session) -> Response:
        try:
            self.state.check_capacity()
            if self.listens >= self.max_listens:
                raise TooBusy(f"{self.listens} listens open (limit {self.max_listens})")
        except TooBusy:
            # Seed 001: "exceeding returns 503 + -32603".
            err = p.RpcError(p.INTERNAL_ERROR, "Subscription limit reached")
            return JSONResponse(p.error(msg.id, err), status_code=503)
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(self.queue_limit)
        overflow = asyncio.Event()

        def push(message: dict[str, Any]) -> bool:
            try:
                queue.put_nowait(message)
            except asyncio.QueueFull:
                overflow.set()
                return False
            return True

        session.send = push
        try:
            await session.open_listen(msg.id, msg.params)
        except p.RpcError as exc:
            return _error_response(msg.id, exc)
        state = self.state
        granted = session.listens.get(msg.id)
        # Seed 001: a listen that can carry nothing is ended right after its ack.
        carries_nothing = granted is not None and not granted.uris and not granted.list_changed

        async def stream() -> AsyncIterator[bytes]:
            async with state.waiter_slot():
                self.listens += 1
                try:
                    if carries_nothing:
                        yield _frame(queue.get_nowait())  # the acknowledgement
                        yield _frame(session.cancel_listen(msg.id) or {})
                        return
                    while not overflow.is_set():
                        message = await _next(queue, state.closing, state.keepalive_s)
                        if message is _CLOSING:
                            # The daemon stops: the listen's result is its graceful end.
                            yield _frame(session.cancel_listen(msg.id) or {})
                            return
                        yield KEEPALIVE if message is None else _frame(message)
                finally:
                    self.listens -= 1
                    await session.close()

        return StreamingResponse(stream(), media_type="text/event-stream", headers=SSE_HEADERS)

    async def _answer(
        self, request: Request, msg: p.Incoming, session: Session, *, modern: bool
    ) -> Response:
        """One request's answer: JSON, or SSE with progress when the client asked for it."""
        token = p.progress_token(msg.params) if msg.method == "tools/call" else None
        if token is None:
            try:
                async with self._wait_slot(msg):
                    answer = await _unless_gone(request, session.handle(msg))
            except ClientGone:
                return Response(status_code=499)
            except TooBusy as exc:
                answer = p.error(msg.id, p.RpcError(p.INTERNAL_ERROR, exc.message))
            return _json_answer(answer, modern)
        try:
            self.state.check_capacity()
        except TooBusy as exc:
            return _json_answer(p.error(msg.id, p.RpcError(p.INTERNAL_ERROR, exc.message)), modern)
        limit = max(2, self.queue_limit)
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(limit)

        def send(message: dict[str, Any]) -> bool:
            if queue.qsize() >= limit - 1:  # the last slot is the end marker's
                return False
            queue.put_nowait(message)
            return True

        progress = progress_reporter(token, send)
        state = self.state

        async def stream() -> AsyncIterator[bytes]:
            async with state.waiter_slot():
                task = asyncio.create_task(session.handle(msg, progress))
                task.add_done_callback(lambda _t: queue.put_nowait(None))
                try:
                    while (item := await queue.get()) is not None:
                        yield _frame(item)
                    answer = task.result()
                    if answer is not None:
                        yield _frame(answer)
                finally:
                    task.cancel()

        return StreamingResponse(stream(), media_type="text/event-stream", headers=SSE_HEADERS)

    @contextlib.asynccontextmanager
    async def _wait_slot(self, msg: p.Incoming) -> AsyncIterator[None]:
        """A ``wait_for_change`` call holds one of the API's waiter slots while it waits."""
        is_wait = msg.method == "tools/call" and msg.params.get("name") == "wait_for_change"
        if not is_wait:
            yield
            return
        self.state.check_capacity()
        async with self.state.waiter_slot():
            yield

    # ---- handshake era ----------------------------------------------------------------
    async def _legacy(self, request: Request, msg: p.Incoming) -> Response:
        if msg.method == "initialize":
            return await self._initialize(msg)
        sid = request.headers.get("mcp-session-id")
        if sid is None:
            err = p.RpcError(p.INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required")
            return JSONResponse(p.error(msg.id if msg.has_id else None, err), status_code=400)
        entry = self.sessions.get(sid)
        if entry is None:
            err = p.RpcError(p.INVALID_REQUEST, "Session not found: initialize again")
            return JSONResponse(p.error(msg.id if msg.has_id else None, err), status_code=404)
        entry.last_used = time.monotonic()
        if msg.is_response or not msg.has_id:
            return Response(status_code=202)
        response = await self._answer(request, msg, entry.session, modern=False)
        response.headers["mcp-session-id"] = sid
        return response

    async def _initialize(self, msg: p.Incoming) -> Response:
        self._reap()
        if len(self.sessions) >= self.max_sessions:
            err = p.RpcError(p.INVALID_REQUEST, f"Too many open sessions ({self.max_sessions})")
            return JSONResponse(p.error(msg.id, err), status_code=503)
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(self.queue_limit)

        def push(message: dict[str, Any]) -> bool:
            try:
                queue.put_nowait(message)
            except asyncio.QueueFull:
                return False
            return True

        session = Session(self.face, push)
        answer = await session.handle(msg)
        if answer is None or "error" in answer:
            await session.close()
            return JSONResponse(answer, status_code=400)
        sid = secrets.token_urlsafe(24)
        self.sessions[sid] = _HttpSession(session, queue)
        return JSONResponse(answer, headers={"mcp-session-id": sid})

    def _reap(self) -> None:
        now = time.monotonic()
        for sid, entry in list(self.sessions.items()):
            if not entry.streaming and now - entry.last_used > SESSION_IDLE_S:
                del self.sessions[sid]
                asyncio.get_running_loop().create_task(entry.session.close())

    def _get(self, request: Request) -> Response:
        sid = request.headers.get("mcp-session-id")
        entry = self.sessions.get(sid or "")
        if entry is None:
            return Response(status_code=405 if sid is None else 404, headers={"Allow": "POST"})
        if entry.streaming:
            err = p.RpcError(p.INVALID_REQUEST, "this session already has a GET stream")
            return JSONResponse(p.error(None, err), status_code=409)
        try:
            self.state.check_capacity()
        except TooBusy as exc:
            return JSONResponse(p.error(None, p.RpcError(p.INTERNAL_ERROR, exc.message)), 503)
        entry.streaming = True
        state = self.state

        async def stream() -> AsyncIterator[bytes]:
            async with state.waiter_slot():
                try:
                    yield sse.comment("stream open")
                    while True:
                        message = await _next(entry.queue, state.closing, state.keepalive_s)
                        if message is _CLOSING:
                            return
                        yield KEEPALIVE if message is None else _frame(message)
                finally:
                    entry.streaming = False
                    entry.last_used = time.monotonic()

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={**SSE_HEADERS, "mcp-session-id": sid or ""},
        )

    async def _delete(self, request: Request) -> Response:
        entry = self.sessions.pop(request.headers.get("mcp-session-id") or "", None)
        if entry is None:
            return Response(status_code=404)
        await entry.session.close()
        return Response(status_code=200)

    async def close(self) -> None:
        for entry in self.sessions.values():
            await entry.session.close()
        self.sessions.clear()


class ClientGone(Exception):
    """The client closed the connection while its request was pending."""


async def _unless_gone(request: Request, work: Awaitable[T]) -> T:
    """``work``'s result, or ClientGone as soon as the client disconnects (a pending
    ``wait_for_change`` must not hold its waiter slot for a client that left)."""
    task = asyncio.ensure_future(work)

    async def gone() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(gone())
    try:
        await asyncio.wait({task, watcher}, return_when="FIRST_COMPLETED")
    finally:
        watcher.cancel()
    if not task.done():
        task.cancel()
        raise ClientGone
    return task.result()


_CLOSING: Final[dict[str, Any]] = {}


async def _next(
    queue: asyncio.Queue[dict[str, Any]], closing: asyncio.Event, keepalive_s: float
) -> dict[str, Any] | None:
    """The next queued message; None after ``keepalive_s`` of silence; ``_CLOSING`` once the
    daemon stops (queued messages first)."""
    if not queue.empty():
        return queue.get_nowait()
    if closing.is_set():
        return _CLOSING
    getter = asyncio.ensure_future(queue.get())
    closer = asyncio.ensure_future(closing.wait())
    try:
        done, _ = await asyncio.wait(
            {getter, closer}, timeout=keepalive_s, return_when="FIRST_COMPLETED"
        )
    finally:
        closer.cancel()
        if not getter.done():
            getter.cancel()
    if getter in done and not getter.cancelled():
        return getter.result()
    return _CLOSING if closer in done else None


def _error_response(msg_id: Any, exc: p.RpcError) -> JSONResponse:
    return JSONResponse(p.error(msg_id, exc), status_code=exc.status)


def _json_answer(answer: dict[str, Any] | None, modern: bool) -> Response:
    if answer is None:
        return Response(status_code=202)
    status = 200
    if modern and "error" in answer:
        status = p.HTTP_STATUS.get(answer["error"]["code"], 200)
    return Response(json_bytes(answer), status_code=status, media_type="application/json")
