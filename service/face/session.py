"""One :class:`Session` per client connection (stdio) or handshake-era HTTP session, over
the shared request handlers (``handlers.Face``).

A session adds what a connection owns: its era, its ``resources/subscribe`` set, its stdio
listens, and one follower task that turns the daemon's events into notifications, each pushed through the
transport's bounded ``send`` (a full queue drops the notification and counts it: a slow
client never makes the daemon buffer without bound).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from service.app.errors import AgentError
from service.backoff import Backoff
from service.face import protocol as p
from service.face import render
from service.face.backend import FaceBackend
from service.face.handlers import FOLLOW_PAGE, TOOL_LIST, Face, Progress

Send = Callable[[dict[str, Any]], bool]
"""Queue one unsolicited message; False when the client's queue is full (then dropped)."""

IDLE_WAIT_S: Final = 30.0
DAEMON_POLL: Final = Backoff(base_s=0.05, cap_s=1.0, jitter=0)
"""While no daemon answers: the pauses between two looks for one (a unix socket's connect is
a cheap refusal; nothing tells a process when another one binds)."""
FOLLOW_AGAIN: Final = Backoff(base_s=1.0, cap_s=1.0, jitter=0)
"""After the notification follower failed (the daemon went away): before following again."""


async def follow(backend: FaceBackend, cursor: int) -> AsyncIterator[dict[str, Any]]:
    """Every event after ``cursor``, oldest first, forever (the caller cancels)."""
    while True:
        for event in await backend.next_events(cursor, FOLLOW_PAGE, IDLE_WAIT_S):
            cursor = max(cursor, int(event["id"]))
            yield event


def progress_reporter(token: str | int, send: Send) -> Progress:
    """The ``progress`` a handler reports to, for a request that carries ``token``: each
    report is one ``notifications/progress`` (``protocol.Progression``: its value only
    increases) handed to ``send``, the transport's bounded queue (stdio's output, an HTTP
    answer's stream), which drops it when full."""
    progression = p.Progression(token)

    async def report(value: float, total: float | None, message: str) -> None:
        send(progression.notification(value, total, message))

    return report


@dataclass
class Listen:
    """A 2026-07-28 listen on stdio: its id and the filter it was granted."""

    request_id: Any
    uris: frozenset[str]
    list_changed: bool


