"""The face's request handlers: tools and resources answered from the backend (no client
state; one :class:`Face` serves every session of a process)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

from service.face import protocol as p
from service.face import render
from service.face import tools as t
from service.face.backend import FaceBackend, FaceError

Progress = Callable[[float, float | None, str], Awaitable[None]]
FOLLOW_PAGE: Final = 100
META_PREFIX: Final = "mcpsub/"


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

    async def naming(self) -> dict[int, str]:
        """Subscription id → face URI, from the backend's cheap identity list."""
        return render.face_names(await self.backend.identities())

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
        # The read tool's bound and its answer, at offset 0: an agent's client may put all of
        # a resource into the model's context.
        contents, contents_cut = render.clip_contents(contents)
        full = content.get("text")
        part, more = render.clip(full, 0)
        meta: dict[str, Any] = {
            META_PREFIX + "revision": content["revision"],
            META_PREFIX + "eventId": content.get("eventId"),
            META_PREFIX + "serverUrl": sub["serverUrl"],
            META_PREFIX + "readAt": content.get("readAt"),
        }
        if more or contents_cut:
            meta.update(
                {
                    META_PREFIX + "truncated": True,
                    META_PREFIX + "totalChars": len(full) if full is not None else None,
                    META_PREFIX + "nextOffset": len(part or "") if more else None,
                    META_PREFIX + "hint": (
                        f"cut at {render.MAX_TEXT_CHARS} characters: the read tool with "
                        "offset=nextOffset returns the next part; `mcpsubctl read --uri URI` "
                        "all of it"
                    ),
                }
            )
        body: dict[str, Any] = {"contents": contents, "_meta": meta}
        if modern:
            body.update(ttlMs=p.LIST_TTL_MS, cacheScope="private")
        return body

    async def known(self, name: str) -> bool:
        subs, _ = await self.names()
        return bool(render.resolve(name, subs))

    # ---- tools ------------------------------------------------------------------------
    async def call_tool(
        self, params: dict[str, Any], progress: Progress | None, client: str | None = None
    ) -> dict[str, Any]:
        """One ``tools/call``; ``client`` is the caller's ``clientInfo.name`` (its known
        tool-call limit bounds ``wait_for_change``)."""
        name = params.get("name")
        args = params.get("arguments") or {}
        if not isinstance(name, str) or name not in TOOL_CALLS:
            raise p.RpcError(p.INVALID_PARAMS, f"Unknown tool: {render.one_line(name)}")
        if not isinstance(args, dict):
            return t.tool_error("INVALID_ARGUMENT", "arguments must be an object", None)
        try:
            return await TOOL_CALLS[name](self, args, progress, client)
        except t.ToolArgError as exc:
            return t.tool_error("INVALID_ARGUMENT", exc.message, exc.hint)
        except FaceError as exc:
            return t.tool_error(exc.code, exc.message, exc.hint)

    async def _list_subscriptions(self) -> dict[str, Any]:
        subs, names = await self.names()
        rows = [{**s, "faceUri": names[s["id"]]} for s in subs]
        return t.tool_result({"subscriptions": rows}, render.listing(subs, names))

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

    async def _read(self, uri: str, url: str | None, offset: int = 0) -> dict[str, Any]:
        sub, content = await self.newest(uri, url)
        name = render.face_names(await self.backend.subscriptions()).get(sub["id"], uri)
        body = {"uri": name, **{k: v for k, v in content.items() if k != "uri"}}
        body["originalUri"] = sub["uri"]
        full = content.get("text")
        part, more = render.clip(full, offset)
        contents, contents_cut = render.clip_contents(content.get("contents"))
        body.update(text=part, contents=contents if offset == 0 else None)
        body.update(
            offset=offset,
            totalChars=len(full) if full is not None else None,
            truncated=more or contents_cut,
            nextOffset=offset + len(part or "") if more else None,
        )
        return t.tool_result(body, render.content_text(name, body))

    async def describe_change(self, event: dict[str, Any], names: dict[int, str]) -> dict[str, Any]:
        detail = await self.backend.change(event)
        rev = detail.get("revision") or {}
        previous = detail.get("previous") or {}
        final, initial = rev.get("text"), previous.get("text") if previous else None
        name = names.get(event.get("subscriptionId") or 0, event.get("uri"))
        change = {
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
        return bounded_change(change)

    async def _wait(
        self, args: t.WaitArgs, progress: Progress | None, client: str | None = None
    ) -> dict[str, Any]:
        backend = self.backend
        cursor = args.after if args.after is not None else await backend.last_event_id()
        try:
            return await self._wait_from(cursor, args, progress, client)
        except FaceError as exc:  # the daemon went away mid-wait: the cursor still holds
            error = t.tool_error(exc.code, exc.message, exc.hint)
            error["structuredContent"]["cursor"] = cursor
            return error

    async def _wait_from(
        self, cursor: int, args: t.WaitArgs, progress: Progress | None, client: str | None
    ) -> dict[str, Any]:
        backend = self.backend
        timeout_s, client_limit = t.clamp_wait(args.timeout_s, client)
        started = time.monotonic()
        deadline = started + timeout_s
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
                    names = await self.naming()
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
                if client_limit is not None:
                    body["clientLimitSeconds"] = client_limit
                return t.tool_result(body, render.change_text(body))
            step = min(remaining, self.progress_every_s) if progress is not None else remaining
            if not await backend.wait_beyond(cursor, step) and progress is not None:
                elapsed = time.monotonic() - started
                await progress(round(elapsed, 3), timeout_s, "waiting for a change")

    async def _changes(self, after: int | None, limit: int, pattern: str | None) -> dict[str, Any]:
        cursor = after if after is not None else await self.backend.last_event_id()
        events = await self.backend.events_after(cursor, limit)
        names = await self.naming()
        shown = []
        for event in events:
            face_name = names.get(event.get("subscriptionId") or 0)
            if pattern is None or render.matches(pattern, event.get("uri"), face_name):
                shown.append({**event, "faceUri": face_name or event.get("uri")})
        next_cursor = int(events[-1]["id"]) if events else cursor
        body = {"events": shown, "cursor": next_cursor, "more": len(events) == limit}
        return t.tool_result(body, render.events_text(shown, names, next_cursor))


def bounded_change(change: dict[str, Any]) -> dict[str, Any]:
    """``change`` with its server text within :data:`render.MAX_TEXT_CHARS` per field, and
    ``truncated`` naming the fields that were cut (absent when none was)."""
    cut = []
    for key in ("initialText", "finalText", "diff"):
        part, more = render.clip(change.get(key))
        if more:
            change[key] = part
            cut.append(key)
    contents, contents_cut = render.clip_contents(change.get("contents"))
    if contents_cut:
        change["contents"] = contents
        cut.append("contents")
    if cut:
        change["truncated"] = cut
    return change


ToolCall = Callable[[Face, dict[str, Any], Progress | None, str | None], Awaitable[dict[str, Any]]]

TOOL_CALLS: Final[dict[str, ToolCall]] = {
    "subscribe": lambda face, args, _progress, _client: face._subscribe(t.subscribe_args(args)),
    "unsubscribe": lambda face, args, _progress, _client: face._unsubscribe(*t.uri_args(args)),
    "list_subscriptions": lambda face, _args, _progress, _client: face._list_subscriptions(),
    "read": lambda face, args, _progress, _client: face._read(*t.read_args(args)),
    "wait_for_change": lambda face, args, progress, client: face._wait(
        t.wait_args(args), progress, client
    ),
    "changes_since": lambda face, args, _progress, _client: face._changes(*t.changes_args(args)),
}
"""Each tool of :data:`service.face.tools.TOOLS` (its schema) to its call: the arguments
checked by its parser in ``tools.py``, then its handler above. A new tool is a schema there
and a row here; tests/unit/service/face/test_method_table.py checks that both name the same
tools."""
