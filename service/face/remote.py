"""The face's backend in ``mcpsubctl mcp``: the daemon's local API over its unix socket (or
loopback TCP with the bearer token), through :mod:`service.localclient`'s asyncio driver:
the one client of the local API (and its bounded reader) the CLIs and the hook use too.

One SSE connection to ``/v1/events/stream`` tells the process when new events exist (what
the daemon's event hub does in-process) and carries the events themselves: while it is
connected, "events after a cursor" are answered from what it delivered (``ring.py``) and the
list of subscription identities is kept until a subscription is created or deleted. Once
the process first describes a change (``wait_for_change``, a channel), the stream is reopened
with ``include=content``, so each ``resource.updated`` event carries its revision's text (up
to the daemon's inline bound): a change whose revision and the one before it both rode along
is described from memory (``RevisionMemory``), so a ``wait_for_change`` costs no request per
change; otherwise one ``/v1/wait`` reads it. A process that only notifies never asks for the
content (the daemon reads each revision for a stream that carries it, which delays the
events by a query). The stream is read through the bounded ``service.mcp.sse`` decoder,
so a broken daemon cannot make it buffer more than :data:`MAX_SSE_EVENT`. It reconnects from
the last id after a daemon restart. Every answer comes from the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import Any, Final

from service.apishapes import answer_problem
from service.app.errors import AgentError
from service.backoff import Backoff
from service.face.backend import LookThenWait
from service.face.ring import EventRing, RevisionMemory
from service.localclient import (
    AsyncConnection,
    Closed,
    Endpoint,
    NotTrusted,
    ProtocolError,
    TooLarge,
    query,
)
from service.mcp.sse import Event, EventTooLarge, SSEDecoder

TIMEOUT_S: Final = 30.0
"""Longest one request to the API takes, its answer read."""
CONNECT_TIMEOUT_S: Final = 5.0
RECONNECT: Final = Backoff(base_s=1.0, cap_s=1.0, jitter=0)
"""Before reconnecting to the daemon's events stream (the daemon restarts; it is local)."""
START_WAIT_S: Final = 20.0
"""Longest a request waits for the daemon this face is starting (its own bound is 15 s)."""
MAX_SSE_EVENT: Final = 64 * 1024
"""Largest event (or unfinished line) the events stream may buffer: twice the daemon's
``INLINE_CONTENT_MAX`` (32 KiB of content) leaves room for the event around it."""
MAX_RESPONSE_BYTES: Final = 64 * 1024 * 1024
"""Largest answer body read (``mcpsubctl``'s bound: the largest content, JSON-escaped)."""
IDLE_CONNECTIONS: Final = 4
"""Kept-alive connections held for the next requests."""
_FAILED = (OSError, ProtocolError, TooLarge)
"""How an exchange fails (``TimeoutError`` is an ``OSError``): the daemon is unavailable."""


