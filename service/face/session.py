"""The face's request handling: one :class:`Face` per process, one :class:`Session` per
client connection (stdio) or handshake-era HTTP session.

``Face`` answers requests from the backend and holds no client state. ``Session`` adds what
a connection owns: its era, its ``resources/subscribe`` set, its stdio listens, and one
follower task that turns the daemon's events into notifications, each pushed through the
transport's bounded ``send`` (a full queue drops the notification and counts it: a slow
client never makes the daemon buffer without bound).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from service.face import protocol as p
from service.face import render
from service.face import tools as t
from service.face.backend import FaceBackend, FaceError

Progress = Callable[[float, float | None, str], Awaitable[None]]
Send = Callable[[dict[str, Any]], bool]
"""Queue one unsolicited message; False when the client's queue is full (then dropped)."""

FOLLOW_PAGE: Final = 100
IDLE_WAIT_S: Final = 30.0
META_PREFIX: Final = "mcpsub/"


async def follow(backend: FaceBackend, cursor: int) -> AsyncIterator[dict[str, Any]]:
    """Every event after ``cursor``, oldest first, forever (the caller cancels)."""
    while True:
        events = await backend.events_after(cursor, FOLLOW_PAGE)
        for event in events:
            cursor = max(cursor, int(event["id"]))
            yield event
        if len(events) < FOLLOW_PAGE:
            await backend.wait_beyond(cursor, IDLE_WAIT_S)


