"""Helpers for the webhook tests against the real daemon and the real lab server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.support.daemon import Daemon
from tests.support.lab import LabServer
from tests.support.poll import until

SLOW_LAB = {"MCP_TEST_UPDATE_DELAY_SECONDS": "600"}
FAST = {
    "MCPSUB_WEBHOOK_SCHEDULE": "0,0.2,0.4",
    "MCPSUB_WEBHOOK_JITTER": "0",
    "MCPSUB_WEBHOOK_TIMEOUT_S": "10",
    "MCPSUB_WEBHOOK_BREAKER_FAILURES": "1000",
}


def put(lab: LabServer, uri: str, text: str) -> None:
    lab.control(
        "PUT", "/lab/resources", json={"uri": uri, "text": text, "notify": True}
    ).raise_for_status()


def subscribe(d: Daemon, url: str, uri: str) -> dict[str, Any]:
    response = d.api("POST", "/v1/subscriptions", json={"url": url, "uri": uri})
    assert response.status_code in (200, 201), response.text
    return response.json()


def add_target(d: Daemon, url: str, **fields: Any) -> dict[str, Any]:
    response = d.api("POST", "/v1/webhooks", json={"url": url, **fields})
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["secret"].startswith("whsec_")
    return body


def deliveries(d: Daemon, **params: Any) -> list[dict[str, Any]]:
    response = d.api("GET", "/v1/deliveries", params={"limit": 1000, **params})
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["deliveries"]
    return found


def wait_deliveries(
    d: Daemon,
    predicate: Callable[[list[dict[str, Any]]], bool],
    timeout: float = 15.0,
    **params: Any,
) -> list[dict[str, Any]]:
    def check() -> list[dict[str, Any]] | None:
        found = deliveries(d, **params)
        return found if predicate(found) else None

    result: list[dict[str, Any]] = until(f"deliveries {params}", check, timeout)
    return result


def wait_revision(d: Daemon, uri: str, revision: int, timeout: float = 15.0) -> None:
    def check() -> bool:
        response = d.api("GET", "/v1/content", params={"uri": uri})
        return response.status_code == 200 and response.json()["revision"] >= revision

    until(f"{uri} revision {revision}", check, timeout)


def assert_secret_hidden(d: Daemon, secret: str) -> None:
    """Neither the daemon's log nor a listing shows ``secret`` (nor its key part)."""
    key = secret.removeprefix("whsec_")
    log = "\n".join(d.lines)
    assert key not in log, "a webhook secret appeared in the daemon log"
    for path in ("/v1/webhooks", "/v1/status", "/v1/deliveries", "/v1/events"):
        assert key not in d.api("GET", path).text, f"a webhook secret appeared in {path}"
