"""Webhook targets and the delivery outbox, on the daemon's database.

:func:`enqueue_sync` runs inside the transaction that records a new revision (see
``Store._after_revision``): the revision, its event and one delivery row per matching target
commit together or not at all, so a crash can lose nothing that was acknowledged. The
dispatcher then works from these rows only; a delivery that was in flight during a crash is
still ``pending`` and goes out again with the same ``webhook-id``.

Delivery states::

    pending --2xx--> delivered
       |  \\--failure--> failed (next_attempt_at from the schedule) --...--> dead
       |                                        410 Gone ---------------> dead (+ target disabled)
       \\--(mode latest: a newer revision of the same URI)--> superseded
"""

from __future__ import annotations

import fnmatch
import json
import secrets
import time
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Connection, text

from service.store.records import Event, from_row

OPEN_STATES = ("pending", "failed")
FINAL_STATES = ("delivered", "dead", "superseded")
MODES = ("all", "latest")


@dataclass(frozen=True, slots=True)
class Target:
    id: int
    url: str
    mode: str
    enabled: bool
    disabled_reason: str | None
    uri_patterns: list[str]
    subscription_ids: list[int]
    consecutive_failures: int
    failing_since: float | None
    last_success_at: float | None
    created_at: float
    allow_private_target: bool = False
    """Registered with ``allowPrivateTarget``: exempt from the private-target rule, at
    registration and at delivery (:mod:`service.netguard`)."""
    url_secret: str | None = None
    """The full URL when it carries credentials (``url`` has them redacted); never shown."""

    @property
    def wire_url(self) -> str:
        """The URL to post to: credentials included."""
        return self.url_secret or self.url

    def to_json(self) -> dict[str, Any]:
        # Neither the signing secret (not a field: shown once, at creation) nor the URL's.
        data = asdict(self)
        del data["url_secret"]
        return data

    def matches(self, uri: str, subscription_id: int | None) -> bool:
        if not self.uri_patterns and not self.subscription_ids:
            return True
        if any(fnmatch.fnmatchcase(uri, pattern) for pattern in self.uri_patterns):
            return True
        return subscription_id is not None and subscription_id in self.subscription_ids


@dataclass(frozen=True, slots=True)
class Delivery:
    id: int
    target_id: int
    webhook_id: str
    event_id: int
    revision_id: int | None
    subscription_id: int | None
    uri: str
    state: str
    attempts: int
    next_attempt_at: float
    last_status: int | None
    last_error: str | None
    created_at: float
    delivered_at: float | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def target_from_row(row: Any) -> Target:
    m = row._mapping
    return from_row(
        Target,
        row,
        enabled=bool(m["enabled"]),
        allow_private_target=bool(m["allow_private_target"]),
        uri_patterns=list(json.loads(m["uri_patterns"] or "[]")),
        subscription_ids=[int(i) for i in json.loads(m["subscription_ids"] or "[]")],
    )


def delivery_from_row(row: Any) -> Delivery:
    return from_row(Delivery, row)


def new_webhook_id() -> str:
    """``msg_`` + 24 hex digits: unique, no dots (Standard Webhooks forbids them)."""
    return "msg_" + secrets.token_hex(12)


ENABLED_TARGETS = text("SELECT * FROM webhook_targets WHERE enabled = 1")
SUPERSEDE = text(
    "UPDATE deliveries SET state = 'superseded', updated_at = :now, "
    "last_error = 'superseded by a newer revision' "
    "WHERE target_id = :target_id AND uri = :uri AND state IN ('pending', 'failed')"
)
INSERT_DELIVERY = text(
    "INSERT INTO deliveries (target_id, webhook_id, event_id, revision_id, subscription_id, uri, "
    "state, attempts, next_attempt_at, created_at, updated_at) VALUES (:target_id, :webhook_id, "
    ":event_id, :revision_id, :subscription_id, :uri, 'pending', 0, :now, :now, :now)"
)


def enqueue_sync(conn: Connection, event: Event) -> int:
    """Insert one delivery per enabled target that wants this event; same transaction.

    Runs on the store's writer thread inside the revision's transaction (see
    ``service.store.hotpath``), so the revision, its event and its deliveries commit together.
    """
    uri = event.uri or ""
    now = time.time()
    count = 0
    for row in conn.execute(ENABLED_TARGETS).all():
        target = target_from_row(row)
        if not target.matches(uri, event.subscription_id):
            continue
        if target.mode == "latest":
            conn.execute(SUPERSEDE, {"now": now, "target_id": target.id, "uri": uri})
        conn.execute(
            INSERT_DELIVERY,
            {
                "target_id": target.id,
                "webhook_id": new_webhook_id(),
                "event_id": event.id,
                "revision_id": event.revision_id,
                "subscription_id": event.subscription_id,
                "uri": uri,
                "now": now,
            },
        )
        count += 1
    return count
