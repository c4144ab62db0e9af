"""``/v1/webhooks`` (targets) and ``/v1/deliveries`` (the outbox): manage, inspect, replay.

A target's secret leaves the daemon twice only: in the answer to ``POST /v1/webhooks`` and in
the answer to ``POST /v1/webhooks/{id}/rotate-secret``. Every call that changes targets or
deliveries goes through :class:`service.app.webhooks.Webhooks`, which wakes the dispatcher, so a
retry or a re-enabled target goes out at once.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Path, Query, Request, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.api import openapi
from service.api.state import ApiState, api_state
from service.app import validate
from service.app.errors import ApiError, InvalidParameter
from service.app.views import camel
from service.app.webhooks import Webhooks
from service.netguard import METADATA_HOSTS, address_problem
from service.safetext import redact_urls
from service.webhooks.outbox import FINAL_STATES, MODES, OPEN_STATES, Delivery, Target
from service.webhooks.repository import ROTATION_OVERLAP_S
from service.webhooks.signing import InvalidSecret as BadSecret
from service.webhooks.signing import checked_secret

router = APIRouter(tags=["webhooks"])

STATES = (*OPEN_STATES, *FINAL_STATES)
openapi.DELIVERY_STATES = STATES
MAX_LIMIT = 1000
MAX_PATTERNS = 100

TargetId = Annotated[int, Path(alias="id", ge=1, le=validate.MAX_ID, description="target id")]
DeliveryId = Annotated[int, Path(alias="id", ge=1, le=validate.MAX_ID, description="delivery id")]


class WebhookNotFound(ApiError):
    error_code = "WEBHOOK_NOT_FOUND"


class DeliveryNotFound(ApiError):
    error_code = "DELIVERY_NOT_FOUND"


class PrivateTarget(ApiError):
    error_code = "PRIVATE_TARGET"


class InvalidSecret(ApiError):
    error_code = "INVALID_SECRET"


# ---- JSON shapes (pure) ---------------------------------------------------------------------
def target_json(target: Target) -> dict[str, Any]:
    """Everything about a target but its secret (which is not a field of Target)."""
    return {camel(k): v for k, v in target.to_json().items()}


def delivery_json(delivery: Delivery) -> dict[str, Any]:
    return {camel(k): v for k, v in delivery.to_json().items()}


# ---- input checks (pure) ---------------------------------------------------------------
def private_target_problem(url: str) -> str | None:
    """Why ``url`` points at a link-local or cloud-metadata address (None when it does not).

    Loopback targets are allowed: the daemon serves one user on one machine, and a receiver
    on 127.0.0.1 is the common case. Link-local (169.254.0.0/16, fe80::/10) and metadata
    addresses hold credentials a webhook body must never be able to reach by accident.
    Only literal addresses and well-known metadata names are judged here (no DNS lookup);
    a name is judged after resolution, at every delivery (:mod:`service.netguard`).
    """
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host in METADATA_HOSTS:
        return f"{host} is a cloud metadata service"
    address = validate.host_address(url)
    return None if address is None else address_problem(address)


def webhook_url(value: Any, *, allow_private: bool = False) -> str:
    """http(s) only; scheme, host, port and the private-target rule are checked here, once."""
    url = validate.http_url(value)
    problem = private_target_problem(url)
    if problem and not allow_private:
        raise PrivateTarget(f"url refused: {problem}", field="url")
    return url


def flag(value: Any, field: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidParameter(f"{field} must be true or false", field=field)
    return value


def uri_patterns(value: Any) -> list[str]:
    field = "uriPatterns"
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_PATTERNS:
        raise InvalidParameter(
            f"{field} must be a list of at most {MAX_PATTERNS} URI globs", field=field
        )
    for item in value:
        if not isinstance(item, str) or not item or any(ch.isspace() for ch in item):
            raise InvalidParameter(
                f"{field} entries must be non-empty strings without spaces", field=field
            )
        problem = validate.text_problem(item)
        if problem or len(item) > validate.MAX_URI_LENGTH:
            raise InvalidParameter(f"{field} entry {problem or 'is too long'}", field=field)
    return list(value)


def subscription_ids(value: Any) -> list[int]:
    field = "subscriptionIds"
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_PATTERNS:
        raise InvalidParameter(f"{field} must be a list of subscription ids", field=field)
    ids = [whole_number(item) for item in value]
    if any(item is None or not 1 <= item <= validate.MAX_ID for item in ids):
        raise InvalidParameter(f"{field} entries must be integers >= 1", field=field)
    return [item for item in ids if item is not None]


def whole_number(value: Any) -> int | None:
    """An integer, or a float with no fraction (JSON has one number type: 3.0 is 3)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def mode(value: Any) -> str:
    if value is None:
        return "all"
    if value not in MODES:
        raise InvalidParameter(f"mode must be one of {', '.join(MODES)}", field="mode")
    return str(value)


