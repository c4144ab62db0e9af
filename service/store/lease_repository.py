"""The link leases of one database, as :class:`LeaseRepository`: the SQL of
:mod:`service.store.leases` run in the store's transactions, beside
:class:`service.webhooks.repository.WebhookRepository` (the store itself keeps transactions,
group commit and what every repository shares).

Scale-out only matters on PostgreSQL; on SQLite the leases are trivially held (one daemon per
database) and cost a statement each.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TypeVar

from sqlalchemy import Connection

from service.store import leases
from service.store.dialect import Dialect
from service.store.store import Store

T = TypeVar("T")


class LeaseRepository:
    def __init__(self, store: Store) -> None:
        self.store = store

    @property
    def dialect(self) -> Dialect:
        return self.store.dialect  # chosen when the store opened

    async def _call(self, fn: Callable[[Connection], T]) -> T:
        """A lease statement. On PostgreSQL it takes a pooled connection of its own instead of
        queueing on the write lock behind every link's revision and state writes: with a
        hundred links starting at once that queue delayed the renew past the TTL, the leases
        lapsed, the other replicas claimed them, and the links flapped between replicas."""
        if self.dialect.replicated:
            return await self.store.in_writer(fn)
        return await self.store.write(fn)

    async def heartbeat(
        self, replica_id: str, host: str, pid: int, *, stopping: bool = False
    ) -> None:
        d = self.dialect
        await self._call(lambda c: leases.heartbeat(c, d, replica_id, host, pid, stopping))

    async def renew_changes(
        self, replica_id: str, ttl: float, running: Collection[int]
    ) -> leases.Renewed:
        """Renew every lease of ``replica_id``; only the differences from ``running`` come
        back (:func:`leases.renew_changes`)."""
        d = self.dialect
        return await self._call(lambda c: leases.renew_changes(c, d, replica_id, ttl, running))

    async def balance(self, ttl: float) -> tuple[int, int]:
        return await self.store.read(lambda c: leases.balance(c, self.dialect, ttl))

    async def uri_set_digests(self, replica_id: str) -> dict[int, tuple[int, int, int]]:
        """Per link this replica leases: a digest of its URI set (:func:`leases.uri_set_digests`)."""
        return await self.store.read(lambda c: leases.uri_set_digests(c, replica_id))

    async def claim(
        self,
        replica_id: str,
        ttl: float,
        limit: int,
        only: list[int] | None = None,
        *,
        mine_too: bool = False,
    ) -> list[leases.Claimed]:
        d = self.dialect
        return await self._call(
            lambda c: leases.claim(c, d, replica_id, ttl, limit, only, mine_too)
        )

    async def release(self, replica_id: str, server_ids: list[int]) -> int:
        return await self._call(lambda c: leases.release(c, replica_id, server_ids))

    async def leave(self, replica_id: str) -> None:
        await self._call(lambda c: leases.leave(c, replica_id))

    async def offer(self, replica_id: str, server_ids: list[int] | None) -> list[int]:
        d = self.dialect
        return await self._call(lambda c: leases.offer(c, d, replica_id, server_ids))

    async def withdraw_offers(self, replica_id: str) -> int:
        return await self._call(lambda c: leases.withdraw(c, replica_id))

    async def request(self, replica_id: str, ttl: float, limit: int) -> list[leases.Requested]:
        d = self.dialect
        return await self._call(lambda c: leases.request(c, d, replica_id, ttl, limit))

    async def requested(self, replica_id: str) -> set[int]:
        return await self.store.read(lambda c: leases.requested(c, replica_id))

    async def take(self, replica_id: str, ttl: float, server_id: int) -> leases.Claimed | None:
        d = self.dialect
        return await self._call(lambda c: leases.take(c, d, replica_id, ttl, server_id))

    async def wake_replicas(self, whom: str = leases.OFFERED) -> None:
        if self.dialect.replicated:
            await self._call(lambda c: leases.wake(c, self.dialect, whom))

    async def forget_dead_replicas(self, older_than_s: float) -> int:
        d = self.dialect
        return await self._call(lambda c: leases.forget_dead(c, d, older_than_s))
