"""What a person or an agent does to the daemon's subscriptions, done once for every front end:
``/v1/subscriptions`` (a person), ``/v1/agent/subscriptions`` (what ``mcpsubctl mcp`` calls)
and the face's tools in the daemon (``/mcp``) all go through :class:`Subscriptions`.

Who asks decides what is allowed. A person subscribes anywhere and removes anything. An agent
subscribes only on ``agent_allowed_origins`` and removes only what an agent made unless
``agent_unsubscribe = any`` (:mod:`service.app.policy`), and its subscription is answered once
its first state is known (:mod:`service.app.firststate`), so the stdio face and ``/mcp`` give
one answer. A person's ``mcpsubctl subscribe`` polls :meth:`Subscriptions.show`'s
``firstState`` instead, since the API answers a subscribe at once.
"""

from __future__ import annotations

import time
from typing import Any, Final, Literal

from service.app import firststate, policy, queries, validate
from service.app.errors import AgentError, ApiError, SubscriptionNotFound
from service.app.supervisor_protocol import SupervisorLike
from service.app.views import (
    link_of,
    revision_summary,
    state_hint,
    subscription_json,
    with_link,
)
from service.store.records import Subscription
from service.store.store import KeptForCreator, Store

Caller = Literal["person", "agent"]
PERSON: Final = "person"
AGENT: Final = "agent"
POLL_S = 0.25
"""How long the first-state wait sleeps at most between looks when no event wakes it."""
MAX_PAGE = 1000
"""Subscriptions in one filtered page of :meth:`Subscriptions.page`."""


class Subscriptions:
    def __init__(
        self,
        supervisor: SupervisorLike,
        store: Store,
        *,
        agent_origins: tuple[str, ...] | None = None,
        agent_unsubscribe: str = "own",
    ) -> None:
        self.supervisor = supervisor
        self.store = store
        self.agent_origins = agent_origins
        """``agent_allowed_origins``: where an agent may subscribe (None: the watched ones)."""
        self.agent_unsubscribe = agent_unsubscribe
        """``agent_unsubscribe``: what an agent may remove (:mod:`service.app.policy`)."""

    # ---- a person -------------------------------------------------------------------------
    async def subscribe(self, url: str, uri: str) -> tuple[Subscription, bool]:
        """A person's subscription (checked ``url`` and ``uri``) and whether it is new."""
        return await self.supervisor.subscribe(url, uri)

    async def subscribe_many(self, url: str, uris: list[str]) -> list[tuple[Subscription, bool]]:
        """A person's subscriptions, each with whether it is new: one transaction, one
        re-listen."""
        return await self.supervisor.subscribe_many(url, uris)

    async def show(self, subscription_id: int) -> dict[str, Any]:
        """The subscription with its link, its current revision, the hint for its state and
        its ``firstState``; SubscriptionNotFound when there is none."""
        sub = await self.store.get_subscription(subscription_id)
        if sub is None:
            raise SubscriptionNotFound(f"no subscription {subscription_id}")
        current = await self.store.current_revision(sub.id)
        link = link_of(self.supervisor, sub)
        row = subscription_json(sub)
        return {
            **row,
            "link": link,
            "current": revision_summary(current),
            "hint": state_hint(sub, link),
            "firstState": firststate.first_state_json(row, link),
        }

    async def all(self) -> list[Subscription]:
        return await self.store.list_subscriptions()

    async def page(
        self,
        *,
        server: str | None = None,
        uri: str | None = None,
        state: str | None = None,
        after: int = 0,
        limit: int = MAX_PAGE,
    ) -> list[Subscription]:
        """Subscriptions with an id above ``after``, filtered (a server URL fragment, a URI
        pattern, a state), at most ``limit`` (capped at :data:`MAX_PAGE`)."""
        return await queries.filtered_subscriptions(
            self.store, server=server, uri=uri, state=state, after=after, limit=min(limit, MAX_PAGE)
        )

    async def with_links(self) -> list[dict[str, Any]]:
        """Every subscription with its link's status entry (what an agent lists)."""
        subs = await self.store.list_subscriptions()
        links = self.supervisor.link_status() if subs else []
        return [with_link(s, links) for s in subs]

    # ---- both -----------------------------------------------------------------------------
    async def unsubscribe(
        self, subscription_id: int, *, caller: Caller = PERSON
    ) -> Subscription | None:
        """Remove it with the caller's rights; None if there is none. An agent gets AgentError
        ``NOT_CREATED_BY_AGENT`` for what a person made (unless ``agent_unsubscribe = any``)."""
        if caller == PERSON:
            return await self.supervisor.unsubscribe(subscription_id)
        sub = await self.store.get_subscription(subscription_id)
        if sub is None:
            return None
        row = subscription_json(sub)
        policy.check_unsubscribe(row, self.agent_unsubscribe)
        # The look above is advice for the error; the delete itself re-checks the creator, so
        # a person's takeover between the two keeps the subscription.
        only = None if self.agent_unsubscribe == "any" else AGENT
        try:
            return await self.supervisor.unsubscribe(subscription_id, created_by=only)
        except KeptForCreator:
            policy.check_unsubscribe({**row, "createdBy": PERSON}, self.agent_unsubscribe)
            raise  # not reached: the check above refuses a person's subscription

    # ---- an agent -------------------------------------------------------------------------
    async def agent_subscribe(self, raw_url: Any, raw_uris: list[Any]) -> list[dict[str, Any]]:
        """Subscribe within the agent policy; each result once its first state is known, with
        ``errorCode``/``hint`` when it failed. AgentError on a refusal (policy, bad input)."""
        try:
            url = validate.server_url(raw_url)
            uris = [validate.resource_uri(u) for u in raw_uris]
        except ApiError as exc:
            raise AgentError.of(exc) from None
        subs = await self.store.list_subscriptions()
        policy.check(url, self.agent_origins, (s.server_url for s in subs))
        policy.check_one_server(url, uris, ((s.server_url, s.uri) for s in subs))
        added = await self.supervisor.subscribe_many(url, uris, created_by=AGENT)
        return [await self.first_state(sub.id) for sub, _created in added]

    async def agent_unsubscribe_json(self, subscription_id: int) -> dict[str, Any] | None:
        """:meth:`unsubscribe` for an agent, as the agent is answered."""
        removed = await self.unsubscribe(subscription_id, caller=AGENT)
        return None if removed is None else subscription_json(removed)

    async def first_state(self, subscription_id: int) -> dict[str, Any]:
        """The subscription with its link once its first state is known (a first revision,
        or the failure that prevents it, as ``errorCode``/``hint``), or as it is after
        :data:`~service.app.firststate.FIRST_STATE_TIMEOUT_S`."""
        deadline = time.monotonic() + firststate.FIRST_STATE_TIMEOUT_S
        hub = self.supervisor.events
        while True:
            cursor = hub.last_id
            sub = await self.store.get_subscription(subscription_id)
            if sub is None:
                raise AgentError("NOT_WATCHED", "the subscription was removed meanwhile", None)
            link = link_of(self.supervisor, sub)
            row = {**subscription_json(sub), "link": link}
            known, code, hint = firststate.verdict(row, link)
            if known or time.monotonic() >= deadline:
                if code is not None:
                    row.update(errorCode=code, hint=hint)
                return row
            await hub.wait_beyond(cursor, POLL_S)
