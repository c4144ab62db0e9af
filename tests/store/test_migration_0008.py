"""Migration 0008 on a database that already has credentials in its URLs, both backends:
they move to ``url_secret``, the shown columns and the copies in events and errors are
redacted, and two credentials for one host stay two servers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from service.store.database import parse
from service.store.migrate import upgrade
from tests.support.postgres import BACKENDS, PgCluster, run_async

ALICE = "http://alice:pw1@127.0.0.1:1/mcp?token=t1"
BOB = "http://bob:pw2@127.0.0.1:1/mcp?token=t2"
PLAIN = "http://127.0.0.1:2/mcp"
HOOK = "http://u:pw3@127.0.0.1:9/h?api_key=k&x=1"


def _run(url: str, *statements: tuple[str, dict[str, Any]]) -> list[list[tuple[Any, ...]]]:
    from sqlalchemy import text
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


@pytest.mark.parametrize("backend", BACKENDS)
def test_0008_moves_url_credentials_apart(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "postgresql":
        cluster: PgCluster = request.getfixturevalue("pg_cluster")
        url = cluster.fresh_database(migrated=False)
    else:
        url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, "0007")
    now = time.time()
    insert_server = (
        "INSERT INTO servers (id, url, credential_key, last_error, created_at, updated_at) "
        "VALUES (:id, :url, '', :error, :now, :now)"
    )
    _run(
        url,
        (insert_server, {"id": 1, "url": ALICE, "error": f"HTTP 401 for {ALICE}", "now": now}),
        (insert_server, {"id": 2, "url": BOB, "error": None, "now": now}),
        (insert_server, {"id": 3, "url": PLAIN, "error": None, "now": now}),
        (
            "INSERT INTO subscriptions (id, server_id, uri, state_reason, created_at, updated_at)"
            " VALUES (1, 1, 'test://a', :reason, :now, :now)",
            {"reason": f"cannot reach {ALICE}", "now": now},
        ),
        (
            "INSERT INTO events (id, type, subscription_id, server_url, uri, created_at)"
            " VALUES (1, 'subscription.created', 1, :url, 'test://a', :now)",
            {"url": ALICE, "now": now},
        ),
        (
            "INSERT INTO webhook_targets (id, url, secret, created_at, updated_at)"
            " VALUES (1, :url, 'whsec_x', :now, :now)",
            {"url": HOOK, "now": now},
        ),
        (
            "INSERT INTO deliveries (id, target_id, webhook_id, event_id, uri, next_attempt_at,"
            " last_error, created_at, updated_at)"
            " VALUES (1, 1, 'msg_1', 1, 'test://a', :now, :error, :now, :now)",
            {"error": f"HTTP 500 from {HOOK}", "now": now},
        ),
    )
    upgrade(url)
    servers, subs, events, targets, deliveries = _run(
        url,
        ("SELECT id, url, url_secret, last_error FROM servers ORDER BY id", {}),
        ("SELECT state_reason FROM subscriptions", {}),
        ("SELECT server_url FROM events", {}),
        ("SELECT url, url_secret FROM webhook_targets", {}),
        ("SELECT last_error FROM deliveries", {}),
    )
    shown = "http://***@127.0.0.1:1/mcp?token=***"
    assert servers == [
        (1, shown, ALICE, f"HTTP 401 for {shown}"),
        (2, shown, BOB, None),  # the same shown URL: told apart by their credential_key
        (3, PLAIN, None, None),
    ]
    assert subs == [(f"cannot reach {shown}",)] and events == [(shown,)]
    hook_shown = "http://***@127.0.0.1:9/h?api_key=***&x=1"
    assert targets == [(hook_shown, HOOK)]
    assert deliveries == [(f"HTTP 500 from {hook_shown}",)]
    (keys,) = _run(url, ("SELECT credential_key FROM servers ORDER BY id", {}))
    assert keys[0] != keys[1] and keys[2] == ("",)
