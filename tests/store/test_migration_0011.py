"""Migration 0011 and the creator it records, both backends: rows made before it are a
person's (the side an agent may not remove); a new subscription records who made it, and a
URI subscribed again keeps its first maker."""

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
def test_0011_records_who_made_each_subscription(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = unmigrated_database(backend, tmp_path, request)
    upgrade(url, "0010")
    now = time.time()
    run_sql(
        url,
        (
            "INSERT INTO servers (url, credential_key, created_at, updated_at)"
            " VALUES (:url, '', :now, :now)",
            {"url": URL, "now": now},
        ),
        (
            "INSERT INTO subscriptions (server_id, uri, created_at, updated_at)"
            " SELECT id, 'test://old', :now, :now FROM servers",
            {"now": now},
        ),
    )
    upgrade(url)
    assert run_sql(url, ("SELECT uri, created_by FROM subscriptions", {}))[0] == [
        ("test://old", "person")
    ]

    async def added() -> list[tuple[str, str, bool]]:
        store = Store.open(url)
        try:
            by_agent = await store.add_subscriptions(
                URL, ["test://a", "test://old"], created_by="agent"
            )
            by_person = await store.add_subscriptions(URL, ["test://p", "test://a"])
            listed = {s.uri: s.created_by for s in await store.list_subscriptions()}
            assert listed == {
                "test://old": "person",
                "test://a": "person",  # a person asked for it too: no longer the agent's
                "test://p": "person",
            }
            return [(s.uri, s.created_by, new) for s, new in [*by_agent, *by_person]]
        finally:
            await store.close()

    assert run_async(added()) == [
        ("test://a", "agent", True),
        ("test://old", "person", False),  # already there: keeps its maker
        ("test://p", "person", True),
        ("test://a", "person", False),
    ]
