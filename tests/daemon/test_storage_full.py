"""Issue 11 point 6 on a real daemon: a database that refuses writes (SQLITE_FULL through the
store's fault hook) is a daemon-level condition, and the update that could not be stored is
read again and stored once writes succeed, without a new notification."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.daemon import Daemon
from tests.support.lab import LabServer

SLOW = {"MCP_TEST_UPDATE_DELAY_SECONDS": "600"}


def _until(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not reached")


def _text(d: Daemon, uri: str) -> str | None:
    response = d.api("GET", "/v1/content", params={"uri": uri})
    return response.json()["text"] if response.status_code == 200 else None


def _metric(d: Daemon, name: str) -> float:
    for line in d.api("GET", "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def test_full_disk_is_reported_and_the_lost_update_is_stored_after_recovery(
    lab_server_factory: Callable[..., LabServer],
    daemon_factory: Callable[..., Daemon],
    tmp_path: Path,
) -> None:
    full = tmp_path / "disk-full"
    lab = lab_server_factory(SLOW)
    uri = "test://doc/full"
    lab.control("PUT", "/lab/resources", json={"uri": uri, "text": "v1", "notify": False})
    d = daemon_factory(env={"MCPSUB_TEST_STORAGE_FULL_FILE": str(full)})
    created = d.api("POST", "/v1/subscriptions", json={"url": lab.url, "uri": uri})
    assert created.status_code == 201
    _until(lambda: _text(d, uri) == "v1")
    assert d.api("GET", "/v1/status").json()["storage"]["ok"] is True

    full.touch()  # from now on every INSERT/UPDATE/DELETE fails with SQLITE_FULL
    lab.control("PUT", "/lab/resources", json={"uri": uri, "text": "v2", "notify": True})
    status = _until(
        lambda: (s := d.api("GET", "/v1/status").json())["storage"]["ok"] is False and s
    )
    assert "disk is full" in status["storage"]["error"]
    ready = d.api("GET", "/readyz")
    assert ready.status_code == 503 and ready.json()["errorCode"] == "STORAGE_FAILING"
    assert ready.json()["status"] == "degraded"
    assert _metric(d, "mcpsub_storage_ok") == 0
    assert _text(d, uri) == "v1"  # stale, and status says why
    text_status = d.ctl("status")
    assert "storage:        FAILING" in text_status.stdout
    assert d.api("GET", "/healthz").status_code == 200

    full.unlink()  # space is back: no new notification, yet v2 must arrive
    _until(lambda: _text(d, uri) == "v2")
    _until(lambda: d.api("GET", "/readyz").status_code == 200)
    assert d.api("GET", "/v1/status").json()["storage"]["ok"] is True
    assert _metric(d, "mcpsub_storage_ok") == 1
    assert _metric(d, "mcpsub_storage_recoveries_total") >= 1
    events = d.api("GET", "/v1/events", params={"type": "daemon.storage"}).json()["events"]
    states = [e["data"]["state"] for e in events if e["type"] == "daemon.storage"]
    assert states[-2:] == ["failing", "ok"], events
    assert d.stop() == 0
