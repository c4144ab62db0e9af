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

from sqlalchemy import Connection

from service.store.dialect import SQLITE, Dialect
from service.store.driver import sql
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
        return wants(self.uri_patterns, self.subscription_ids, uri, subscription_id)


def wants(
    uri_patterns: list[str], subscription_ids: list[int], uri: str, subscription_id: int | None
) -> bool:
    """Whether a target with these filters gets an event of ``uri`` (no filter: every one)."""
    if not uri_patterns and not subscription_ids:
        return True
    if any(fnmatch.fnmatchcase(uri, pattern) for pattern in uri_patterns):
        return True
    return subscription_id is not None and subscription_id in subscription_ids


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


ENABLED_TARGETS = sql(
    "SELECT id, mode, uri_patterns, subscription_ids FROM webhook_targets WHERE enabled = 1"
)
SUPERSEDE = sql(
    "UPDATE deliveries SET state = 'superseded', updated_at = :now, "
    "last_error = 'superseded by a newer revision' "
    "WHERE target_id = :target_id AND uri = :uri AND state IN ('pending', 'failed')"
)
INSERT_DELIVERY = sql(
    "INSERT INTO deliveries (target_id, webhook_id, event_id, revision_id, subscription_id, uri, "
    "state, attempts, next_attempt_at, created_at, updated_at) VALUES (:target_id, :webhook_id, "
    ":event_id, :revision_id, :subscription_id, :uri, 'pending', 0, :now, :now, :now)"
)


def enqueue_sync(conn: Connection, event: Event, dialect: Dialect = SQLITE) -> int:
    """Insert one delivery per enabled target that wants this event; same transaction.

    Runs on the store's writer thread inside the revision's transaction (see
    ``service.store.groupcommit``), so the revision, its event and its deliveries commit together.
    Its statements go to the driver (:meth:`Dialect.rows`), like the revision's own: this runs
    for every revision, and the look-up of the enabled targets through SQLAlchemy was half
    of the revision transaction's time once the store's statements had left it.
    """
    targets = dialect.rows(conn, ENABLED_TARGETS, {})
    if not targets:
        return 0
    uri = event.uri or ""
    now = time.time()
    count = 0
    for target_id, mode, uri_patterns, subscription_ids in targets:
        if not wants(
            json.loads(uri_patterns or "[]"),
            [int(i) for i in json.loads(subscription_ids or "[]")],
            uri,
            event.subscription_id,
        ):
            continue
        if mode == "latest":
            dialect.rows(conn, SUPERSEDE, {"now": now, "target_id": target_id, "uri": uri})
        dialect.rows(
            conn,
            INSERT_DELIVERY,
            {
                "target_id": target_id,
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
