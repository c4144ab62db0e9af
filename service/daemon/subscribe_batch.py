"""Subscribe requests that queue up, written together: one queue and one writer task.

Requests that arrive while a write is under way are gathered and written in one
transaction, with one hand-over to the links, so that concurrent single-URI POSTs do not
each wait for their own commit behind the others.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable
from typing import Any

from service.daemon.link import ServerLink
from service.store import Store, Subscription
from service.store.database import database_errors

ADD_BATCH_URIS = 2000
"""URIs written in one transaction when subscribe requests queue up (a single request of
up to ``MAX_BATCH`` URIs always goes in whole)."""

_PendingAdd = tuple[str, list[str], str, asyncio.Future[list[tuple[Subscription, bool]]]]
"""``(url, uris, created_by, future)``."""


class SubscribeBatcher:
    """The supervisor's ``subscribe_many``: queue a request, one task drains the queue."""

    def __init__(
        self,
        store: Store,
        lock: asyncio.Lock,
        held: Callable[[int], ServerLink | None],
        claim: Callable[[int, list[int]], Awaitable[Any]],
    ) -> None:
        self._store = store
        self._lock = lock
        """The supervisor's lock: a batch is written while no link set changes."""
        self._held = held
        """The supervisor's held link of a server, if any: added URIs go to it."""
        self._claim = claim
        """Lease links no replica holds yet: ``claim(count, only)``."""
        self._adds: collections.deque[_PendingAdd] = collections.deque()
        """Subscribe requests waiting for the next batch write."""
        self._add_task: asyncio.Task[None] | None = None

    async def subscribe_many(
        self, url: str, uris: list[str], created_by: str = "person"
    ) -> list[tuple[Subscription, bool]]:
        """Several URIs of one server in one transaction; the link re-listens once for all."""
        future: asyncio.Future[list[tuple[Subscription, bool]]] = (
            asyncio.get_running_loop().create_future()
        )
        self._adds.append((url, uris, created_by, future))
        if self._add_task is None or self._add_task.done():
            self._add_task = asyncio.get_running_loop().create_task(self._write_adds())
        return await future

    async def _write_adds(self) -> None:
        """Drain the queued subscribe requests, a batch of at most ``ADD_BATCH_URIS`` at a time."""
        while self._adds:
            batch: list[_PendingAdd] = []
            size = 0
            while self._adds and (not batch or size + len(self._adds[0][1]) <= ADD_BATCH_URIS):
                item = self._adds.popleft()
                batch.append(item)
                size += len(item[1])
            try:
                async with self._lock:
                    await self._add_batch(batch)
            except Exception as exc:
                for *_, future in batch:
                    if not future.done():
                        future.set_exception(exc)

    async def _add_batch(self, batch: list[_PendingAdd]) -> None:
        requests = [(url, uris, by) for url, uris, by, _ in batch]
        try:
            results = await self._store.add_subscriptions_batch(requests)
        except database_errors():
            raise  # the database refuses writes: every request gets that answer
        except Exception:
            if len(batch) == 1:
                raise
            # Something in one request the database refused: write each on its own, so
            # the others do not fail with it.
            for item in batch:
                try:
                    await self._add_batch([item])
                except Exception as exc:
                    if not item[3].done():
                        item[3].set_exception(exc)
            return
        unheld: list[int] = []
        for added in results:
            for sub, _ in added:
                link = self._held(sub.server_id)
                if link is not None:
                    link.want(sub.uri, sub.id)
                elif sub.server_id not in unheld:
                    unheld.append(sub.server_id)
        if unheld:
            # New links (or ones no replica holds): lease them here now. If another replica
            # holds one, that one picks the URIs up at its next lease pass.
            await self._claim(len(unheld), unheld)
        for (*_, future), added in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(added)
