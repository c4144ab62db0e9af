"""The face's backend inside the daemon (``/mcp``): the supervisor, the store and the event
hub directly, through the application layer (``service/app``); what an agent may subscribe or
remove is :class:`service.app.subscriptions.Subscriptions`, shared with
``/v1/agent/subscriptions``."""

from __future__ import annotations

from typing import Any

from service.app.queries import event_id_for_revision
from service.app.subscriptions import Subscriptions
from service.app.views import content_json, event_json


class InProcessBackend:
    def __init__(self, subscriptions: Subscriptions) -> None:
        self._subscriptions = subscriptions
        self.supervisor = subscriptions.supervisor

    @property
    def store(self) -> Any:
        return self.supervisor.store

    async def subscriptions(self) -> list[dict[str, Any]]:
        return await self._subscriptions.with_links()

    async def identities(self) -> list[dict[str, Any]]:
        subs = await self.store.list_subscriptions()
        return [{"id": s.id, "uri": s.uri, "serverUrl": s.server_url} for s in subs]

    async def content(self, subscription: dict[str, Any]) -> dict[str, Any] | None:
        sub = await self.store.get_subscription(int(subscription["id"]))
        if sub is None:
            return None
        rev = await self.store.current_revision(sub.id)
        if rev is None:
            return None
        return content_json(sub, rev, await event_id_for_revision(self.store, sub.id, rev.id))

    async def change(self, event: dict[str, Any]) -> dict[str, Any]:
        store = self.store
        sub_id = int(event.get("subscriptionId") or 0)
        sub = await store.get_subscription(sub_id)
        rev = await store.get_revision(event["revisionId"]) if event.get("revisionId") else None
        if rev is None and sub is not None:
            rev = await store.current_revision(sub_id)
        if rev is None or sub is None:
            return {"revision": None, "previous": None}
        before = await store.revision_before(sub_id, rev.revision)
        previous = None if before is None else {"revision": before.revision, "text": before.text}
        event_id = event["id"] if rev.id == event.get("revisionId") else None
        return {"revision": content_json(sub, rev, event_id), "previous": previous}

    async def subscribe(self, url: str, uris: list[str]) -> list[dict[str, Any]]:
        return await self._subscriptions.agent_subscribe(url, uris)

    async def unsubscribe(self, subscription_id: int) -> dict[str, Any] | None:
        return await self._subscriptions.agent_unsubscribe_json(subscription_id)

    async def events_after(
        self, after: int, limit: int, types: list[str] | None = None
    ) -> list[dict[str, Any]]:
        recent = self.supervisor.events.recent_after(after, types=types)
        if recent is not None and len(recent[0]) <= limit:
            events = recent[0]
        else:
            events = await self.store.events_after(after, limit=limit, types=types)
        return [event_json(e) for e in events]

    async def last_event_id(self) -> int:
        hub = self.supervisor.events
        return int(hub.last_id)

    async def wait_beyond(self, cursor: int, timeout: float) -> bool:
        return bool(await self.supervisor.events.wait_beyond(cursor, timeout))
