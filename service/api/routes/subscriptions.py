"""``/v1/subscriptions``: add, list, show, remove, as a person, through
:class:`service.app.subscriptions.Subscriptions`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response

from service.api.state import api_state
from service.app import validate
from service.app.errors import InvalidParameter, SubscriptionNotFound
from service.app.subscriptions import MAX_PAGE
from service.app.views import subscription_json
from service.jsonencode import json_bytes

router = APIRouter(prefix="/v1/subscriptions", tags=["subscriptions"])

MAX_BATCH = 1000
"""URIs in one batch ``POST /v1/subscriptions`` (the 64 KiB body cap allows about that)."""

SubscriptionId = Annotated[
    int, Path(alias="id", ge=1, le=validate.MAX_ID, description="subscription id")
]

_URL = {"type": "string", "description": "MCP endpoint, http(s)"}
_CREATE_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "oneOf": [
                        {
                            "type": "object",
                            "required": ["url", "uri"],
                            "properties": {
                                "url": _URL,
                                "uri": {"type": "string", "description": "resource URI"},
                            },
                        },
                        {
                            "type": "object",
                            "required": ["url", "uris"],
                            "properties": {
                                "url": _URL,
                                "uris": {
                                    "type": "array",
                                    "items": {"type": "string"},
                                    "minItems": 1,
                                    "maxItems": 1000,
                                    "description": "several URIs of url, one transaction",
                                },
                            },
                        },
                    ]
                }
            }
        },
    }
}


@router.post(
    "",
    status_code=201,
    response_model=dict[str, Any],
    openapi_extra=_CREATE_BODY,
    responses={200: {"description": "already subscribed"}, 400: {"description": "bad input"}},
)
async def create_subscription(request: Request) -> Response:
    """Watch ``uri`` on ``url``; idempotent (201 when new, 200 when it existed).

    Batch form: ``{"url", "uris": [...]}`` (up to ``MAX_BATCH``) adds them all in one
    transaction and one re-listen; the answer is ``{"subscriptions": [...], "created": n}``,
    201 when any was new."""
    state = api_state(request)
    raw = await state.read_body(request)
    body = validate.json_object(raw)
    url = validate.server_url(body.get("url"))
    if "uris" in body:
        if "uri" in body:
            raise InvalidParameter("give either uri or uris, not both", field="uris")
        uris = _batch_uris(body["uris"])
        added = await state.subscriptions.subscribe_many(url, uris)
        new = sum(1 for _, created in added if created)
        return _json(
            {
                "subscriptions": [{**subscription_json(s), "created": c} for s, c in added],
                "created": new,
            },
            201 if new else 200,
        )
    uri = validate.resource_uri(body.get("uri"))
    sub, created = await state.subscriptions.subscribe(url, uri)
    return _json({**subscription_json(sub), "created": created}, 201 if created else 200)


def _json(body: dict[str, Any], status: int) -> Response:
    """Plain JSON types already: encoded directly, without FastAPI's response validation and
    recursive encoder (a measurable part of a POST's CPU when hundreds arrive per second)."""
    return Response(json_bytes(body), status_code=status, media_type="application/json")


def _batch_uris(value: Any) -> list[str]:
    if not isinstance(value, list) or not value:
        raise InvalidParameter("uris must be a non-empty list of URIs", field="uris")
    if len(value) > MAX_BATCH:
        raise InvalidParameter(f"uris takes at most {MAX_BATCH} URIs per call", field="uris")
    uris = [validate.resource_uri(item, field="uris") for item in value]
    return list(dict.fromkeys(uris))  # a repeated URI is one subscription


@router.get("")
async def list_subscriptions(
    request: Request,
    server: Annotated[str | None, Query(description="part of the server URL")] = None,
    pattern: Annotated[
        str | None, Query(description="URI pattern: * is a wildcard, else a part of the URI")
    ] = None,
    state: Annotated[str | None, Query(description="pending, active, error, …")] = None,
    after: Annotated[int, Query(ge=0, le=validate.MAX_ID, description="subscription id")] = 0,
    limit: Annotated[
        int | None, Query(ge=1, description=f"capped at {MAX_PAGE}; default: all")
    ] = None,
) -> dict[str, Any]:
    """Every subscription, or with any filter or ``limit`` a page of them (id above
    ``after``) and ``nextAfter`` to pass back."""
    subscriptions = api_state(request).subscriptions
    filters = (server, pattern, state)
    if limit is None and after == 0 and not any(filters):
        return {"subscriptions": [subscription_json(s) for s in await subscriptions.all()]}
    subs = await subscriptions.page(
        server=validate.text_filter(server, "server"),
        uri=validate.text_filter(pattern, "pattern"),
        state=validate.state_filter(state),
        after=after,
        limit=limit or MAX_PAGE,
    )
    return {
        "subscriptions": [subscription_json(s) for s in subs],
        "nextAfter": subs[-1].id if subs else after,
    }


@router.get("/{id}")
async def show_subscription(request: Request, subscription_id: SubscriptionId) -> dict[str, Any]:
    return await api_state(request).subscriptions.show(subscription_id)


@router.delete("/{id}")
async def delete_subscription(request: Request, subscription_id: SubscriptionId) -> dict[str, Any]:
    removed = await api_state(request).subscriptions.unsubscribe(subscription_id)
    if removed is None:
        raise SubscriptionNotFound(f"no subscription {subscription_id}")
    return subscription_json(removed)