def secret(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidSecret("secret must be a string", field="secret")
    try:
        return checked_secret(value)
    except BadSecret as exc:
        raise InvalidSecret(str(exc), field="secret") from None


def since_time(value: Any) -> float:
    """ISO-8601 (a naive time is UTC) or Unix seconds, as a number or a string."""
    field = "since"
    if isinstance(value, bool) or value is None or value == "":
        raise InvalidParameter(f"{field} is required: ISO-8601 or Unix seconds", field=field)
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            try:
                parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                raise InvalidParameter(
                    f"{field} must be ISO-8601 (2026-11-29T00:00:00Z) or Unix seconds",
                    field=field,
                ) from None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            number = parsed.timestamp()
    else:
        raise InvalidParameter(f"{field} must be ISO-8601 or Unix seconds", field=field)
    if not math.isfinite(number) or number < 0:
        raise InvalidParameter(f"{field} must be a time after 1970", field=field)
    return number


def target_param(value: Any) -> int:
    number = whole_number(value)
    if number is None or not 1 <= number <= validate.MAX_ID:
        raise InvalidParameter("target must be a webhook target id (integer >= 1)", field="target")
    return number


# ---- helpers ------------------------------------------------------------------------------
async def _json_body(
    request: Request, state: ApiState, *, optional: bool = False
) -> dict[str, Any]:
    raw = await state.read_body(request)
    if optional and not raw.strip():
        return {}
    return validate.json_object(raw)


def _webhooks(state: ApiState) -> Webhooks:
    """The changes, each with its wake of the dispatcher (:mod:`service.app.webhooks`)."""
    dispatcher = state.supervisor.webhooks
    return Webhooks(dispatcher.repo, dispatcher.wake)


async def _target(state: ApiState, target_id: int) -> Target:
    target = await state.supervisor.webhooks.repo.get_target(target_id)
    if target is None:
        raise WebhookNotFound(f"no webhook target {target_id}")
    return target


def _body_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": bool(required),
            "content": {
                "application/json": {
                    "schema": {"type": "object", "required": required, "properties": properties}
                }
            },
        }
    }


