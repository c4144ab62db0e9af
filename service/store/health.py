"""Is the database taking writes? A daemon-level condition, not a per-subscription one.

When the disk fills, every write fails with "database or disk is full" while reads keep
working; without this the daemon would show ``active`` everywhere and serve stale content
in silence. The store reports every failed and every successful write here;
``/v1/status``, ``/readyz``, ``/metrics`` and a ``daemon.storage`` event read it.

:data:`FAULT_FILE_ENV` is a test hook: while the file it names exists, every
INSERT/UPDATE/DELETE fails exactly as SQLite fails on a full disk (SQLITE_FULL), so the
whole path is exercised on a real daemon without filling a real disk.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any

FAULT_FILE_ENV = "MCPSUB_TEST_STORAGE_FULL_FILE"
HEALTH_KEY = "mcpsub.health"
"""``Connection.info`` key: the :class:`StorageHealth` that statements run on the driver
itself (:mod:`service.store.driver`) report their storage failures to."""
FAULT_KEY = "mcpsub.fault_file"
"""``Connection.info`` key: the test hook's file, for statements run on the driver itself."""
fault_armed = False
"""Some engine of this process has the test hook (so the driver looks for its file)."""
_STORAGE_MARKERS = (
    "database or disk is full",
    "disk i/o error",
    "no space left",
    "could not extend file",
    "disk quota exceeded",
    "readonly database",
)
MAX_PENDING_EVENTS = 16
_WRITES = ("insert", "update", "delete", "replace")


def is_storage_failure(exc: BaseException) -> bool:
    """True for errors that mean "the database cannot write" (not a lock, not a bug)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(current).lower()
        if any(marker in text for marker in _STORAGE_MARKERS):
            return True
        if type(current).__name__ == "DiskFullError":  # asyncpg, SQLSTATE 53100
            return True
        current = getattr(current, "orig", None) or current.__cause__
    return False


_UNANSWERED = frozenset(
    {
        "TimeoutError",  # builtin, asyncio's, and SQLAlchemy's pool timeout
        "ConnectionDoesNotExistError",  # asyncpg: the connection was lost mid-statement
        "CannotConnectNowError",  # asyncpg: the server is starting or shutting down
        "ConnectionFailureError",
    }
)


def is_unanswered(exc: BaseException) -> bool:
    """True for errors that mean "the database did not answer" (refused, lost, timed out):
    like a full disk, a daemon-level condition, not a bug of the request at hand."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionError) or type(current).__name__ in _UNANSWERED:
            return True
        if getattr(current, "connection_invalidated", False):
            return True
        current = getattr(current, "orig", None) or current.__cause__
    return False


@dataclass
class StorageHealth:
    """One failing period from the first failed write until writes have succeeded for
    :attr:`recovery_s` without a failure in between.

    On a really full disk some writes still go through (an ``UPDATE`` that rewrites a page
    the WAL has room for, a lease renew) while others fail (a new revision): flipping to
    "ok" at every success made the status flap five times in 25 s while the disk stayed full.
    """

    failing: bool = False
    error: str | None = None
    since: float | None = None
    failures_total: int = 0
    recoveries_total: int = 0
    pending_events: list[dict[str, Any]] = field(default_factory=list)
    """``daemon.storage`` event data to record once a write can carry it (bounded)."""
    recovery_s: float = 0.0
    """How long writes must go through without a failure before the period ends."""
    last_failure: float = 0.0
    """Monotonic time of the last failed write."""

    def failed(self, exc: BaseException) -> None:
        self.failures_total += 1
        self.last_failure = time.monotonic()
        text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        self.error = (text[0] if text else type(exc).__name__)[:300]
        if not self.failing:
            self.failing = True
            self.since = time.time()
            self._queue({"state": "failing", "error": self.error, "since": self.since})

    def succeeded(self) -> None:
        if self.failing and time.monotonic() - self.last_failure >= self.recovery_s:
            self.failing = False
            self.recoveries_total += 1
            self._queue(
                {
                    "state": "ok",
                    "error": self.error,
                    "since": self.since,
                    "recoveredAt": time.time(),
                    "failedWrites": self.failures_total,
                }
            )

    def _queue(self, data: dict[str, Any]) -> None:
        self.pending_events = [*self.pending_events, data][-MAX_PENDING_EVENTS:]

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": not self.failing,
            "error": self.error if self.failing else None,
            "since": self.since if self.failing else None,
            "failuresTotal": self.failures_total,
        }


def writes(statement: str) -> bool:
    """Whether a statement writes: it starts with a write, or it is a ``WITH`` whose parts
    write (PostgreSQL's one-statement revision write, ``dialect.RECORD_READ_PG``)."""
    lowered = statement.lstrip().lower()
    if lowered.startswith(_WRITES):
        return True
    return lowered.startswith("with") and any(f"{w} " in lowered for w in ("insert into", "update"))


def install(engine: Any, health: StorageHealth) -> None:
    """Report storage failures of ``engine`` (a sync Engine) to ``health``; add the fault hook
    when the test environment asks for it. Both also reach the statements that bypass
    SQLAlchemy's execution (:mod:`service.store.driver`) through each connection's ``info``."""
    from sqlalchemy import event

    def on_error(context: Any) -> None:
        if is_storage_failure(context.original_exception):
            health.failed(context.original_exception)

    event.listen(engine, "handle_error", on_error)
    fault_file = os.environ.get(FAULT_FILE_ENV)
    if fault_file:
        global fault_armed
        fault_armed = True

    def on_connect(_dbapi_connection: Any, record: Any) -> None:
        record.info[HEALTH_KEY] = health
        if fault_file:
            record.info[FAULT_KEY] = fault_file

    event.listen(engine, "connect", on_connect)
    if fault_file:
        from sqlalchemy.exc import OperationalError

        def fault(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
            if writes(statement) and os.path.exists(fault_file):
                # Wrapped as SQLAlchemy wraps a driver's error, on either backend.
                full = sqlite3.OperationalError("database or disk is full")
                raise OperationalError(statement, None, full)

        event.listen(engine, "before_cursor_execute", fault)
