"""``/v1/content`` (the current revision of a URI) and ``/v1/wait`` (long-poll for the next)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from service.api.state import ApiState, api_state
from service.app import validate
from service.app.changes import Change
from service.app.errors import (
    AmbiguousUri,
    InvalidParameter,
    NoContentYet,
    NotificationTimeout,
    NotWatched,
)
from service.app.views import change_json, content_json, event_json, link_of
from service.store.records import Subscription

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
    subs = await state.changes.watchers(uri, url)
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
    current = await state.changes.current(sub)
    if current is None:
        raise NoContentYet(f"{uri} has not been read yet")
    return content_json(sub, *current)


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
    sub = await _watcher(state, uri, url, server)
    changes = state.changes
    cursor = await changes.last_event_id() if after is None else after
    state.check_capacity()
    deadline = time.monotonic() + timeout_ms / 1000
    async with state.waiter_slot():
        while True:
            # In steps, so a long-poll whose client went away ends within one.
            step = min(deadline, time.monotonic() + DISCONNECT_CHECK_S)
            waited = await changes.wait(
                after=cursor,
                deadline=step,
                types=["resource.updated"],
                uri=uri,
                subscription_ids=[sub.id],
            )
            if waited.event is not None:
                change = await changes.change_for(waited.event, sub)
                assert change is not None  # the subscription was given
                return _wait_result(state, change)
            cursor = waited.cursor
            if time.monotonic() >= deadline:
                raise NotificationTimeout(
                    f"no update of {uri} within {timeout_ms} ms", extra={"after": cursor}
                )
            if await request.is_disconnected():
                return JSONResponse({"errorCode": "CLIENT_GONE"}, status_code=499)


def _wait_result(state: ApiState, change: Change) -> dict[str, Any]:
    # The link as `GET /v1/subscriptions/{id}` shows it: `wait` reports its capabilities and
    # honored URIs, and a script's loop then costs one request, not two. The revision before
    # the new one is the waiter's baseline: `wait` prints it as initialText.
    link = link_of(state.supervisor, change.subscription)
    return {"event": event_json(change.event), **change_json(change), "link": link}
