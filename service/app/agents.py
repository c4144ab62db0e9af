"""What an agent may do to the daemon's subscriptions, done once for every front end: the MCP
face's ``subscribe``/``unsubscribe`` tools in the daemon (``/mcp``) and
``/v1/agent/subscriptions`` (what ``mcpsubctl mcp`` calls) both go through :class:`Agents`.

Subscribing is limited to ``agent_allowed_origins``, removing to what an agent made unless
``agent_unsubscribe = any`` (:mod:`service.app.policy`); a subscription is answered once its
first state is known (:mod:`service.app.firststate`), so both ways give one answer.
"""

from __future__ import annotations

import time
from typing import Any

from service.app import firststate, policy, validate
from service.app.errors import AgentError, ApiError
from service.app.supervisor_protocol import SupervisorLike
from service.app.views import subscription_json, with_link
from service.store.store import KeptForCreator

POLL_S = 0.25


class Agents:
    def __init__(
        self,
        supervisor: SupervisorLike,
        allowed_origins: tuple[str, ...] | None,
        unsubscribe: str = "own",
    ) -> None:
        self.supervisor = supervisor
        self.allowed = allowed_origins
        """``agent_allowed_origins``: where an agent may subscribe (None: the watched ones)."""
        self.unsubscribe_setting = unsubscribe
        """``agent_unsubscribe``: what an agent may remove (:mod:`service.app.policy`)."""

    async def subscribe(self, raw_url: Any, raw_uris: list[Any]) -> list[dict[str, Any]]:
        """Subscribe within the policy; each result once its first state is known, with
        ``errorCode``/``hint`` when it failed. AgentError on a refusal (policy, bad input)."""
        store = self.supervisor.store
        try:
            url = validate.server_url(raw_url)
            uris = [validate.resource_uri(u) for u in raw_uris]
        except ApiError as exc:
            raise AgentError.of(exc) from None
        subs = await store.list_subscriptions()
        policy.check(url, self.allowed, (s.server_url for s in subs))
        policy.check_one_server(url, uris, ((s.server_url, s.uri) for s in subs))
        added = await self.supervisor.subscribe_many(url, uris, created_by="agent")
        return [await self._first_state(sub.id) for sub, _created in added]

    async def _first_state(self, subscription_id: int) -> dict[str, Any]:
        deadline = time.monotonic() + firststate.FIRST_STATE_TIMEOUT_S
        hub = self.supervisor.events
        while True:
            cursor = hub.last_id
            sub = await self.supervisor.store.get_subscription(subscription_id)
            if sub is None:
                raise AgentError("NOT_WATCHED", "the subscription was removed meanwhile", None)
            row = with_link(sub, self.supervisor.link_status())
            known, code, hint = firststate.verdict(row, row["link"])
            if known or time.monotonic() >= deadline:
                if code is not None:
                    row.update(errorCode=code, hint=hint)
                return row
            await hub.wait_beyond(cursor, POLL_S)

    async def unsubscribe(self, subscription_id: int) -> dict[str, Any] | None:
        """Within the policy: AgentError ``NOT_CREATED_BY_AGENT`` for what a person made."""
        sub = await self.supervisor.store.get_subscription(subscription_id)
        if sub is None:
            return None
        row = subscription_json(sub)
        policy.check_unsubscribe(row, self.unsubscribe_setting)
        # The look above is advice for the error; the delete itself re-checks the creator, so
        # a person's takeover between the two keeps the subscription.
        only = None if self.unsubscribe_setting == "any" else "agent"
        try:
            removed = await self.supervisor.unsubscribe(subscription_id, created_by=only)
        except KeptForCreator:
            policy.check_unsubscribe({**row, "createdBy": "person"}, self.unsubscribe_setting)
            raise  # not reached: the check above refuses a person's subscription
        return None if removed is None else subscription_json(removed)
