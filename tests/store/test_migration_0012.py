"""Migration 0012 on a database written under the rule before it, both backends: values under
the newly listed names (``code``, ``pat``, ``ticket`` …) move to ``url_secret``, and echoed
``Bearer``/``Basic`` credentials in stored errors and response bodies are cut."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from service.store.migrate import upgrade
from tests.support.postgres import BACKENDS
from tests.support.store import run_sql, unmigrated_database

CLEAR = "http://127.0.0.1:1/mcp?code=c1&pat=p1&Session_Id=s1&page=2"
SHOWN = "http://127.0.0.1:1/mcp?code=***&pat=***&Session_Id=***&page=2"
HOOK = "http://127.0.0.1:9/h?ticket=t3"


@pytest.mark.parametrize("backend", BACKENDS)
def test_0012_redacts_the_newly_named_credentials(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = unmigrated_database(backend, tmp_path, request)
    upgrade(url, "0011")
    now = time.time()
    run_sql(
        url,
        (
            "INSERT INTO servers (id, url, credential_key, last_error, created_at, updated_at)"
            " VALUES (1, :url, '', :error, :now, :now)",
            {"url": CLEAR, "error": "denied: Bearer abc123XYZ", "now": now},
        ),
        (
            "INSERT INTO webhook_targets (id, url, secret, created_at, updated_at)"
            " VALUES (1, :url, 'whsec_x', :now, :now)",
            {"url": HOOK, "now": now},
        ),
        (
            "INSERT INTO deliveries (id, target_id, webhook_id, event_id, uri, next_attempt_at,"
            " created_at, updated_at) VALUES (1, 1, 'msg_1', 1, 'test://a', :now, :now, :now)",
            {"now": now},
        ),
        (
            "INSERT INTO delivery_attempts (delivery_id, attempt, started_at, response_body)"
            " VALUES (1, 1, :now, :body)",
            {"body": f"you posted to {HOOK} with Basic dTpTRUtSSVQ=", "now": now},
        ),
    )
    upgrade(url)
    servers, targets, attempts = run_sql(
        url,
        ("SELECT url, url_secret, last_error FROM servers", {}),
        ("SELECT url, url_secret FROM webhook_targets", {}),
        ("SELECT response_body FROM delivery_attempts", {}),
    )
    assert servers == [(SHOWN, CLEAR, "denied: Bearer ***")]
    assert targets == [("http://127.0.0.1:9/h?ticket=***", HOOK)]
    assert attempts == [("you posted to http://127.0.0.1:9/h?ticket=*** with Basic ***",)]
