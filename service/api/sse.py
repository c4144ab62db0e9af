"""Server-sent events for ``GET /v1/events/stream``.

Each frame is written by the daemon's one SSE encoder (``service/http/sse.py``).
:func:`event_stream` encodes what
:meth:`service.app.changes.Changes.follow` yields: the events after a cursor, replayed from
the table and then followed as they are committed (from the hub's ring while it can prove it
holds them all), a ``reset`` when the cursor names events that are not kept, and a ``:``
comment when nothing happened for ``keepalive_s`` so proxies and clients see a live
connection. Ids are the events table's integer ids, so a client's ``Last-Event-ID`` survives
daemon restarts.

With ``content=True`` (``?include=content``) each ``resource.updated`` event also carries its
revision's ``content`` (:func:`service.app.views.revision_json`) when that fits
``INLINE_CONTENT_MAX`` bytes of JSON: a follower that shows the text (``mcpsubctl mcp``'s ``wait_for_change``) then
needs no request per change. It costs the stream one read of the revision by its key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from service.app.changes import KEEPALIVE, Changes, Reset
from service.app.views import event_json, revision_json
from service.http import sse
from service.jsonencode import json_bytes
from service.store.records import Event, Revision

RETRY_MS = 5000
INLINE_CONTENT_MAX = 32 * 1024
"""A revision's ``content`` rides along only up to this many bytes of JSON (a bigger one is
left out: the client reads it from ``/v1/content`` or ``/v1/wait``)."""


def inline_content(rev: Revision | None) -> dict[str, Any] | None:
    """What ``include=content`` adds to a ``resource.updated`` event: None when the
    revision is gone or its JSON exceeds ``INLINE_CONTENT_MAX`` bytes (pure)."""
    if rev is None:
        return None
    content = revision_json(rev)
    size = len(json_bytes(content))
    return content if size <= INLINE_CONTENT_MAX else None


async def _encoded(changes: Changes, item: Event, content: bool) -> bytes:
    payload = event_json(item)
    if content and item.type == "resource.updated":
        inline = inline_content(await changes.revision_of(item))
        if inline is not None:
            payload["content"] = inline
    return sse.json_event(payload, event_type=item.type, event_id=item.id)


async def event_stream(
    changes: Changes,
    *,
    after: int,
    keepalive_s: float,
    types: Sequence[str] | None = None,
    uri: str | None = None,
    content: bool = False,
) -> AsyncIterator[bytes]:
    """The stream's bytes: what :meth:`Changes.follow` yields, encoded."""
    yield sse.retry(RETRY_MS)
    async for item in changes.follow(after=after, idle_s=keepalive_s, types=types, uri=uri):
        if item is KEEPALIVE:
            yield sse.comment("keep-alive")
        elif isinstance(item, Reset):
            reset = {
                "requestedAfter": item.requested_after,
                "firstEventId": item.first_id,
                "lastEventId": item.last_id,
            }
            yield sse.json_event(reset, event_type="reset")
        else:
            yield await _encoded(changes, item, content)
