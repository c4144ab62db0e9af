"""Triggers and runs: the async operations the API and the runner need.

Writes go through ``Store.write`` (serialised with every other write of the daemon); the
run rows themselves are inserted by :class:`~service.triggers.outbox.TriggerSink` inside
each revision's transaction.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Connection, delete, func, insert, select, text, update

from service.store import Store, schema
from service.triggers.outbox import (
    FINAL_STATES,
    OPEN_STATES,
    Run,
    Trigger,
    TriggerSink,
    run_from_row,
    trigger_from_row,
)
from service.triggers.process import Finished

T = TypeVar("T")


class TooManyTriggers(Exception):
    """The daemon holds ``trigger_max_triggers`` already."""


@dataclass(frozen=True, slots=True)
class Due:
    """A run whose turn it is (its trigger has room for it)."""

    run_id: int
    trigger_id: int
    timeout_s: float


DUE_RUNS = text(
    "WITH heads AS ("
    " SELECT MIN(id) AS id FROM trigger_runs WHERE state IN ('pending', 'failed', 'running')"
    " GROUP BY trigger_id, uri"
    "), busy AS ("
    " SELECT trigger_id, COUNT(*) AS n FROM trigger_runs WHERE state = 'running'"
    " GROUP BY trigger_id"
    "), ready AS ("
    " SELECT r.id, r.trigger_id, r.next_attempt_at, t.timeout_s,"
    " t.concurrency - COALESCE(b.n, 0) AS room, row_number() OVER ("
    "  PARTITION BY r.trigger_id ORDER BY r.next_attempt_at, r.id) AS rank_in_trigger"
    " FROM heads h JOIN trigger_runs r ON r.id = h.id JOIN triggers t ON t.id = r.trigger_id"
    " LEFT JOIN busy b ON b.trigger_id = r.trigger_id"
    " WHERE r.state IN ('pending', 'failed') AND r.next_attempt_at <= :now AND t.enabled = 1"
    ") "
    "SELECT id, trigger_id, timeout_s FROM ready WHERE rank_in_trigger <= room "
    "ORDER BY next_attempt_at, id LIMIT :limit"
)
"""The head of every (trigger, URI) queue that is due (revision order per URI: a ``running``
head holds its queue), as many of a trigger's as its concurrency leaves room for."""
NEXT_DUE = text(
    "SELECT MIN(r.next_attempt_at) FROM trigger_runs r JOIN triggers t ON t.id = r.trigger_id"
    " WHERE r.state IN ('pending', 'failed') AND t.enabled = 1 AND r.next_attempt_at > :now"
)
ANY_ENABLED_TRIGGER = text("SELECT 1 FROM triggers WHERE enabled = 1 LIMIT 1")
CLAIM = text(
    "UPDATE trigger_runs SET state = 'running', attempts = attempts + 1, lease_owner = :me,"
    " lease_until = :until, updated_at = :now WHERE id = :id AND state IN ('pending', 'failed')"
)
START_ATTEMPT = text(
    "INSERT INTO trigger_attempts (run_id, attempt, started_at)"
    " SELECT id, attempts, :now FROM trigger_runs WHERE id = :id"
)
"""The attempt's row exists from its start: one the daemon did not see end (a restart, a
kill -9) is shown as interrupted, and ``MCPSUB_ATTEMPT`` never repeats for a run."""
RECORD = text(
    "UPDATE trigger_runs SET state = :state, last_exit = :exit_code,"
    " last_signal = :signal, last_error = :error, next_attempt_at = :next_attempt_at,"
    " updated_at = :now, finished_at = :finished_at, lease_owner = NULL, lease_until = NULL"
    " WHERE id = :id AND state = 'running' AND lease_owner = :me"
)
END_ATTEMPT = text(
    "UPDATE trigger_attempts SET started_at = :started_at, ended_at = :ended_at,"
    " duration_ms = :duration_ms, exit_code = :exit_code, signal = :signal,"
    " timed_out = :timed_out, error = :error, stdout_tail = :stdout_tail,"
    " stderr_tail = :stderr_tail, stdout_bytes = :stdout_bytes, stderr_bytes = :stderr_bytes"
    " WHERE run_id = :run_id AND attempt = :attempt"
)
INTERRUPTED = "INTERRUPTED: the daemon stopped during this attempt; the run is run again"
END_INTERRUPTED = (
    "UPDATE trigger_attempts SET ended_at = :now, error = :interrupted"
    " WHERE ended_at IS NULL AND run_id IN"
    " (SELECT id FROM trigger_runs WHERE state = 'running' AND ({who}))"
)
RELEASE = (
    "UPDATE trigger_runs SET state = 'pending', lease_owner = NULL, lease_until = NULL,"
    " next_attempt_at = :now, updated_at = :now WHERE state = 'running' AND ({who})"
)
SUPERSEDE_OLDER = text(
    "UPDATE trigger_runs SET state = 'superseded', updated_at = :now, finished_at = :now,"
    " last_error = 'superseded by a newer revision' "
    "WHERE state IN ('pending', 'failed')"
    " AND trigger_id IN (SELECT id FROM triggers WHERE mode = 'latest')"
    " AND EXISTS (SELECT 1 FROM trigger_runs n WHERE n.trigger_id = trigger_runs.trigger_id"
    " AND n.uri = trigger_runs.uri AND n.id > trigger_runs.id"
    " AND n.state IN ('pending', 'failed'))"
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One finished attempt and what it makes of its run (``next_attempt_at`` None: the run
    is finished: succeeded, or dead when it failed)."""

    run: Run
    finished: Finished
    stdout_tail: str
    stderr_tail: str
    next_attempt_at: float | None


class TriggerRepository:
    def __init__(self, store: Store) -> None:
        self.store = store
        sink = TriggerSink(store.dialect)
        if sink not in store.event_sinks:
            store.event_sinks.append(sink)
        self.on_trigger_change: list[Callable[[int, bool], None]] = []
        """Callbacks ``(trigger_id, removed)`` after a change made here (the runner wakes,
        and ends the runs of a removed trigger)."""

    def _changed(self, trigger_id: int, removed: bool = False) -> None:
        for callback in list(self.on_trigger_change):
            callback(trigger_id, removed)

    # ---- triggers -----------------------------------------------------------------------
    async def create_trigger(
        self,
        *,
        program: str,
        args: Sequence[str],
        uri_patterns: Sequence[str],
        name: str | None,
        mode: str,
        concurrency: int,
        timeout_s: float,
        env: Sequence[str],
        cwd: str | None,
        max_triggers: int,
    ) -> Trigger:
        now = time.time()
        t = schema.triggers
        statement = insert(t).values(
            name=name,
            program=program,
            args=json.dumps(list(args)),
            uri_patterns=json.dumps(list(uri_patterns)),
            mode=mode,
            concurrency=concurrency,
            timeout_s=timeout_s,
            env=json.dumps(list(env)),
            cwd=cwd,
            created_by="person",
            created_at=now,
            updated_at=now,
        )

        def transaction(conn: Connection) -> int:
            count = conn.scalar(select(func.count()).select_from(t)) or 0
            if count >= max_triggers:
                raise TooManyTriggers(f"the daemon holds {count} triggers (at most {max_triggers})")
            key = conn.execute(statement).inserted_primary_key
            return int(key[0]) if key else 0

        trigger_id = await self.store.write(transaction)
        self._changed(trigger_id)
        trigger = await self.get_trigger(trigger_id)
        assert trigger is not None
        return trigger

    async def get_trigger(self, trigger_id: int) -> Trigger | None:
        t = schema.triggers

        def read(conn: Connection) -> Trigger | None:
            row = conn.execute(select(t).where(t.c.id == trigger_id)).one_or_none()
            return trigger_from_row(row) if row is not None else None

        return await self.store.read(read)

    async def list_triggers(self) -> list[Trigger]:
        t = schema.triggers

        def read(conn: Connection) -> list[Trigger]:
            return [trigger_from_row(row) for row in conn.execute(select(t).order_by(t.c.id))]

        return await self.store.read(read)

    async def delete_trigger(self, trigger_id: int) -> Trigger | None:
        trigger = await self.get_trigger(trigger_id)
        if trigger is None:
            return None
        r, a = schema.trigger_runs, schema.trigger_attempts

        def transaction(conn: Connection) -> None:
            runs = select(r.c.id).where(r.c.trigger_id == trigger_id)
            conn.execute(delete(a).where(a.c.run_id.in_(runs)))
            conn.execute(delete(r).where(r.c.trigger_id == trigger_id))
            conn.execute(delete(schema.triggers).where(schema.triggers.c.id == trigger_id))

        await self.store.write(transaction)
        self._changed(trigger_id, removed=True)
        return trigger

    async def set_enabled(self, trigger_id: int, enabled: bool) -> Trigger | None:
        t = schema.triggers
        statement = (
            update(t)
            .where(t.c.id == trigger_id)
            .values(enabled=1 if enabled else 0, updated_at=time.time())
        )
        changed = await self.store.write(lambda conn: conn.execute(statement).rowcount)
        if not changed:
            return None
        self._changed(trigger_id)
        return await self.get_trigger(trigger_id)

    # ---- the runner's side --------------------------------------------------------------
    async def has_enabled_triggers(self) -> bool:
        """Whether a revision can enqueue a run now (the runner sleeps through revisions
        when none can)."""
        return bool(await self.store.read(lambda conn: conn.scalar(ANY_ENABLED_TRIGGER)))

    async def due(self, now: float, *, limit: int) -> tuple[list[Due], float | None]:
        def read(conn: Connection) -> tuple[list[Due], float | None]:
            rows = conn.execute(DUE_RUNS, {"now": now, "limit": limit})
            found = [Due(int(a), int(b), float(c)) for a, b, c in rows]
            next_due = conn.scalar(NEXT_DUE, {"now": now})
            return found, float(next_due) if next_due is not None else None

        return await self.store.read(read)

    async def claim(self, run_id: int, replica_id: str, ttl: float) -> Run | None:
        """Mark the run ``running`` under this replica's lease and open its next attempt;
        the run as claimed (``attempts`` counts this one), or None when another replica
        (or a supersede) got there first."""
        now = time.time()
        params = {"id": run_id, "me": replica_id, "until": now + ttl, "now": now}
        r = schema.trigger_runs

        def transaction(conn: Connection) -> Run | None:
            if not conn.execute(CLAIM, params).rowcount:
                return None
            conn.execute(START_ATTEMPT, params)
            return run_from_row(conn.execute(select(r).where(r.c.id == run_id)).one())

        return await self.store.write(transaction)

    async def _release(self, who: str, params: dict[str, Any]) -> int:
        def transaction(conn: Connection) -> int:
            conn.execute(
                text(END_INTERRUPTED.format(who=who)), {**params, "interrupted": INTERRUPTED}
            )
            released = conn.execute(text(RELEASE.format(who=who)), params)
            conn.execute(SUPERSEDE_OLDER, params)
            return int(released.rowcount or 0)

        return await self.store.write(transaction)

    async def recover(self, replica_id: str, *, starting: bool = True) -> int:
        """The runs a daemon left ``running`` (it stopped or was killed mid-run) are
        ``pending`` again: at least once. SQLite has one daemon, so at its start every
        ``running`` row is its own. On PostgreSQL: at the start this replica's own and those
        whose lease expired (a replica that died); later (``starting`` False) only the
        expired ones, since this replica's own are running. In mode ``latest`` only the
        newest open run of a URI stays."""
        if not self.store.dialect.replicated:
            who = "1 = 1"
        elif starting:
            who = "lease_owner = :me OR lease_until < :now"
        else:
            who = "lease_until < :now"
        return await self._release(who, {"me": replica_id, "now": time.time()})

    async def release(self, run_ids: Collection[int], replica_id: str) -> None:
        """Runs this daemon stops without an outcome (shutdown): ``pending`` again."""
        if not run_ids:
            return
        ids = ", ".join(str(int(i)) for i in run_ids)
        await self._release(
            f"lease_owner = :me AND id IN ({ids})", {"me": replica_id, "now": time.time()}
        )

    async def record(self, outcome: Outcome, replica_id: str) -> bool:
        """Write an attempt's outcome and its attempt row in one transaction; False when the
        run is no longer this replica's (removed, or its lease was taken)."""
        run, finished = outcome.run, outcome.finished
        now = time.time()
        if finished.ok:
            state = "succeeded"
        else:
            state = "dead" if outcome.next_attempt_at is None else "failed"
        params = {
            "id": run.id,
            "me": replica_id,
            "state": state,
            "exit_code": finished.exit_code,
            "signal": finished.signal,
            "error": None if finished.ok else finished.describe()[:500],
            "next_attempt_at": outcome.next_attempt_at or now,
            "now": now,
            "finished_at": None if state == "failed" else now,
        }
        attempt = {
            "run_id": run.id,
            "attempt": run.attempts,
            "started_at": finished.started_at,
            "ended_at": finished.ended_at,
            "duration_ms": finished.duration_ms,
            "exit_code": finished.exit_code,
            "signal": finished.signal,
            "timed_out": 1 if finished.timed_out else 0,
            "error": finished.error,
            "stdout_tail": outcome.stdout_tail,
            "stderr_tail": outcome.stderr_tail,
            "stdout_bytes": finished.stdout_bytes,
            "stderr_bytes": finished.stderr_bytes,
        }

        def transaction(conn: Connection) -> bool:
            if not conn.execute(RECORD, params).rowcount:
                return False
            conn.execute(END_ATTEMPT, attempt)
            return True

        return await self.store.write(transaction)

    # ---- runs ---------------------------------------------------------------------------
    async def get_run(self, run_id: int) -> Run | None:
        r = schema.trigger_runs

        def read(conn: Connection) -> Run | None:
            row = conn.execute(select(r).where(r.c.id == run_id)).one_or_none()
            return run_from_row(row) if row is not None else None

        return await self.store.read(read)

    async def list_runs(
        self,
        *,
        trigger_id: int | None = None,
        state: str | None = None,
        after: int = 0,
        limit: int = 100,
        newest_first: bool = False,
    ) -> list[Run]:
        r = schema.trigger_runs
        query = select(r).where(r.c.id > after)
        if trigger_id is not None:
            query = query.where(r.c.trigger_id == trigger_id)
        if state is not None:
            query = query.where(r.c.state == state)
        order = r.c.id.desc() if newest_first else r.c.id
        query = query.order_by(order).limit(limit)

        def read(conn: Connection) -> list[Run]:
            return [run_from_row(row) for row in conn.execute(query)]

        return await self.store.read(read)

    async def attempts(self, run_id: int, limit: int = 100) -> list[dict[str, Any]]:
        """The run's attempts, oldest first (the newest ``limit``)."""
        a = schema.trigger_attempts
        query = select(a).where(a.c.run_id == run_id).order_by(a.c.id.desc()).limit(limit)

        def read(conn: Connection) -> list[dict[str, Any]]:
            rows = list(conn.execute(query))
            rows.reverse()
            return [
                {
                    "attempt": int(row.attempt),
                    "startedAt": float(row.started_at),
                    "endedAt": row.ended_at,
                    "durationMs": row.duration_ms,
                    "exitCode": row.exit_code,
                    "signal": row.signal,
                    "timedOut": bool(row.timed_out),
                    "error": row.error,
                    "stdoutTail": row.stdout_tail,
                    "stderrTail": row.stderr_tail,
                    "stdoutBytes": int(row.stdout_bytes),
                    "stderrBytes": int(row.stderr_bytes),
                }
                for row in rows
            ]

        return await self.store.read(read)

    async def retry(self, run_id: int) -> Run | None:
        """Run again now with a fresh retry budget (any state but ``running``)."""
        r = schema.trigger_runs
        now = time.time()
        statement = (
            update(r)
            .where(r.c.id == run_id, r.c.state != "running")
            .values(
                state="pending",
                next_attempt_at=now,
                updated_at=now,
                finished_at=None,
                budget_from=r.c.attempts,
            )
        )
        await self.store.write(lambda conn: conn.execute(statement).rowcount)
        return await self.get_run(run_id)

    async def counts(self, trigger_id: int | None = None) -> dict[str, int]:
        """Runs by state (of one trigger when given), every state present."""
        r = schema.trigger_runs
        query = select(r.c.state, func.count()).group_by(r.c.state)
        if trigger_id is not None:
            query = query.where(r.c.trigger_id == trigger_id)

        def read(conn: Connection) -> dict[str, int]:
            found = {state: int(n) for state, n in conn.execute(query)}
            return {state: found.get(state, 0) for state in (*OPEN_STATES, *FINAL_STATES)}

        return await self.store.read(read)
