"""Deliver the outbox: signed POSTs, retries on a schedule, dead letters, per-target isolation.

The loop is woken by every committed revision (its transaction enqueued the deliveries) and
by the next due time; it never polls on a fixed tick. Each target has its own concurrency limit and a small circuit breaker, so a slow
or dead receiver costs its own deliveries time, never another target's. Decisions that can
be pure are: :func:`attempt_outcome` classifies a response, :func:`next_attempt_time`
applies the schedule and ``Retry-After``.

Database work per delivery is kept small: one pass is *one* query on a reader thread that
returns every due delivery with its target, secrets, revision and event, bodies built
(:meth:`WebhookRepository.due_work`); outcomes go to a queue that one task drains, writing
everything that completed meanwhile in one transaction on the store's writer thread
(:meth:`WebhookRepository.apply_outcomes`). A delivery stays "in flight" (excluded from the
passes) until its outcome is committed, so the next delivery of the same (target, URI) is
never sent before the previous one is recorded (mode ``all`` ordering), and a crash before
that commit re-sends it with the same ``webhook-id`` (at least once).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import structlog

from service._version import __version__
from service.backoff import jittered
from service.mcp.errors import InvalidUrl, McpError
from service.mcp.transports.base import Transport
from service.mcp.transports.choose import make_transport
from service.netguard import AddressRefused, address_problem, refused_in
from service.safetext import known_secrets, redact_known, url_credentials
from service.store import Store
from service.store.database import describe
from service.store.health import is_storage_failure, is_unanswered
from service.webhooks.outbox import Delivery
from service.webhooks.repository import (
    Applied,
    AttemptLog,
    AttemptResult,
    WebhookRepository,
    Work,
    delivery_body,
    iso,
)
from service.webhooks.signing import SECRET_PREFIX, signed_headers

log = structlog.get_logger("mcpsubd.webhooks")


def _log_failure(message: str, exc: BaseException, **fields: Any) -> None:
    """A database that refuses writes or does not answer is the daemon-level storage
    condition (status, ``/readyz``): one warning line, not a traceback; anything else is a
    bug and keeps its stack."""
    if is_storage_failure(exc) or is_unanswered(exc):
        log.warning(message, error=describe(exc), **fields)
    else:
        log.exception(message, error=str(exc), **fields)


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
    permanent: bool = False
    """Retrying cannot help (the target resolves to a refused address): dead at once."""
    response_body: str | None = None
    """The answer's first :data:`RESPONSE_EXCERPT` bytes (the console's attempt log)."""
    request_headers: dict[str, str] | None = None
    started_at: float = 0.0
    duration_ms: float | None = None


RESPONSE_EXCERPT = 2048
"""Bytes of a receiver's answer kept per attempt."""


def excerpt(body: bytes, secrets: tuple[str, ...] = ()) -> str:
    """What an attempt keeps of the receiver's answer, without what the daemon sent it: a
    receiver may echo its URL (credentials in it) or the signing secret. Redacted before it
    is cut, so a secret across the cut goes whole."""
    room = max((len(secret.encode()) for secret in secrets), default=0)
    text = redact_known(body[: RESPONSE_EXCERPT + room].decode("utf-8", "replace"), secrets)
    return text.encode()[:RESPONSE_EXCERPT].decode("utf-8", "replace")


def target_secrets(url: str, signing: Sequence[str]) -> tuple[str, ...]:
    """What a receiver must not get shown back: its URL's credentials and the signing
    secrets, whole and as the key after ``whsec_`` (:func:`service.safetext.known_secrets`)."""
    keys = [secret.removeprefix(SECRET_PREFIX) for secret in signing]
    return known_secrets(*url_credentials(url), *signing, *keys)


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


