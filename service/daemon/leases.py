"""The replica's lease loop: heartbeat, renew, rebalance, and stop links before they expire.

Every third of the TTL one pass: heartbeat, renew every held lease (the database returns the
ones we still hold; any other link is stopped at once, because another replica owns it now),
then move towards the fair share ``ceil(links / live replicas)``: claim when below it, release
(stop first, then release) when above. A renew that fails keeps being retried; if none has
succeeded for two thirds of the TTL every link is stopped locally, so no link runs on after
its lease could have expired (the database would fence its writes anyway, see
:mod:`service.store.leases`). The time base is the start of the last successful renew, which
can only make the local deadline earlier than the database's.

On SQLite the same loop runs with one replica: it holds every link.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import secrets
import socket
import time
from pathlib import Path
from typing import Protocol

import structlog

from service.store import Store
from service.store.leases import Claimed
from service.store.records import Subscription

log = structlog.get_logger("mcpsubd.leases")
RECONCILE_EVERY = 10  # lease passes between full reconciles when nothing changed


class LinkOwner(Protocol):
    """What the keeper asks of the supervisor (it owns the links)."""

    def held(self) -> set[int]: ...

    async def adopt(self, claimed: Claimed, subs: list[Subscription] | None = None) -> None: ...

    async def drop(self, server_id: int, *, release: bool) -> None: ...

    async def reconcile(self) -> None: ...


def default_replica_id(state_dir: Path | None = None) -> str:
    """``<host>-<random>``, kept in ``<state_dir>/replica.id``: a replica restarted on the same
    state dir (a crash, ``systemctl restart``) is the same replica, and takes its own leases
    (links and deliveries) back at once instead of waiting for them to expire."""
    path = state_dir / "replica.id" if state_dir is not None else None
    if path is not None:
        with contextlib.suppress(OSError):
            kept = path.read_text().strip()
            if kept:
                return kept
    value = f"{socket.gethostname()}-{secrets.token_hex(4)}"
    if path is not None:
        with contextlib.suppress(OSError):
            path.write_text(value + "\n")
    return value


class LeaseKeeper:
    def __init__(self, store: Store, owner: LinkOwner, ttl_s: float, replica_id: str) -> None:
        self.store = store
        self.owner = owner
        self.ttl_s = ttl_s
        self.replica_id = replica_id
        self.valid_until = 0.0
        """Monotonic time by which the held leases may have expired (no renew since)."""
        self.stats: dict[str, float] = {
            "leases_held": 0.0,
            "lease_claims_total": 0.0,
            "lease_handovers_total": 0.0,
            "lease_releases_total": 0.0,
            "lease_expired_locally_total": 0.0,
            "lease_renew_failures_total": 0.0,
            "lease_renew_seconds": 0.0,
            "replicas_live": 0.0,
        }
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._passes = 0

    @property
    def interval_s(self) -> float:
        return self.ttl_s / 3

    async def start(self) -> None:
        """Register and take a first share before the API says ready."""
        await self.store.lease_heartbeat(self.replica_id, socket.gethostname(), os.getpid())
        await self.tick()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="leases")

    async def stop(self) -> None:
        """Graceful stop: announce it (the others stop counting us), then the caller stops the
        links and :meth:`leave` releases every lease."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        try:
            await self.store.lease_heartbeat(
                self.replica_id, socket.gethostname(), os.getpid(), stopping=True
            )
        except Exception as exc:
            log.warning("could not announce the stop", error=str(exc))

    async def leave(self) -> None:
        try:
            await self.store.leave(self.replica_id)
        except Exception as exc:  # the leases then expire after their TTL
            log.warning("could not release the leases", error=str(exc))

    async def _run(self) -> None:
        while not self._stopping:
            try:
                await self.tick()
                delay = self.interval_s
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.stats["lease_renew_failures_total"] += 1
                log.warning("lease renew failed", error=str(exc))
                await self._expire_locally()
                delay = min(1.0, self.ttl_s / 10)
            await asyncio.sleep(delay)

    async def _expire_locally(self) -> None:
        """No successful renew for 2/3 of the TTL: stop every link before its lease lapses."""
        if time.monotonic() < self.valid_until - self.ttl_s / 3:
            return
        held = self.owner.held()
        if held:
            log.warning("leases about to expire without renewal; stopping links", links=len(held))
            self.stats["lease_expired_locally_total"] += len(held)
        for server_id in sorted(held):
            await self.owner.drop(server_id, release=False)

    async def tick(self) -> None:
        started = time.monotonic()
        held_before = set(self.owner.held())
        await self.store.lease_heartbeat(self.replica_id, socket.gethostname(), os.getpid())
        # Only the differences come back: a pass over 1,000 held links returned 1,000 rows.
        renewed = await self.store.renew_lease_changes(self.replica_id, self.ttl_s, held_before)
        self.valid_until = started + self.ttl_s
        self.stats["lease_renew_seconds"] = time.monotonic() - started
        # Against what runs now: a link adopted or dropped during the renew is neither.
        for server_id in [i for i in renewed.lost if i in self.owner.held()]:
            log.warning("lease gone; stopping the link", server_id=server_id)
            await self.owner.drop(server_id, release=False)
        orphans = [i for i in renewed.orphans if i not in self.owner.held()]
        if orphans:  # ours in the table but not running: a previous run, or stopped locally
            await self.claim(len(orphans), only=orphans, mine_too=True)
        live, links = await self.store.lease_balance(self.ttl_s)
        self.stats["replicas_live"] = float(live)
        share = math.ceil(links / live) if links else 0
        mine = self.owner.held()
        if len(mine) < share:
            await self.claim(share - len(mine))
        elif len(mine) > share:
            # Release the newest links beyond the share: stop first, then release, so the
            # next owner never overlaps with us.
            # next owner never overlaps with us. One release statement for all of them: a
            # statement per link made a pass that hands 500 links over outlast the TTL on a
            # busy host (bench/scaleout.py), so our own heartbeat lapsed meanwhile.
            extra = sorted(mine, reverse=True)[: len(mine) - share]
            for server_id in extra:
                await self.owner.drop(server_id, release=False)
            await self.store.release_leases(self.replica_id, extra)
            self.stats["lease_releases_total"] += len(extra)
        # Subscriptions added or removed through this replica's API reach its links at once, and
        # another replica's changes arrive by NOTIFY (``_remote_link_change``). A full reconcile
        # (it loads every held subscription: most of an idle daemon's CPU at 10,000 of them) is
        # the safety net for a missed notification: when the held set changed, and every
        # ``RECONCILE_EVERY`` passes otherwise.
        if self.owner.held() != held_before or self._passes % RECONCILE_EVERY == 0:
            await self.owner.reconcile()
        self.stats["leases_held"] = float(len(self.owner.held()))
        self._passes += 1
        if self._passes % 100 == 1:
            await self.store.forget_dead_replicas(max(3600.0, self.ttl_s * 20))

    async def claim(
        self, limit: int, only: list[int] | None = None, *, mine_too: bool = False
    ) -> list[Claimed]:
        claimed = await self.store.claim_leases(
            self.replica_id, self.ttl_s, limit, only, mine_too=mine_too
        )
        # The claimed links' subscriptions in one query, not one per link: with a query per
        # link, claiming 1,000 links took one pass longer than the TTL on a busy host, the
        # next heartbeat came too late, the other replicas counted this one dead and took
        # the links back, and the replicas passed all the links to and fro (bench/scaleout.py).
        subs: dict[int, list[Subscription]] = {item.server_id: [] for item in claimed}
        if claimed:
            for sub in await self.store.list_subscriptions(server_ids=list(subs)):
                subs[sub.server_id].append(sub)
        for item in claimed:
            self.stats["lease_claims_total"] += 1
            if item.previous_owner not in (None, self.replica_id):
                self.stats["lease_handovers_total"] += 1
            (log.info if item.previous_owner else log.debug)(
                "lease claimed",
                server_id=item.server_id,
                epoch=item.epoch,
                previous=item.previous_owner,
            )
            await self.owner.adopt(item, subs[item.server_id])
        self.stats["leases_held"] = float(len(self.owner.held()))
        return claimed
