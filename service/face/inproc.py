"""The face's backend inside the daemon (``/mcp``), through the application layer's use
cases: what changed (content, a change's two sides, events after a cursor, the wait for the
next) is :class:`service.app.changes.Changes`, shared with the API's ``/v1/content``,
``/v1/wait`` and ``/v1/events``; what an agent may subscribe or remove is
:class:`service.app.subscriptions.Subscriptions`, shared with ``/v1/agent/subscriptions``."""

from __future__ import annotations

from typing import Any

from service.app.changes import Changes
from service.app.subscriptions import Subscriptions
from service.app.views import change_json, content_json, event_from_json, event_json


class InProcessBackend:
    def __init__(self, subscriptions: Subscriptions, changes: Changes) -> None:
        self._subscriptions = subscriptions
        self.changes = changes
        self.supervisor = subscriptions.supervisor

    async def subscriptions(self) -> list[dict[str, Any]]:
        return await self._subscriptions.with_links()

    async def identities(self) -> list[dict[str, Any]]:
        subs = await self._subscriptions.all()
        return [{"id": s.id, "uri": s.uri, "serverUrl": s.server_url} for s in subs]

    async def content(self, subscription: dict[str, Any]) -> dict[str, Any] | None:
        sub = await self.changes.subscription(int(subscription["id"]))
        current = None if sub is None else await self.changes.current(sub)
        if sub is None or current is None:
            return None
        return content_json(sub, *current)

    async def change(self, event: dict[str, Any]) -> dict[str, Any]:
        return change_json(await self.changes.change_for(event_from_json(event)))

    async def subscribe(self, url: str, uris: list[str]) -> list[dict[str, Any]]:
        return await self._subscriptions.agent_subscribe(url, uris)

    async def unsubscribe(self, subscription_id: int) -> dict[str, Any] | None:
        return await self._subscriptions.agent_unsubscribe_json(subscription_id)

    async def events_after(
        self, after: int, limit: int, types: list[str] | None = None
    ) -> list[dict[str, Any]]:
        events = await self.changes.events_after(after, limit=limit, types=types)
        return [event_json(e) for e in events]

    async def next_events(self, after: int, limit: int, timeout: float) -> list[dict[str, Any]]:
        events = await self.changes.next_events(after, limit=limit, timeout=timeout)
        return [event_json(e) for e in events]

    async def last_event_id(self) -> int:
        return self.changes.published_id

    async def wait_beyond(self, cursor: int, timeout: float) -> bool:
        return await self.changes.wait_beyond(cursor, timeout)