class ApiBackend(LookThenWait):
    def __init__(self, endpoint: Endpoint, *, start_hint: str | None = None) -> None:
        self.endpoint = endpoint
        self.start_hint = start_hint or endpoint.start_hint()
        self.display = endpoint.display
        self._idle: list[AsyncConnection] = []
        self._starting: asyncio.Future[Any] | None = None
        self._last_seen = -1
        self._ring = EventRing()
        self._revisions = RevisionMemory()
        self._with_content = False
        self._identities: list[dict[str, Any]] | None = None
        self._changed = asyncio.Event()
        self._watcher: asyncio.Task[None] | None = None

    def starting(self, started: asyncio.Future[Any]) -> None:
        """A daemon is being started for this face (``mcpsubctl mcp``'s autostart runs beside
        the server, so ``initialize`` never waits for it): until ``started`` is done, a
        request that finds no daemon waits for it (at most :data:`START_WAIT_S`) and tries
        once more, instead of failing at once."""
        self._starting = started

    def retarget(self, socket: str, start_hint: str) -> None:
        """Talk to the daemon at ``socket`` from now on (the installed service the autostart
        started, whose socket is not the default one)."""
        self.endpoint = Endpoint(socket=socket)
        self.display = self.endpoint.display
        self.start_hint = start_hint
        self._drop_idle()
        if self._watcher is not None and not self._watcher.done():
            self._watcher.cancel()
            self._watcher = asyncio.create_task(self._watch(), name="face-events")

    def _drop_idle(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    async def _started(self) -> bool:
        """Wait for a start in progress; True when there was one to wait for."""
        starting = self._starting
        if starting is None or starting.done():
            return False
        with contextlib.suppress(TimeoutError, Exception):
            await asyncio.wait_for(asyncio.shield(starting), START_WAIT_S)
        return True

    async def aclose(self) -> None:
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watcher
        self._drop_idle()

    async def _exchange(self, payload: bytes) -> tuple[int, str, bytes]:
        """One request on a kept connection or a new one: (status, reason, body), within
        :data:`TIMEOUT_S`. A kept connection the daemon closed while idle fails before any
        answer byte: the request is sent once more on a new connection."""
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                reused = bool(self._idle)
                if reused:
                    connection = self._idle.pop()
                else:
                    connection = await AsyncConnection.open(self.endpoint, CONNECT_TIMEOUT_S)
                try:
                    answer = await connection.exchange(payload, MAX_RESPONSE_BYTES)
                    body = await connection.body(answer)
                except (Closed, ConnectionResetError, BrokenPipeError):
                    connection.close()
                    if reused:
                        continue
                    raise
                except BaseException:
                    connection.close()
                    raise
                if answer.keep_alive and len(self._idle) < IDLE_CONNECTIONS:
                    self._idle.append(connection)
                else:
                    connection.close()
                return answer.status, answer.reason, body

    async def _request(
        self,
        method: str,
        path: str,
        *,
        wait_for_start: bool = True,
        params: dict[str, Any] | None = None,
        json_body: dict[str, Any] | None = None,
    ) -> tuple[int, Any]:
        target = path + query(params or {})
        data = json.dumps(json_body).encode() if json_body is not None else None
        try:
            try:
                status, reason, raw = await self._exchange(
                    self.endpoint.request(method, target, data)
                )
            except NotTrusted:
                raise
            except _FAILED:
                if not (wait_for_start and await self._started()):
                    raise
                # Built again: the start may have moved the face to the service's socket.
                status, reason, raw = await self._exchange(
                    self.endpoint.request(method, target, data)
                )
        except NotTrusted as exc:
            raise AgentError(exc.error_code, exc.message, exc.hint) from None
        except _FAILED as exc:
            raise AgentError(
                "DAEMON_UNAVAILABLE",
                f"the mcpsub daemon is not reachable at {self.display}: "
                f"{str(exc) or type(exc).__name__}",
                self.start_hint,
            ) from None
        try:
            body = json.loads(raw)
        except ValueError:
            body = None if 200 <= status < 300 else {}
        if 200 <= status < 300:
            problem = answer_problem(method, path, body)
            if problem is not None:
                raise AgentError(
                    "NOT_MCPSUBD",
                    f"what answers at {self.display} does not look like mcpsubd "
                    f"(HTTP {status}: {problem})",
                    "check --api / MCPSUB_API: it must name mcpsubd's socket or TCP address",
                )
        if status >= 400 and status not in (404, 408):
            code = (
                body.get("errorCode", "DAEMON_ERROR") if isinstance(body, dict) else "DAEMON_ERROR"
            )
            message = body.get("message", reason) if isinstance(body, dict) else ""
            hint = body.get("hint") if isinstance(body, dict) else None
            raise AgentError(str(code), str(message), hint)
        return status, body

    async def subscriptions(self) -> list[dict[str, Any]]:
        _, body = await self._request("GET", "/v1/subscriptions")
        subs = list(body.get("subscriptions", []))
        if subs:
            _, status = await self._request("GET", "/v1/status")
            links = status.get("links", []) if isinstance(status, dict) else []
            for sub in subs:
                sub["link"] = next(
                    (link for link in links if link.get("serverId") == sub.get("serverId")), None
                )
        return subs

    async def identities(self) -> list[dict[str, Any]]:
        cached = self._identities
        if cached is not None and self._ring.start is not None:
            return cached
        _, body = await self._request("GET", "/v1/subscriptions")
        rows = [
            {"id": s["id"], "uri": s["uri"], "serverUrl": s["serverUrl"]}
            for s in body.get("subscriptions", [])
        ]
        if self._ring.start is not None:
            self._identities = rows
        return rows

    async def content(self, subscription: dict[str, Any]) -> dict[str, Any] | None:
        status, body = await self._request(
            "GET",
            "/v1/content",
            params={"uri": subscription["uri"], "url": subscription["serverUrl"]},
        )
        return body if status == 200 else None

    async def change(self, event: dict[str, Any]) -> dict[str, Any]:
        held = self._revisions.change(event)
        if held is not None:
            return held
        self._want_content()
        # /v1/wait after (eventId - 1) answers with exactly this event, its revision and the
        # one before it.
        params = {
            "uri": event["uri"],
            "url": event["serverUrl"],
            "after": max(0, int(event["id"]) - 1),
            "timeout_ms": 1,
        }
        status, body = await self._request("GET", "/v1/wait", params=params)
        if status != 200:
            return {"revision": None, "previous": None}
        return {"revision": body.get("revision"), "previous": body.get("previous")}

    def _want_content(self) -> None:
        """From now on the stream carries revision contents: reopen it from the last id."""
        if self._with_content:
            return
        self._with_content = True
        if self._watcher is not None and not self._watcher.done():
            self._watcher.cancel()  # the new one resumes from _last_seen; nothing is skipped
            self._watcher = asyncio.create_task(self._watch(), name="face-events")

    async def subscribe(self, url: str, uris: list[str]) -> list[dict[str, Any]]:
        _, body = await self._request(
            "POST", "/v1/agent/subscriptions", json_body={"url": url, "uris": uris}
        )
        return list(body["subscriptions"])

    async def unsubscribe(self, subscription_id: int) -> dict[str, Any] | None:
        # The daemon applies the agent policy (agent_unsubscribe): a 403 is a AgentError.
        status, body = await self._request("DELETE", f"/v1/agent/subscriptions/{subscription_id}")
        return body if status == 200 else None

    async def events_after(
        self, after: int, limit: int, types: list[str] | None = None
    ) -> list[dict[str, Any]]:
        held = self._ring.after(after, limit, types)
        if held is not None:
            return held
        params: dict[str, Any] = {"after": after, "limit": limit}
        if types:
            params["type"] = ",".join(types)
        _, body = await self._request("GET", "/v1/events", params=params)
        return list(body.get("events", []))

    async def last_event_id(self) -> int:
        # Not waiting for a start: a session's follower asks this at ``initialize``, which
        # must answer at once; the follower looks again once the daemon answers.
        _, status = await self._request("GET", "/v1/status", wait_for_start=False)
        newest = status.get("lastEventId") if isinstance(status, dict) else None
        return newest if isinstance(newest, int) else 0

    async def wait_beyond(self, cursor: int, timeout: float) -> bool:
        if self._watcher is None or self._watcher.done():
            self._last_seen = max(self._last_seen, cursor)
            self._watcher = asyncio.create_task(self._watch(), name="face-events")
        if self._last_seen > cursor:
            return True
        try:
            async with asyncio.timeout(timeout):
                while self._last_seen <= cursor:
                    changed = self._changed
                    await changed.wait()
        except TimeoutError:
            return False
        return True

    async def _watch(self) -> None:
        """Follow ``/v1/events/stream`` from ``_last_seen``: hold every event delivered,
        raise ``_last_seen``, wake the waiters."""
        while True:
            start = max(self._last_seen, 0)
            params: dict[str, Any] = {"after": start}
            if self._with_content:
                params["include"] = "content"
            payload = self.endpoint.request(
                "GET", "/v1/events/stream" + query(params), None, {"Accept": "text/event-stream"}
            )
            connection: AsyncConnection | None = None
            try:
                connection = await AsyncConnection.open(self.endpoint, CONNECT_TIMEOUT_S)
                answer = await connection.exchange(payload, MAX_RESPONSE_BYTES)
                if answer.status != 200:
                    raise ProtocolError(f"events stream: {answer.status}")
                answer.max_body = None  # no end: each event is bounded by the decoder
                self._ring.reset(start)
                self._identities = None
                decoder = SSEDecoder(MAX_SSE_EVENT)
                async for chunk in connection.stream(answer):
                    for item in decoder.feed(chunk):
                        if isinstance(item, Event):
                            self._received(item.event, item.data)
            except EventTooLarge as exc:
                # Not a daemon we know how to read: say so once per connection, then
                # reconnect as for any other broken stream (the buffer never grew past it).
                print(f"mcpsubctl mcp: events stream from {self.display}: {exc}", file=sys.stderr)
            except _FAILED:
                pass
            finally:
                if connection is not None:
                    connection.close()
            # The daemon went away (or restarted): nothing held is proven any more; wake the
            # waiters so they ask the API, then reconnect.
            self._ring.reset(None)
            self._identities = None
            changed, self._changed = self._changed, asyncio.Event()
            changed.set()
            await asyncio.sleep(RECONNECT.delay(0))

    def _received(self, kind: str, data: str) -> None:
        if kind == "reset":  # the cursor was pruned: what follows does not start at it
            self._ring.reset(None)
            return
        try:
            event = json.loads(data) if data else None
        except ValueError:
            event = None
        if not isinstance(event, dict) or not isinstance(event.get("id"), int):
            return
        if kind in ("subscription.created", "subscription.deleted"):
            self._identities = None
        self._revisions.add(event)
        self._ring.add(event)
        if event["id"] > self._last_seen:
            self._last_seen = event["id"]
            changed, self._changed = self._changed, asyncio.Event()
            changed.set()
