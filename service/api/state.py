"""What every route needs: the supervisor contract and the app's settings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from fastapi import Request

from service.api.errors import TooBusy
from service.api.metrics import Metrics
from service.store.eventhub import EventHub
from service.store.records import Subscription
from service.store.store import Store
from service.webhooks.dispatcher import Dispatcher


class SupervisorLike(Protocol):
    """The part of the daemon's supervisor the API uses (and test fakes implement)."""

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

    async def subscribe(self, url: str, uri: str) -> tuple[Subscription, bool]: ...
    async def unsubscribe(self, subscription_id: int) -> Subscription | None: ...
    def link_status(self) -> list[dict[str, Any]]: ...
    def recheck(self, url: str | None = None) -> list[str]: ...
    def metrics_snapshot(self) -> dict[str, float]: ...


@dataclass
class ApiState:
    supervisor: SupervisorLike
    metrics: Metrics
    keepalive_s: float = 15.0
    """Seconds of silence before the SSE stream sends a ``:`` comment."""
    max_wait_ms: int = 600_000
    """Upper bound of ``/v1/wait``'s ``timeout_ms``."""
    default_wait_ms: int = 60_000
    max_waiters: int = 256
    """Open SSE streams plus pending long-polls; more get 503 TOO_MANY_WAITERS."""
    max_body_bytes: int = 64 * 1024
    waiters: int = field(default=0)

    def check_capacity(self) -> None:
        if self.waiters >= self.max_waiters:
            raise TooBusy(f"{self.waiters} streams and long-polls open (limit {self.max_waiters})")

    @asynccontextmanager
    async def waiter_slot(self) -> AsyncIterator[None]:
        """Count one open stream or long-poll (call :meth:`check_capacity` first)."""
        self.waiters += 1
        try:
            yield
        finally:
            self.waiters -= 1


def api_state(request: Request) -> ApiState:
    state = request.app.state.api
    assert isinstance(state, ApiState)
    return state
