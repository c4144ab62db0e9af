"""Triggers and their run outbox, on the daemon's database.

:func:`enqueue_sync` runs inside the transaction that records a new revision (one of
``Store.event_sinks``, as the webhook outbox): the revision, its event and one run row per
matching trigger commit together or not at all. The runner works from these rows only.

Run states::

    pending --claimed--> running --exit 0--> succeeded
       ^                    |  \\--failure--> failed (next_attempt_at: backoff) --...--> dead
       |                    \\--daemon gone (restart, kill -9)--> pending again (at least once)
       \\--(mode latest: a newer revision of the same URI while not running)--> superseded

A ``running`` row is never superseded: the run in flight finishes and is recorded, and the
newest revision waits behind it (a burst gives one run in flight plus one with the newest
content).
"""

from __future__ import annotations

import fnmatch
import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Connection

from service.store.dialect import Dialect
from service.store.driver import sql
from service.store.records import Event, from_row

OPEN_STATES = ("pending", "failed", "running")
FINAL_STATES = ("succeeded", "dead", "superseded")
STATES = (*OPEN_STATES, *FINAL_STATES)
MODES = ("all", "latest")


@dataclass(frozen=True, slots=True)
class Trigger:
    id: int
    name: str | None
    program: str
    args: list[str]
    uri_patterns: list[str]
    mode: str
    concurrency: int
    timeout_s: float
    env: list[str]
    """``NAME`` (passed through from the daemon's environment) or ``NAME=VALUE``."""
    cwd: str | None
    enabled: bool
    created_by: str
    created_at: float
    updated_at: float

    def matches(self, uri: str) -> bool:
        return wants(self.uri_patterns, uri)

    def env_names(self) -> list[str]:
        """The names it sets or passes through, never a value (what a listing shows)."""
        return [entry.split("=", 1)[0] for entry in self.env]

    def env_values(self) -> dict[str, str]:
        """The ``NAME=VALUE`` entries (the runner's; redacted from output tails)."""
        return dict(entry.split("=", 1) for entry in self.env if "=" in entry)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        # Values given with --env NAME=VALUE may be secrets: a listing names them only.
        data["env"] = self.env_names()
        return data


def wants(uri_patterns: list[str], uri: str) -> bool:
    """Whether a trigger with these globs runs for ``uri`` (no glob: every URI)."""
    if not uri_patterns:
        return True
    return any(fnmatch.fnmatchcase(uri, pattern) for pattern in uri_patterns)


@dataclass(frozen=True, slots=True)
class Run:
    id: int
    trigger_id: int
    event_id: int | None
    revision_id: int | None
    subscription_id: int | None
    uri: str
    state: str
    attempts: int
    budget_from: int
    next_attempt_at: float
    last_exit: int | None
    last_signal: str | None
    last_error: str | None
    created_at: float
    updated_at: float
    finished_at: float | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def trigger_from_row(row: Any) -> Trigger:
    m = row._mapping
    return from_row(
        Trigger,
        row,
        args=list(json.loads(m["args"] or "[]")),
        uri_patterns=list(json.loads(m["uri_patterns"] or "[]")),
        env=list(json.loads(m["env"] or "[]")),
        enabled=bool(m["enabled"]),
        concurrency=int(m["concurrency"]),
        timeout_s=float(m["timeout_s"]),
    )


def run_from_row(row: Any) -> Run:
    return from_row(Run, row)


ENABLED_TRIGGERS = sql("SELECT id, mode, uri_patterns FROM triggers WHERE enabled = 1")
SUPERSEDE = sql(
    "UPDATE trigger_runs SET state = 'superseded', updated_at = :now, finished_at = :now,"
    " last_error = 'superseded by a newer revision' "
    "WHERE trigger_id = :trigger_id AND uri = :uri AND state IN ('pending', 'failed')"
)
INSERT_RUN = sql(
    "INSERT INTO trigger_runs (trigger_id, event_id, revision_id, subscription_id, uri, state,"
    " attempts, budget_from, next_attempt_at, created_at, updated_at) VALUES (:trigger_id,"
    " :event_id, :revision_id, :subscription_id, :uri, 'pending', 0, 0, :now, :now, :now)"
)


def enqueue_sync(conn: Connection, event: Event, dialect: Dialect) -> int:
    """Insert one run per enabled trigger whose globs match; the revision's transaction."""
    triggers = dialect.rows(conn, ENABLED_TRIGGERS, {})
    if not triggers:
        return 0
    uri = event.uri or ""
    now = time.time()
    count = 0
    for trigger_id, mode, uri_patterns in triggers:
        if not wants(json.loads(uri_patterns or "[]"), uri):
            continue
        if mode == "latest":
            dialect.rows(conn, SUPERSEDE, {"now": now, "trigger_id": trigger_id, "uri": uri})
        dialect.rows(
            conn,
            INSERT_RUN,
            {
                "trigger_id": trigger_id,
                "event_id": event.id,
                "revision_id": event.revision_id,
                "subscription_id": event.subscription_id,
                "uri": uri,
                "now": now,
            },
        )
        count += 1
    return count


@dataclass(frozen=True, slots=True)
class TriggerSink:
    """The store's event sink that enqueues runs; equal for one dialect, so a store gets one
    however many repositories it has."""

    dialect: Dialect

    def __call__(self, conn: Connection, event: Event) -> int:
        return enqueue_sync(conn, event, self.dialect)
