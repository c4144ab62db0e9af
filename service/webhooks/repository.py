"""Webhook targets and deliveries: the async operations the API and the dispatcher need.

Shares the daemon store's engine and its write lock, so webhook writes are serialised with
revision writes like every other write of the daemon.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote

from sqlalchemy import Connection, bindparam, delete, func, insert, select, text, update

from service.jsonencode import json_bytes, json_text
from service.safetext import redact_urls, split_secret
from service.store import Store, schema
from service.store.dialect import POSTGRESQL, Dialect, each_dialect
from service.store.driver import sql
from service.store.records import Event
from service.webhooks.outbox import (
    FINAL_STATES,
    OPEN_STATES,
    Delivery,
    Target,
    delivery_from_row,
    enqueue_sync,
    target_from_row,
)
from service.webhooks.signing import generate_secret, secret_key

ROTATION_OVERLAP_S = 24 * 3600.0
"""After a rotation we sign with both secrets for this long, so receivers can switch."""

T = TypeVar("T")


# ---- the dispatcher's hot path: plain SQL compiled once (see service.store.groupcommit) ----------
DUE_WORK = each_dialect(
    "WITH heads AS ("
    " SELECT MIN(id) AS id FROM deliveries WHERE state IN ('pending', 'failed')"
    " GROUP BY target_id, uri"
    "), ranked AS ("
    " SELECT d.id, row_number() OVER ("
    "  PARTITION BY d.target_id ORDER BY d.next_attempt_at, d.id) AS rank_in_target"
    " FROM deliveries d JOIN heads h ON h.id = d.id"
    " JOIN webhook_targets t ON t.id = d.target_id"
    " WHERE d.next_attempt_at <= :now AND t.enabled = 1 AND NOT (d.id {in_ids})"
    ") "
    # the first 14 columns are Delivery's fields, in order (Delivery(*row[:14]))
    "SELECT d.id, d.target_id, d.webhook_id, d.event_id, d.revision_id, d.subscription_id, d.uri,"
    " d.state, d.attempts, d.next_attempt_at, d.last_status, d.last_error, d.created_at,"
    " d.delivered_at, COALESCE(t.url_secret, t.url), t.mode, t.secret, t.previous_secret,"
    " t.previous_secret_until, t.consecutive_failures, t.allow_private_target, v.revision,"
    " v.content_hash, v.contents, v.generation, v.read_at, e.server_url "
    "FROM ranked r JOIN deliveries d ON d.id = r.id"
    " JOIN webhook_targets t ON t.id = d.target_id"
    " LEFT JOIN revisions v ON v.id = d.revision_id"
    " LEFT JOIN events e ON e.id = d.event_id "
    "WHERE r.rank_in_target <= :per_target "
    "ORDER BY d.next_attempt_at, d.id LIMIT :limit"
)
"""One dispatcher pass, on the driver (:meth:`Dialect.rows`): SQLAlchemy's execution of it
(an expanding ``IN`` compiled again for every pass, 27 columns a row) cost as much CPU as
SQLite's own work."""
CLAIM_DELIVERIES = text(
    f"WITH picked AS (SELECT id FROM deliveries WHERE id IN :ids"
    " AND state IN ('pending', 'failed')"
    f" AND (lease_owner IS NULL OR lease_owner = :me OR lease_until < {POSTGRESQL.now})"
    " FOR UPDATE SKIP LOCKED) "
    f"UPDATE deliveries SET lease_owner = :me, lease_until = {POSTGRESQL.now} + :ttl"
    " FROM picked WHERE deliveries.id = picked.id RETURNING deliveries.id"
)
NEXT_DUE = sql(
    "SELECT MIN(d.next_attempt_at) FROM deliveries d JOIN webhook_targets t"
    " ON t.id = d.target_id WHERE d.state IN ('pending', 'failed') AND t.enabled = 1"
    " AND d.next_attempt_at > :now"
)
# An outcome batch's statements, on the driver too.
MARK_DELIVERED = sql(
    "UPDATE deliveries SET state = 'delivered', attempts = attempts + 1, last_status = :status,"
    " last_error = NULL, delivered_at = :now, updated_at = :now,"
    " lease_owner = NULL, lease_until = NULL"
    " WHERE id = :id AND state IN ('pending', 'failed')"
)
MARK_FAILED = sql(
    "UPDATE deliveries SET state = :state, attempts = attempts + 1, last_status = :status,"
    " last_error = :error, next_attempt_at = :next_attempt_at, updated_at = :now,"
    " lease_owner = NULL, lease_until = NULL"
    " WHERE id = :id AND state IN ('pending', 'failed')"
)
TARGET_OK = sql(
    "UPDATE webhook_targets SET consecutive_failures = 0, failing_since = NULL,"
    " last_success_at = :now WHERE id = :target_id"
)
TARGET_FAILED = sql(
    "UPDATE webhook_targets SET consecutive_failures = consecutive_failures + 1,"
    " failing_since = COALESCE(failing_since, :now) WHERE id = :target_id"
)
TARGET_HEALTH = sql(
    "SELECT consecutive_failures, failing_since FROM webhook_targets WHERE id = :target_id"
)
DISABLE_TARGET = sql(
    "UPDATE webhook_targets SET enabled = 0, disabled_reason = :reason, updated_at = :now"
    " WHERE id = :target_id"
)


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Work:
    """Everything one attempt needs, read by :func:`due_work_sync` in one query."""

    delivery: Delivery
    url: str
    mode: str
    secrets: tuple[str, ...]
    body: bytes
    consecutive_failures: int
    allow_private_target: bool = False


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """One finished attempt, to be written by :func:`apply_outcomes_sync`.

    ``next_attempt_at`` None (or ``disable_target``) makes the delivery a dead letter.
    """

    delivery: Delivery
    ok: bool
    status: int | None
    error: str = ""
    next_attempt_at: float | None = None
    disable_target: str | None = None
    attempt: AttemptLog | None = None
    """What was sent and answered, for the attempt log (None: record no attempt row)."""