def attempt_outcome(status: int, headers: Mapping[str, str], now: float) -> Outcome:
    """2xx is success; 410 disables the target; 3xx is a failure (redirects are not followed)."""
    if 200 <= status < 300:
        return Outcome(True, status, "")
    if status == 410:
        return Outcome(False, status, "410 Gone", disable_reason="the receiver answered 410 Gone")
    retry_after = (
        parse_retry_after(headers.get("retry-after"), now) if status in (429, 503) else None
    )
    return Outcome(False, status, f"HTTP {status}", retry_after_s=retry_after)


PRIVATE_TARGET_HINT = (
    "re-add the target with --allow-private-target (allowPrivateTarget: true) if you mean it"
)


UNENCODABLE_HOST = (
    "INVALID_URL: the target's host is not a valid DNS name (IDNA); "
    "remove the target and add it again with a valid URL"
)


def refused_outcome(exc: BaseException) -> Outcome | None:
    """``PRIVATE_TARGET`` when the attempt failed because the target's host resolved to a
    refused address: permanent (the delivery is dead at once, not retried for days)."""
    refused: AddressRefused | None = refused_in(exc)
    if refused is None:
        return None
    error = f"PRIVATE_TARGET: {refused}; {PRIVATE_TARGET_HINT}"
    return Outcome(False, None, error[:300], permanent=True)


def request_headers(secrets_in_use: Sequence[str], webhook_id: str, body: bytes) -> dict[str, str]:
    """Every header of one signed POST of ``body``, signed now (a delivery and a test alike)."""
    return {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        **signed_headers(secrets_in_use, webhook_id, int(time.time()), body),
    }


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
    delay = jittered(settings.schedule[attempts_done], settings.jitter, rng)
    if retry_after_s is not None:
        delay = max(delay, retry_after_s)
    return now + max(0.0, delay)


__all__ = [
    "Dispatcher",
    "Outcome",
    "WebhookSettings",
    "attempt_outcome",
    "iso",
    "next_attempt_time",
    "parse_retry_after",
]

OUTCOME_BATCH = 256
"""At most this many outcomes per write transaction."""
OUTCOME_GATHER_S = 0.002
"""How long the writer waits for more outcomes before writing a short batch."""
PASS_LIMIT = 400
"""At most this many deliveries per pass (over all targets)."""
TIMED_PASS_S = 5.0
"""With replicas: the longest sleep between passes (see ``Dispatcher._timed_pass_s``)."""
SINGLE_REPLICA_PASS_S = 60.0
"""Alone (SQLite): the same, a safety net only."""


class _Breaker:
    def __init__(self) -> None:
        self.open_until = 0.0
        self.probing = False


