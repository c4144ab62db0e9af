"""Run the trigger outbox: one process per run, retries with backoff, dead letters.

The loop is woken by every committed revision (its transaction enqueued the runs), by every
finished run and trigger change, and by the next due time; it never polls on a fixed tick.
A pass reads the head of each (trigger, URI) queue that is due, at most as many as the
trigger's concurrency leaves room for, and claims each (``running``, under this replica's
lease) before its process starts; an outcome is written with its attempt row in one
transaction. A run in flight when the daemon stops or dies is still ``running`` in the
database and is made ``pending`` again at the next start: at least once, never lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from service.backoff import Backoff
from service.jsonencode import json_bytes, json_text
from service.safetext import redact_urls
from service.store import Store
from service.store.database import describe
from service.store.health import is_storage_failure, is_unanswered
from service.triggers.outbox import Run, Trigger
from service.triggers.process import Finished, run_program
from service.triggers.program_input import Change, program_argv, program_env
from service.triggers.repository import Outcome, TriggerRepository
from service.webhooks.outbox import Delivery
from service.webhooks.repository import delivery_body

log = structlog.get_logger("mcpsubd.triggers")

TIMED_PASS_S = 5.0
"""With replicas: the longest sleep between passes (another replica's runs and triggers)."""
SINGLE_REPLICA_PASS_S = 60.0
"""Alone (SQLite): every change is made here and wakes the loop; a safety net only."""
DURATION_BUCKETS = (0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
"""Seconds: the upper bounds of the run-duration histogram's buckets."""


@dataclass(frozen=True, slots=True)
class TriggerSettings:
    attempts: int = 5
    """Attempts per run (per replay) before it is dead-lettered."""
    retry: Backoff = field(default_factory=lambda: Backoff(base_s=10.0, cap_s=900.0))
    """Delay before each retry: full jitter under base * 2^n, capped (service.backoff)."""
    timeout_s: float = 600.0
    """A trigger's default timeout per attempt."""
    max_timeout_s: float = 86400.0
    kill_grace_s: float = 5.0
    """Between SIGTERM and SIGKILL to the process group at a timeout."""
    max_triggers: int = 100
    max_running: int = 8
    """Processes running at once, over every trigger (a trigger's concurrency is also
    capped by it)."""
    tail_bytes: int = 8192
    """Bytes of stdout and of stderr kept per attempt (the last ones)."""
    max_input_bytes: int = 256 * 1024
    """The change on stdin, as a webhook body: larger content is left out and the body
    says ``truncated`` with a ``contentPath``."""


@dataclass(slots=True)
class Durations:
    """The run-duration histogram (seconds), cumulative as Prometheus wants it."""

    buckets: tuple[float, ...] = DURATION_BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * len(DURATION_BUCKETS))
    total: int = 0
    sum_s: float = 0.0

    def observe(self, seconds: float) -> None:
        self.total += 1
        self.sum_s += seconds
        for i, bound in enumerate(self.buckets):
            if seconds <= bound:
                self.counts[i] += 1


def redact_output(data: bytes, secrets: Mapping[str, str]) -> str:
    """An output tail as it is stored: text, URL credentials and secret query parameters
    redacted, and the values the trigger sets with ``--env NAME=VALUE`` masked."""
    text = redact_urls(data.decode("utf-8", "replace"))
    for value in secrets.values():
        if len(value) >= 4:
            text = text.replace(value, "***")
    return text


class TriggerRunner:
    def __init__(
        self,
        store: Store,
        settings: TriggerSettings,
        daemon_env: Mapping[str, str],
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.repo = TriggerRepository(store)
        self._daemon_env = dict(daemon_env)
        self._rng = rng or random.Random()
        self._wake = asyncio.Event()
        self._tasks: dict[int, asyncio.Task[None]] = {}
        """run id -> its task, while its process runs or its outcome is being written."""
        self._of_trigger: dict[int, int] = {}
        """run id -> trigger id, for the runs in :attr:`_tasks`."""
        self._unreleased: set[int] = set()
        """Runs whose outcome could not be written: made ``pending`` again by a later pass."""
        self._loop_task: asyncio.Task[None] | None = None
        self._no_triggers = False
        """True while the last pass found no enabled trigger: a new revision then cannot have
        enqueued a run, and waking for it would cost a pass (two reader queries) per
        revision. Triggers changed through this process clear it at once; any other way
        (another replica) is seen by the next timed pass, as the webhook dispatcher does."""
        self._trigger_changes = 0
        self.replica_id = "mcpsubd"
        """Set by the composition root: who holds this runner's run leases (PostgreSQL)."""
        self.stats: dict[str, float] = {
            "runs_started_total": 0,
            "runs_succeeded_total": 0,
            "runs_failed_total": 0,
            "runs_dead_total": 0,
        }
        self.durations = Durations()
        store.on_event.append(self._on_event)
        self.repo.on_trigger_change.append(self._on_trigger_change)

    # ---- wake-ups -------------------------------------------------------------------------
    def _on_event(self, event: Any) -> None:
        if getattr(event, "type", None) == "resource.updated" and not self._no_triggers:
            self._wake.set()

    def _on_trigger_change(self, trigger_id: int, removed: bool) -> None:
        self._no_triggers = False
        self._trigger_changes += 1
        if removed:  # its runs end now: nothing of a removed trigger keeps running
            for run_id, owner in list(self._of_trigger.items()):
                task = self._tasks.get(run_id)
                if owner == trigger_id and task is not None:
                    task.cancel()
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def remote_events(self) -> None:
        """Events another replica committed (PostgreSQL): their runs may be ours to run."""
        self._wake.set()

    def gauges(self) -> dict[str, Callable[[], float]]:
        """``/metrics`` values read at each scrape (``trigger_`` prefixed)."""

        def stat(key: str) -> Callable[[], float]:
            return lambda: self.stats[key]

        found = {f"trigger_{key}": stat(key) for key in self.stats}
        found["trigger_runs_running"] = lambda: float(len(self._tasks))
        return found

    @property
    def daemon_path(self) -> str:
        """The PATH a bare program name is looked up on (the daemon's own)."""
        return self._daemon_env.get("PATH", os.defpath)

    @property
    def running(self) -> int:
        return len(self._tasks)

    # ---- life -----------------------------------------------------------------------------
    def start(self) -> None:
        self._loop_task = asyncio.get_running_loop().create_task(self._run(), name="trigger runner")

    async def stop(self) -> None:
        """End the runs in flight (their process groups, TERM then KILL) and leave them
        ``pending``: the next start runs them again."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        tasks = list(self._tasks.values())
        in_flight = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.repo.release([*in_flight, *self._unreleased], self.replica_id)

    @property
    def _timed_pass_s(self) -> float:
        return TIMED_PASS_S if self.store.dialect.replicated else SINGLE_REPLICA_PASS_S

    async def _run(self) -> None:
        while True:
            try:
                await self.repo.recover(self.replica_id)
                break
            except Exception as exc:  # the database is not taking writes yet
                _log_failure("recovering the runs in flight failed", exc)
                await asyncio.sleep(1.0)
        while True:
            self._wake.clear()
            now = time.time()
            next_due: float | None = None
            try:
                if self._unreleased:
                    await self.repo.release(list(self._unreleased), self.replica_id)
                    self._unreleased.clear()
                if self.store.dialect.replicated:
                    # The runs of a replica that died (their lease expired).
                    await self.repo.recover(self.replica_id, starting=False)
                next_due = await self._pass(now)
                changes = self._trigger_changes
                empty = not await self.repo.has_enabled_triggers()
                self._no_triggers = empty and changes == self._trigger_changes
            except Exception as exc:
                _log_failure("trigger pass failed", exc)
                next_due = now + 1.0
            wake_at = now + self._timed_pass_s
            if next_due is not None:
                wake_at = min(wake_at, next_due)
            timeout = wake_at - time.time()
            if timeout > 0 and not self._wake.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._wake.wait()

    async def _pass(self, now: float) -> float | None:
        free = self.settings.max_running - len(self._tasks)
        if free <= 0:
            return None  # a finished run wakes the loop
        due, next_due = await self.repo.due(now, limit=free)
        for item in due:
            if len(self._tasks) >= self.settings.max_running:
                break
            if item.run_id in self._tasks:
                continue
            ttl = item.timeout_s + 2 * self.settings.kill_grace_s + 60.0
            claimed = await self.repo.claim(item.run_id, self.replica_id, ttl)
            if claimed is None:
                continue
            task = asyncio.get_running_loop().create_task(
                self._execute(claimed), name=f"trigger run {item.run_id}"
            )
            self._tasks[item.run_id] = task
            self._of_trigger[item.run_id] = item.trigger_id
        return next_due

    # ---- one run --------------------------------------------------------------------------
    async def _execute(self, run: Run) -> None:
        """One attempt of a claimed run (``run.attempts`` is its number) and its outcome."""
        run_id = run.id
        recorded = False
        try:
            trigger = await self.repo.get_trigger(run.trigger_id)
            if trigger is None:
                recorded = True  # removed meanwhile: nothing to run or record
                return
            change = Change(
                run_id=run.id,
                uri=run.uri,
                revision=None,
                event_id=run.event_id,
                server=None,
                attempt=run.attempts,
            )
            body, change = await self._change_body(run, change)
            self.stats["runs_started_total"] += 1
            finished = await self.attempt(trigger, change, body)
            outcome = self._outcome(run, trigger, finished)
            recorded = await self.repo.record(outcome, self.replica_id)
            recorded = True  # False: the run was removed or taken over; nothing to undo
            self._count(outcome)
        except asyncio.CancelledError:
            raise  # stop() releases it
        except Exception as exc:
            _log_failure("trigger run failed", exc, run=run_id)
        finally:
            self._tasks.pop(run_id, None)
            self._of_trigger.pop(run_id, None)
            if not recorded and not _cancelling():
                self._unreleased.add(run_id)
            self._wake.set()

    async def attempt(self, trigger: Trigger, change: Change, body: bytes) -> Finished:
        """Run ``trigger``'s program once for ``change`` (the runner's runs and ``test``)."""
        argv = program_argv(trigger.program, trigger.args, change)
        env = program_env(self._daemon_env, trigger.env, change)
        finished = await run_program(
            argv,
            stdin=body,
            env=env,
            cwd=trigger.cwd or self._daemon_env.get("HOME") or "/",
            timeout_s=trigger.timeout_s,
            grace_s=self.settings.kill_grace_s,
            tail_bytes=self.settings.tail_bytes,
        )
        self.durations.observe(finished.ended_at - finished.started_at)
        return finished

    def _outcome(self, run: Run, trigger: Trigger, finished: Finished) -> Outcome:
        secrets = trigger.env_values()
        next_at = None
        if not finished.ok:
            done = run.attempts - run.budget_from
            if done < self.settings.attempts:
                next_at = time.time() + self.settings.retry.delay(done - 1, rng=self._rng)
        return Outcome(
            run=run,
            finished=finished,
            stdout_tail=redact_output(finished.stdout, secrets),
            stderr_tail=redact_output(finished.stderr, secrets),
            next_attempt_at=next_at,
        )

    def _count(self, outcome: Outcome) -> None:
        if outcome.finished.ok:
            self.stats["runs_succeeded_total"] += 1
            return
        self.stats["runs_failed_total"] += 1
        if outcome.next_attempt_at is None:
            self.stats["runs_dead_total"] += 1
        log.info(
            "trigger run failed",
            run=outcome.run.id,
            trigger=outcome.run.trigger_id,
            error=outcome.finished.describe(),
            retry_at=outcome.next_attempt_at,
        )

    async def _change_body(self, run: Run, change: Change) -> tuple[bytes, Change]:
        """The change as a webhook body (bounded), and ``change`` with its revision number
        and server filled in."""
        revision = await self.store.get_revision(run.revision_id) if run.revision_id else None
        event = await self.store.get_event(run.event_id) if run.event_id else None
        server = event.server_url if event is not None else None
        body = delivery_body(
            _as_delivery(run),
            server_url=server,
            revision=revision.revision if revision else None,
            content_hash=revision.content_hash if revision else None,
            generation=revision.generation if revision else None,
            read_at=revision.read_at if revision else None,
            contents_json=json_text(revision.contents) if revision else None,
            max_body_bytes=self.settings.max_input_bytes,
        )
        filled = Change(
            run_id=change.run_id,
            uri=change.uri,
            revision=revision.revision if revision else None,
            event_id=change.event_id,
            server=server,
            attempt=change.attempt,
        )
        return body, filled

    async def test(self, trigger: Trigger) -> tuple[Finished, str, str]:
        """Run ``trigger`` once with a synthetic change (nothing stored, nothing retried);
        the outcome and its redacted tails."""
        uri = next((p for p in trigger.uri_patterns if not set(p) & set("*?[")), "")
        uri = uri or "mcpsub-test://synthetic"
        change = Change(run_id=0, uri=uri, revision=0, event_id=None, server=None, attempt=1)
        body = json_bytes(
            {
                "type": "resource.updated",
                "test": True,
                "id": "run_test",
                "eventId": None,
                "server": None,
                "uri": uri,
                "revision": 0,
                "contentHash": None,
                "generation": None,
                "readAt": None,
                "contents": [{"uri": uri, "mimeType": "text/plain", "text": "mcpsub trigger test"}],
            }
        )
        finished = await self.attempt(trigger, change, body)
        secrets = trigger.env_values()
        return (
            finished,
            redact_output(finished.stdout, secrets),
            redact_output(finished.stderr, secrets),
        )


def _as_delivery(run: Run) -> Delivery:
    """The run as the webhook body's builder reads it (its id is ``run_<id>``)."""
    return Delivery(
        id=run.id,
        target_id=run.trigger_id,
        webhook_id=f"run_{run.id}",
        event_id=run.event_id or 0,
        revision_id=run.revision_id,
        subscription_id=run.subscription_id,
        uri=run.uri,
        state=run.state,
        attempts=run.attempts,
        next_attempt_at=run.next_attempt_at,
        last_status=None,
        last_error=None,
        created_at=run.created_at,
        delivered_at=None,
    )


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _log_failure(message: str, exc: BaseException, **fields: Any) -> None:
    if is_storage_failure(exc) or is_unanswered(exc):
        log.warning(message, error=describe(exc), **fields)
    else:
        log.exception(message, error=str(exc), **fields)