@dataclass(frozen=True, slots=True)
class AttemptLog:
    """One attempt's request headers and the start of its answer (``delivery_attempts``)."""

    started_at: float
    duration_ms: float | None
    request_headers: dict[str, str]
    response_body: str | None


@dataclass(slots=True)
class Applied:
    """What a batch of outcomes did: events to notify after commit, target health."""

    events: list[Event]
    dead: dict[int, Event | None]
    """delivery id -> its ``delivery.dead`` event, for the failures that became dead letters."""
    failures: dict[int, int]
    """target id -> ``consecutive_failures`` after the batch (targets with a failure only)."""
    disabled: set[int]


def delivery_body(
    delivery: Delivery,
    *,
    server_url: str | None,
    revision: int | None,
    content_hash: str | None,
    generation: int | None,
    read_at: float | None,
    contents_json: str | None,
    max_body_bytes: int,
) -> bytes:
    """The ``resource.updated`` body. ``contents_json`` is the revision's stored JSON text,
    spliced in as is (it is not parsed and dumped again); None means no revision."""
    payload: dict[str, Any] = {
        "type": "resource.updated",
        "id": delivery.webhook_id,
        "eventId": delivery.event_id,
        "server": server_url,
        "uri": delivery.uri,
        "revision": revision,
        "contentHash": content_hash,
        "generation": generation,
        "readAt": iso(read_at) if read_at is not None else None,
    }
    head = json_bytes(payload)  # orjson: a pass builds up to 400 of these
    contents = contents_json if contents_json and contents_json.lstrip().startswith("[") else "[]"
    body = head[:-1] + b',"contents":' + contents.encode() + b"}"
    if len(body) > max_body_bytes:
        payload["truncated"] = True
        payload["contentPath"] = f"/v1/content?uri={quote(delivery.uri, safe='')}"
        body = json_bytes(payload)
    return body


def signing_secrets_of(
    secret: str, previous: str | None, previous_until: float | None, now: float
) -> tuple[str, ...]:
    if previous and (previous_until or 0) > now:
        return (secret, previous)
    return (secret,)


