"""``/v1/webhooks`` (targets) and ``/v1/deliveries`` (the outbox): manage, inspect, replay,
through :class:`service.app.webhooks.Webhooks` (each route parses, calls it, renders).

A target's secret leaves the daemon twice only: in the answer to ``POST /v1/webhooks`` and in
the answer to ``POST /v1/webhooks/{id}/rotate-secret``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.api import openapi
from service.api.state import ApiState, api_state
from service.app import validate
from service.app.views import delivery_json, next_after, target_json
from service.app.webhooks import DELIVERY_STATES, MAX_PAGE, TARGET_MODES
from service.safetext import redact_urls

router = APIRouter(tags=["webhooks"])

openapi.DELIVERY_STATES = DELIVERY_STATES

TargetId = Annotated[int, Path(alias="id", ge=1, le=validate.MAX_ID, description="target id")]
DeliveryId = Annotated[int, Path(alias="id", ge=1, le=validate.MAX_ID, description="delivery id")]


async def _json_body(
    request: Request, state: ApiState, *, optional: bool = False
) -> dict[str, Any]:
    raw = await state.read_body(request)
    if optional and not raw.strip():
        return {}
    return validate.json_object(raw)


_CREATE_BODY = openapi.body_schema(
    {
        "url": {"type": "string", "description": "http(s) endpoint"},
        "uriPatterns": {"type": "array", "items": {"type": "string"}},
        "subscriptionIds": {"type": "array", "items": {"type": "integer"}},
        "mode": {"type": "string", "enum": list(TARGET_MODES)},
        "secret": {"type": "string", "description": "whsec_…; generated when absent"},
        "allowPrivateTarget": {
            "type": "boolean",
            "description": "allow a link-local or cloud-metadata target (refused by default)",
        },
    },
    ["url"],
)
_ROTATE_BODY = openapi.body_schema({"secret": {"type": "string"}}, [])
_RECOVER_BODY = openapi.body_schema(
    {
        "target": {"type": "integer"},
        "since": {"type": ["string", "number"], "description": "ISO-8601 or Unix seconds"},
    },
    ["target", "since"],
)


# ---- targets ----------------------------------------------------------------------------
@router.post(
    "/v1/webhooks",
    status_code=201,
    openapi_extra=_CREATE_BODY,
    responses={
        400: {
            "description": "INVALID_JSON, INVALID_URL, INVALID_PARAMETER, INVALID_SECRET "
            "or PRIVATE_TARGET"
        }
    },
)
async def create_webhook(request: Request) -> dict[str, Any]:
    """A new target; the answer holds its ``secret``, which is never shown again."""
    state = api_state(request)
    target, created_secret = await state.webhooks.create(await _json_body(request, state))
    return {**target_json(target), "secret": created_secret}


@router.get("/v1/webhooks")
async def list_webhooks(request: Request) -> dict[str, Any]:
    targets = await api_state(request).webhooks.targets()
    return {"webhooks": [target_json(t) for t in targets]}


@router.get("/v1/webhooks/{id}")
async def show_webhook(request: Request, target_id: TargetId) -> dict[str, Any]:
    target, counts = await api_state(request).webhooks.target_with_counts(target_id)
    return {**target_json(target), "deliveries": counts}


@router.delete("/v1/webhooks/{id}")
async def delete_webhook(request: Request, target_id: TargetId) -> dict[str, Any]:
    return target_json(await api_state(request).webhooks.delete(target_id))


@router.post("/v1/webhooks/{id}/enable")
async def enable_webhook(request: Request, target_id: TargetId) -> dict[str, Any]:
    return target_json(await api_state(request).webhooks.set_enabled(target_id, True))


@router.post("/v1/webhooks/{id}/disable")
async def disable_webhook(request: Request, target_id: TargetId) -> dict[str, Any]:
    return target_json(await api_state(request).webhooks.set_enabled(target_id, False))


@router.post("/v1/webhooks/{id}/test")
async def test_webhook(request: Request, target_id: TargetId) -> dict[str, Any]:
    """Send a signed ``webhook.test`` ping now; nothing is stored or retried."""
    outcome, elapsed_s = await api_state(request).webhooks.send_test(target_id)
    return {
        "targetId": target_id,
        "ok": outcome.ok,
        "status": outcome.status,
        "error": redact_urls(outcome.error) if outcome.error else None,
        "elapsedMs": round(elapsed_s * 1000, 1),
    }


@router.post("/v1/webhooks/{id}/rotate-secret", openapi_extra=_ROTATE_BODY)
async def rotate_webhook_secret(
    request: Request, target_id: TargetId, response: Response
) -> dict[str, Any]:
    """A new secret (shown once); the old one keeps signing too for 24 h."""
    state = api_state(request)
    body = await _json_body(request, state, optional=True)
    new_secret, previous_until = await state.webhooks.rotate_secret(target_id, body)
    response.headers["Cache-Control"] = "no-store"
    return {"id": target_id, "secret": new_secret, "previousSecretValidUntil": previous_until}


# ---- deliveries -------------------------------------------------------------------------
@router.get("/v1/deliveries")
async def list_deliveries(
    request: Request,
    target: Annotated[int | None, Query(ge=1, le=validate.MAX_ID)] = None,
    state: Annotated[str | None, Query(description=" | ".join(DELIVERY_STATES))] = None,
    after: Annotated[int, Query(ge=0, le=validate.MAX_ID)] = 0,
    limit: Annotated[int, Query(ge=1, description=f"capped at {MAX_PAGE}")] = 100,
    since: Annotated[
        float | None, Query(ge=0, le=1e11, description="created at or after (Unix seconds)")
    ] = None,
    newest: Annotated[bool, Query(description="the newest `limit` first instead")] = False,
) -> dict[str, Any]:
    """Deliveries with an id above ``after``, oldest first; pass ``nextAfter`` back.
    With ``newest=true``: the newest ``limit`` matching deliveries, newest first."""
    found = await api_state(request).webhooks.deliveries(
        target_id=target, state=state, after=after, limit=limit, since=since, newest_first=newest
    )
    return {
        "deliveries": [delivery_json(d) for d in found],
        "nextAfter": next_after([d.id for d in found], after, newest_first=newest),
    }


@router.api_route(
    "/v1/deliveries/recover",
    methods=["GET", "PUT", "PATCH", "DELETE"],
    include_in_schema=False,
)
async def recover_other_methods() -> None:
    """Without this, ``GET /v1/deliveries/recover`` would match ``/v1/deliveries/{id}`` and
    answer 400 (``recover`` is not an id) instead of 405."""
    raise StarletteHTTPException(405)


@router.post("/v1/deliveries/recover", openapi_extra=_RECOVER_BODY)
async def recover_deliveries(request: Request) -> dict[str, Any]:
    """Send again every failed or dead delivery of ``target`` created since ``since``."""
    state = api_state(request)
    target_id, since, count = await state.webhooks.recover(await _json_body(request, state))
    return {"targetId": target_id, "since": since, "recovered": count}


@router.get("/v1/deliveries/{id}")
async def show_delivery(request: Request, delivery_id: DeliveryId) -> dict[str, Any]:
    return delivery_json(await api_state(request).webhooks.delivery(delivery_id))


@router.get("/v1/deliveries/{id}/attempts")
async def delivery_attempts(request: Request, delivery_id: DeliveryId) -> dict[str, Any]:
    """Each logged attempt (headers sent, status, the answer's first 2 KiB, error) and the
    request body (the same for every attempt: it is rebuilt from the delivery's revision)."""
    found, body, attempts = await api_state(request).webhooks.attempts(delivery_id)
    return {
        **delivery_json(found),
        "requestBody": body.decode("utf-8", "replace"),
        "attempts": attempts,
    }


@router.post("/v1/deliveries/{id}/retry")
async def retry_delivery(request: Request, delivery_id: DeliveryId) -> dict[str, Any]:
    """Send one delivery again now (any state), with the same ``webhook-id``."""
    return delivery_json(await api_state(request).webhooks.retry(delivery_id))
