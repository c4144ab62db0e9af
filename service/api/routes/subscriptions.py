"""``/v1/subscriptions``: add, list, show, remove."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response

from service.api import validate
from service.api.errors import SubscriptionNotFound
from service.api.state import api_state
from service.api.views import link_for, revision_summary, subscription_json

router = APIRouter(prefix="/v1/subscriptions", tags=["subscriptions"])

SubscriptionId = Annotated[
    int, Path(alias="id", ge=1, le=validate.MAX_ID, description="subscription id")
]

_CREATE_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["url", "uri"],
                    "properties": {
                        "url": {"type": "string", "description": "MCP endpoint, http(s)"},
                        "uri": {"type": "string", "description": "resource URI"},
                    },
                }
            }
        },
    }
}


@router.post(
    "",
    status_code=201,
    openapi_extra=_CREATE_BODY,
    responses={200: {"description": "already subscribed"}, 400: {"description": "bad input"}},
)
async def create_subscription(request: Request, response: Response) -> dict[str, Any]:
    """Watch ``uri`` on ``url``; idempotent (201 when new, 200 when it existed)."""
    state = api_state(request)
    raw = await state.read_body(request)
    body = validate.json_object(raw)
    url = validate.server_url(body.get("url"))
    uri = validate.resource_uri(body.get("uri"))
    sub, created = await state.supervisor.subscribe(url, uri)
    response.status_code = 201 if created else 200
    return {**subscription_json(sub), "created": created}


@router.get("")
async def list_subscriptions(request: Request) -> dict[str, Any]:
    subs = await api_state(request).supervisor.store.list_subscriptions()
    return {"subscriptions": [subscription_json(s) for s in subs]}


@router.get("/{id}")
async def show_subscription(request: Request, subscription_id: SubscriptionId) -> dict[str, Any]:
    supervisor = api_state(request).supervisor
    sub = await supervisor.store.get_subscription(subscription_id)
    if sub is None:
        raise SubscriptionNotFound(f"no subscription {subscription_id}")
    current = await supervisor.store.current_revision(sub.id)
    return {
        **subscription_json(sub),
        "link": link_for(supervisor.link_status(), sub),
        "current": revision_summary(current),
    }


@router.delete("/{id}")
async def delete_subscription(request: Request, subscription_id: SubscriptionId) -> dict[str, Any]:
    removed = await api_state(request).supervisor.unsubscribe(subscription_id)
    if removed is None:
        raise SubscriptionNotFound(f"no subscription {subscription_id}")
    return subscription_json(removed)
