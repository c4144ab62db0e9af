"""Migration 0010 on a database written under the old redaction rule, both backends: a
``password``, ``client_secret`` or ``;token=`` value shown in clear moves to ``url_secret``,
a row already split by 0008 is re-split from its full URL (its credential key kept), and the
copies in events, errors and delivery attempts are redacted."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from service.store.migrate import upgrade
from tests.support.postgres import BACKENDS
from tests.support.store import run_sql, unmigrated_database

CLEAR = "http://127.0.0.1:1/mcp;token=t1?password=p1&x=1"
HALF = "http://127.0.0.1:1/mcp?token=t2&client_secret=c2"  # 0008 redacted token only
HALF_SHOWN_BY_0008 = "http://127.0.0.1:1/mcp?token=***&client_secret=c2"
PLAIN = "http://127.0.0.1:2/mcp?page=1"
HOOK = "http://127.0.0.1:9/h?apikey=k3&auth=a3"


@pytest.mark.parametrize("backend", BACKENDS)
def test_0010_moves_the_newly_named_credentials_apart(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = unmigrated_database(backend, tmp_path, request)
    upgrade(url, "0009")
    now = time.time()
    insert_server = (
        "INSERT INTO servers (id, url, url_secret, credential_key, last_error, created_at,"
        " updated_at) VALUES (:id, :url, :secret, :key, :error, :now, :now)"
    )
    run_sql(
        url,
        (
            insert_server,
            {"id": 1, "url": CLEAR, "secret": None, "key": "", "error": f"x {CLEAR}", "now": now},
        ),
        (
            insert_server,
            {
                "id": 2,
                "url": HALF_SHOWN_BY_0008,
                "secret": HALF,
                "key": "url:kept",
                "error": None,
                "now": now,
            },
        ),
        (
            insert_server,
            {"id": 3, "url": PLAIN, "secret": None, "key": "", "error": None, "now": now},
        ),
        (
            "INSERT INTO events (id, type, subscription_id, server_url, uri, created_at)"
            " VALUES (1, 'subscription.created', 1, :url, 'test://a', :now)",
            {"url": CLEAR, "now": now},
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
        (
            "INSERT INTO delivery_attempts (delivery_id, attempt, started_at, error)"
            " VALUES (1, 1, :now, :error)",
            {"error": f"refused by {HOOK}", "now": now},
        ),
    )
    upgrade(url)
    servers, events, targets, deliveries, attempts = run_sql(
        url,
        ("SELECT id, url, url_secret, credential_key, last_error FROM servers ORDER BY id", {}),
        ("SELECT server_url FROM events", {}),
        ("SELECT url, url_secret FROM webhook_targets", {}),
        ("SELECT last_error FROM deliveries", {}),
        ("SELECT error FROM delivery_attempts", {}),
    )
    clear_shown = "http://127.0.0.1:1/mcp;token=***?password=***&x=1"
    assert servers[0][:3] == (1, clear_shown, CLEAR) and servers[0][4] == f"x {clear_shown}"
    assert servers[0][3].startswith("url:")  # derived from the full URL, as 0008 does
    half_shown = "http://127.0.0.1:1/mcp?token=***&client_secret=***"
    assert servers[1] == (2, half_shown, HALF, "url:kept", None)
    assert servers[2] == (3, PLAIN, None, "", None)
    assert events == [(clear_shown,)]
    hook_shown = "http://127.0.0.1:9/h?apikey=***&auth=***"
    assert targets == [(hook_shown, HOOK)]
    assert deliveries == [(f"HTTP 500 from {hook_shown}",)]
    assert attempts == [(f"refused by {hook_shown}",)]
