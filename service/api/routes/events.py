"""``/v1/events`` (a page of the event log) and ``/v1/events/stream`` (SSE, resumable)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from service.api.sse import event_stream
from service.api.state import api_state
from service.app import validate
from service.app.errors import InvalidParameter
from service.app.views import event_json
from service.eventtypes import EVENT_TYPES, unknown_types

router = APIRouter(prefix="/v1/events", tags=["events"])

MAX_LIMIT = 1000

TypeParam = Annotated[
    list[str] | None,
    Query(alias="type", description="event type; repeat or comma-separate for several"),
]


TYPE_LIST = re.compile(r"^[a-z]+(\.[a-z]+)*(,[a-z]+(\.[a-z]+)*)*$")


def _types(values: list[str] | None) -> list[str] | None:
    """The ``type`` filter; a name that is not an event type is 400, not an empty answer."""
    if not values:
        return None
    if not all(TYPE_LIST.match(v) for v in values):
        raise InvalidParameter(
            "type must be event types such as resource.updated (comma-separated)", field="type"
        )
    names = [t for v in values for t in v.split(",")]
    unknown = unknown_types(names)
    if unknown:
        raise InvalidParameter(
            f"unknown event type {', '.join(unknown)} (known: {', '.join(EVENT_TYPES)})",
            field="type",
        )
    return names


@router.get("")
async def list_events(
    request: Request,
    after: Annotated[int, Query(ge=0, le=validate.MAX_ID)] = 0,
    limit: Annotated[int, Query(ge=1, description=f"capped at {MAX_LIMIT}")] = 100,
    uri: str | None = None,
    types: TypeParam = None,
    subscription: Annotated[int | None, Query(ge=1, le=validate.MAX_ID)] = None,
    before: Annotated[
        int | None,
        Query(ge=1, le=validate.MAX_ID, description="the newest events below this id instead"),
    ] = None,
) -> dict[str, Any]:
    """Events with an id above ``after``, oldest first; pass ``nextAfter`` back as ``after``.

    With ``before``: the newest ``limit`` events below it (still oldest first), the tail a
    live view shows before it follows ``/v1/events/stream`` from ``nextAfter``."""
    if uri is not None:
        validate.resource_uri(uri)
    changes = api_state(request).changes
    if before is not None:
        tail, next_after = await changes.events_before(
            before,
            limit=min(limit, MAX_LIMIT),
            types=_types(types),
            uri=uri,
            subscription_id=subscription,
        )
        return {"events": [event_json(e) for e in tail], "nextAfter": next_after}
    found = await changes.events_after(
        after,
        limit=min(limit, MAX_LIMIT),
        types=_types(types),
        uri=uri,
        subscription_ids=None if subscription is None else [subscription],
    )
    return {
        "events": [event_json(e) for e in found],
        "nextAfter": found[-1].id if found else after,
    }


@router.get(
    "/stream",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "SSE"}},
)
async def stream_events(
    request: Request,
    last_event_id_header: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    last_event_id: Annotated[str | None, Query()] = None,
    after: Annotated[str | None, Query()] = None,
    uri: str | None = None,
    types: TypeParam = None,
    include: Annotated[
        str | None,
        Query(
            pattern="^content$",
            description="content: each resource.updated event carries its revision's "
            "content (revision, contentHash, generation, readAt, contents, text) when its "
            "JSON is at most 32 KiB",
        ),
    ] = None,
) -> StreamingResponse:
    """Server-sent events, ``id:`` = event id; resume with ``Last-Event-ID``.

    Without a cursor the stream starts at the newest event (live only); ``after=0``
    replays everything retained. A cursor older than the retained history first gets an
    ``event: reset`` (refetch state from ``/v1/content``), then the retained events.
    """
    state = api_state(request)
    if uri is not None:
        validate.resource_uri(uri)
    cursor = validate.cursor(last_event_id_header, "Last-Event-ID")
    if cursor is None:
        cursor = validate.cursor(last_event_id, "last_event_id")
    if cursor is None:
        cursor = validate.cursor(after, "after")
    changes = state.changes
    if cursor is None:
        cursor = await changes.last_event_id()
    state.check_capacity()
    start = cursor
    selected = _types(types)

    async def body() -> Any:
        async with state.waiter_slot():
            async for chunk in event_stream(
                changes,
                after=start,
                keepalive_s=state.keepalive_s,
                types=selected,
                uri=uri,
                content=include == "content",
            ):
                yield chunk

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
