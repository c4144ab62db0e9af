"""A `Store` opened on the backend the test runs on (see ``database_url``), closed afterwards."""

from collections.abc import AsyncIterator

import pytest

from service.store.store import Store


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    s = Store.open(database_url)
    try:
        yield s
    finally:
        await s.close()