def due_work_sync(
    conn: Connection,
    dialect: Dialect,
    now: float,
    *,
    limit: int,
    exclude: Collection[int],
    per_target: int,
    max_body_bytes: int,
) -> tuple[list[Work], float | None]:
    """One dispatcher pass: the due heads of every (target, URI) queue with their target,
    secrets, revision and event, bodies built; and the next later due time."""
    rows = dialect.rows(
        conn,
        DUE_WORK[dialect.name],
        {
            "now": now,
            "ids": dialect.id_list(sorted(exclude)),
            "per_target": per_target,
            "limit": limit,
        },
    )
    work = []
    for row in rows:
        delivery = Delivery(*row[:14])
        (url, mode, secret, previous, previous_until, failures, allow_private) = row[14:21]
        (number, content_hash, contents, generation, read_at, server_url) = row[21:]
        has_revision = number is not None
        work.append(
            Work(
                delivery=delivery,
                url=url,
                mode=mode,
                secrets=signing_secrets_of(secret, previous, previous_until, now),
                body=delivery_body(
                    delivery,
                    server_url=server_url,
                    revision=number,
                    content_hash=content_hash if has_revision else None,
                    generation=generation if has_revision else None,
                    read_at=read_at if has_revision else None,
                    contents_json=contents if has_revision else None,
                    max_body_bytes=max_body_bytes,
                ),
                consecutive_failures=int(failures or 0),
                allow_private_target=bool(allow_private),
            )
        )
    ((next_due,),) = dialect.rows(conn, NEXT_DUE, {"now": now})
    return work, float(next_due) if next_due is not None else None


def apply_outcomes_sync(
    conn: Connection,
    dialect: Dialect,
    results: Sequence[AttemptResult],
    disable_after_s: float | None,
) -> Applied:
    """Write a batch of attempt outcomes in one transaction, in order (writer thread)."""
    now = time.time()
    if any(not result.ok for result in results):
        dialect.order_events(conn)  # failures may insert events (delivery.dead, webhook.disabled)
    applied = Applied(events=[], dead={}, failures={}, disabled=set())
    delivered: list[dict[str, Any]] = []
    target_ok: set[int] = set()  # targets whose last write in this batch was a success
    for result in results:
        delivery = result.delivery
        target_id = delivery.target_id
        if result.ok:
            delivered.append({"id": delivery.id, "status": result.status or 200, "now": now})
            if target_id not in target_ok:
                dialect.rows(conn, TARGET_OK, {"now": now, "target_id": target_id})
                target_ok.add(target_id)
                applied.failures.pop(target_id, None)
            continue
        target_ok.discard(target_id)
        dead = result.next_attempt_at is None or result.disable_target is not None
        error = redact_urls(result.error)[:500]
        dialect.rows(
            conn,
            MARK_FAILED,
            {
                "id": delivery.id,
                "state": "dead" if dead else "failed",
                "status": result.status,
                "error": error,
                "next_attempt_at": now
                if result.next_attempt_at is None
                else result.next_attempt_at,
                "now": now,
            },
        )
        dialect.rows(conn, TARGET_FAILED, {"now": now, "target_id": target_id})
        if dead:
            event = dialect.insert_event(
                conn,
                "delivery.dead",
                now,
                subscription_id=delivery.subscription_id,
                uri=delivery.uri,
                revision_id=delivery.revision_id,
                data={
                    "deliveryId": delivery.id,
                    "targetId": target_id,
                    "webhookId": delivery.webhook_id,
                    "lastStatus": result.status,
                    "lastError": error,
                },
            )
            applied.events.append(event)
            applied.dead[delivery.id] = event
        health = dialect.rows(conn, TARGET_HEALTH, {"target_id": target_id})
        if not health:  # removed meanwhile
            continue
        ((consecutive_failures, failing_since),) = health
        applied.failures[target_id] = int(consecutive_failures)
        reason = result.disable_target
        if (
            reason is None
            and disable_after_s is not None
            and failing_since is not None
            and now - float(failing_since) > disable_after_s
        ):
            reason = f"every delivery failed for {disable_after_s / 86400:g} days"
        if reason is not None:
            dialect.rows(
                conn, DISABLE_TARGET, {"reason": reason, "now": now, "target_id": target_id}
            )
            applied.disabled.add(target_id)
            applied.events.append(
                dialect.insert_event(
                    conn, "webhook.disabled", now, data={"targetId": target_id, "reason": reason}
                )
            )
    for row in delivered:
        dialect.rows(conn, MARK_DELIVERED, row)
    # The attempt log: one row per attempt, in the outcome's transaction (docs/webhooks.md).
    for result in results:
        if result.attempt is not None:
            dialect.rows(conn, INSERT_ATTEMPT, _attempt_row(result))
    return applied


