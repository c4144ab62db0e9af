"""What every route needs: the supervisor contract and the app's settings."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from fastapi import Request

from service.api.errors import BodyTimeout, BodyTooLarge, TooBusy
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
    async def subscribe_many(
        self, url: str, uris: list[str], *, created_by: str = "person"
    ) -> list[tuple[Subscription, bool]]: ...
    async def unsubscribe(self, subscription_id: int) -> Subscription | None: ...
    def link_status(self) -> list[dict[str, Any]]: ...
    def link_status_json(self) -> bytes:
        """``link_status()`` as a JSON array (UTF-8)."""
        ...

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
    read_timeout_s: float = 10.0
    """A request body must arrive within this (a trickling client holds a connection)."""
    waiters: int = field(default=0)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the daemon stops: streams that can end with a result do so at once."""
    console_listener: Any = None
    """A :class:`service.api.listener.ConsoleListener` on a unix-socket daemon (the daemon
    sets it): ``POST /v1/console/listener`` opens a loopback TCP listener for a browser."""

    async def read_body(self, request: Request) -> bytes:
        """The whole body, at most ``max_body_bytes`` (413), within ``read_timeout_s`` (408)."""
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.read_timeout_s):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > self.max_body_bytes:
                        raise BodyTooLarge(f"the body is larger than {self.max_body_bytes} bytes")
                    chunks.append(chunk)
        except TimeoutError:
            raise BodyTimeout(f"the body did not arrive within {self.read_timeout_s:g} s") from None
        return b"".join(chunks)

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
