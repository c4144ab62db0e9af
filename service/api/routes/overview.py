"""``/v1/overview`` (the figures a dashboard shows, small at any scale) and ``/v1/links``
(the links, filtered and paged). ``/v1/status`` carries every link in full, which a page
refreshed on every change cannot afford at 1,000 links."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from service._version import __version__
from service.api.metrics import uptime
from service.api.state import api_state
from service.app import validate
from service.app.views import figures_json

router = APIRouter(tags=["system"])

MAX_LIMIT = 1000


@router.get("/v1/overview")
async def overview(request: Request) -> dict[str, Any]:
    """Counts by state, the revisions of the last hour per minute, storage health and the
    replicas with the links each holds: a few kilobytes whatever the daemon's size."""
    state = api_state(request)
    supervisor = state.supervisor
    # From memory when the database does not answer in time (a frozen PostgreSQL): the
    # storage then says failing, and the history queries are left out.
    answer = await state.status.counts()
    counts = answer.value
    states = _link_states(supervisor)
    body: dict[str, Any] = {
        "version": __version__,
        "ready": supervisor.ready,
        "uptimeSeconds": round(uptime(supervisor.started_at), 3),
        "links": {"total": sum(states.values()), "byState": dict(sorted(states.items()))},
        "subscriptions": {
            "total": sum(counts.subscription_states.values()),
            "byState": dict(sorted(counts.subscription_states.items())),
        },
        **figures_json(counts),
        "storage": state.status.storage_json(),
    }
    if not answer.fresh:
        return {**body, "revisionsPerMinute": [], "replicas": [], "countsFromMemory": True}
    return {**body, **await state.status.recent()}


@router.get("/v1/links")
async def list_links(
    request: Request,
    state: Annotated[str | None, Query(description="open, connecting, backoff, error, …")] = None,
    server: Annotated[str | None, Query(description="part of the server URL")] = None,
    after: Annotated[int, Query(ge=0, le=validate.MAX_ID, description="server id")] = 0,
    limit: Annotated[int, Query(ge=1, description=f"capped at {MAX_LIMIT}")] = 100,
) -> dict[str, Any]:
    """The links by server id (above ``after``), without their URI lists (counts instead)."""
    wanted_state = validate.state_filter(state)
    fragment = validate.text_filter(server, "server")
    found: list[dict[str, Any]] = []
    cap = min(limit, MAX_LIMIT)
    for link in sorted(api_state(request).supervisor.link_status(), key=_server_id):
        if _server_id(link) <= after:
            continue
        if wanted_state is not None and link.get("state") != wanted_state:
            continue
        if fragment is not None and fragment not in str(link.get("url", "")):
            continue
        entry = {k: v for k, v in link.items() if k not in ("uris", "honoredUris")}
        entry["uriCount"] = len(link.get("uris") or ())
        entry["honoredCount"] = len(link.get("honoredUris") or ())
        found.append(entry)
        if len(found) == cap:
            break
    return {"links": found, "nextAfter": _server_id(found[-1]) if found else after}


def _link_states(supervisor: Any) -> Counter[str]:
    """Links by state: read off the daemon's links when it has them (building 1,000 status
    objects only to count them was most of an overview), else from ``link_status()``."""
    links = getattr(supervisor, "links", None)
    if isinstance(links, dict):
        return Counter(str(link.state) for link in links.values())
    return Counter(str(link["state"]) for link in supervisor.link_status())


def _server_id(link: dict[str, Any]) -> int:
    return int(link.get("serverId") or 0)
