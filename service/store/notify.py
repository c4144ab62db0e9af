"""Cross-replica wake-ups over PostgreSQL ``LISTEN/NOTIFY``.

Every transaction that commits an event also runs ``pg_notify('mcpsub_events', id)`` (see
:meth:`service.store.dialect.Dialect.order_events`); PostgreSQL delivers it at commit, to every
listening session. Each replica keeps one dedicated asyncpg connection listening, and hands
the ids to its :class:`~service.store.eventhub.EventHub`, so SSE streams and long-poll waits
on *any* replica wake for events any replica wrote. Notifications carry ids only (payloads
are capped at 8,000 bytes); the events table stays the source of truth.

A notification can be lost while the listening connection is down, so after every
(re)connect the hub is told the table's newest id: waiters re-query and miss nothing.
The ``mcpsub_links`` channel carries server ids whose subscriptions changed, so the replica
holding that link re-reads its URI set at once instead of at its next lease pass. The
``mcpsub_leases`` channel carries a replica id (or ``*``) whose lease keeper should run a pass
now: links were offered for a make-before-break handover, or one of its links was taken.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from sqlalchemy.engine import make_url

from service.backoff import Backoff
from service.store.database import parse
from service.store.dialect import EVENTS_CHANNEL, LINKS_CHANNEL
from service.store.leases import LEASES_CHANNEL, OFFERED

log = structlog.get_logger("mcpsubd.notify")

RECONNECT = Backoff(base_s=0.2, cap_s=5.0, jitter=0)
"""Between two attempts to re-open the LISTEN connection (one per replica: no jitter)."""


def asyncpg_dsn(url: str) -> str:
    """The libpq-style URL asyncpg takes, from any URL the store accepts."""
    return make_url(parse(url).async_url).set(drivername="postgresql").render_as_string(False)


def _set_event(event: asyncio.Event, *_args: Any) -> None:
    event.set()


class PgListener:
    def __init__(
        self,
        url: str,
        on_event_id: Callable[[int], None],
        on_link: Callable[[int], None] | None = None,
        newest_id: Callable[[], Awaitable[int]] | None = None,
        on_lease: Callable[[str], None] | None = None,
    ) -> None:
        self._dsn = asyncpg_dsn(url)
        self._on_event_id = on_event_id
        self._on_link = on_link
        self._newest_id = newest_id
        self._on_lease = on_lease
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()
        self.received = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="pg-listen")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def _events(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self.received += 1
        with contextlib.suppress(ValueError):
            self._on_event_id(int(payload))

    def _links(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if self._on_link is not None:
            with contextlib.suppress(ValueError):
                self._on_link(int(payload))

    def _leases(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if self._on_lease is not None:
            self._on_lease(payload)

    async def _run(self) -> None:
        import asyncpg

        failures = 0
        while True:
            conn = None
            try:
                conn = await asyncpg.connect(self._dsn, timeout=10)
                lost = asyncio.Event()
                conn.add_termination_listener(functools.partial(_set_event, lost))
                await conn.add_listener(EVENTS_CHANNEL, self._events)
                await conn.add_listener(LINKS_CHANNEL, self._links)
                await conn.add_listener(LEASES_CHANNEL, self._leases)
                failures = 0
                self.connected.set()
                if self._newest_id is not None:  # whatever was notified while we were away
                    self._on_event_id(await self._newest_id())
                if self._on_lease is not None:  # an offer made while we were away
                    self._on_lease(OFFERED)
                await lost.wait()
                log.warning("LISTEN connection lost; reconnecting")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("LISTEN connection failed", error=str(exc))
            finally:
                self.connected.clear()
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close(timeout=2)
            await asyncio.sleep(RECONNECT.delay(failures))
            failures += 1