INSERT_ATTEMPT = sql(
    "INSERT INTO delivery_attempts (delivery_id, attempt, started_at, duration_ms,"
    " request_headers, ok, status, response_body, error) VALUES (:delivery_id, :attempt,"
    " :started_at, :duration_ms, :request_headers, :ok, :status, :response_body, :error)"
)


def _attempt_row(result: AttemptResult) -> dict[str, Any]:
    log = result.attempt
    assert log is not None
    return {
        "delivery_id": result.delivery.id,
        "attempt": result.delivery.attempts + 1,
        "started_at": log.started_at,
        "duration_ms": log.duration_ms,
        "request_headers": json_text(log.request_headers),
        "ok": 1 if result.ok else 0,
        "status": result.status,
        "response_body": log.response_body,
        "error": result.error[:500] or None,
    }


ANY_ENABLED_TARGET = text("SELECT 1 FROM webhook_targets WHERE enabled = 1 LIMIT 1")


@dataclass(frozen=True, slots=True)
class OutboxSink:
    """The store's event sink that enqueues deliveries (:func:`enqueue_sync`) on the store's
    dialect; equal for one dialect, so a store gets one however many repositories it has."""

    dialect: Dialect

    def __call__(self, conn: Connection, event: Event) -> int:
        return enqueue_sync(conn, event, self.dialect)


