"""What an idle single-replica daemon still wakes for: its lease passes run every
SINGLE_REPLICA_PASS_S while the storage is healthy (a third of the TTL with replicas or while
writes fail), and the webhook dispatcher runs a pass for committed revisions only."""

from __future__ import annotations

import asyncio
from pathlib import Path

from service.daemon.leases import SINGLE_REPLICA_PASS_S, LeaseKeeper
from service.store.dialect import POSTGRESQL
from service.store.records import Event
from service.webhooks.dispatcher import Dispatcher, WebhookSettings
from tests.api.fakes import migrated_store


def _event(type_: str, uri: str | None = "test://a") -> Event:
    return Event(1, type_, 1, "http://127.0.0.1:1/mcp", uri, None, None, {}, 1.0)


def test_the_lease_passes_of_a_lone_healthy_sqlite_replica_are_a_safety_net(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        store = migrated_store(tmp_path / "mcpsub.db")
        keeper = LeaseKeeper(store, object(), 15.0, "r")  # type: ignore[arg-type]  # no pass runs
        assert keeper.pass_interval_s == SINGLE_REPLICA_PASS_S > keeper.interval_s == 5.0
        store.health.failed(OSError("database or disk is full"))
        assert keeper.pass_interval_s == 5.0  # a renew is the write that sees it recover
        store.health.failing = False
        assert store.health.pending_events  # the "failing" event not written yet
        assert keeper.pass_interval_s == 5.0
        store.health.pending_events = []
        assert keeper.pass_interval_s == SINGLE_REPLICA_PASS_S
        store.dialect = POSTGRESQL  # replicas: the TTL's cadence
        assert keeper.pass_interval_s == 5.0
        await store.close()

    asyncio.run(run())


def test_the_dispatcher_runs_a_pass_for_revisions_only(tmp_path: Path) -> None:
    async def run() -> None:
        store = migrated_store(tmp_path / "mcpsub.db")
        dispatcher = Dispatcher(store, WebhookSettings())
        for type_ in ("subscription.state", "subscription.created", "delivery.dead"):
            store.publish([_event(type_)])
        assert not dispatcher._wake.is_set()  # none of them can have enqueued a delivery
        store.publish([_event("resource.updated")])
        assert dispatcher._wake.is_set()
        dispatcher._wake.clear()
        dispatcher._no_targets = True  # nothing can be enqueued: not even a revision wakes
        store.publish([_event("resource.updated", "test://b")])
        assert not dispatcher._wake.is_set()
        assert dispatcher._uri_changed_at["test://b"] > dispatcher._uri_changed_at["test://a"]
        assert dispatcher._timed_pass_s == 60.0  # alone: every change here wakes the loop
        await store.close()

    asyncio.run(run())
