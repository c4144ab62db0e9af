"""A call cancelled during asyncpg's implicit ``BEGIN`` must not leave a pooled connection
inside a hidden transaction (``service.store.pgpool``).

Before the guard, the next user of such a connection wrote into a ``SAVEPOINT`` of the
hidden transaction: its "commit" released the savepoint, nothing became visible to anyone
else, and the writes were rolled back when the connection closed. In the replica tests
this was a lease take that the replica logged and the database never kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from service.store import Store
from service.store.database import parse
from tests.support.postgres import PgCluster

pytestmark = pytest.mark.anyio


@pytest.fixture
async def pg_store(pg_cluster: PgCluster) -> AsyncIterator[tuple[Store, str]]:
    url = pg_cluster.fresh_database()
    store = Store.open(url)
    try:
        yield store, url
    finally:
        await store.close()


def insert(server_id: int) -> Any:
    def transaction(conn: Connection) -> None:
        conn.execute(
            text(
                "INSERT INTO servers (id, url, credential_key, created_at, updated_at) "
                "VALUES (:id, :url, '', 1, 1)"
            ),
            {"id": server_id, "url": f"http://pgpool/{server_id}"},
        )

    return transaction


async def seen_elsewhere(url: str) -> set[int]:
    """The rows another session sees: what really committed."""
    engine = create_async_engine(parse(url).async_url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                text("SELECT id FROM servers WHERE url LIKE 'http://pgpool/%'")
            )
            return {int(r[0]) for r in rows}
    finally:
        await engine.dispose()


async def cancel_during_begin(store: Store) -> None:
    """Return a pooled connection as a cancelled call does: asyncpg's ``BEGIN`` sent, the
    task cancelled before the transaction start returned (asyncpg keeps it as its top
    transaction, SQLAlchemy's adapter never recorded it, so the pool's reset rolls back
    nothing)."""
    async with store.engine.connect() as conn:
        raw = (await conn.get_raw_connection()).driver_connection
        assert raw is not None
        start = asyncio.ensure_future(raw.transaction().start())
        await asyncio.sleep(0)
        start.cancel()
        with pytest.raises(asyncio.CancelledError):
            await start
        assert raw._top_xact is not None, "the state this test means to produce"


async def test_a_write_after_a_cancelled_begin_commits_for_everyone(
    pg_store: tuple[Store, str],
) -> None:
    store, url = pg_store
    await cancel_during_begin(store)
    # The pool hands its connections out first in, first out: ten writes in a row pass
    # through the dirty one and every other.
    for n in range(10):
        await store.write(insert(n))
    assert await seen_elsewhere(url) == set(range(10)), "written into a hidden transaction"
