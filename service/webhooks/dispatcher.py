"""Deliver the outbox: signed POSTs, retries on a schedule, dead letters, per-target isolation.

The loop is woken by every committed event and by the next due time; it never polls on a
fixed tick. Each target has its own concurrency limit and a small circuit breaker, so a slow
or dead receiver costs its own deliveries time, never another target's. Decisions that can
be pure are: :func:`attempt_outcome` classifies a response, :func:`next_attempt_time`
applies the schedule and ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx
import structlog

from service._version import __version__
from service.store import Store
from service.webhooks.outbox import Delivery
from service.webhooks.repository import WebhookRepository
from service.webhooks.signing import signature_header

log = structlog.get_logger("mcpsubd.webhooks")
USER_AGENT = f"mcpsub/{__version__} (+webhooks; Standard Webhooks v1)"
DEFAULT_SCHEDULE = (0.0, 5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 36000.0)


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    schedule: tuple[float, ...] = DEFAULT_SCHEDULE
    """Delay before each attempt; its length is the number of attempts (Svix's ladder)."""
    jitter: float = 0.2
    timeout_s: float = 15.0
    max_body_bytes: int = 256 * 1024
    concurrency: int = 4
    disable_after_s: float = 5 * 86400.0
    breaker_failures: int = 5
    breaker_open_s: float = 30.0


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: bool
    status: int | None
    error: str
    retry_after_s: float | None = None
    disable_reason: str | None = None


def parse_retry_after(value: str | None, now: float) -> float | None:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def attempt_outcome(status: int, headers: httpx.Headers, now: float) -> Outcome:
    """2xx is success; 410 disables the target; 3xx is a failure (redirects are not followed)."""
    if 200 <= status < 300:
        return Outcome(True, status, "")
    if status == 410:
        return Outcome(False, status, "410 Gone", disable_reason="the receiver answered 410 Gone")
    retry_after = (
        parse_retry_after(headers.get("retry-after"), now) if status in (429, 503) else None
    )
    return Outcome(False, status, f"HTTP {status}", retry_after_s=retry_after)


def next_attempt_time(
    settings: WebhookSettings,
    attempts_done: int,
    now: float,
    retry_after_s: float | None,
    rng: random.Random,
) -> float | None:
    """When to try again after ``attempts_done`` attempts, or None: the schedule is spent."""
    if attempts_done >= len(settings.schedule):
        return None
    delay = settings.schedule[attempts_done]
    delay *= 1 + rng.uniform(-settings.jitter, settings.jitter)
    if retry_after_s is not None:
        delay = max(delay, retry_after_s)
    return now + max(0.0, delay)


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


class _Breaker:
    def __init__(self) -> None:
        self.open_until = 0.0
        self.probing = False


class Dispatcher:
    def __init__(
        self,
        store: Store,
        settings: WebhookSettings,
        http: httpx.AsyncClient | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.repo = WebhookRepository(store)
        self.settings = settings
        self._http = http or httpx.AsyncClient(
            timeout=httpx.Timeout(settings.timeout_s),
            follow_redirects=False,
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
        )
        self._rng = rng or random.Random()
        self._wake = asyncio.Event()
        self._inflight: set[int] = set()
        self._slots: dict[int, asyncio.Semaphore] = {}
        self._breakers: dict[int, _Breaker] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self.stats = {"attempts_total": 0, "delivered_total": 0, "failed_total": 0, "dead_total": 0}
        store.on_event.append(self._on_event)

    def _on_event(self, event: Any) -> None:
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self._loop_task = asyncio.get_running_loop().create_task(
            self._run(), name="webhook dispatcher"
        )

    async def stop(self, grace_s: float = 3.0) -> None:
        """Stop taking work; attempts still running get ``grace_s``, the rest stay pending."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=grace_s)
            for task in self._tasks:
                task.cancel()
        await self._http.aclose()

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            now = time.time()
            try:
                for delivery in await self.repo.due(
                    now,
                    exclude=self._inflight,
                    per_target=self.settings.concurrency,
                ):
                    if delivery.id in self._inflight or not self._may_send(delivery.target_id, now):
                        continue
                    self._inflight.add(delivery.id)
                    task = asyncio.get_running_loop().create_task(self._deliver(delivery))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                # Rows already due are in flight (their completion wakes us) or behind an
                # open breaker (its half-open time is below): only a *future* due time and
                # the breakers decide how long to sleep. Counting due rows here made the
                # loop spin without sleeping for as long as any attempt was in flight.
                next_due = await self.repo.next_due_at(after=now)
            except Exception as exc:  # keep delivering whatever one query did
                log.exception("dispatcher pass failed", error=str(exc))
                next_due = now + 1.0
            wake_at = [now + 5.0]
            if next_due is not None:
                wake_at.append(next_due)
            wake_at += [b.open_until for b in self._breakers.values() if b.open_until > now]
            timeout = min(wake_at) - time.time()
            if timeout > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._wake.wait()

    def _may_send(self, target_id: int, now: float) -> bool:
        breaker = self._breakers.get(target_id)
        if breaker is None or breaker.open_until <= 0:
            return True
        if now < breaker.open_until or breaker.probing:
            return False
        breaker.probing = True  # half-open: one attempt decides
        return True

    def _slot(self, target_id: int) -> asyncio.Semaphore:
        slot = self._slots.get(target_id)
        if slot is None:
            slot = self._slots[target_id] = asyncio.Semaphore(self.settings.concurrency)
        return slot

    async def _deliver(self, delivery: Delivery) -> None:
        try:
            async with self._slot(delivery.target_id):
                outcome = await self._attempt(delivery)
            await self._record(delivery, outcome)
        except Exception as exc:
            log.exception("delivery crashed", delivery=delivery.id, error=str(exc))
        finally:
            self._inflight.discard(delivery.id)
            self._wake.set()

    async def body(self, delivery: Delivery) -> bytes:
        revision = (
            await self.store.get_revision(delivery.revision_id) if delivery.revision_id else None
        )
        event = await self.store.get_event(delivery.event_id)
        payload: dict[str, Any] = {
            "type": "resource.updated",
            "id": delivery.webhook_id,
            "eventId": delivery.event_id,
            "server": event.server_url if event else None,
            "uri": delivery.uri,
            "revision": revision.revision if revision else None,
            "contentHash": revision.content_hash if revision else None,
            "generation": revision.generation if revision else None,
            "readAt": iso(revision.read_at) if revision else None,
            "contents": revision.contents if revision else [],
        }
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        if len(body) > self.settings.max_body_bytes:
            payload.pop("contents")
            payload["truncated"] = True
            payload["contentPath"] = f"/v1/content?uri={quote(delivery.uri, safe='')}"
            body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        return body

    async def _attempt(self, delivery: Delivery) -> Outcome:
        target = await self.repo.get_target(delivery.target_id)
        if target is None or not target.enabled:
            return Outcome(False, None, "target disabled or removed")
        secrets_in_use = await self.repo.signing_secrets(target.id)
        body = await self.body(delivery)
        timestamp = int(time.time())
        headers = {
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            "webhook-id": delivery.webhook_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": signature_header(
                secrets_in_use, delivery.webhook_id, timestamp, body
            ),
        }
        self.stats["attempts_total"] += 1
        try:
            response = await self._http.post(target.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            return Outcome(False, None, f"{type(exc).__name__}: {exc}"[:300])
        await response.aclose()
        return attempt_outcome(response.status_code, response.headers, time.time())

    async def send_test(self, target_id: int) -> Outcome:
        """A signed ``webhook.test`` ping, outside the outbox (nothing is stored or retried)."""
        target = await self.repo.get_target(target_id)
        if target is None:
            return Outcome(False, None, "unknown target")
        webhook_id = "msg_test_" + f"{int(time.time() * 1000):x}"
        body = json.dumps(
            {
                "type": "webhook.test",
                "id": webhook_id,
                "targetId": target_id,
                "sentAt": iso(time.time()),
            },
            separators=(",", ":"),
        ).encode()
        timestamp = int(time.time())
        headers = {
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            "webhook-id": webhook_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": signature_header(
                await self.repo.signing_secrets(target_id), webhook_id, timestamp, body
            ),
        }
        try:
            response = await self._http.post(target.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            return Outcome(False, None, f"{type(exc).__name__}: {exc}"[:300])
        await response.aclose()
        return attempt_outcome(response.status_code, response.headers, time.time())

    async def _record(self, delivery: Delivery, outcome: Outcome) -> None:
        breaker = self._breakers.setdefault(delivery.target_id, _Breaker())
        breaker.probing = False
        if outcome.ok:
            breaker.open_until = 0.0
            self.stats["delivered_total"] += 1
            await self.repo.record_success(delivery, outcome.status or 200)
            return
        self.stats["failed_total"] += 1
        now = time.time()
        retry_at = next_attempt_time(
            self.settings, delivery.attempts + 1, now, outcome.retry_after_s, self._rng
        )
        target = await self.repo.get_target(delivery.target_id)
        if target is not None and target.consecutive_failures + 1 >= self.settings.breaker_failures:
            breaker.open_until = now + self.settings.breaker_open_s
        dead = await self.repo.record_failure(
            delivery,
            status=outcome.status,
            error=outcome.error,
            next_attempt_at=retry_at,
            disable_target=outcome.disable_reason,
            disable_after_s=self.settings.disable_after_s,
        )
        if retry_at is None or outcome.disable_reason:
            self.stats["dead_total"] += 1
        log.info(
            "delivery failed",
            delivery=delivery.id,
            target=delivery.target_id,
            status=outcome.status,
            error=outcome.error,
            retry_at=retry_at,
            dead=dead is not None,
        )
