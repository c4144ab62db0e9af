"""Stores for store-level tests: one on the backend the test runs on (``store``, see
``database_url``), or two replicas' on one fresh PostgreSQL database (``pg_pair``)."""

from collections.abc import AsyncIterator

import pytest

from service.store.store import Store
from tests.support.postgres import PgCluster


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
