"""Status, health, readiness and Prometheus metrics."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from service import eventloop
from service._version import __version__
from service.api.metrics import uptime
from service.api.state import api_state
from service.app import validate
from service.app.views import figures_json
from service.jsonencode import json_bytes

router = APIRouter(tags=["system"])


@router.get("/v1/status", response_model=dict[str, Any])
async def status(request: Request) -> Response:
    state = api_state(request)
    supervisor = state.supervisor
    # One reader hop for every figure; from memory when the database does not answer in time
    # (the storage then says why).
    answer = await state.status.counts()
    counts = answer.value
    head = {
        "version": __version__,
        "ready": supervisor.ready,
        "uptimeSeconds": round(uptime(supervisor.started_at), 3),
        "eventLoop": eventloop.name_of(asyncio.get_running_loop()),
    }
    tail = {
        "counts": counts.rows,
        "subscriptionsByState": dict(sorted(counts.subscription_states.items())),
        **figures_json(counts),
        "storage": state.status.storage.to_json(),
    }
    if not answer.fresh:
        tail["countsFromMemory"] = True
        tail["countsAt"] = answer.at
    # The links are most of the answer: the supervisor keeps each link's
    # JSON until the link changes, and the parts are joined here in the documented order.
    body = b"".join(
        (
            json_bytes(head)[:-1],
            b',"links":',
            supervisor.link_status_json(),
            b",",
            json_bytes(tail)[1:],
        )
    )
    return Response(body, media_type="application/json")


@router.post("/v1/resubscribe")
async def resubscribe(request: Request, url: str | None = None) -> dict[str, Any]:
    """Wake every link (or the one for ``url``) to reconnect now.

    Links parked on a slow schedule (``error``: the server cannot speak 2026-07-28;
    ``login_required``; a long backoff) otherwise wait up to ``protocol_recheck_s``.
    """
    if url is not None:
        validate.server_url(url)
    return {"rechecked": api_state(request).supervisor.recheck(url)}


@router.get("/healthz")
async def healthz() -> dict[str, bool]:
    """Liveness: the process answers. Needs no token."""
    return {"ok": True}


@router.get("/readyz", responses={503: {"description": "NOT_READY or STORAGE_FAILING"}})
async def readyz(request: Request) -> JSONResponse:
    state = api_state(request)
    if not state.supervisor.ready:
        return JSONResponse(
            {"ready": False, "errorCode": "NOT_READY", "message": "links are not started yet"},
            status_code=503,
        )
    storage = state.status.storage
    if storage.failing:
        # Degraded: the API answers and serves what is stored, but nothing new is recorded.
        return JSONResponse(
            {
                "ready": False,
                "status": "degraded",
                "errorCode": "STORAGE_FAILING",
                "message": f"the database refuses writes: {storage.error}",
                "storage": storage.to_json(),
            },
            status_code=503,
        )
    return JSONResponse({"ready": True})


@router.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    state = api_state(request)
    counts = (await state.status.counts()).value
    text = state.metrics.render(counts.rows, counts.last_event_id)
    return Response(text, media_type=CONTENT_TYPE_LATEST)