class WebhookRepository:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._engine = store.engine
        # The outbox row commits in the revision's transaction: the store runs its sinks there.
        sink = OutboxSink(store.dialect)
        if sink not in store.event_sinks:
            store.event_sinks.append(sink)
        self.on_target_change: list[Callable[[int, bool], None]] = []
        """Callbacks ``(target_id, removed) -> None`` after any change of a target made here
        (the dispatcher drops what it read about that target before the change)."""

    def _target_changed(self, target_id: int, removed: bool = False) -> None:
        for callback in list(self.on_target_change):
            callback(target_id, removed)

    async def run_read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(connection)`` as one reader call (see :meth:`Store.in_reader`)."""
        return await self.store.in_reader(fn)

    async def due_work(
        self,
        now: float,
        *,
        limit: int = 200,
        exclude: Collection[int] = (),
        per_target: int = 4,
        max_body_bytes: int = 256 * 1024,
    ) -> tuple[list[Work], float | None]:
        """One dispatcher pass in one query on a reader thread; see :func:`due_work_sync`."""
        excluded = list(exclude)
        return await self.run_read(
            lambda conn: due_work_sync(
                conn,
                self.store.dialect,
                now,
                limit=limit,
                exclude=excluded,
                per_target=per_target,
                max_body_bytes=max_body_bytes,
            )
        )

    async def claim_deliveries(self, ids: Sequence[int], replica_id: str, ttl: float) -> set[int]:
        """PostgreSQL: lease these due deliveries to this replica for ``ttl`` seconds; returns
        the ids it got. Rows another replica holds (or is claiming right now: SKIP LOCKED) are
        left out, so each attempt is made by one replica; an expired lease (a dead or paused
        replica) can be taken over, and the attempt goes out again with the same webhook-id.
        SQLite: one daemon, every id is its own."""
        if not ids or not self.store.dialect.replicated:
            return set(ids)
        statement = CLAIM_DELIVERIES.bindparams(bindparam("ids", expanding=True))

        def claim(conn: Connection) -> set[int]:
            rows = conn.execute(statement, {"ids": list(ids), "me": replica_id, "ttl": ttl})
            return {int(r[0]) for r in rows}

        return await self.store.in_writer(claim)  # PostgreSQL only: no local write lock

    async def apply_outcomes(
        self, results: Sequence[AttemptResult], disable_after_s: float | None = None
    ) -> Applied:
        """Write outcomes in one transaction on the store's writer thread, then notify the
        events it created (``delivery.dead``, ``webhook.disabled``)."""
        batch = list(results)
        applied = await self.store.write(
            lambda conn: apply_outcomes_sync(conn, self.store.dialect, batch, disable_after_s)
        )
        for target_id in applied.disabled:
            self._target_changed(target_id)
        self.store.publish(applied.events)
        return applied

    # ---- targets ------------------------------------------------------------------------
    async def create_target(
        self,
        url: str,
        *,
        uri_patterns: Sequence[str] = (),
        subscription_ids: Sequence[int] = (),
        mode: str = "all",
        secret: str | None = None,
        allow_private_target: bool = False,
    ) -> tuple[Target, str]:
        """Returns the target and its secret: the only time the secret leaves the store."""
        secret = secret or generate_secret()
        secret_key(secret)  # validates
        shown_url, secret_url = split_secret(url)  # credentials in the URL are stored apart
        now = time.time()
        statement = insert(schema.webhook_targets).values(
            url=shown_url,
            url_secret=secret_url,
            secret=secret,
            mode=mode,
            uri_patterns=json.dumps(list(uri_patterns)),
            subscription_ids=json.dumps([int(i) for i in subscription_ids]),
            allow_private_target=1 if allow_private_target else 0,
            created_at=now,
            updated_at=now,
        )

        def transaction(conn: Connection) -> int:
            key = conn.execute(statement).inserted_primary_key
            return int(key[0]) if key else 0

        target_id = await self.store.write(transaction)
        self._target_changed(target_id)
        target = await self.get_target(target_id)
        assert target is not None
        return target, secret

    async def get_target(self, target_id: int) -> Target | None:
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    select(schema.webhook_targets).where(schema.webhook_targets.c.id == target_id)
                )
            ).one_or_none()
        return target_from_row(row) if row is not None else None

    async def has_enabled_targets(self) -> bool:
        """Whether any delivery can be enqueued now (the dispatcher sleeps through revisions
        when none can)."""

        def probe(conn: Connection) -> bool:
            return conn.execute(ANY_ENABLED_TARGET).first() is not None

        return await self.run_read(probe)

    async def list_targets(self) -> list[Target]:
        async with self._engine.connect() as conn:
            rows = await conn.execute(
                select(schema.webhook_targets).order_by(schema.webhook_targets.c.id)
            )
            return [target_from_row(row) for row in rows]

    async def signing_secrets(self, target_id: int) -> list[str]:
        """Current secret, plus the previous one while a rotation overlaps."""
        t = schema.webhook_targets
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    select(t.c.secret, t.c.previous_secret, t.c.previous_secret_until).where(
                        t.c.id == target_id
                    )
                )
            ).one_or_none()
        if row is None:
            return []
        found = [row.secret]
        if row.previous_secret and (row.previous_secret_until or 0) > time.time():
            found.append(row.previous_secret)
        return found

    async def rotate_secret(self, target_id: int, secret: str | None = None) -> str | None:
        secret = secret or generate_secret()
        secret_key(secret)
        t = schema.webhook_targets
        statement = (
            update(t)
            .where(t.c.id == target_id)
            .values(
                previous_secret=t.c.secret,
                previous_secret_until=time.time() + ROTATION_OVERLAP_S,
                secret=secret,
                updated_at=time.time(),
            )
        )
        changed = await self.store.write(lambda conn: conn.execute(statement).rowcount)
        self._target_changed(target_id)
        return secret if changed else None

    async def delete_target(self, target_id: int) -> Target | None:
        target = await self.get_target(target_id)
        if target is None:
            return None

        def transaction(conn: Connection) -> None:
            conn.execute(
                delete(schema.deliveries).where(schema.deliveries.c.target_id == target_id)
            )
            conn.execute(
                delete(schema.webhook_targets).where(schema.webhook_targets.c.id == target_id)
            )

        await self.store.write(transaction)
        self._target_changed(target_id, removed=True)
        return target

    async def set_enabled(self, target_id: int, enabled: bool, reason: str | None = None) -> bool:
        t = schema.webhook_targets
        values: dict[str, Any] = {
            "enabled": 1 if enabled else 0,
            "disabled_reason": None if enabled else reason,
            "updated_at": time.time(),
        }
        if enabled:
            values.update(consecutive_failures=0, failing_since=None)
        statement = update(t).where(t.c.id == target_id).values(**values)

        def transaction(conn: Connection) -> tuple[bool, list[Event]]:
            if not conn.execute(statement).rowcount:
                return False, []
            if enabled:
                return True, []
            data = {"targetId": target_id, "reason": reason}
            event = self.store.dialect.insert_event(
                conn, "webhook.disabled", time.time(), data=data
            )
            return True, [event]

        changed, events = await self.store.write(transaction, events=not enabled)
        self._target_changed(target_id)
        self.store.publish(events)
        return changed

    # ---- deliveries ---------------------------------------------------------------------
    async def get_delivery(self, delivery_id: int) -> Delivery | None:
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    select(schema.deliveries).where(schema.deliveries.c.id == delivery_id)
                )
            ).one_or_none()
        return delivery_from_row(row) if row is not None else None

    async def list_deliveries(
        self,
        *,
        target_id: int | None = None,
        state: str | None = None,
        after: int = 0,
        limit: int = 100,
        since: float | None = None,
        newest_first: bool = False,
    ) -> list[Delivery]:
        """Ids above ``after``, oldest first; or (``newest_first``) the newest ``limit``.
        ``since``: created at or after this Unix time."""
        d = schema.deliveries
        query = select(d).where(d.c.id > after)
        if target_id is not None:
            query = query.where(d.c.target_id == target_id)
        if state is not None:
            query = query.where(d.c.state == state)
        if since is not None:
            query = query.where(d.c.created_at >= since)
        order = d.c.id.desc() if newest_first else d.c.id
        async with self._engine.connect() as conn:
            rows = await conn.execute(query.order_by(order).limit(limit))
            return [delivery_from_row(row) for row in rows]

    async def attempts(self, delivery_id: int, limit: int = 100) -> list[dict[str, Any]]:
        """The delivery's logged attempts, oldest first (the newest ``limit``)."""
        a = schema.delivery_attempts
        query = select(a).where(a.c.delivery_id == delivery_id).order_by(a.c.id.desc())
        async with self._engine.connect() as conn:
            rows = list(await conn.execute(query.limit(limit)))
        rows.reverse()
        return [
            {
                "attempt": int(row.attempt),
                "startedAt": float(row.started_at),
                "durationMs": row.duration_ms,
                "requestHeaders": json.loads(row.request_headers or "{}"),
                "ok": bool(row.ok),
                "status": row.status,
                "responseBody": row.response_body,
                "error": row.error,
            }
            for row in rows
        ]

    async def retry(self, delivery_id: int) -> Delivery | None:
        """Send a delivery again now (also a delivered or dead one), keeping its webhook-id."""
        d = schema.deliveries
        now = time.time()
        statement = (
            update(d)
            .where(d.c.id == delivery_id)
            .values(state="pending", next_attempt_at=now, updated_at=now)
        )
        changed = await self.store.write(lambda conn: conn.execute(statement).rowcount)
        return await self.get_delivery(delivery_id) if changed else None

    async def recover(self, target_id: int, since: float) -> int:
        """Re-send every dead or failing delivery of a target created since ``since``.

        For a ``latest`` target only the newest of them per URI is sent again; the older
        ones become ``superseded`` (sending them would replay states the mode skips).
        Returns how many deliveries go out again.
        """
        d, t = schema.deliveries, schema.webhook_targets
        now = time.time()

        def transaction(conn: Connection) -> int:
            mode = conn.scalar(select(t.c.mode).where(t.c.id == target_id))
            if mode is None:
                return 0
            chosen = (
                d.c.target_id == target_id,
                d.c.created_at >= since,
                d.c.state.in_(("dead", "failed")),
            )
            again = {"state": "pending", "attempts": 0, "next_attempt_at": now, "updated_at": now}
            if mode != "latest":
                return int(conn.execute(update(d).where(*chosen).values(**again)).rowcount or 0)
            newest: dict[str, int] = {}
            for row in conn.execute(select(d.c.id, d.c.uri).where(*chosen).order_by(d.c.id)):
                newest[row.uri] = row.id
            keep = list(newest.values())
            conn.execute(
                update(d)
                .where(*chosen, d.c.id.not_in(keep))
                .values(
                    state="superseded",
                    updated_at=now,
                    last_error="superseded by a newer revision (recover, mode latest)",
                )
            )
            return int(
                conn.execute(update(d).where(d.c.id.in_(keep)).values(**again)).rowcount or 0
            )

        return await self.store.write(transaction)

    async def counts(self, target_id: int | None = None) -> dict[str, int]:
        """Deliveries by state (of one target when given), every state present."""
        d = schema.deliveries
        query = select(d.c.state, func.count()).group_by(d.c.state)
        if target_id is not None:
            query = query.where(d.c.target_id == target_id)
        async with self._engine.connect() as conn:
            rows = await conn.execute(query)
            found = {state: int(n) for state, n in rows}
        return {state: found.get(state, 0) for state in (*OPEN_STATES, *FINAL_STATES)}