class Dispatcher:
    def __init__(
        self,
        store: Store,
        settings: WebhookSettings,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.repo = WebhookRepository(store)
        self.settings = settings
        self._transports: dict[int, tuple[Transport, bool]] = {}
        """Per target: its transport, and whether it may reach private addresses (see
        :meth:`_transport`)."""
        self._retiring: set[Transport] = set()
        self._rng = rng or random.Random()
        self._wake = asyncio.Event()
        self._inflight: set[int] = set()
        """Deliveries taken by a pass whose outcome is not committed yet."""
        self._taken: dict[int, int] = {}
        """target id -> how many of its deliveries are in ``_inflight``."""
        self._slots: dict[int, asyncio.Semaphore] = {}
        self._breakers: dict[int, _Breaker] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self._outcomes: list[AttemptResult] = []
        self._outcomes_ready = asyncio.Event()
        self._writer_task: asyncio.Task[None] | None = None
        self._closing = False
        self._epoch = 0
        """Counts target changes; a pass remembers the value it read under."""
        self._target_changed_at: dict[int, int] = {}
        self._uri_changed_at: dict[str, int] = {}
        self._last_pass_full = False
        self._no_targets = False
        """True while the last check found no enabled target: a new revision then cannot
        have enqueued anything, and waking for it would cost a pass query per revision.
        Targets changed through this process clear it at once; any other way (another
        replica) is seen by the next timed pass, within 5 s (``TIMED_PASS_S``)."""
        self._target_changes = 0
        self.replica_id = "mcpsubd"
        """Set by the supervisor: who holds this dispatcher's delivery leases (PostgreSQL)."""
        self.stats = {"attempts_total": 0, "delivered_total": 0, "failed_total": 0, "dead_total": 0}
        store.on_event.append(self._on_event)
        self.repo.on_target_change.append(self._on_target_change)

    def _on_event(self, event: Any) -> None:
        if getattr(event, "type", None) != "resource.updated":
            # Only a revision's transaction enqueues deliveries (the store's event sinks); a
            # cold start of 1,000 links also commits thousands of subscription.state events,
            # and each ran a pass.
            return
        uri = getattr(event, "uri", None)
        if uri:
            # Its commit superseded the open deliveries of this URI to "latest" targets.
            self._epoch += 1
            self._uri_changed_at[uri] = self._epoch
        if not self._no_targets:
            self._wake.set()

    def _on_target_change(self, target_id: int, removed: bool = False) -> None:
        self._no_targets = False
        self._target_changes += 1
        self._epoch += 1
        self._target_changed_at[target_id] = self._epoch
        held = self._transports.pop(target_id, None) if removed else None
        if held is not None:  # a changed URL or allowPrivateTarget is seen by _transport
            self._retire_later(target_id, held[0])

    def _retire_later(self, target_id: int, transport: Transport) -> None:
        self._retiring.add(transport)
        task = asyncio.get_running_loop().create_task(self._retire(target_id, transport))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _retire(self, target_id: int, transport: Transport) -> None:
        """Close a changed target's old transport once its attempts are over."""
        while self._taken.get(target_id, 0):
            await asyncio.sleep(1.0)
        self._retiring.discard(transport)
        await transport.aclose()

    def _transport(self, target_id: int, url: str, allow_private: bool) -> Transport:
        """The target's own transport, as many connections as it has slots: lean h11 on a
        plain http:// URL (a fraction of httpx's CPU per POST), httpx otherwise, each with its
        own pool (one httpx pool for every target scans all its connections on every request:
        with many targets that costs more than the request). It connects
        only to addresses the private-target rule allows, unless the target was registered
        with ``allowPrivateTarget`` (:mod:`service.netguard`)."""
        held = self._transports.get(target_id)
        if held is None or held[0].url != url or held[1] != allow_private:
            if held is not None:
                self._retire_later(target_id, held[0])
            n = self.settings.concurrency
            transport = make_transport(
                url,
                timeout=self.settings.timeout_s,
                max_connections=n,
                max_idle=n,
                address_check=None if allow_private else address_problem,
            )
            held = self._transports[target_id] = (transport, allow_private)
        return held[0]

    def wake(self) -> None:
        self._wake.set()

    def remote_events(self) -> None:
        """Events any replica committed, heard by LISTEN/NOTIFY (PostgreSQL; our own too).

        While no target is enabled none of them can have enqueued a delivery, so they do not
        wake the loop: otherwise every replica ran a pass (three queries) for every event of
        the cluster. A target enabled on another replica is seen by the next timed pass
        (within 5 s), as for local events."""
        if not self._no_targets:
            self._wake.set()

    @property
    def _timed_pass_s(self) -> float:
        """The longest sleep between passes. With replicas, what another one changed (a
        target enabled there, an expired delivery lease) is seen by a timed pass; alone
        (SQLite) every change is made here and wakes the loop (a commit, an outcome, the
        API's target and delivery routes), so the timed pass is only a safety net."""
        return TIMED_PASS_S if self.store.dialect.replicated else SINGLE_REPLICA_PASS_S

    @property
    def _lease_ttl(self) -> float:
        """A delivery's lease outlasts its attempt (timeout) and the outcome write after it."""
        return self.settings.timeout_s + 10.0

    @property
    def _per_target(self) -> int:
        """Deliveries of one target taken by the passes at a time: in its slots, ready behind
        them, or waiting for their outcome to be written. A pass costs O(open deliveries), so one
        pass takes several deliveries per target and the next pass runs when half of them are
        done (or on a new event), not after every completion. Eight rounds of the target's
        slots: with fewer, the passes of a long drain are a large share of its CPU. Bodies are
        built by the pass, so this also bounds the memory a target's backlog holds (at most
        this many bodies of up to ``max_body_bytes``)."""
        return 8 * self.settings.concurrency

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._closing = False
        self._writer_task = loop.create_task(self._write_outcomes(), name="webhook outcomes")
        self._loop_task = loop.create_task(self._run(), name="webhook dispatcher")

    async def stop(self, grace_s: float = 3.0) -> None:
        """Stop taking work; attempts still running get ``grace_s``, the rest stay pending.
        Outcomes already known are written before this returns."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=grace_s)
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._writer_task is not None:
            self._closing = True
            self._outcomes_ready.set()
            try:
                await asyncio.wait_for(asyncio.shield(self._writer_task), timeout=grace_s)
            except TimeoutError:
                self._writer_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._writer_task
        transports = [held[0] for held in self._transports.values()] + [*self._retiring]
        self._transports.clear()
        self._retiring.clear()
        for transport in transports:
            await transport.aclose()

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            now = time.time()
            epoch = self._epoch
            try:
                work, next_due = await self.repo.due_work(
                    now,
                    limit=PASS_LIMIT,
                    exclude=self._inflight,
                    per_target=self._per_target,
                    max_body_bytes=self.settings.max_body_bytes,
                )
                self._last_pass_full = len(work) >= PASS_LIMIT
                if work and self.store.dialect.replicated:
                    # Several replicas see the same due rows: each attempt is leased to one.
                    mine = await self.repo.claim_deliveries(
                        [item.delivery.id for item in work], self.replica_id, self._lease_ttl
                    )
                    work = [item for item in work if item.delivery.id in mine]
                for item in work:
                    self._take(item, epoch, now)
                if not work and next_due is None and not self._inflight:
                    # Nothing to do: find out whether anything *can* be enqueued. A target
                    # change while we ask leaves the flag off.
                    changes = self._target_changes
                    empty = not await self.repo.has_enabled_targets()
                    self._no_targets = empty and changes == self._target_changes
            except Exception as exc:  # keep delivering whatever one query did
                _log_failure("dispatcher pass failed", exc)
                next_due = now + 1.0
            # Rows already due are in flight (their recorded outcome wakes us), behind a full
            # target (likewise) or behind an open breaker (its half-open time is below): only
            # a *future* due time and the breakers decide how long to sleep.
            wake_at = [now + self._timed_pass_s]
            if next_due is not None:
                wake_at.append(next_due)
            wake_at += [b.open_until for b in self._breakers.values() if b.open_until > now]
            timeout = min(wake_at) - time.time()
            if timeout > 0 and not self._wake.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._wake.wait()

    def _take(self, item: Work, epoch: int, now: float) -> None:
        delivery = item.delivery
        target_id = delivery.target_id
        if delivery.id in self._inflight or self._taken.get(target_id, 0) >= self._per_target:
            return
        if not self._may_send(target_id, now):
            return
        self._inflight.add(delivery.id)
        self._taken[target_id] = self._taken.get(target_id, 0) + 1
        task = asyncio.get_running_loop().create_task(self._deliver(item, epoch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _release(self, delivery: Delivery) -> None:
        left = 0
        if delivery.id in self._inflight:
            self._inflight.discard(delivery.id)
            left = self._taken.get(delivery.target_id, 1) - 1
            if left > 0:
                self._taken[delivery.target_id] = left
            else:
                self._taken.pop(delivery.target_id, None)
        # A new pass when this target runs low on taken work (its queue heads that just
        # became eligible are picked up then), or when the last pass was cut by its limit.
        if left <= self._per_target // 2 or self._last_pass_full:
            self._wake.set()

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

    async def _deliver(self, item: Work, epoch: int = 0) -> None:
        delivery = item.delivery
        queued = False
        try:
            async with self._slot(delivery.target_id):
                if self._stale(item, epoch):
                    return  # not sent, nothing recorded: a later pass decides again
                outcome = await self._attempt(item, epoch)
            self._queue_outcome(delivery, outcome)
            queued = True
        except Exception as exc:
            log.exception("delivery crashed", delivery=delivery.id, error=str(exc))
        finally:
            if not queued:  # nothing to record: it stays pending and goes out again
                self._release(delivery)

    def _stale(self, item: Work, epoch: int) -> bool:
        """Did something change, while this delivery waited for a slot, that the pass which
        took it could not see? An open breaker, or (target in mode ``latest``) a newer
        revision of its URI, which superseded it. (Target changes: see :meth:`_attempt`.)"""
        breaker = self._breakers.get(item.delivery.target_id)
        if breaker is not None and breaker.open_until > time.time() and not breaker.probing:
            return True
        return item.mode == "latest" and self._uri_changed_at.get(item.delivery.uri, -1) > epoch

    async def body(self, delivery: Delivery) -> bytes:
        """The body of ``delivery``, read on its own (the dispatcher's passes build bodies
        in their one query; this is for callers that hold only a delivery)."""
        revision = (
            await self.store.get_revision(delivery.revision_id) if delivery.revision_id else None
        )
        event = await self.store.get_event(delivery.event_id)
        return delivery_body(
            delivery,
            server_url=event.server_url if event else None,
            revision=revision.revision if revision else None,
            content_hash=revision.content_hash if revision else None,
            generation=revision.generation if revision else None,
            read_at=revision.read_at if revision else None,
            contents_json=(
                json.dumps(revision.contents, separators=(",", ":"), ensure_ascii=False)
                if revision
                else None
            ),
            max_body_bytes=self.settings.max_body_bytes,
        )

    async def _attempt(self, item: Work, epoch: int = 0) -> Outcome:
        delivery = item.delivery
        url, secrets_in_use = item.url, item.secrets
        allow_private = item.allow_private_target
        if self._target_changed_at.get(delivery.target_id, -1) > epoch:
            # The target changed after the pass read it (disabled, removed, rotated, or
            # re-created): read it again rather than use what the pass saw.
            target = await self.repo.get_target(delivery.target_id)
            if target is None or not target.enabled:
                return Outcome(False, None, "target disabled or removed")
            url, allow_private = target.wire_url, target.allow_private_target
            secrets_in_use = tuple(await self.repo.signing_secrets(target.id))
        headers = request_headers(secrets_in_use, delivery.webhook_id, item.body)
        self.stats["attempts_total"] += 1
        started, clock = time.time(), time.monotonic()
        outcome = await self._post(
            delivery.target_id,
            url,
            allow_private,
            item.body,
            headers,
            secrets_in_use,
        )
        return replace(
            outcome,
            request_headers=headers,
            started_at=started,
            duration_ms=round((time.monotonic() - clock) * 1000, 1),
        )

    async def _post(
        self,
        target_id: int,
        url: str,
        allow_private: bool,
        body: bytes,
        headers: dict[str, str],
        signing: Sequence[str],
    ) -> Outcome:
        """One POST on the target's transport, as an :class:`Outcome`; the attempt as a
        whole is bounded by the timeout (a trickling receiver resets per-read timeouts).
        The one place a receiver's words enter: its answer and errors lose the credentials
        sent to it (:func:`target_secrets` of ``url`` and the ``signing`` secrets, worked
        out only when there is text to redact: most answers are empty)."""
        transport = self._transport(target_id, url, allow_private)
        try:
            async with asyncio.timeout(self.settings.timeout_s):
                answer = await transport.post(body, headers)
        except TimeoutError:
            # :g, as every timeout the CLIs print: "15 s", not "15.0 s"
            return Outcome(False, None, f"ReadTimeout: no answer in {self.settings.timeout_s:g} s")
        except InvalidUrl:
            # A host no resolver can encode (the API refuses such URLs; a target stored
            # before it did may still have one): permanent, not an internal error.
            return Outcome(False, None, UNENCODABLE_HOST, permanent=True)
        except McpError as exc:
            return refused_outcome(exc) or Outcome(
                False,
                None,
                redact_known(f"{type(exc).__name__}: {exc}", target_secrets(url, signing))[:300],
            )
        outcome = attempt_outcome(answer.status, answer.headers, time.time())
        secrets = target_secrets(url, signing) if answer.body else ()
        return replace(outcome, response_body=excerpt(answer.body, secrets))

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
        signing = await self.repo.signing_secrets(target_id)
        headers = request_headers(signing, webhook_id, body)
        return await self._post(
            target.id,
            target.wire_url,
            target.allow_private_target,
            body,
            headers,
            signing,
        )

    # ---- outcomes: queued, written in batches by one task -------------------------------
    def _queue_outcome(self, delivery: Delivery, outcome: Outcome) -> None:
        if outcome.ok:
            self.stats["delivered_total"] += 1
            result = AttemptResult(delivery, True, outcome.status or 200, attempt=_attempt(outcome))
        else:
            self.stats["failed_total"] += 1
            retry_at = (
                None
                if outcome.permanent
                else next_attempt_time(
                    self.settings,
                    delivery.attempts + 1,
                    time.time(),
                    outcome.retry_after_s,
                    self._rng,
                )
            )
            if retry_at is None or outcome.disable_reason:
                self.stats["dead_total"] += 1
            result = AttemptResult(
                delivery,
                False,
                outcome.status,
                outcome.error,
                next_attempt_at=retry_at,
                disable_target=outcome.disable_reason,
                attempt=_attempt(outcome),
            )
        self._outcomes.append(result)
        self._outcomes_ready.set()

    async def _write_outcomes(self) -> None:
        """The one task that writes outcomes: whatever completed while the previous batch
        was being written goes in the next transaction."""
        while True:
            if not self._outcomes:
                if self._closing:
                    return
                self._outcomes_ready.clear()
                await self._outcomes_ready.wait()
                continue
            if len(self._outcomes) < OUTCOME_BATCH and not self._closing:
                # Let the attempts finishing about now join this transaction: one write
                # (a thread hop, the write lock, a commit) per batch instead of per outcome.
                await asyncio.sleep(OUTCOME_GATHER_S)
            batch = self._outcomes[:OUTCOME_BATCH]
            del self._outcomes[:OUTCOME_BATCH]
            applied: Applied | None = None
            try:
                applied = await self.repo.apply_outcomes(batch, self.settings.disable_after_s)
            except Exception as exc:  # they stay pending: sent again, same webhook-id
                _log_failure("recording outcomes failed", exc, count=len(batch))
            finally:
                for result in batch:
                    self._release(result.delivery)
            if applied is not None:
                self._after_commit(batch, applied)

    def _after_commit(self, batch: list[AttemptResult], applied: Applied) -> None:
        now = time.time()
        for result in batch:
            delivery = result.delivery
            breaker = self._breakers.setdefault(delivery.target_id, _Breaker())
            breaker.probing = False
            if result.ok:
                breaker.open_until = 0.0
                continue
            failures = applied.failures.get(delivery.target_id)
            if failures is not None and failures >= self.settings.breaker_failures:
                breaker.open_until = now + self.settings.breaker_open_s
            log.info(
                "delivery failed",
                delivery=delivery.id,
                target=delivery.target_id,
                status=result.status,
                error=result.error,
                retry_at=result.next_attempt_at,
                dead=delivery.id in applied.dead,
            )


def _attempt(outcome: Outcome) -> AttemptLog | None:
    """What the attempt log keeps of an outcome (None when nothing was sent)."""
    if outcome.request_headers is None:
        return None
    return AttemptLog(
        started_at=outcome.started_at,
        duration_ms=outcome.duration_ms,
        request_headers=outcome.request_headers,
        response_body=outcome.response_body,
    )
