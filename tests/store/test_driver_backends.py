"""The hot statements on the driver itself (``service.store.driver``), on both backends.

They bypass SQLAlchemy's execution but not its transaction: what they write commits and
rolls back with the rest of the store's transaction, and a failure looks to every caller as
a failure of a statement run through SQLAlchemy (its exception class, ``.orig``, the storage
health, a lost connection invalidated and replaced).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError, IntegrityError

from service.store import Store
from service.store.database import database_errors
from service.store.driver import sql
from service.store.health import is_unanswered
from tests.support.postgres import PgCluster

pytestmark = pytest.mark.anyio
URL = "http://127.0.0.1:1/mcp"

INSERT_SERVER = sql(
    "INSERT INTO servers (id, url, credential_key, created_at, updated_at) "
    "VALUES (:id, :url, '', :now, :now) RETURNING id, url"
)
COUNT = text("SELECT COUNT(*) FROM servers WHERE url LIKE 'http://driver/%'")


def server(id_: int) -> dict[str, Any]:
    return {"id": id_, "url": f"http://driver/{id_}", "now": 1.0}


async def count(store: Store) -> int:
    return int(await store.read(lambda c: c.execute(COUNT).scalar_one()))


async def test_a_driver_statement_commits_and_rolls_back_with_its_transaction(
    store: Store,
) -> None:
    def written_then_failed(conn: Connection) -> None:
        assert store.dialect.rows(conn, INSERT_SERVER, server(901)) == [(901, "http://driver/901")]
        raise RuntimeError("after the insert")

    with pytest.raises(RuntimeError):
        await store.write(written_then_failed)
    assert await count(store) == 0, "rolled back with the transaction SQLAlchemy began"

    def mixed(conn: Connection) -> list[Any]:
        rows = store.dialect.rows(conn, INSERT_SERVER, server(902))
        conn.execute(  # the same transaction sees the driver's row, and vice versa
            text("UPDATE servers SET url = 'http://driver/902b' WHERE id = 902")
        )
        return rows

    assert [tuple(r) for r in await store.write(mixed)] == [(902, "http://driver/902")]
    assert await count(store) == 1


async def test_a_driver_error_is_sqlalchemys_and_the_connection_goes_on(store: Store) -> None:
    await store.write(lambda c: store.dialect.rows(c, INSERT_SERVER, server(903)))
    with pytest.raises(IntegrityError) as raised:
        await store.write(lambda c: store.dialect.rows(c, INSERT_SERVER, server(903)))
    assert isinstance(raised.value, database_errors())
    assert raised.value.orig is not None and raised.value.orig is raised.value.__cause__
    assert "INSERT INTO servers" in str(raised.value.statement)
    assert not raised.value.connection_invalidated
    assert not store.health.failing, "a constraint is not a storage failure"
    await store.write(lambda c: store.dialect.rows(c, INSERT_SERVER, server(904)))
    assert await count(store) == 2


async def test_a_lost_connection_is_invalidated_and_the_next_write_reconnects(
    pg_cluster: PgCluster,
) -> None:
    """PostgreSQL (SQLite has no connection to lose): the server ends the session under a
    driver statement; the error says so and the pool hands the next write a new one."""
    store = Store.open(pg_cluster.fresh_database())
    try:
        await store.write(lambda c: store.dialect.rows(c, INSERT_SERVER, server(905)))
        kill = sql("SELECT pg_terminate_backend(pg_backend_pid())")
        with pytest.raises(DBAPIError) as raised:
            await store.write(lambda c: store.dialect.rows(c, kill, {}))
        assert is_unanswered(raised.value) or raised.value.connection_invalidated
        await store.write(lambda c: store.dialect.rows(c, INSERT_SERVER, server(906)))
        assert await count(store) == 2
    finally:
        await store.close()
