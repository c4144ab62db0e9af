"""Apply Alembic migrations (``mcpsubd`` does it on start; ``mcpsubd migrate`` on demand).

Both backends go through the asyncio driver the store uses (aiosqlite, asyncpg), so there is
no second, synchronous driver to install: Alembic runs on a sync facade of an async
connection (``AsyncConnection.run_sync``), which ``migrations/env.py`` accepts as the
``connection`` attribute.

Alembic is imported only when there is something to migrate: the daemon checks the stored
revision against the newest script first (:func:`upgrade_if_needed`), because importing
Alembic (and Mako, and its PostgreSQL DDL module) would keep megabytes of a daemon's RSS for
a check that almost always finds nothing to do (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import Connection, inspect, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from service.store.database import parse
from service.store.dialect import dialect_for

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
T = TypeVar("T")
if TYPE_CHECKING:
    from alembic.config import Config

_REVISION = re.compile(r'^revision(?:: str)? = "([^"]+)"$', re.MULTILINE)
_DOWN_REVISION = re.compile(r'^down_revision(?:: [^=]+)? = (None|"[^"]+")$', re.MULTILINE)


def script_head() -> str | None:
    """The newest migration's revision, read from ``migrations/versions`` without Alembic;
    None when the scripts do not name exactly one head in the plain form they all use (the
    caller then asks Alembic)."""
    revisions: set[str] = set()
    downs: set[str] = set()
    for path in (MIGRATIONS_DIR / "versions").glob("[0-9]*.py"):
        source = path.read_text(encoding="utf-8")
        revision, down = _REVISION.findall(source), _DOWN_REVISION.findall(source)
        if len(revision) != 1 or len(down) != 1:
            return None
        revisions.add(revision[0])
        if down[0] != "None":
            downs.add(down[0].strip('"'))
    heads = revisions - downs
    return heads.pop() if len(heads) == 1 else None


def stored_revision(conn: Connection) -> str | None:
    """The revision recorded in ``alembic_version`` (None: never migrated)."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    rows = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    return str(rows[0]) if len(rows) == 1 else None


RACE_ATTEMPTS = 3


def lost_race(exc: BaseException) -> bool:
    """A migration that failed because another process created the same thing at the same
    time (a start without the lock, e.g. an older replica): migrating again finds it done."""
    text = str(exc).lower()
    return any(
        marker in text
        for marker in ("already exists", "duplicate key value", "pg_type_typname_nsp_index")
    )


def upgrade_if_needed(url: str) -> None:
    """:func:`upgrade` to head, unless the database already records the newest script's
    revision (then neither Alembic nor tenacity is even imported). A start that lost a race
    with another process migrating the same database tries again (the winner's work is then
    seen): tenacity's ``Retrying`` states that policy (which errors, how many tries, the last
    error re-raised) instead of a hand-written loop."""
    head = script_head()

    def current() -> bool:
        return head is not None and _on_connection(url, stored_revision) == head

    if current():
        return
    from tenacity import Retrying, retry_if_exception, stop_after_attempt

    retrying = Retrying(
        retry=retry_if_exception(lost_race), stop=stop_after_attempt(RACE_ATTEMPTS), reraise=True
    )
    for attempt in retrying:
        with attempt:
            if attempt.retry_state.attempt_number == 1 or not current():
                upgrade(url)


def alembic_config(url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # Alembic's ini interpolation treats % specially (URL-encoded passwords have them).
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def _on_connection(url: str, fn: Callable[[Connection], T]) -> T:
    """Run ``fn`` on a sync facade of an async connection, in a transaction.

    ``asyncio.run`` needs a thread without a running loop: callers inside a loop are moved
    to a short-lived thread (migrations run once at start-up)."""
    database = parse(url)

    async def go() -> T:
        engine = create_async_engine(database.async_url, poolclass=NullPool)
        try:
            async with engine.begin() as conn:
                return await conn.run_sync(fn)
        finally:
            await engine.dispose()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(go())
    box: list[T] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            box.append(asyncio.run(go()))
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=worker, name="mcpsub-migrate")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return box[0]


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at ``url`` (any form :func:`service.store.database.parse` takes).

    ``"head"`` on an empty database creates it at the newest revision in one step
    (:func:`_create_if_empty`) instead of running every migration: a daemon's first start then
    does not even import Alembic. Naming the newest revision itself runs the migrations."""
    dialect = dialect_for(parse(url))
    head = script_head() if revision == "head" else None

    def run(conn: Connection) -> None:
        dialect.migration_lock(conn)  # one migrating process at a time (PostgreSQL)
        if head is not None and _create_if_empty(conn, head):
            return
        from alembic import command

        config = alembic_config(url)
        config.attributes["connection"] = conn
        command.upgrade(config, revision)

    _on_connection(url, run)


def _create_if_empty(conn: Connection, head: str) -> bool:
    """The tables of :mod:`service.store.schema`, then ``head`` recorded as Alembic's
    ``stamp`` does, when the database has no table yet (False: nothing done).
    tests/store/test_schema_at_head.py proves this is the schema every migration in turn
    makes, on both backends; the caller holds the migration lock."""
    if inspect(conn).get_table_names():
        return False
    from service.store import schema

    schema.metadata.create_all(conn)
    # Alembic's own version table: one primary-key column, named as Alembic names it.
    conn.execute(
        text(
            "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
            "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"
        )
    )
    conn.execute(text("INSERT INTO alembic_version (version_num) VALUES (:head)"), {"head": head})
    return True


def current(url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return _on_connection(url, lambda conn: MigrationContext.configure(conn).get_current_revision())
