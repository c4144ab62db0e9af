"""The face's request handlers: tools and resources answered from the backend (no client
state; one :class:`Face` serves every session of a process), and :data:`TOOLS`, the one
table of tools."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Generic, TypeVar

from service.app.errors import AgentError
from service.face import protocol as p
from service.face import render
from service.face import tools as t
from service.face.backend import FaceBackend

Progress = Callable[[float, float | None, str], Awaitable[None]]
A = TypeVar("A")
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
        """(subscription, content) of the newest revision ``name`` names; AgentError else."""
        subs, _ = await self.names()
        found = [s for s in render.resolve(name, subs) if url in (None, s["serverUrl"])]
        if not found:
            raise AgentError(
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
            raise AgentError(
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
        except AgentError as exc:
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

    # ---- tools (one handler a tool; the table, TOOLS, is below the class) --------------
    async def call_tool(
        self, params: dict[str, Any], progress: Progress | None, client: str | None = None
    ) -> dict[str, Any]:
        """One ``tools/call``; ``client`` is the caller's ``clientInfo.name`` (its known
        tool-call limit bounds ``wait_for_change``)."""
        name = params.get("name")
        args = params.get("arguments") or {}
        tool = TOOLS.get(name) if isinstance(name, str) else None
        if tool is None:
            raise p.RpcError(p.INVALID_PARAMS, f"Unknown tool: {render.one_line(name)}")
        if not isinstance(args, dict):
            return t.tool_error("INVALID_ARGUMENT", "arguments must be an object", None)
        try:
            answer = await tool.handle(self, tool.parse(args), Caller(progress, client))
        except t.ToolArgError as exc:
            return t.tool_error("INVALID_ARGUMENT", exc.message, exc.hint)
        except AgentError as exc:
            return t.tool_error(exc.error_code, exc.message, exc.hint)
        return t.tool_result(answer, tool.render(answer), is_error=tool.failed(answer))

    async def list_subscriptions(self, _args: None, _caller: Caller) -> dict[str, Any]:
        subs, names = await self.names()
        return {"subscriptions": [{**s, "faceUri": names[s["id"]]} for s in subs]}

    async def subscribe(self, args: t.SubscribeArgs, _caller: Caller) -> dict[str, Any]:
        results = await self.backend.subscribe(args.url, args.uris)
        _, names = await self.names()
        rows = [{**r, "faceUri": names.get(r["id"], r["uri"])} for r in results]
        failed = [r for r in rows if r.get("errorCode")]
        answer: dict[str, Any] = {"subscriptions": rows}
        if failed:
            answer.update(errorCode=failed[0]["errorCode"], hint=failed[0].get("hint"))
        return answer

    async def unsubscribe(self, args: t.UriArgs, _caller: Caller) -> dict[str, Any]:
        subs, names = await self.names()
        found = [s for s in render.resolve(args.uri, subs) if args.url in (None, s["serverUrl"])]
        if not found:
            raise AgentError("NOT_WATCHED", f"nothing watches {render.one_line(args.uri)}", None)
        if len(found) > 1:
            raise AgentError(
                "AMBIGUOUS_URI",
                f"{len(found)} servers are watched for {render.one_line(args.uri)}",
                "pass url, or the mcpsub://<id>/<uri> name from list_subscriptions",
            )
        removed = await self.backend.unsubscribe(int(found[0]["id"]))
        return {"removed": removed, "faceUri": names[found[0]["id"]]}

    async def read(self, args: t.ReadArgs, _caller: Caller) -> dict[str, Any]:
        sub, content = await self.newest(args.uri, args.url)
        name = render.face_names(await self.backend.subscriptions()).get(sub["id"], args.uri)
        answer = {"uri": name, **{k: v for k, v in content.items() if k != "uri"}}
        answer["originalUri"] = sub["uri"]
        full, offset = content.get("text"), args.offset
        part, more = render.clip(full, offset)
        contents, contents_cut = render.clip_contents(content.get("contents"))
        answer.update(text=part, contents=contents if offset == 0 else None)
        answer.update(
            offset=offset,
            totalChars=len(full) if full is not None else None,
            truncated=more or contents_cut,
            nextOffset=offset + len(part or "") if more else None,
        )
        return answer

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

    async def wait_for_change(self, args: t.WaitArgs, caller: Caller) -> dict[str, Any]:
        backend = self.backend
        cursor = args.after if args.after is not None else await backend.last_event_id()
        try:
            return await self._wait_from(cursor, args, caller.progress, caller.client)
        except AgentError as exc:  # the daemon went away mid-wait: the cursor still holds
            return {**exc.to_json(), "cursor": cursor}

    async def _wait_from(
        self, cursor: int, args: t.WaitArgs, progress: Progress | None, client: str | None
    ) -> dict[str, Any]:
        backend = self.backend
        timeout_s, client_limit = t.clamp_wait(args.timeout_s, client)
        started = time.monotonic()
        deadline = started + timeout_s
        names: dict[int, str] | None = None
        while True:
            remaining = max(deadline - time.monotonic(), 0.0)
            step = min(remaining, self.progress_every_s) if progress is not None else remaining
            # Every type, filtered here: the cursor then moves past other events too, so a
            # wake-up for them does not loop, and no "newest id" query is needed per turn.
            events = await backend.next_events(cursor, FOLLOW_PAGE, step)
            for event in events:
                cursor = max(cursor, int(event["id"]))
                if event.get("type") != "resource.updated":
                    continue
                if names is None or event.get("subscriptionId") not in names:
                    names = await self.naming()
                face_name = names.get(event.get("subscriptionId") or 0)
                if render.matches(args.pattern, event.get("uri"), face_name):
                    return await self.describe_change(event, names)
            if len(events) == FOLLOW_PAGE:
                continue
            if not events and step > 0 and progress is not None:  # a quiet step went by
                elapsed = time.monotonic() - started
                await progress(round(elapsed, 3), timeout_s, "waiting for a change")
            if time.monotonic() >= deadline:
                waited = round(time.monotonic() - started, 1)
                body = {"changed": False, "cursor": cursor, "waitedSeconds": waited}
                if client_limit is not None:
                    body["clientLimitSeconds"] = client_limit
                return body

    async def changes_since(self, args: t.ChangesArgs, _caller: Caller) -> dict[str, Any]:
        after, limit, pattern = args.after, args.limit, args.pattern
        cursor = after if after is not None else await self.backend.last_event_id()
        events = await self.backend.events_after(cursor, limit)
        names = await self.naming()
        shown = []
        for event in events:
            face_name = names.get(event.get("subscriptionId") or 0)
            if pattern is None or render.matches(pattern, event.get("uri"), face_name):
                shown.append({**event, "faceUri": face_name or event.get("uri")})
        next_cursor = int(events[-1]["id"]) if events else cursor
        return {"events": shown, "cursor": next_cursor, "more": len(events) == limit}


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


@dataclass(frozen=True, slots=True)
class Caller:
    """Who called a tool: ``progress`` reports to it while a call runs (None without a
    progress token), ``client`` is its ``clientInfo.name``."""

    progress: Progress | None
    client: str | None


@dataclass(frozen=True, slots=True)
class Tool(Generic[A]):
    """One face tool, everything about it in one row: its schema (``tools.py``), its parser
    (``tools.py``: arguments in, a frozen value or ``ToolArgError`` out, before the daemon is
    asked anything), its handler (a :class:`Face` method: that value in, the structured answer
    out), its text (``render.py``: the structured answer in, escaped text out), and when that
    answer is an error (``isError``)."""

    name: str
    schema: dict[str, Any]
    parse: Callable[[dict[str, Any]], A]
    handle: Callable[[Face, A, Caller], Awaitable[dict[str, Any]]]
    render: Callable[[dict[str, Any]], str]
    failed: Callable[[dict[str, Any]], bool] = t.never_failed

    def listed(self) -> dict[str, Any]:
        """The tool as ``tools/list`` shows it."""
        return t.listed(self.name, self.schema)


TOOLS: Final[Mapping[str, Tool[Any]]] = MappingProxyType(
    {
        tool.name: tool
        for tool in (
            Tool(
                "subscribe",
                t.SUBSCRIBE,
                t.subscribe_args,
                Face.subscribe,
                render.subscribe_text,
                t.every_subscription_failed,
            ),
            Tool(
                "unsubscribe", t.UNSUBSCRIBE, t.uri_args, Face.unsubscribe, render.unsubscribe_text
            ),
            Tool(
                "list_subscriptions",
                t.LIST_SUBSCRIPTIONS,
                t.no_args,
                Face.list_subscriptions,
                render.subscriptions_text,
            ),
            Tool("read", t.READ, t.read_args, Face.read, render.content_text),
            Tool(
                "wait_for_change",
                t.WAIT_FOR_CHANGE,
                t.wait_args,
                Face.wait_for_change,
                render.change_text,
                t.carries_error,
            ),
            Tool(
                "changes_since",
                t.CHANGES_SINCE,
                t.changes_args,
                Face.changes_since,
                render.events_text,
            ),
        )
    }
)
"""The face's one table of tools: ``tools/list`` shows its rows in this order and
``tools/call`` dispatches by their names (:meth:`Face.call_tool`). A new tool is one row
here, with its schema and parser in ``tools.py``, its handler on :class:`Face` and its text
in ``render.py``; tests/unit/service/face/test_tool_table.py checks every row."""
TOOL_LIST: Final = [tool.listed() for tool in TOOLS.values()]
"""What ``tools/list`` answers."""
