"""Migration 0014, both backends: servers get ``discovered`` (NULL for existing rows: their
next start discovers), which a listen's acknowledgement fills, fenced on its generation, and
``stored_discover`` reads."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from service.store import Store
from service.store.migrate import upgrade
from tests.support.postgres import BACKENDS, run_async
from tests.support.store import run_sql, unmigrated_database

URL = "http://127.0.0.1:1/mcp"


@pytest.mark.parametrize("backend", BACKENDS)
def test_0014_keeps_a_discover_result_with_the_acknowledgement(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = unmigrated_database(backend, tmp_path, request)
    upgrade(url, "0013")
    now = time.time()
    run_sql(
        url,
        (
            "INSERT INTO servers (url, credential_key, created_at, updated_at)"
            " VALUES (:url, '', :now, :now)",
            {"url": URL, "now": now},
        ),
    )
    upgrade(url)
    ((server_id,),) = run_sql(url, ("SELECT id FROM servers", {}))[0]

    async def kept() -> tuple[str | None, str | None, str | None]:
        store = Store.open(url)
        try:
            before = await store.stored_discover(server_id)
            acked = await store.listen_acknowledged(server_id, 0, [], '{"kept": 1}')
            assert acked is not None
            after = await store.stored_discover(server_id)
            fenced = await store.listen_acknowledged(server_id, 0, [], '{"kept": 2}')
            assert fenced is None  # another generation: nothing written
            return before, after, await store.stored_discover(server_id)
        finally:
            await store.close()

    assert run_async(kept()) == (None, '{"kept": 1}', '{"kept": 1}')
