"""Status, health, readiness and Prometheus metrics."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from service._version import __version__
from service.api import validate
from service.api.metrics import uptime
from service.api.state import api_state
from service.webhooks.repository import WebhookRepository

router = APIRouter(tags=["system"])


@router.get("/v1/status", response_model=dict[str, Any])
async def status(request: Request) -> Response:
    supervisor = api_state(request).supervisor
    store = supervisor.store
    body = {
        "version": __version__,
        "ready": supervisor.ready,
        "uptimeSeconds": round(uptime(supervisor.started_at), 3),
        "links": supervisor.link_status(),
        "counts": await store.counts(),
        "subscriptionsByState": dict(sorted((await store.subscription_states()).items())),
        "lastEventId": await store.last_event_id(),
        "deliveries": await supervisor.webhooks.repo.counts(),
        "webhooks": await _webhook_counts(supervisor.webhooks.repo),
        "storage": store.health.to_json(),
    }
    # Plain JSON types already: json.dumps directly, not FastAPI's recursive encoder
    # (with 1,000 links that encoder was most of the request).
    return Response(
        json.dumps(body, ensure_ascii=False, separators=(",", ":")), media_type="application/json"
    )


@router.post("/v1/resubscribe")
async def resubscribe(request: Request, url: str | None = None) -> dict[str, Any]:
    """Wake every link (or the one for ``url``) to reconnect now.

    Links parked on a slow schedule (``error``: the server cannot speak 2026-07-28;
    ``login_required``; a long backoff) otherwise wait up to ``protocol_recheck_s``.
    """
    if url is not None:
        validate.server_url(url)
    return {"rechecked": api_state(request).supervisor.recheck(url)}


async def _webhook_counts(repo: WebhookRepository) -> dict[str, int]:
    targets = await repo.list_targets()
    return {"targets": len(targets), "enabled": sum(1 for t in targets if t.enabled)}


@router.get("/healthz")
async def healthz() -> dict[str, bool]:
    """Liveness: the process answers. Needs no token."""
    return {"ok": True}


@router.get("/readyz", responses={503: {"description": "NOT_READY or STORAGE_FAILING"}})
async def readyz(request: Request) -> JSONResponse:
    supervisor = api_state(request).supervisor
    if not supervisor.ready:
        return JSONResponse(
            {"ready": False, "errorCode": "NOT_READY", "message": "links are not started yet"},
            status_code=503,
        )
    storage = supervisor.store.health
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
    store = state.supervisor.store
    text = state.metrics.render(await store.counts(), await store.last_event_id())
    return Response(text, media_type=CONTENT_TYPE_LATEST)
