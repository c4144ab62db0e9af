"""The standby takeover (make-before-break handover, scale-out on PostgreSQL).

A replica asked to take a link another one offers listens to it in *standby*
(:func:`prepare`): the standby link writes nothing until its first listen is acknowledged;
then (:func:`take_on_ack`, called by the link) it takes the lease (:func:`take`), and from
that commit on the previous owner's writes are fenced while the standby's re-read of every
URI covers any update the owner missed. The lease side is :mod:`service.daemon.leases`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from service.mcp.client import ListenStream
from service.store.leases import Requested

if TYPE_CHECKING:
    from service.daemon.link import ServerLink
    from service.daemon.supervisor import Supervisor


class LeaseLost(Exception):
    """A fenced write was rejected: another replica claimed this link (scale-out)."""


async def take_on_ack(link: ServerLink, stream: ListenStream) -> None:
    """Standby: our listen is acknowledged while the current owner still listens; take the
    lease now and write under the generation it gave (closes ``stream`` when it cannot)."""
    takeover = link.takeover
    if takeover is None:
        return
    try:
        taken = await takeover()
    except BaseException:
        await stream.aclose()
        raise
    if taken is None:
        await stream.aclose()
        raise LeaseLost(f"the hand-over of {link.url} was withdrawn")
    link.takeover = None
    link.generation = taken


async def prepare(supervisor: Supervisor, requested: Requested) -> None:
    """Listen to a link another replica offered, in standby: it writes nothing until its
    listen is acknowledged, then takes the lease (:func:`take`) and re-reads every URI
    while the previous owner is told to close its stream."""
    if requested.server_id in supervisor.links or requested.server_id in supervisor.standby_links:
        return
    subs = await supervisor.store.list_subscriptions(requested.server_id)
    link = supervisor.new_link(requested.server_id, requested.url, subs)

    async def taken() -> int | None:
        return await take(supervisor, link)

    def dropped(server_id: int) -> None:
        if supervisor.standby_links.get(server_id) is link:
            del supervisor.standby_links[server_id]

    link.takeover = taken
    link.on_lease_lost = dropped
    supervisor.standby_links[requested.server_id] = link
    link.start()


async def take(supervisor: Supervisor, link: ServerLink) -> int | None:
    """Take the lease of a standby link whose listen was just acknowledged: it becomes a
    held link (a stale run of ours stopped). None: the request is gone."""
    if supervisor.standby_links.get(link.server_id) is not link:
        return None  # abandoned meanwhile
    taken = await supervisor.leases.take(link.server_id)
    if taken is None:
        return None
    if supervisor.standby_links.get(link.server_id) is link:
        del supervisor.standby_links[link.server_id]
    stale = supervisor.links.get(link.server_id)
    if stale is not None and stale is not link:
        supervisor.links.pop(link.server_id)
        await stale.stop()
    link.on_lease_lost = supervisor.lease_lost
    supervisor.links[link.server_id] = link
    # A subscription added or removed through another replica while we stood by: its
    # NOTIFY found no held link here, so bring the URI set in line now.
    subs = await supervisor.store.list_subscriptions(link.server_id)
    uris = {sub.uri: sub.id for sub in subs}
    for uri in set(link.wanted) - set(uris):
        link.unwant(uri)
    for uri, subscription_id in uris.items():
        link.want(uri, subscription_id)
    return taken.generation
