"""``/v1/agent/subscriptions``: subscribe and unsubscribe on behalf of an agent
(``mcpsubctl mcp``).

The same as ``POST /v1/subscriptions`` and ``DELETE /v1/subscriptions/{id}``, but within the
agent policy, through the same :class:`service.app.subscriptions.Subscriptions` as ``/mcp``
(``agent_allowed_origins`` for what it may add, ``agent_unsubscribe`` for what it may remove;
what it adds is recorded as ``createdBy: "agent"``), and a subscription is answered once its
first state is known, so the stdio face and ``/mcp`` give one answer.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request

from service.api.openapi import URI_SCHEMA, URL_SCHEMA
from service.api.state import api_state
from service.app import validate
from service.app.errors import InvalidParameter, SubscriptionNotFound

router = APIRouter(prefix="/v1/agent", tags=["agent"])
MAX_URIS = 100
_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["url", "uris"],
                    "properties": {
                        "url": URL_SCHEMA,
                        "uris": {
                            "type": "array",
                            "items": URI_SCHEMA,
                            "minItems": 1,
                            "maxItems": MAX_URIS,
                        },
                    },
                }
            }
        },
    }
}


@router.post(
    "/subscriptions",
    openapi_extra=_BODY,
    responses={
        403: {
            "description": "AGENT_ORIGIN_NOT_ALLOWED (outside agent_allowed_origins), "
            "URI_WATCHED_ELSEWHERE (a URI already watched on another server)"
        }
    },
)
async def agent_subscribe(request: Request) -> Any:
    """Body ``{"url", "uris": [...]}``; 403 ``AGENT_ORIGIN_NOT_ALLOWED`` outside the policy."""
    state = api_state(request)
    body = validate.json_object(await state.read_body(request))
    uris = body.get("uris")
    if not isinstance(uris, list) or not 1 <= len(uris) <= MAX_URIS:
        raise InvalidParameter(f"uris must be a list of 1 to {MAX_URIS} URIs", field="uris")
    rows = await state.subscriptions.agent_subscribe(body.get("url"), uris)
    return {"subscriptions": rows}


@router.delete(
    "/subscriptions/{id}",
    responses={
        403: {"description": "NOT_CREATED_BY_AGENT (a person made it; agent_unsubscribe = own)"},
        404: {"description": "SUBSCRIPTION_NOT_FOUND"},
    },
)
async def agent_unsubscribe(
    request: Request,
    subscription_id: Annotated[int, Path(alias="id", ge=1, le=validate.MAX_ID)],
) -> Any:
    """Remove a subscription an agent made; 403 ``NOT_CREATED_BY_AGENT`` for one a person
    made (unless the daemon's ``agent_unsubscribe`` is ``any``)."""
    removed = await api_state(request).subscriptions.agent_unsubscribe_json(subscription_id)
    if removed is None:
        raise SubscriptionNotFound(f"no subscription {subscription_id}")
    return removed
