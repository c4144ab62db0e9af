"""PostgreSQL frozen (every process of the cluster SIGSTOPped, as a VM pause or a
frozen host does it) under two replicas, then thawed.

Was: ``/v1/status`` and ``/metrics`` hung and then logged a ``TimeoutError`` traceback,
``/readyz`` stayed 200, no replica stopped its links at 2/3 of the TTL (a renew awaited
without a deadline never failed), and after SIGCONT both replicas swapped all their links.
Now: renews time out on their own deadline and each replica stops its links before its
leases could have lapsed; status and metrics answer from memory with the storage failing;
``/readyz`` says 503; when the database returns every replica takes back what it held.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from tests.support.daemon import Daemon
from tests.support.lab import LabServer
from tests.support.poll import until
from tests.support.postgres import PgCluster

LINKS = 6
TTL = 3.0
FROZEN_S = 3 * TTL


def _held(d: Daemon) -> set[int]:
    return {link["serverId"] for link in d.api("GET", "/v1/status").json()["links"]}


def _log_time(d: Daemon, event: str) -> float:
    """When the daemon logged ``event`` first (its JSON line's timestamp, epoch seconds)."""
    for line in list(d.lines):
        if f'"event": "{event}"' in line:
            stamp = json.loads(line)["timestamp"]
            return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    raise AssertionError(f"no {event!r} in the log")


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def test_a_frozen_database_stops_the_links_in_time_and_nothing_swaps_after(
    pg_cluster: PgCluster,
    lab_server_factory: Callable[..., LabServer],
    daemon_factory: Callable[..., Daemon],
    tmp_path: Path,
) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    url = pg_cluster.fresh_database()
    env = {
        "MCPSUB_DATABASE_URL": url,
        "MCPSUB_LEASE_TTL_S": str(TTL),
        "MCPSUB_STORAGE_RECOVERY_S": "1",
    }
    a = daemon_factory(tmp_path / "a", env)
    for n in range(LINKS):
        lab.control("PUT", "/lab/resources", json={"uri": f"test://frozen/{n}", "text": "v1"})
        body = {"url": f"{lab.url}?link={n}", "uri": f"test://frozen/{n}"}
        assert a.api("POST", "/v1/subscriptions", json=body).is_success
    b = daemon_factory(tmp_path / "b", env)
    until(
        "the links split between the replicas",
        lambda: len(_held(a)) == len(_held(b)) == LINKS // 2 and not _held(a) & _held(b),
    )
    before = {"a": _held(a), "b": _held(b)}
    owners_before = dict(a.query("SELECT id, lease_owner FROM servers"))

    with pg_cluster.frozen():
        frozen_at, frozen_wall = time.monotonic(), time.time()
        for d in (a, b):
            started = time.monotonic()
            status = d.api("GET", "/v1/status")
            assert status.status_code == 200 and time.monotonic() - started < 7, status.text
        for d in (a, b):
            ready = until(
                "readyz 503",
                lambda d=d: (r := d.api("GET", "/readyz")).status_code == 503 and r,
            )
            assert ready.json()["errorCode"] == "STORAGE_FAILING", ready.text
            until("the links stopped before their leases lapse", lambda d=d: not _held(d))
            stopped = _log_time(d, "leases about to expire without renewal; stopping links")
            # The local deadline: 2/3 of the TTL after the last renew, which began at most a
            # third of the TTL before the freeze (plus a loaded host's slack).
            assert stopped - frozen_wall < TTL + 2, stopped - frozen_wall
            status = d.api("GET", "/v1/status").json()
            assert status["storage"]["ok"] is False and status["countsFromMemory"] is True
            metrics = d.api("GET", "/metrics")
            assert metrics.status_code == 200
            assert _metric(metrics.text, "mcpsub_storage_ok") == 0
            assert _metric(metrics.text, "mcpsub_lease_expired_locally_total") == LINKS // 2
        until("the freeze outlasted the TTL", lambda: time.monotonic() - frozen_at > FROZEN_S)

    for d in (a, b):
        until("ready again", lambda d=d: d.api("GET", "/readyz").status_code == 200)
    until(
        "each replica holds what it held",
        lambda: _held(a) == before["a"] and _held(b) == before["b"],
    )
    assert dict(a.query("SELECT id, lease_owner FROM servers")) == owners_before, "no swap"
    for d in (a, b):
        noisy = [line for line in d.lines if "Traceback" in line or '"exception"' in line]
        assert noisy == [], noisy[:3]
    assert a.stop() == 0 and b.stop() == 0
