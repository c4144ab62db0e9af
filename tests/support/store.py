"""Stores for store-level tests: one on the backend the test runs on (``store``, see
``database_url``), or two replicas' on one fresh PostgreSQL database (``pg_pair``)."""

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, text

from service.store.database import parse
from service.store.store import Store
from tests.support.postgres import PgCluster, run_async


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    s = Store.open(database_url)
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def pg_pair(pg_cluster: PgCluster) -> AsyncIterator[tuple[Store, Store]]:
    """Two replicas' stores on one PostgreSQL database."""
    url = pg_cluster.fresh_database()
    a, b = Store.open(url), Store.open(url)
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def bump_generation(store: Store, server_id: int, expected: int | None = None) -> int | None:
    """A new listen's generation for a link, as a test's setup (production bumps it inside
    the lease claim and the listen acknowledgement): fenced on ``expected`` when given,
    None when the stored generation moved on."""
    fence = "" if expected is None else " AND generation = :expected"
    statement = text(
        f"UPDATE servers SET generation = generation + 1 WHERE id = :id{fence} RETURNING generation"
    )

    def bump(conn: Connection) -> int | None:
        value = conn.execute(statement, {"id": server_id, "expected": expected}).scalar()
        return None if value is None else int(value)

    return await store.write(bump)


async def held_leases(store: Store, replica_id: str, ttl: float) -> dict[int, int]:
    """Renew ``replica_id``'s leases and return server id -> epoch of those it holds."""

    def renew(conn: Connection) -> dict[int, int]:
        rows = conn.execute(
            text(
                f"UPDATE servers SET lease_until = {store.dialect.now} + :ttl "
                "WHERE lease_owner = :me RETURNING id, lease_epoch"
            ),
            {"me": replica_id, "ttl": ttl},
        )
        return {int(r.id): int(r.lease_epoch) for r in rows}

    return await store.write(renew)


def unmigrated_database(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A URL of an empty, unmigrated database on ``backend`` (a migration test brings it to
    the revision before the one it tests, writes old rows, then migrates)."""
    if backend == "postgresql":
        cluster: PgCluster = request.getfixturevalue("pg_cluster")
        return cluster.fresh_database(migrated=False)
    return f"sqlite:///{tmp_path / 'old.db'}"


def run_sql(url: str, *statements: tuple[str, dict[str, Any]]) -> list[list[tuple[Any, ...]]]:
    """Each ``(sql, params)`` in one transaction on the database at ``url``; the rows each
    returned (an empty list for a statement without rows)."""
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import NullPool

    async def go() -> list[list[tuple[Any, ...]]]:
        engine = create_async_engine(parse(url).async_url, poolclass=NullPool)
        try:
            async with engine.begin() as conn:
                results = []
                for sql, params in statements:
                    result = await conn.execute(text(sql), params)
                    results.append([tuple(r) for r in result] if result.returns_rows else [])
                return results
        finally:
            await engine.dispose()

    return run_async(go())
