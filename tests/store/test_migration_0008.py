"""Migration 0008 on a database that already has credentials in its URLs, both backends:
they move to ``url_secret``, the shown columns and the copies in events and errors are
redacted, and two credentials for one host stay two servers."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from service.store.migrate import upgrade
from tests.support.postgres import BACKENDS
from tests.support.store import run_sql, unmigrated_database

ALICE = "http://alice:pw1@127.0.0.1:1/mcp?token=t1"
BOB = "http://bob:pw2@127.0.0.1:1/mcp?token=t2"
PLAIN = "http://127.0.0.1:2/mcp"
HOOK = "http://u:pw3@127.0.0.1:9/h?api_key=k&x=1"


@pytest.mark.parametrize("backend", BACKENDS)
def test_0008_moves_url_credentials_apart(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = unmigrated_database(backend, tmp_path, request)
    upgrade(url, "0007")
    now = time.time()
    insert_server = (
        "INSERT INTO servers (id, url, credential_key, last_error, created_at, updated_at) "
        "VALUES (:id, :url, '', :error, :now, :now)"
    )
    run_sql(
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
    servers, subs, events, targets, deliveries = run_sql(
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
    (keys,) = run_sql(url, ("SELECT credential_key FROM servers ORDER BY id", {}))
    assert keys[0] != keys[1] and keys[2] == ("",)
