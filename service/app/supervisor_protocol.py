"""The daemon's supervisor as every front end sees it: one :class:`typing.Protocol`, so the
REST API, the MCP face and the test fakes depend on this contract, never on
``service.daemon`` (which sits above them and wires them to the real one)."""

from __future__ import annotations

from typing import Any, Protocol

from service.store.eventhub import EventHub
from service.store.records import Subscription
from service.store.store import Store
from service.triggers.runner import TriggerRunner
from service.webhooks.dispatcher import Dispatcher


class SupervisorLike(Protocol):
    """The part of the daemon's supervisor the front ends use (and test fakes implement)."""

    @property
    def store(self) -> Store: ...
    @property
    def events(self) -> EventHub: ...
    @property
    def started_at(self) -> float: ...
    @property
    def ready(self) -> bool: ...
    @property
    def webhooks(self) -> Dispatcher: ...
    @property
    def triggers(self) -> TriggerRunner: ...

    async def subscribe(self, url: str, uri: str) -> tuple[Subscription, bool]: ...
    async def subscribe_many(
        self, url: str, uris: list[str], *, created_by: str = "person"
    ) -> list[tuple[Subscription, bool]]: ...
    async def unsubscribe(
        self, subscription_id: int, *, created_by: str | None = None
    ) -> Subscription | None: ...
    def link_status(self) -> list[dict[str, Any]]: ...
    def link_status_json(self) -> bytes:
        """``link_status()`` as a JSON array (UTF-8)."""
        ...

    def recheck(self, url: str | None = None) -> list[str]: ...
    def metrics_snapshot(self) -> dict[str, float]: ...
