"""Apply Alembic migrations (``mcpsubd`` does it on start; ``mcpsubd migrate`` on demand).

Both backends go through the asyncio driver the store uses (aiosqlite, asyncpg), so there is
no second, synchronous driver to install: Alembic runs on a sync facade of an async
connection (``AsyncConnection.run_sync``), which ``migrations/env.py`` accepts as the
``connection`` attribute.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from service.store.database import parse

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
T = TypeVar("T")


def alembic_config(url: str) -> Config:
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
    """Migrate the database at ``url`` (any form :func:`service.store.database.parse` takes)."""

    def run(conn: Connection) -> None:
        config = alembic_config(url)
        config.attributes["connection"] = conn
        command.upgrade(config, revision)

    _on_connection(url, run)


def current(url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return _on_connection(url, lambda conn: MigrationContext.configure(conn).get_current_revision())