@dataclass
class Session:
    """One client connection's state and its notification follower."""

    face: Face
    send: Send
    version: str | None = None
    subscribed: set[str] = field(default_factory=set)
    listens: dict[Any, Listen] = field(default_factory=dict)
    channel: bool = False
    client: str | None = None
    """``clientInfo.name`` from ``initialize`` (2026-07-28 requests carry it in ``_meta``)."""
    dropped: int = 0
    max_subscribed: int = 1000
    max_listens: int = 64
    _follower: asyncio.Task[None] | None = None
    _daemon_found: asyncio.Future[int] | None = None

    async def start_following(self) -> None:
        """Start the follower from the newest event now (idempotent).

        With no daemon answering (``--no-autostart``, a failed start, a daemon that is
        restarting) it never fails: the follower starts from the daemon's newest event once
        one answers, so ``initialize`` succeeds, the tools say ``DAEMON_UNAVAILABLE`` with
        the command that starts it, and notifications flow once it runs, without a restart
        of the face (docs/agents-face.md). A later call (``resources/subscribe``, a listen)
        that finds the daemon hands the follower its cursor at once."""
        if self._follower is None or self._follower.done():
            try:
                cursor: int | None = await self.face.backend.last_event_id()
            except AgentError:
                cursor = None
                self._daemon_found = asyncio.get_running_loop().create_future()
            self._follower = asyncio.create_task(self._follow(cursor), name="face-follow")
        elif self._daemon_found is not None and not self._daemon_found.done():
            try:
                cursor = await self.face.backend.last_event_id()
            except AgentError:
                return
            if not self._daemon_found.done():
                self._daemon_found.set_result(cursor)

    async def _first_cursor(self) -> int:
        """The daemon's newest event id, once a daemon answers: looked for with a bounded
        backoff, or handed over by :meth:`start_following`."""
        found = self._daemon_found
        attempt = 0
        while True:
            try:
                return await self.face.backend.last_event_id()
            except AgentError:
                pass
            pause = DAEMON_POLL.delay(attempt)
            attempt += 1
            if found is not None:
                with contextlib.suppress(TimeoutError):
                    return await asyncio.wait_for(asyncio.shield(found), pause)
            else:
                await asyncio.sleep(pause)

    async def close(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._follower

    def _push(self, message: dict[str, Any]) -> None:
        if not self.send(message):
            self.dropped += 1

    async def _follow(self, cursor: int | None) -> None:
        if cursor is None:
            cursor = await self._first_cursor()
        names: dict[int, str] = {}
        while True:
            try:
                async for event in follow(self.face.backend, cursor):
                    cursor = int(event["id"])
                    kind = event.get("type")
                    sub_id = event.get("subscriptionId") or 0
                    if kind in ("subscription.created", "subscription.deleted"):
                        names = await self.face.naming()
                        self._list_changed()
                    elif kind == "resource.updated":
                        if sub_id not in names:
                            names = await self.face.naming()
                        await self._updated(event, names)
            except asyncio.CancelledError:
                raise
            except Exception:
                await asyncio.sleep(FOLLOW_AGAIN.delay(0))

    def _list_changed(self) -> None:
        if self.version is not None and self.version != p.MODERN:
            self._push(p.notification("notifications/resources/list_changed"))
        for listen in list(self.listens.values()):
            if listen.list_changed:
                self._push(
                    p.notification(
                        "notifications/resources/list_changed",
                        {"_meta": {p.META_SUBSCRIPTION: listen.request_id}},
                    )
                )

    async def _updated(self, event: dict[str, Any], names: dict[int, str]) -> None:
        uri = event.get("uri")
        face_name = names.get(event.get("subscriptionId") or 0, uri)
        for name in list(self.subscribed):
            if name in (uri, face_name):
                self._push(p.notification("notifications/resources/updated", {"uri": name}))
        for listen in list(self.listens.values()):
            for name in listen.uris:
                if name in (uri, face_name):
                    self._push(
                        p.notification(
                            "notifications/resources/updated",
                            {"uri": name, "_meta": {p.META_SUBSCRIPTION: listen.request_id}},
                        )
                    )
        if self.channel:
            change = await self.face.describe_change(event, names)
            self._push(channel_message(change))

    # ---- requests ---------------------------------------------------------------------
    async def handle(
        self, msg: p.Incoming, progress: Progress | None = None
    ) -> dict[str, Any] | None:
        """The answer to one request (None for a notification or a held listen)."""
        try:
            body = await self._dispatch(msg, progress)
        except p.RpcError as exc:
            return p.error(msg.id, exc) if msg.has_id else None
        except AgentError as exc:
            err = p.RpcError(p.INTERNAL_ERROR, exc.message, exc.to_json())
            return p.error(msg.id, err) if msg.has_id else None
        if body is None or not msg.has_id:
            return None
        return p.result(msg.id, body)

    async def _dispatch(self, msg: p.Incoming, progress: Progress | None) -> dict[str, Any] | None:
        method, params = msg.method or "", msg.params
        if not msg.has_id:
            return None  # notifications: initialized, cancelled (the transport handles it)
        envelope = p.modern_meta(params)
        modern = envelope is not None or (method == "server/discover")
        if modern:
            p.check_envelope(params)
        known(method, modern, channel=self.channel)
        call = Call(msg, params, modern, envelope is not None, progress)
        body = await METHODS[method].handler(self, call)
        return p.stamp_modern(body) if modern and body is not None else body

    # ---- one handler a method (the table, METHODS, is below the class) ------------------
    async def _initialize(self, call: Call) -> dict[str, Any] | None:
        self.version = p.negotiate(call.params.get("protocolVersion"))
        self.client = client_name(call.params.get("clientInfo"))
        await self.start_following()
        return p.initialize_result(self.version, methods_in(self.version), channel=self.channel)

    async def _discover(self, call: Call) -> dict[str, Any] | None:
        return p.discover_result(methods_in(p.MODERN), channel=self.channel)

    async def _empty(self, call: Call) -> dict[str, Any] | None:
        return {}  # ping, logging/setLevel

    async def _tools_list(self, call: Call) -> dict[str, Any] | None:
        return p.paged(list(TOOL_LIST), "tools", call.modern)

    async def _tools_call(self, call: Call) -> dict[str, Any] | None:
        meta = call.params.get("_meta") if call.enveloped else None
        client = client_name(meta.get(p.META_CLIENT_INFO)) if isinstance(meta, dict) else None
        return await self.face.call_tool(call.params, call.progress, client or self.client)

    async def _resources_list(self, call: Call) -> dict[str, Any] | None:
        return await self.face.list_resources(call.modern)

    async def _templates_list(self, call: Call) -> dict[str, Any] | None:
        return p.paged([], "resourceTemplates", call.modern)

    async def _resources_read(self, call: Call) -> dict[str, Any] | None:
        return await self.face.read_resource(call.params, call.modern)

    async def _subscribe(self, call: Call) -> dict[str, Any] | None:
        return await self._subscribe_resource(call.msg.method or "", call.params)

    async def _listen(self, call: Call) -> dict[str, Any] | None:
        await self.open_listen(call.msg.id, call.params)
        return None  # answered when the listen ends

    async def _subscribe_resource(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise p.RpcError(p.INVALID_PARAMS, "params.uri must be a string")
        if method == "resources/unsubscribe":
            self.subscribed.discard(uri)
            return {}
        if not await self.face.known(uri):
            raise p.RpcError(p.INVALID_PARAMS, "Resource not found", {"uri": uri})
        if uri not in self.subscribed and len(self.subscribed) >= self.max_subscribed:
            raise p.RpcError(
                p.INTERNAL_ERROR, f"Subscription limit reached ({self.max_subscribed} URIs)"
            )
        self.subscribed.add(uri)
        await self.start_following()
        return {}

    async def open_listen(self, request_id: Any, params: dict[str, Any]) -> None:
        """Register a stdio listen and push its acknowledgement; the answer comes when it
        ends (``notifications/cancelled`` or the end of the session)."""
        listen, ack = listen_filter(request_id, params)
        if len(self.listens) >= self.max_listens:
            raise p.RpcError(p.INTERNAL_ERROR, "Subscription limit reached")
        await self.start_following()
        self.listens[request_id] = listen
        self._push(ack)
        return None

    def cancel_listen(self, request_id: Any) -> dict[str, Any] | None:
        """The final answer of a listen the client cancelled (None if it was not one)."""
        if self.listens.pop(request_id, None) is None:
            return None
        return listen_closed(request_id)


@dataclass(frozen=True, slots=True)
class Call:
    """One request as a handler sees it: ``modern`` for the 2026-07-28 era, ``enveloped``
    when ``params._meta`` carries that era's envelope."""

    msg: p.Incoming
    params: dict[str, Any]
    modern: bool
    enveloped: bool
    progress: Progress | None


Handler = Callable[[Session, Call], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True, slots=True)
class Method:
    eras: frozenset[str]
    """The protocol versions the method exists in."""
    handler: Handler


METHODS: Final[Mapping[str, Method]] = MappingProxyType(
    {
        "initialize": Method(p.HANDSHAKE_ERA, Session._initialize),
        "ping": Method(p.HANDSHAKE_ERA, Session._empty),
        "logging/setLevel": Method(p.HANDSHAKE_ERA, Session._empty),
        "resources/subscribe": Method(p.HANDSHAKE_ERA, Session._subscribe),
        "resources/unsubscribe": Method(p.HANDSHAKE_ERA, Session._subscribe),
        "server/discover": Method(p.MODERN_ERA, Session._discover),
        "subscriptions/listen": Method(p.MODERN_ERA, Session._listen),
        "tools/list": Method(p.ALL_ERAS, Session._tools_list),
        "tools/call": Method(p.ALL_ERAS, Session._tools_call),
        "resources/list": Method(p.ALL_ERAS, Session._resources_list),
        "resources/templates/list": Method(p.ALL_ERAS, Session._templates_list),
        "resources/read": Method(p.ALL_ERAS, Session._resources_read),
    }
)
"""The face's one method table: which methods exist in which era and which handler answers
each. Dispatch (:func:`known`, ``Session._dispatch``) and discovery (``initialize``'s and
``server/discover``'s capabilities, from :func:`methods_in`) both read it."""


def methods_in(version: str) -> frozenset[str]:
    """The methods of ``version``, from :data:`METHODS`."""
    return frozenset(name for name, method in METHODS.items() if version in method.eras)


def known(method: str, modern: bool, *, channel: bool = False) -> None:
    """-32601 unless ``method`` is in :data:`METHODS` for the request's era (see
    ``protocol.method_known``; with ``channel`` every 2026-07-28 request is refused)."""
    entry = METHODS.get(method)
    p.method_known(method, entry.eras if entry else frozenset(), modern, channel=channel)


def client_name(info: Any) -> str | None:
    """``clientInfo.name`` when it is a string (what the face keys client limits by)."""
    name = info.get("name") if isinstance(info, dict) else None
    return name if isinstance(name, str) else None


def listen_filter(request_id: Any, params: dict[str, Any]) -> tuple[Listen, dict[str, Any]]:
    """(Listen, acknowledgement) for a ``subscriptions/listen`` request (pure)."""
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise p.RpcError(
            p.INVALID_PARAMS, "params.notifications (a SubscriptionFilter) is required"
        )
    uris = wanted.get("resourceSubscriptions") or []
    if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
        raise p.RpcError(p.INVALID_PARAMS, "resourceSubscriptions must be a list of URIs")
    if len(uris) > 1000:
        raise p.RpcError(p.INTERNAL_ERROR, "Subscription limit reached (1000 URIs per listen)")
    list_changed = wanted.get("resourcesListChanged") is True
    honored: dict[str, Any] = {}
    if list_changed:
        honored["resourcesListChanged"] = True
    if uris:
        honored["resourceSubscriptions"] = list(dict.fromkeys(uris))
    ack = p.notification(
        "notifications/subscriptions/acknowledged",
        {"_meta": {p.META_SUBSCRIPTION: request_id}, "notifications": honored},
    )
    return Listen(request_id, frozenset(uris), list_changed), ack


def listen_closed(request_id: Any) -> dict[str, Any]:
    return p.result(
        request_id,
        {"resultType": "complete", "_meta": {p.META_SUBSCRIPTION: request_id}},
    )


CHANNEL_META_KEYS: Final = ("uri", "server_url", "revision", "event_id")


def channel_message(change: dict[str, Any]) -> dict[str, Any]:
    """A Claude Code channel event (``notifications/claude/channel``: ``content`` is the
    text the model sees, ``meta`` string attributes with identifier keys)."""
    meta = {
        "uri": render.one_line(change.get("uri")),
        "server_url": render.one_line(change.get("serverUrl")),
        "revision": str(change.get("revision")),
        "event_id": str(change.get("eventId")),
    }
    return p.notification(
        "notifications/claude/channel",
        {"content": render.change_text(change), "meta": meta},
    )
