"""A supervisor with the daemon's contract and none of its links: the API's test double."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from service.app.usecases import DaemonParts
from service.jsonencode import json_bytes
from service.store.eventhub import EventHub
from service.store.migrate import upgrade
from service.store.records import Revision, Subscription
from service.store.store import Store, sqlite_url
from service.triggers.runner import TriggerRunner, TriggerSettings
from service.webhooks.dispatcher import Dispatcher, WebhookSettings
from tests.support.store import bump_generation


class FakeSupervisor:
    def __init__(self, store: Store, events: EventHub) -> None:
        self.store = store
        self.events = events
        self.started_at = time.time()
        self.ready = True
        self.subscribe_calls = 0
        self._links: dict[int, dict[str, Any]] = {}
        self.webhooks = Dispatcher(store, WebhookSettings(schedule=(0.0, 0.2, 0.4), jitter=0.0))
        self.triggers = TriggerRunner(store, TriggerSettings(), {"PATH": "/usr/bin:/bin"})

    @property
    def parts(self) -> DaemonParts:
        """What the composition root hands the use cases beside the supervisor."""
        return DaemonParts(self.store, self.webhooks, self.triggers)

    async def subscribe(self, url: str, uri: str) -> tuple[Subscription, bool]:
        return (await self.subscribe_many(url, [uri]))[0]

    async def subscribe_many(
        self, url: str, uris: list[str], *, created_by: str = "person"
    ) -> list[tuple[Subscription, bool]]:
        self.subscribe_calls += 1
        added = await self.store.add_subscriptions(url, uris, created_by=created_by)
        for sub, _ in added:
            self._want(url, sub)
        return added

    def _want(self, url: str, sub: Subscription) -> None:
        uri = sub.uri
        link = self._links.setdefault(
            sub.server_id,
            {
                "serverId": sub.server_id, "url": url, "state": "listening", "generation": 0,
                "lastError": None, "lastErrorCode": None, "backoffUntil": None,
                "reconnects": 0, "streamOpen": True, "honoredUris": [], "uris": [],
                "circuit": "closed",
            },
        )  # fmt: skip
        if uri not in link["uris"]:
            link["uris"].append(uri)
            link["honoredUris"].append(uri)

    async def unsubscribe(
        self, subscription_id: int, *, created_by: str | None = None
    ) -> Subscription | None:
        return await self.store.remove_subscription(subscription_id, created_by=created_by)

    def link_status(self) -> list[dict[str, Any]]:
        return list(self._links.values())

    def link_status_of(self, server_id: int) -> dict[str, Any] | None:
        return next((s for s in self._links.values() if s.get("serverId") == server_id), None)

    def link_status_json(self) -> bytes:
        return json_bytes(self.link_status())

    def recheck(self, url: str | None = None) -> list[str]:
        return [str(link["url"]) for link in self._links.values() if url in (None, link["url"])]

    def metrics_snapshot(self) -> dict[str, float]:
        return {
            "streams_open": float(len(self._links)),
            "reconnects_total": 0.0,
            "reads_total": 3.0,
            "revisions_total": 2.0,
            "errors_total": 0.0,
        }

    async def publish(
        self, sub: Subscription, text: str, trigger: str = "notification", *, activate: bool = False
    ) -> Revision:
        """What the refresher does after a read: store it under the link's generation (with
        ``activate``, marking the subscription ``active`` with it, as a first read does)."""
        generation = await bump_generation(self.store, sub.server_id)
        contents = [{"uri": sub.uri, "mimeType": "text/plain", "text": text}]
        revision = await self.store.record_read(
            sub.id, sub.server_id, generation, contents, text, trigger=trigger, activate=activate
        )
        assert revision is not None
        return revision


def migrated_store(path: Path) -> Store:
    upgrade(f"sqlite:///{path}")
    return Store.open(sqlite_url(path))


async def make_supervisor(path: Path | str, template: Path | None = None) -> FakeSupervisor:
    """A supervisor on a fresh database at ``path`` (copied from a migrated ``template``),
    or on the migrated database at URL ``path`` (the ``database_url`` fixture)."""
    if isinstance(path, str):
        store = Store.open(path)
    elif template is not None:
        shutil.copyfile(template, path)
        store = Store.open(sqlite_url(path))
    else:
        store = migrated_store(path)
    hub = EventHub(await store.last_event_id())
    store.on_event.append(hub.publish)
    return FakeSupervisor(store, hub)
