"""Chaos: SIGKILL mcpsubd at random moments while updates and webhook deliveries flow.

After a few kills and restarts on the same state directory, the end state must be exactly
what an uninterrupted run would give: the final content reached, event ids and revision
numbers without gaps or repeats, every delivery made at least once with one stable
``webhook-id`` (and the same body each time), and a SQLite file that passes
``PRAGMA integrity_check``. The seed is in every assertion message, so a failure replays.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from collections import defaultdict
from typing import Any

from tests.hostile.helpers import put, subscribe, wait_text
from tests.support.daemon import Daemon
from tests.support.poll import until
from tests.webhooks.receiver import Receiver

ITERATIONS = 3
WEBHOOK_ENV = {
    "MCPSUB_WEBHOOK_SCHEDULE": "0,0.2,0.4,0.8,1,1,1,1",
    "MCPSUB_WEBHOOK_JITTER": "0",
    "MCPSUB_WEBHOOK_TIMEOUT_S": "5",
    "MCPSUB_WEBHOOK_BREAKER_FAILURES": "1000",
}


def all_events(d: Daemon) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    after = 0
    while True:
        page = d.api("GET", "/v1/events", params={"after": after, "limit": 1000}).json()
        events += page["events"]
        if not page["events"]:
            return events
        after = page["nextAfter"]


def test_sigkill_during_updates_and_deliveries_loses_nothing(
    lab_server_factory, daemon_factory, receiver: Receiver
) -> None:
    seed = int(os.environ.get("CHAOS_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    why = f"(CHAOS_SEED={seed})"
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    uri = "test://chaos"
    put(lab, uri, "v0")
    d = daemon_factory(env=WEBHOOK_ENV)
    target = d.api("POST", "/v1/webhooks", json={"url": receiver.url("/hook")}).json()
    receiver.expect_secret("/hook", target["secret"])
    subscribe(d, lab.url, uri)
    wait_text(d, uri, "v0")

    version = 0
    for _ in range(ITERATIONS):
        # Kill at a random moment while updates (and so reads, revisions, deliveries) flow.
        killer = threading.Timer(rng.uniform(0.05, 0.8), d.kill)
        killer.start()
        while d.proc is not None and d.proc.poll() is None:
            version += 1
            put(lab, uri, f"v{version}")
            time.sleep(rng.uniform(0.0, 0.03))
        killer.join()
        d = daemon_factory(state_dir=d.state_dir, env=WEBHOOK_ENV)

    put(lab, uri, "final")
    wait_text(d, uri, "final", timeout=30)

    events = all_events(d)
    ids = [e["id"] for e in events]
    assert ids == list(range(ids[0], ids[0] + len(ids))), f"event ids have gaps {why}"
    updates = [e for e in events if e["type"] == "resource.updated" and e["uri"] == uri]
    revisions = [e["revision"] for e in updates]
    assert revisions == list(range(1, len(revisions) + 1)), f"revisions {revisions} {why}"

    def all_delivered() -> list[dict[str, Any]] | None:
        found = d.api("GET", "/v1/deliveries", params={"limit": 1000}).json()["deliveries"]
        done = len(found) == len(updates) and all(x["state"] == "delivered" for x in found)
        return found if done else None

    delivered = until(f"every delivery delivered {why}", all_delivered, timeout=30)
    received: dict[str, list[bytes]] = defaultdict(list)
    for request in receiver.received("/hook"):
        received[request.webhook_id].append(request.body)
    wanted = {x["webhookId"] for x in delivered}
    assert wanted <= set(received), f"deliveries never received {wanted - set(received)} {why}"
    assert set(received) <= wanted, f"requests with unknown webhook-ids {why}"
    for webhook_id, bodies in received.items():
        assert len(set(bodies)) == 1, f"{webhook_id} was sent with different bodies {why}"
    got = {r.json["revision"] for r in receiver.received("/hook")}
    assert got == set(revisions), f"revisions never delivered {set(revisions) - got} {why}"

    d.stop()
    with sqlite3.connect(d.state_dir / "mcpsub.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",), why