class Face:
    """Request handlers shared by every session (stateless)."""

    def __init__(
        self,
        backend: FaceBackend,
        *,
        channel: bool = False,
        progress_every_s: float = t.PROGRESS_EVERY_S,
    ) -> None:
        self.backend = backend
        self.channel = channel
        self.progress_every_s = min(progress_every_s, t.MAX_PROGRESS_EVERY_S)

    async def names(self) -> tuple[list[dict[str, Any]], dict[int, str]]:
        subs = await self.backend.subscriptions()
        return subs, render.face_names(subs)

    # ---- resources --------------------------------------------------------------------
    async def list_resources(self, modern: bool) -> dict[str, Any]:
        subs, names = await self.names()
        resources = []
        for sub in subs:
            entry: dict[str, Any] = {
                "uri": names[sub["id"]],
                "name": sub["uri"],
                "description": f"watched on {sub['serverUrl']} (state {sub['state']})",
                "_meta": {
                    META_PREFIX + "revision": sub.get("revision"),
                    META_PREFIX + "serverUrl": sub["serverUrl"],
                    META_PREFIX + "state": sub["state"],
                },
            }
            resources.append(entry)
        return p.paged(resources, "resources", modern)

    async def newest(
        self, name: str, url: str | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """(subscription, content) of the newest revision ``name`` names; FaceError else."""
        subs, _ = await self.names()
        found = [s for s in render.resolve(name, subs) if url in (None, s["serverUrl"])]
        if not found:
            raise FaceError(
                "NOT_WATCHED",
                f"nothing watches {render.one_line(name)}",
                "list_subscriptions shows what is watched; subscribe adds a URI",
            )
        best: tuple[dict[str, Any], dict[str, Any]] | None = None
        for sub in found:
            content = await self.backend.content(sub)
            if content is not None and (best is None or content["readAt"] > best[1]["readAt"]):
                best = (sub, content)
        if best is None:
            raise FaceError(
                "NO_CONTENT_YET",
                f"{render.one_line(name)} has not been read yet (state {found[0]['state']})",
                "wait_for_change with this uri returns its first revision",
            )
        return best

    async def read_resource(self, params: dict[str, Any], modern: bool) -> dict[str, Any]:
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise p.RpcError(p.INVALID_PARAMS, "params.uri must be a string")
        try:
            sub, content = await self.newest(uri)
        except FaceError as exc:
            message = "Resource not found: " + exc.message
            raise p.RpcError(p.INVALID_PARAMS, message, {"uri": uri}) from None
        contents = []
        for item in content.get("contents") or []:
            if isinstance(item, dict):
                contents.append({**item, "uri": uri} if item.get("uri") == sub["uri"] else item)
        if not contents:
            contents = [{"uri": uri, "text": content.get("text") or ""}]
        body: dict[str, Any] = {
            "contents": contents,
            "_meta": {
                META_PREFIX + "revision": content["revision"],
                META_PREFIX + "eventId": content.get("eventId"),
                META_PREFIX + "serverUrl": sub["serverUrl"],
                META_PREFIX + "readAt": content.get("readAt"),
            },
        }
        if modern:
            body.update(ttlMs=p.LIST_TTL_MS, cacheScope="private")
        return body

    async def known(self, name: str) -> bool:
        subs, _ = await self.names()
        return bool(render.resolve(name, subs))

    # ---- tools ------------------------------------------------------------------------
    async def call_tool(self, params: dict[str, Any], progress: Progress | None) -> dict[str, Any]:
        name = params.get("name")
        args = params.get("arguments") or {}
        if name not in t.TOOL_NAMES:
            raise p.RpcError(p.INVALID_PARAMS, f"Unknown tool: {render.one_line(name)}")
        if not isinstance(args, dict):
            return t.tool_error("INVALID_ARGUMENT", "arguments must be an object", None)
        try:
            if name == "subscribe":
                return await self._subscribe(t.subscribe_args(args))
            if name == "unsubscribe":
                return await self._unsubscribe(*t.uri_args(args))
            if name == "list_subscriptions":
                subs, names = await self.names()
                rows = [{**s, "faceUri": names[s["id"]]} for s in subs]
                return t.tool_result({"subscriptions": rows}, render.listing(subs, names))
            if name == "read":
                return await self._read(*t.uri_args(args))
            if name == "wait_for_change":
                return await self._wait(t.wait_args(args), progress)
            return await self._changes(*t.changes_args(args))
        except t.ToolArgError as exc:
            return t.tool_error("INVALID_ARGUMENT", exc.message, exc.hint)
        except FaceError as exc:
            return t.tool_error(exc.code, exc.message, exc.hint)

    async def _subscribe(self, args: t.SubscribeArgs) -> dict[str, Any]:
        results = await self.backend.subscribe(args.url, args.uris)
        _, names = await self.names()
        rows = [{**r, "faceUri": names.get(r["id"], r["uri"])} for r in results]
        failed = [r for r in rows if r.get("errorCode")]
        lines = [
            render.subscription_line(r, r["faceUri"])
            + (f"\n  hint: {render.one_line(r['hint'])}" if r.get("hint") else "")
            for r in rows
        ]
        body: dict[str, Any] = {"subscriptions": rows}
        if failed:
            body.update(errorCode=failed[0]["errorCode"], hint=failed[0].get("hint"))
        return t.tool_result(body, "\n".join(lines), is_error=len(failed) == len(rows))

    async def _unsubscribe(self, uri: str, url: str | None) -> dict[str, Any]:
        subs, names = await self.names()
        found = [s for s in render.resolve(uri, subs) if url in (None, s["serverUrl"])]
        if not found:
            raise FaceError("NOT_WATCHED", f"nothing watches {render.one_line(uri)}", None)
        if len(found) > 1:
            raise FaceError(
                "AMBIGUOUS_URI",
                f"{len(found)} servers are watched for {render.one_line(uri)}",
                "pass url, or the mcpsub://<id>/<uri> name from list_subscriptions",
            )
        removed = await self.backend.unsubscribe(int(found[0]["id"]))
        text = f"unsubscribed {render.one_line(names[found[0]['id']])}"
        return t.tool_result({"removed": removed}, text)

    async def _read(self, uri: str, url: str | None) -> dict[str, Any]:
        sub, content = await self.newest(uri, url)
        name = render.face_names(await self.backend.subscriptions()).get(sub["id"], uri)
        body = {"uri": name, **{k: v for k, v in content.items() if k != "uri"}}
        body["originalUri"] = sub["uri"]
        return t.tool_result(body, render.content_text(name, content))

    async def describe_change(self, event: dict[str, Any], names: dict[int, str]) -> dict[str, Any]:
        detail = await self.backend.change(event)
        rev = detail.get("revision") or {}
        previous = detail.get("previous") or {}
        final, initial = rev.get("text"), previous.get("text") if previous else None
        name = names.get(event.get("subscriptionId") or 0, event.get("uri"))
        return {
            "changed": True,
            "uri": name,
            "originalUri": event.get("uri"),
            "serverUrl": event.get("serverUrl"),
            "eventId": event["id"],
            "cursor": event["id"],
            "revision": event.get("revision"),
            "previousRevision": previous.get("revision") if previous else None,
            "initialText": initial,
            "finalText": final,
            "diff": render.unified_diff(
                str(name), initial, final, previous.get("revision"), event.get("revision")
            ),
            "contents": rev.get("contents"),
        }

    async def _wait(self, args: t.WaitArgs, progress: Progress | None) -> dict[str, Any]:
        backend = self.backend
        cursor = args.after if args.after is not None else await backend.last_event_id()
        started = time.monotonic()
        deadline = started + args.timeout_s
        names: dict[int, str] | None = None
        while True:
            # Every type, filtered here: the cursor then moves past other events too, so a
            # wake-up for them does not loop, and no "newest id" query is needed per turn.
            events = await backend.events_after(cursor, FOLLOW_PAGE)
            for event in events:
                cursor = max(cursor, int(event["id"]))
                if event.get("type") != "resource.updated":
                    continue
                if names is None or event.get("subscriptionId") not in names:
                    _, names = await self.names()
                face_name = names.get(event.get("subscriptionId") or 0)
                if render.matches(args.pattern, event.get("uri"), face_name):
                    change = await self.describe_change(event, names)
                    return t.tool_result(change, render.change_text(change))
            if len(events) == FOLLOW_PAGE:
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                waited = round(time.monotonic() - started, 1)
                body = {"changed": False, "cursor": cursor, "waitedSeconds": waited}
                return t.tool_result(body, render.change_text(body))
            step = min(remaining, self.progress_every_s) if progress is not None else remaining
            if not await backend.wait_beyond(cursor, step) and progress is not None:
                elapsed = time.monotonic() - started
                await progress(round(elapsed, 3), args.timeout_s, "waiting for a change")

    async def _changes(self, after: int | None, limit: int, pattern: str | None) -> dict[str, Any]:
        cursor = after if after is not None else await self.backend.last_event_id()
        events = await self.backend.events_after(cursor, limit)
        _, names = await self.names()
        shown = []
        for event in events:
            face_name = names.get(event.get("subscriptionId") or 0)
            if pattern is None or render.matches(pattern, event.get("uri"), face_name):
                shown.append({**event, "faceUri": face_name or event.get("uri")})
        next_cursor = int(events[-1]["id"]) if events else cursor
        body = {"events": shown, "cursor": next_cursor, "more": len(events) == limit}
        return t.tool_result(body, render.events_text(shown, names, next_cursor))


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
    dropped: int = 0
    max_subscribed: int = 1000
    max_listens: int = 64
    _follower: asyncio.Task[None] | None = None

    @property
    def modern_default(self) -> bool:
        return self.version == p.MODERN

    async def start_following(self) -> None:
        """Start the follower from the newest event now (idempotent)."""
        if self._follower is None or self._follower.done():
            cursor = await self.face.backend.last_event_id()
            self._follower = asyncio.create_task(self._follow(cursor), name="face-follow")

    async def close(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._follower

    def _push(self, message: dict[str, Any]) -> None:
        if not self.send(message):
            self.dropped += 1

    async def _follow(self, cursor: int) -> None:
        names: dict[int, str] = {}
        while True:
            try:
                async for event in follow(self.face.backend, cursor):
                    cursor = int(event["id"])
                    kind = event.get("type")
                    sub_id = event.get("subscriptionId") or 0
                    if kind in ("subscription.created", "subscription.deleted"):
                        _, names = await self.face.names()
                        self._list_changed()
                    elif kind == "resource.updated":
                        if sub_id not in names:
                            _, names = await self.face.names()
                        await self._updated(event, names)
            except asyncio.CancelledError:
                raise
            except Exception:
                await asyncio.sleep(1.0)

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
        except FaceError as exc:
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
        p.method_known(method, modern)
        face = self.face
        if method == "initialize":
            self.version = p.negotiate(params.get("protocolVersion"))
            await self.start_following()
            return p.initialize_result(self.version, channel=self.channel)
        if method == "server/discover":
            return p.discover_result(channel=self.channel)
        if method in ("ping", "logging/setLevel"):
            return {}
        body: dict[str, Any] | None
        if method == "tools/list":
            body = p.paged(list(t.TOOLS), "tools", modern)
        elif method == "tools/call":
            body = await face.call_tool(params, progress)
        elif method == "resources/list":
            body = await face.list_resources(modern)
        elif method == "resources/templates/list":
            body = p.paged([], "resourceTemplates", modern)
        elif method == "resources/read":
            body = await face.read_resource(params, modern)
        elif method in ("resources/subscribe", "resources/unsubscribe"):
            body = await self._subscribe_resource(method, params)
        elif method == "subscriptions/listen":
            await self.open_listen(msg.id, params)
            return None
        else:  # pragma: no cover - method_known let through only the methods above
            raise p.RpcError(p.METHOD_NOT_FOUND, f"Method not found: {method}")
        return p.stamp_modern(body) if modern and body is not None else body

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
