"""Webhook targets and deliveries: the async operations the API and the dispatcher need.

Shares the daemon store's engine and its write lock, so webhook writes are serialised with
revision writes like every other write of the daemon.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import delete, func, insert, select, update

from service.store import Store, schema
from service.store.records import Event
from service.webhooks.outbox import (
    FINAL_STATES,
    OPEN_STATES,
    Delivery,
    Target,
    delivery_from_row,
    due_query,
    next_due_query,
    target_from_row,
)
from service.webhooks.signing import generate_secret, secret_key

ROTATION_OVERLAP_S = 24 * 3600.0
"""After a rotation we sign with both secrets for this long, so receivers can switch."""


class WebhookRepository:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._engine = store.engine
        self._lock = store._write_lock

    # ---- targets ------------------------------------------------------------------------
    async def create_target(
        self,
        url: str,
        *,
        uri_patterns: Sequence[str] = (),
        subscription_ids: Sequence[int] = (),
        mode: str = "all",
        secret: str | None = None,
    ) -> tuple[Target, str]:
        """Returns the target and its secret: the only time the secret leaves the store."""
        secret = secret or generate_secret()
        secret_key(secret)  # validates
        now = time.time()
        async with self._lock, self._engine.begin() as conn:
            result = await conn.execute(
                insert(schema.webhook_targets).values(
                    url=url,
                    secret=secret,
                    mode=mode,
                    uri_patterns=json.dumps(list(uri_patterns)),
                    subscription_ids=json.dumps([int(i) for i in subscription_ids]),
                    created_at=now,
                    updated_at=now,
                )
            )
            key = result.inserted_primary_key
            target_id = int(key[0]) if key else 0
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
        async with self._lock, self._engine.begin() as conn:
            result = await conn.execute(
                update(t)
                .where(t.c.id == target_id)
                .values(
                    previous_secret=t.c.secret,
                    previous_secret_until=time.time() + ROTATION_OVERLAP_S,
                    secret=secret,
                    updated_at=time.time(),
                )
            )
        return secret if result.rowcount else None

    async def delete_target(self, target_id: int) -> Target | None:
        target = await self.get_target(target_id)
        if target is None:
            return None
        async with self._lock, self._engine.begin() as conn:
            await conn.execute(
                delete(schema.deliveries).where(schema.deliveries.c.target_id == target_id)
            )
            await conn.execute(
                delete(schema.webhook_targets).where(schema.webhook_targets.c.id == target_id)
            )
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
        async with self._lock, self._engine.begin() as conn:
            result = await conn.execute(update(t).where(t.c.id == target_id).values(**values))
            if result.rowcount and not enabled:
                event = await self.store._insert_event(
                    conn, "webhook.disabled", data={"targetId": target_id, "reason": reason}
                )
        if result.rowcount and not enabled:
            self.store._notify([event])
        return bool(result.rowcount)

    # ---- deliveries ---------------------------------------------------------------------
    async def due(
        self,
        now: float,
        limit: int = 200,
        *,
        exclude: Collection[int] = (),
        per_target: int | None = None,
    ) -> list[Delivery]:
        """Due deliveries, first in line per (target, URI); ``exclude`` the ones in flight and
        take at most ``per_target`` per target so one backlog cannot fill ``limit``."""
        query = due_query(now, limit, exclude=exclude, per_target=per_target)
        async with self._engine.connect() as conn:
            return [delivery_from_row(row) for row in await conn.execute(query)]

    async def next_due_at(self, after: float | None = None) -> float | None:
        """The earliest next attempt (only those later than ``after`` when given)."""
        async with self._engine.connect() as conn:
            value = await conn.scalar(next_due_query(after))
        return float(value) if value is not None else None

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
    ) -> list[Delivery]:
        d = schema.deliveries
        query = select(d).where(d.c.id > after)
        if target_id is not None:
            query = query.where(d.c.target_id == target_id)
        if state is not None:
            query = query.where(d.c.state == state)
        async with self._engine.connect() as conn:
            rows = await conn.execute(query.order_by(d.c.id).limit(limit))
            return [delivery_from_row(row) for row in rows]

    async def record_success(self, delivery: Delivery, status: int) -> None:
        now = time.time()
        d, t = schema.deliveries, schema.webhook_targets
        async with self._lock, self._engine.begin() as conn:
            await conn.execute(
                update(d)
                .where(d.c.id == delivery.id, d.c.state.in_(OPEN_STATES))
                .values(
                    state="delivered",
                    attempts=d.c.attempts + 1,
                    last_status=status,
                    last_error=None,
                    delivered_at=now,
                    updated_at=now,
                )
            )
            await conn.execute(
                update(t)
                .where(t.c.id == delivery.target_id)
                .values(consecutive_failures=0, failing_since=None, last_success_at=now)
            )

    async def record_failure(
        self,
        delivery: Delivery,
        *,
        status: int | None,
        error: str,
        next_attempt_at: float | None,
        disable_target: str | None = None,
        disable_after_s: float | None = None,
    ) -> Event | None:
        """A failed attempt. ``next_attempt_at`` None means the schedule is spent: dead letter."""
        now = time.time()
        d, t = schema.deliveries, schema.webhook_targets
        events: list[Event] = []
        async with self._lock, self._engine.begin() as conn:
            state = "failed" if next_attempt_at is not None and not disable_target else "dead"
            await conn.execute(
                update(d)
                .where(d.c.id == delivery.id, d.c.state.in_(OPEN_STATES))
                .values(
                    state=state,
                    attempts=d.c.attempts + 1,
                    last_status=status,
                    last_error=error[:500],
                    next_attempt_at=next_attempt_at if next_attempt_at is not None else now,
                    updated_at=now,
                )
            )
            await conn.execute(
                update(t)
                .where(t.c.id == delivery.target_id)
                .values(
                    consecutive_failures=t.c.consecutive_failures + 1,
                    failing_since=func.coalesce(t.c.failing_since, now),
                )
            )
            if state == "dead":
                events.append(
                    await self.store._insert_event(
                        conn,
                        "delivery.dead",
                        subscription_id=delivery.subscription_id,
                        uri=delivery.uri,
                        revision_id=delivery.revision_id,
                        data={
                            "deliveryId": delivery.id,
                            "targetId": delivery.target_id,
                            "webhookId": delivery.webhook_id,
                            "lastStatus": status,
                            "lastError": error[:500],
                        },
                    )
                )
            failing_since = await conn.scalar(
                select(t.c.failing_since).where(t.c.id == delivery.target_id)
            )
            reason = disable_target
            if (
                reason is None
                and disable_after_s is not None
                and failing_since is not None
                and now - float(failing_since) > disable_after_s
            ):
                reason = f"every delivery failed for {disable_after_s / 86400:g} days"
            if reason is not None:
                await conn.execute(
                    update(t)
                    .where(t.c.id == delivery.target_id)
                    .values(enabled=0, disabled_reason=reason, updated_at=now)
                )
                events.append(
                    await self.store._insert_event(
                        conn,
                        "webhook.disabled",
                        data={"targetId": delivery.target_id, "reason": reason},
                    )
                )
        self.store._notify(events)
        return events[0] if events else None

    async def retry(self, delivery_id: int) -> Delivery | None:
        """Send a delivery again now (also a delivered or dead one), keeping its webhook-id."""
        d = schema.deliveries
        now = time.time()
        async with self._lock, self._engine.begin() as conn:
            result = await conn.execute(
                update(d)
                .where(d.c.id == delivery_id)
                .values(state="pending", next_attempt_at=now, updated_at=now)
            )
        return await self.get_delivery(delivery_id) if result.rowcount else None

    async def recover(self, target_id: int, since: float) -> int:
        """Re-send every dead or failing delivery of a target created since ``since``.

        For a ``latest`` target only the newest of them per URI is sent again; the older
        ones become ``superseded`` (sending them would replay states the mode skips).
        Returns how many deliveries go out again.
        """
        d, t = schema.deliveries, schema.webhook_targets
        now = time.time()
        async with self._lock, self._engine.begin() as conn:
            mode = await conn.scalar(select(t.c.mode).where(t.c.id == target_id))
            if mode is None:
                return 0
            chosen = (
                d.c.target_id == target_id,
                d.c.created_at >= since,
                d.c.state.in_(("dead", "failed")),
            )
            if mode == "latest":
                rows = await conn.execute(select(d.c.id, d.c.uri).where(*chosen).order_by(d.c.id))
                newest: dict[str, int] = {}
                for row in rows:
                    newest[row.uri] = row.id
                keep = list(newest.values())
                await conn.execute(
                    update(d)
                    .where(*chosen, d.c.id.not_in(keep))
                    .values(
                        state="superseded",
                        updated_at=now,
                        last_error="superseded by a newer revision (recover, mode latest)",
                    )
                )
                result = await conn.execute(
                    update(d)
                    .where(d.c.id.in_(keep))
                    .values(state="pending", attempts=0, next_attempt_at=now, updated_at=now)
                )
            else:
                result = await conn.execute(
                    update(d)
                    .where(*chosen)
                    .values(state="pending", attempts=0, next_attempt_at=now, updated_at=now)
                )
        return int(result.rowcount or 0)

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
