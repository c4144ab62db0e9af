"""JSON shapes of the API: store records in, camelCase dicts out (pure)."""

from __future__ import annotations

import dataclasses
from typing import Any

from service.failures import RESOURCE_NOT_FOUND_HINT
from service.store.records import Event, Revision, Subscription

STATE_HINTS = {
    "RESOURCE_NOT_FOUND": RESOURCE_NOT_FOUND_HINT,
    "SUBSCRIPTION_NOT_HONORED": "the server acknowledged the stream without this URI; check "
    "it with `mcpsubctl probe --url URL --uri URI`",
    "AUTH_LOGIN_REQUIRED": "run `mcpsubctl login URL`; the daemon picks the token up",
}
"""What to do about a subscription's error state, by its code (the link's own errors carry
their hint in ``lastErrorHint``)."""


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_SUBSCRIPTION_KEYS = tuple(
    (field.name, camel(field.name)) for field in dataclasses.fields(Subscription)
)


def subscription_json(sub: Subscription) -> dict[str, Any]:
    # Flat fields of plain values: no ``asdict`` deep copy, names converted once.
    return {key: getattr(sub, name) for name, key in _SUBSCRIPTION_KEYS}


def event_json(event: Event) -> dict[str, Any]:
    return {camel(k): v for k, v in event.to_json().items()}


def revision_summary(rev: Revision | None) -> dict[str, Any] | None:
    if rev is None:
        return None
    return {
        "revision": rev.revision,
        "contentHash": rev.content_hash,
        "readAt": rev.read_at,
        "text": rev.text,
    }


def content_json(sub: Subscription, rev: Revision, event_id: int | None) -> dict[str, Any]:
    return {
        "subscriptionId": sub.id,
        "serverUrl": sub.server_url,
        "uri": sub.uri,
        "revision": rev.revision,
        "contentHash": rev.content_hash,
        "generation": rev.generation,
        "readAt": rev.read_at,
        "contents": rev.contents,
        "text": rev.text,
        "eventId": event_id,
    }


def state_hint(sub: Subscription, link: dict[str, Any] | None) -> str | None:
    """The hint for the subscription's error code, else its link's (None when all is well)."""
    if sub.state_code and sub.state_code in STATE_HINTS:
        return STATE_HINTS[sub.state_code]
    if link and link.get("lastErrorCode") and link.get("state") != "open":
        hint = link.get("lastErrorHint")
        return str(hint) if hint else None
    return None


def link_for(links: list[dict[str, Any]], sub: Subscription) -> dict[str, Any] | None:
    """The supervisor's link entry for ``sub`` (by server id, else by URL)."""
    for link in links:
        if link.get("serverId") == sub.server_id:
            return link
    for link in links:
        if link.get("url") == sub.server_url:
            return link
    return None