_CREATE_BODY = _body_schema(
    {
        "url": {"type": "string", "description": "http(s) endpoint"},
        "uriPatterns": {"type": "array", "items": {"type": "string"}},
        "subscriptionIds": {"type": "array", "items": {"type": "integer"}},
        "mode": {"type": "string", "enum": list(MODES)},
        "secret": {"type": "string", "description": "whsec_…; generated when absent"},
        "allowPrivateTarget": {
            "type": "boolean",
            "description": "allow a link-local or cloud-metadata target (refused by default)",
        },
    },
    ["url"],
)
_ROTATE_BODY = _body_schema({"secret": {"type": "string"}}, [])
_RECOVER_BODY = _body_schema(
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
    body = await _json_body(request, state)
    allow_private = flag(body.get("allowPrivateTarget"), "allowPrivateTarget")
    url = webhook_url(body.get("url"), allow_private=allow_private)
    patterns = uri_patterns(body.get("uriPatterns"))
    sub_ids = subscription_ids(body.get("subscriptionIds"))
    chosen_mode = mode(body.get("mode"))
    own_secret = secret(body.get("secret"))
    target, created_secret = await _webhooks(state).create(
        url,
        allow_private_target=allow_private,
        uri_patterns=patterns,
        subscription_ids=sub_ids,
        mode=chosen_mode,
        secret=own_secret,
    )
    return {**target_json(target), "secret": created_secret}


@router.get("/v1/webhooks")
async def list_webhooks(request: Request) -> dict[str, Any]:
    targets = await api_state(request).supervisor.webhooks.repo.list_targets()
    return {"webhooks": [target_json(t) for t in targets]}


@router.get("/v1/webhooks/{id}")
async def show_webhook(request: Request, target_id: TargetId) -> dict[str, Any]:
    state = api_state(request)
    target = await _target(state, target_id)
    counts = await state.supervisor.webhooks.repo.counts(target_id=target_id)
    return {**target_json(target), "deliveries": counts}


@router.delete("/v1/webhooks/{id}")
async def delete_webhook(request: Request, target_id: TargetId) -> dict[str, Any]:
    removed = await _webhooks(api_state(request)).delete(target_id)
    if removed is None:
        raise WebhookNotFound(f"no webhook target {target_id}")
    return target_json(removed)


@router.post("/v1/webhooks/{id}/enable")
async def enable_webhook(request: Request, target_id: TargetId) -> dict[str, Any]:
    return await _set_enabled(request, target_id, True)


@router.post("/v1/webhooks/{id}/disable")
async def disable_webhook(request: Request, target_id: TargetId) -> dict[str, Any]:
    return await _set_enabled(request, target_id, False)


async def _set_enabled(request: Request, target_id: int, enabled: bool) -> dict[str, Any]:
    state = api_state(request)
    if not await _webhooks(state).set_enabled(
        target_id, enabled, reason="disabled through the API"
    ):
        raise WebhookNotFound(f"no webhook target {target_id}")
    return target_json(await _target(state, target_id))


@router.post("/v1/webhooks/{id}/test")
async def test_webhook(request: Request, target_id: TargetId) -> dict[str, Any]:
    """Send a signed ``webhook.test`` ping now; nothing is stored or retried."""
    state = api_state(request)
    await _target(state, target_id)
    started = time.monotonic()
    outcome = await state.supervisor.webhooks.send_test(target_id)
    return {
        "targetId": target_id,
        "ok": outcome.ok,
        "status": outcome.status,
        "error": redact_urls(outcome.error) if outcome.error else None,
        "elapsedMs": round((time.monotonic() - started) * 1000, 1),
    }


@router.post("/v1/webhooks/{id}/rotate-secret", openapi_extra=_ROTATE_BODY)
async def rotate_webhook_secret(
    request: Request, target_id: TargetId, response: Response
) -> dict[str, Any]:
    """A new secret (shown once); the old one keeps signing too for 24 h."""
    state = api_state(request)
    body = await _json_body(request, state, optional=True)
    own_secret = secret(body.get("secret"))
    new_secret = await _webhooks(state).rotate_secret(target_id, own_secret)
    if new_secret is None:
        raise WebhookNotFound(f"no webhook target {target_id}")
    response.headers["Cache-Control"] = "no-store"
    return {
        "id": target_id,
        "secret": new_secret,
        "previousSecretValidUntil": time.time() + ROTATION_OVERLAP_S,
    }


# ---- deliveries -------------------------------------------------------------------------
@router.get("/v1/deliveries")
async def list_deliveries(
    request: Request,
    target: Annotated[int | None, Query(ge=1, le=validate.MAX_ID)] = None,
    state: Annotated[str | None, Query(description=" | ".join(STATES))] = None,
    after: Annotated[int, Query(ge=0, le=validate.MAX_ID)] = 0,
    limit: Annotated[int, Query(ge=1, description=f"capped at {MAX_LIMIT}")] = 100,
    since: Annotated[
        float | None, Query(ge=0, le=1e11, description="created at or after (Unix seconds)")
    ] = None,
    newest: Annotated[bool, Query(description="the newest `limit` first instead")] = False,
) -> dict[str, Any]:
    """Deliveries with an id above ``after``, oldest first; pass ``nextAfter`` back.
    With ``newest=true``: the newest ``limit`` matching deliveries, newest first."""
    if state is not None and state not in STATES:
        raise InvalidParameter(f"state must be one of {', '.join(STATES)}", field="state")
    found = await api_state(request).supervisor.webhooks.repo.list_deliveries(
        target_id=target,
        state=state,
        after=after,
        limit=min(limit, MAX_LIMIT),
        since=since,
        newest_first=newest,
    )
    if newest:
        return {
            "deliveries": [delivery_json(d) for d in found],
            "nextAfter": max((d.id for d in found), default=after),
        }
    return {
        "deliveries": [delivery_json(d) for d in found],
        "nextAfter": found[-1].id if found else after,
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
    body = await _json_body(request, state)
    target_id = target_param(body.get("target"))
    since = since_time(body.get("since"))
    await _target(state, target_id)
    count = await _webhooks(state).recover(target_id, since)
    return {"targetId": target_id, "since": since, "recovered": count}


@router.get("/v1/deliveries/{id}")
async def show_delivery(request: Request, delivery_id: DeliveryId) -> dict[str, Any]:
    found = await api_state(request).supervisor.webhooks.repo.get_delivery(delivery_id)
    if found is None:
        raise DeliveryNotFound(f"no delivery {delivery_id}")
    return delivery_json(found)


@router.get("/v1/deliveries/{id}/attempts")
async def delivery_attempts(request: Request, delivery_id: DeliveryId) -> dict[str, Any]:
    """Each logged attempt (headers sent, status, the answer's first 2 KiB, error) and the
    request body (the same for every attempt: it is rebuilt from the delivery's revision)."""
    dispatcher = api_state(request).supervisor.webhooks
    found = await dispatcher.repo.get_delivery(delivery_id)
    if found is None:
        raise DeliveryNotFound(f"no delivery {delivery_id}")
    body = await dispatcher.body(found)
    return {
        **delivery_json(found),
        "requestBody": body.decode("utf-8", "replace"),
        "attempts": await dispatcher.repo.attempts(delivery_id),
    }


@router.post("/v1/deliveries/{id}/retry")
async def retry_delivery(request: Request, delivery_id: DeliveryId) -> dict[str, Any]:
    """Send one delivery again now (any state), with the same ``webhook-id``."""
    found = await _webhooks(api_state(request)).retry(delivery_id)
    if found is None:
        raise DeliveryNotFound(f"no delivery {delivery_id}")
    return delivery_json(found)
