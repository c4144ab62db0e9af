"""The daemon's supervisor as every front end sees it: one :class:`typing.Protocol`, so the
REST API, the MCP face and the test fakes depend on this contract, never on
``service.daemon`` (which sits above them and wires them to the real one).

It offers the links and the subscriptions' life, not the daemon's other parts: the store, the
webhook dispatcher and the trigger runner reach the use cases from the composition root
(:class:`service.app.usecases.DaemonParts`), and the front ends only through a use case."""

from __future__ import annotations

from typing import Any, Protocol

from service.store.eventhub import EventHub
from service.store.records import Subscription


class SupervisorLike(Protocol):
    """The part of the daemon's supervisor the front ends use (and test fakes implement)."""

    @property
    def events(self) -> EventHub: ...
    @property
    def started_at(self) -> float: ...
    @property
    def ready(self) -> bool: ...

    async def subscribe(self, url: str, uri: str) -> tuple[Subscription, bool]: ...
    async def subscribe_many(
        self, url: str, uris: list[str], *, created_by: str = "person"
    ) -> list[tuple[Subscription, bool]]: ...
    async def unsubscribe(
        self, subscription_id: int, *, created_by: str | None = None
    ) -> Subscription | None: ...
    def link_status(self) -> list[dict[str, Any]]: ...
    def link_status_of(self, server_id: int) -> dict[str, Any] | None:
        """One link's status, by its server's id (None when no link of this replica runs
        it): a subscription's page needs its own link, not all of them."""
        ...

    def link_status_json(self) -> bytes:
        """``link_status()`` as a JSON array (UTF-8)."""
        ...

    def recheck(self, url: str | None = None) -> list[str]: ...
    def metrics_snapshot(self) -> dict[str, float]: ...
