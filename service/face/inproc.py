"""The face's backend inside the daemon (``/mcp``, and ``POST /v1/agent/subscriptions``
that ``mcpsubctl mcp`` uses): the supervisor, the store and the event hub directly."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from service.api import validate
from service.api.errors import ApiError
from service.api.queries import event_id_for_revision
from service.api.views import content_json, event_json, link_for, subscription_json
from service.face import firststate, policy
from service.face.backend import FaceError

if TYPE_CHECKING:
    from service.api.state import SupervisorLike
    from service.store.records import Subscription

POLL_S = 0.25


class InProcessBackend:
    def __init__(
        self,
        supervisor: SupervisorLike,
        allowed_origins: tuple[str, ...] | None,
        unsubscribe: str = "own",
    ) -> None:
        self.supervisor = supervisor
        self.allowed = allowed_origins
        self.unsubscribe_setting = unsubscribe
        """``agent_unsubscribe``: what an agent may remove (``service/face/policy.py``)."""

    @property
    def store(self) -> Any:
        return self.supervisor.store

    def _with_link(self, sub: Subscription, links: list[dict[str, Any]]) -> dict[str, Any]:
        return {**subscription_json(sub), "link": link_for(links, sub)}

    async def subscriptions(self) -> list[dict[str, Any]]:
        subs = await self.store.list_subscriptions()
        links = self.supervisor.link_status() if subs else []
        return [self._with_link(s, links) for s in subs]

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
        try:
            url = validate.server_url(url)
            uris = [validate.resource_uri(u) for u in uris]
        except ApiError as exc:
            raise FaceError(exc.error_code, exc.message, exc.hint) from None
        subs = await self.store.list_subscriptions()
        policy.check(url, self.allowed, (s.server_url for s in subs))
        added = await self.supervisor.subscribe_many(url, uris, created_by="agent")
        return [await self._first_state(sub.id) for sub, _created in added]

    async def _first_state(self, subscription_id: int) -> dict[str, Any]:
        deadline = time.monotonic() + firststate.FIRST_STATE_TIMEOUT_S
        hub = self.supervisor.events
        while True:
            cursor = hub.last_id
            sub = await self.store.get_subscription(subscription_id)
            if sub is None:
                raise FaceError("NOT_WATCHED", "the subscription was removed meanwhile", None)
            row = self._with_link(sub, self.supervisor.link_status())
            known, code, hint = firststate.verdict(row, row["link"])
            if known or time.monotonic() >= deadline:
                if code is not None:
                    row.update(errorCode=code, hint=hint)
                return row
            await hub.wait_beyond(cursor, POLL_S)

    async def unsubscribe(self, subscription_id: int) -> dict[str, Any] | None:
        """Within the agent policy: FaceError ``NOT_CREATED_BY_AGENT`` for what a person made."""
        sub = await self.store.get_subscription(subscription_id)
        if sub is None:
            return None
        policy.check_unsubscribe(subscription_json(sub), self.unsubscribe_setting)
        removed = await self.supervisor.unsubscribe(subscription_id)
        return None if removed is None else subscription_json(removed)

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
