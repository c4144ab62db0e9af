"""A subscription's history: its revisions (a page of summaries, one with its content) and
the diff between any two. The console's subscription page is built from these."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request

from service.api.state import ApiState, api_state
from service.app import validate
from service.app.diffs import DiffTooLarge, revision_text, unified
from service.app.errors import ApiError, SubscriptionNotFound
from service.app.views import revision_json
from service.store.records import Revision, Subscription

router = APIRouter(prefix="/v1/subscriptions", tags=["subscriptions"])

MAX_LIMIT = 1000

SubscriptionId = Annotated[
    int, Path(alias="id", ge=1, le=validate.MAX_ID, description="subscription id")
]
RevisionNumber = Annotated[int, Path(ge=1, le=validate.MAX_ID, description="revision number")]


class RevisionNotFound(ApiError):
    error_code = "REVISION_NOT_FOUND"


class DiffRefused(ApiError):
    error_code = "DIFF_TOO_LARGE"


async def _subscription(state: ApiState, subscription_id: int) -> Subscription:
    sub = await state.changes.subscription(subscription_id)
    if sub is None:
        raise SubscriptionNotFound(f"no subscription {subscription_id}")
    return sub


async def _revision(state: ApiState, sub: Subscription, number: int) -> Revision:
    rev = await state.changes.revision(sub, number)
    if rev is None:
        raise RevisionNotFound(f"subscription {sub.id} keeps no revision {number}")
    return rev


@router.get("/{id}/revisions")
async def list_revisions(
    request: Request,
    subscription_id: SubscriptionId,
    before: Annotated[int | None, Query(ge=1, le=validate.MAX_ID)] = None,
    limit: Annotated[int, Query(ge=1, description=f"capped at {MAX_LIMIT}")] = 100,
) -> dict[str, Any]:
    """The kept revisions, newest first, without contents; page with ``before``."""
    state = api_state(request)
    sub = await _subscription(state, subscription_id)
    page = await state.changes.revision_page(sub, before=before, limit=min(limit, MAX_LIMIT))
    return {"subscriptionId": sub.id, "revisions": page}


@router.get("/{id}/revisions/{revision}")
async def show_revision(
    request: Request, subscription_id: SubscriptionId, revision: RevisionNumber
) -> dict[str, Any]:
    """One kept revision with its contents and text."""
    state = api_state(request)
    sub = await _subscription(state, subscription_id)
    rev = await _revision(state, sub, revision)
    return {"subscriptionId": sub.id, "uri": sub.uri, **revision_json(rev)}


@router.get("/{id}/diff")
async def diff_revisions(
    request: Request,
    subscription_id: SubscriptionId,
    from_revision: Annotated[int, Query(alias="from", ge=1, le=validate.MAX_ID)],
    to_revision: Annotated[int, Query(alias="to", ge=1, le=validate.MAX_ID)],
) -> dict[str, Any]:
    """A unified diff of two kept revisions' texts (``from`` → ``to``, any order)."""
    state = api_state(request)
    sub = await _subscription(state, subscription_id)
    old = await _revision(state, sub, from_revision)
    new = await _revision(state, sub, to_revision)
    try:
        lines, truncated = unified(
            revision_text(old.text, old.contents),
            revision_text(new.text, new.contents),
            f"revision {old.revision}",
            f"revision {new.revision}",
        )
    except DiffTooLarge as exc:
        raise DiffRefused(str(exc)) from None
    return {
        "subscriptionId": sub.id,
        "from": old.revision,
        "to": new.revision,
        "lines": lines,
        "truncated": truncated,
    }
