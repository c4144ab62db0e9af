"""The standby takeover (make-before-break handover, scale-out on PostgreSQL).

A replica asked to take a link another one offers listens to it in *standby*
(:meth:`Handover.prepare`): the standby link writes nothing until its first listen is
acknowledged; then the link calls the ``takeover`` it was given, which takes the lease
(:meth:`Handover.take`), and from that commit on the previous owner's writes are fenced
while the standby's re-read of every URI covers any update the owner missed. The lease side
is :mod:`service.daemon.leases`.

:class:`Handover` owns the standby links. It is handed what it needs of the supervisor
(make a link, the held links' table, what to do when a held lease is lost) and never sees
the supervisor itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from service.daemon.link import ServerLink
from service.store import Store
from service.store.leases import Claimed, Requested

NewLink = Callable[[int, str, Mapping[str, int]], ServerLink]


class Handover:
    """The links this replica listens to in standby, until each is taken or abandoned."""

    def __init__(
        self,
        store: Store,
        take_lease: Callable[[int], Awaitable[Claimed | None]],
        new_link: NewLink,
        held: dict[int, ServerLink],
        lease_lost: Callable[[int], None],
    ) -> None:
        self._store = store
        self._take_lease = take_lease
        self._new_link = new_link
        self._held = held
        """The supervisor's table of held links: a taken link moves into it."""
        self._lease_lost = lease_lost
        self.links: dict[int, ServerLink] = {}
        """Standby links by server id: listened to, not ours until taken."""

    async def prepare(self, requested: Requested) -> None:
        """Listen to a link another replica offered, in standby: it writes nothing until its
        listen is acknowledged, then takes the lease (:meth:`take`) and re-reads every URI
        while the previous owner is told to close its stream."""
        if requested.server_id in self._held or requested.server_id in self.links:
            return
        wanted = await self._store.wanted_uris([requested.server_id])
        link = self._new_link(requested.server_id, requested.url, wanted[requested.server_id])

        async def taken() -> int | None:
            return await self.take(link)

        def dropped(server_id: int) -> None:
            if self.links.get(server_id) is link:
                del self.links[server_id]

        link.takeover = taken
        link.on_lease_lost = dropped
        self.links[requested.server_id] = link
        link.start()

    async def take(self, link: ServerLink) -> int | None:
        """Take the lease of a standby link whose listen was just acknowledged: it becomes a
        held link (a stale run of ours stopped). None: the request is gone."""
        if self.links.get(link.server_id) is not link:
            return None  # abandoned meanwhile
        taken = await self._take_lease(link.server_id)
        if taken is None:
            return None
        if self.links.get(link.server_id) is link:
            del self.links[link.server_id]
        stale = self._held.get(link.server_id)
        if stale is not None and stale is not link:
            self._held.pop(link.server_id)
            await stale.stop()
        link.on_lease_lost = self._lease_lost
        self._held[link.server_id] = link
        # A subscription added or removed through another replica while we stood by: its
        # NOTIFY found no held link here, so bring the URI set in line now.
        uris = (await self._store.wanted_uris([link.server_id]))[link.server_id]
        for uri in set(link.wanted) - set(uris):
            link.unwant(uri)
        for uri, subscription_id in uris.items():
            link.want(uri, subscription_id)
        return taken.generation

    def pop(self, server_id: int) -> ServerLink | None:
        """Forget a standby link (its request was overtaken); the caller stops it."""
        return self.links.pop(server_id, None)

    async def abandon(self, server_id: int) -> None:
        link = self.links.pop(server_id, None)
        if link is not None:
            await link.stop()
