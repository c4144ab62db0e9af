"""``/v1/content`` (the current revision of a URI) and ``/v1/wait`` (long-poll for the next)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from service.api.state import ApiState, api_state
from service.app import validate
from service.app.errors import (
    AmbiguousUri,
    InvalidParameter,
    NoContentYet,
    NotificationTimeout,
    NotWatched,
)
from service.app.queries import event_id_for_revision
from service.app.views import content_json, event_json, link_of
from service.store.records import Event, Revision, Subscription

router = APIRouter(prefix="/v1", tags=["content"])

DISCONNECT_CHECK_S = 5.0
"""A long-poll whose client went away is noticed within this long."""

UriParam = Annotated[str, Query(description="resource URI")]
UrlParam = Annotated[str | None, Query(description="server URL, when several watch the URI")]
ServerParam = Annotated[
    str | None,
    Query(max_length=2048, description="the server (its URL or id), when several watch the URI"),
]


async def _watcher(
    state: ApiState, uri: str, url: str | None, server: str | None = None
) -> Subscription:
    """The one subscription of ``uri`` on the server named (``url``, or ``server``: a URL or
    a server id), or on the only server that watches it. Several and none named: 409
    ``AMBIGUOUS_URI`` naming them, never a silent pick (the newest could be a server an agent
    chose, not the one a person subscribed on)."""
    validate.resource_uri(uri)
    server_id = None
    if server is not None and server.isdigit():
        server_id = int(server)
    elif server is not None:
        url = server if url is None else url
    if url is not None:
        validate.server_url(url)
    subs = await state.supervisor.store.find_subscriptions(uri, url)
    if server_id is not None:
        subs = [s for s in subs if s.server_id == server_id]
    if not subs:
        named = url if server_id is None else f"server {server_id}"
        where = f" on {named}" if named else ""
        raise NotWatched(f"nothing watches {uri}{where}")
    if len(subs) > 1:
        servers = [
            {"serverId": s.server_id, "url": s.server_url, "subscriptionId": s.id,
             "createdBy": s.created_by}
            for s in subs
        ]  # fmt: skip
        names = ", ".join(f"{s.server_url} (id {s.server_id})" for s in subs)
        raise AmbiguousUri(
            f"{uri} is watched on {len(subs)} servers: {names}",
            hint=f"name one: --server {subs[0].server_id} (or its URL; the API's ?server=)",
            extra={"servers": servers},
        )
    return subs[0]


async def _content(
    state: ApiState, sub: Subscription, rev: Revision, event_id: int | None = None
) -> dict[str, Any]:
    if event_id is None:
        event_id = await event_id_for_revision(state.supervisor.store, sub.id, rev.id)
    return content_json(sub, rev, event_id)


@router.get(
    "/content",
    responses={
        404: {"description": "NOT_WATCHED, NO_CONTENT_YET"},
        409: {"description": "AMBIGUOUS_URI (several servers watch it; name one)"},
    },
)
async def get_content(
    request: Request, uri: UriParam, url: UrlParam = None, server: ServerParam = None
) -> dict[str, Any]:
    """The current revision of ``uri`` on its server; 409 ``AMBIGUOUS_URI`` when several
    servers watch it and none is named (``url`` or ``server``)."""
    state = api_state(request)
    sub = await _watcher(state, uri, url, server)
    rev = await state.supervisor.store.current_revision(sub.id)
    if rev is None:
        raise NoContentYet(f"{uri} has not been read yet")
    return await _content(state, sub, rev)


@router.get(
    "/wait",
    responses={
        408: {"description": "NOTIFICATION_TIMEOUT"},
        404: {"description": "NOT_WATCHED"},
        409: {"description": "AMBIGUOUS_URI (several servers watch it; name one)"},
    },
)
async def wait_for_update(
    request: Request,
    uri: UriParam,
    url: UrlParam = None,
    server: ServerParam = None,
    after: Annotated[
        int | None,
        Query(ge=0, le=validate.MAX_ID, description="event id; default: the newest one now"),
    ] = None,
    timeout_ms: Annotated[int | None, Query(ge=1, description="default 60000")] = None,
) -> Any:
    """Long-poll: the first ``resource.updated`` event of ``uri`` with an id above ``after``."""
    state = api_state(request)
    if timeout_ms is None:
        timeout_ms = state.default_wait_ms
    if timeout_ms > state.max_wait_ms:
        raise InvalidParameter(
            f"timeout_ms must be at most {state.max_wait_ms}", field="timeout_ms"
        )
    subs = [await _watcher(state, uri, url, server)]
    store = state.supervisor.store
    cursor = await store.last_event_id() if after is None else after
    by_id = {s.id: s for s in subs}
    state.check_capacity()
    deadline = time.monotonic() + timeout_ms / 1000
    async with state.waiter_slot():
        while True:
            hub = state.supervisor.events
            recent = hub.recent_after(
                cursor, types=["resource.updated"], uri=uri, subscription_ids=list(by_id)
            )
            if recent is not None:  # from memory: no query while caught up
                found, mark = recent
            else:
                mark = await store.last_event_id()
                found = await store.events_after(
                    cursor,
                    limit=1,
                    types=["resource.updated"],
                    uri=uri,
                    subscription_ids=list(by_id),
                )
            if found:
                return await _wait_result(state, by_id[found[0].subscription_id or 0], found[0])
            cursor = max(cursor, mark)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise NotificationTimeout(
                        f"no update of {uri} within {timeout_ms} ms", extra={"after": cursor}
                    )
                if await state.supervisor.events.wait_beyond(
                    cursor, min(remaining, DISCONNECT_CHECK_S)
                ):
                    break
                if await request.is_disconnected():
                    return JSONResponse({"errorCode": "CLIENT_GONE"}, status_code=499)


async def _wait_result(state: ApiState, sub: Subscription, event: Event) -> dict[str, Any]:
    store = state.supervisor.store
    rev = await store.get_revision(event.revision_id) if event.revision_id else None
    if rev is None:  # pruned or removed since: hand out what is current
        rev = await store.current_revision(sub.id)
    # The link as `GET /v1/subscriptions/{id}` shows it: `wait` reports its capabilities and
    # honored URIs, and a script's loop then costs one request, not two.
    link = link_of(state.supervisor, sub)
    if rev is None:
        return {"event": event_json(event), "revision": None, "link": link}
    event_id = event.id if rev.id == event.revision_id else None
    content = await _content(state, sub, rev, event_id)
    # The revision before it is the waiter's baseline: `wait` prints it as initialText.
    before = await store.revision_before(sub.id, rev.revision)
    previous = None if before is None else {"revision": before.revision, "text": before.text}
    return {"event": event_json(event), "revision": content, "previous": previous, "link": link}
