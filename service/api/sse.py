"""Server-sent events for ``GET /v1/events/stream``.

The encoders are pure (record in, bytes out). :func:`event_stream` replays the events table
from a cursor and then follows it: it sleeps on :meth:`EventHub.wait_beyond` (woken by the
store's commit callback), never on a database timer, and once caught up it takes the next
events from the hub's in-memory ring (:meth:`EventHub.recent_after`), querying the table
only when the ring cannot prove it holds them all; and emits a ``:`` comment when nothing
happened for ``keepalive_s`` so proxies and clients see a live connection. Ids are the
events table's integer ids, so a client's ``Last-Event-ID`` survives daemon restarts.

With ``content=True`` (``?include=content``) each ``resource.updated`` event also carries its
revision's ``content`` (:func:`service.app.views.revision_json`) when that fits ``INLINE_CONTENT_MAX``
bytes of JSON: a follower that shows the text (``mcpsubctl mcp``'s ``wait_for_change``) then
needs no request per change. It costs the stream one read of the revision by its key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from service.app.views import event_json, revision_json
from service.jsonout import dumps
from service.store.eventhub import EventHub
from service.store.records import Event, Revision
from service.store.store import Store

RETRY_MS = 5000
BATCH = 500
"""Events read per query while replaying; the stream never holds more in memory."""
INLINE_CONTENT_MAX = 32 * 1024
"""A revision's ``content`` rides along only up to this many bytes of JSON (a bigger one is
left out: the client reads it from ``/v1/content`` or ``/v1/wait``)."""


def encode_event(event_type: str, data: Any, event_id: int | None = None) -> bytes:
    # JSON escapes newlines, so the payload is always one data line. jsonout.dumps is the
    # hot path's one encoder (orjson, json as its fallback).
    head = f"event: {event_type}\ndata: "
    if event_id is not None:
        head = f"id: {event_id}\n{head}"
    return head.encode() + dumps(data) + b"\n\n"


def inline_content(rev: Revision | None) -> dict[str, Any] | None:
    """What ``include=content`` adds to a ``resource.updated`` event: None when the
    revision is gone or its JSON exceeds ``INLINE_CONTENT_MAX`` bytes (pure)."""
    if rev is None:
        return None
    content = revision_json(rev)
    size = len(dumps(content))
    return content if size <= INLINE_CONTENT_MAX else None


async def _encoded(store: Store, item: Event, content: bool) -> bytes:
    payload = event_json(item)
    if content and item.type == "resource.updated" and item.revision_id is not None:
        inline = inline_content(await store.get_revision(item.revision_id))
        if inline is not None:
            payload["content"] = inline
    return encode_event(item.type, payload, item.id)


def encode_comment(text: str) -> bytes:
    return f": {text}\n\n".encode()


def encode_retry(ms: int) -> bytes:
    return f"retry: {ms}\n\n".encode()


def needs_reset(cursor: int, first_id: int, last_id: int) -> bool:
    """True when events after ``cursor`` were pruned, or the cursor is from another database."""
    if cursor > last_id:
        return True
    return first_id > 0 and cursor < first_id - 1


async def event_stream(
    store: Store,
    hub: EventHub,
    *,
    after: int,
    keepalive_s: float,
    types: Sequence[str] | None = None,
    uri: str | None = None,
    content: bool = False,
) -> AsyncIterator[bytes]:
    yield encode_retry(RETRY_MS)
    cursor = after
    first_id, last_id = await store.first_event_id(), await store.last_event_id()
    if needs_reset(cursor, first_id, last_id):
        yield encode_event(
            "reset",
            {"requestedAfter": cursor, "firstEventId": first_id, "lastEventId": last_id},
        )
        cursor = max(first_id - 1, 0) if cursor <= last_id else last_id
    while True:
        recent = hub.recent_after(cursor, types=types, uri=uri)
        if recent is not None:  # caught up: the next events come from memory, no query
            items, covered = recent
            for item in items:
                yield await _encoded(store, item, content)
            cursor = max(cursor, covered)
            if not await hub.wait_beyond(cursor, keepalive_s):
                yield encode_comment("keep-alive")
            continue
        # Read the high-water mark before the query: an event committed in between is
        # then either in the batch or beyond the mark, so wait_beyond() sees it.
        mark = await store.last_event_id()
        batch = await store.events_after(cursor, limit=BATCH, types=types, uri=uri)
        for item in batch:
            yield await _encoded(store, item, content)
            cursor = item.id
        if len(batch) == BATCH:
            continue
        cursor = max(cursor, mark)
        if not await hub.wait_beyond(cursor, keepalive_s):
            yield encode_comment("keep-alive")
