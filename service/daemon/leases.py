"""The replica's lease loop: heartbeat, renew, rebalance, and stop links before they expire.

Every third of the TTL (or at once when another replica asks over ``NOTIFY``) one pass:
heartbeat, renew every held lease (the database returns the ones we still hold; any other link
is stopped at once, because another replica owns it now), then move towards the fair share
``ceil(links / live replicas)``. Below it: claim unowned or expired links, then request links
other replicas offer and listen to them in standby. Above it: offer the newest links beyond
the share. A handover is make-before-break: the offering replica keeps running a link until
the successor's own listen is acknowledged and it takes the lease (one fenced statement, see
:mod:`service.store.leases`); on SIGTERM (:meth:`LeaseKeeper.hand_over`) every link is offered
and the replica waits, bounded, until they are taken. A renew that fails keeps being retried; if none has
succeeded for two thirds of the TTL every link is stopped locally, so no link runs on after
its lease could have expired (the database would fence its writes anyway, see
:mod:`service.store.leases`). The time base is the start of the last successful renew, which
can only make the local deadline earlier than the database's. A renew has a deadline of its
own (9/10 of the TTL after the last successful one): a frozen database does not fail a
statement, it never answers it, and a renew awaited without one kept every link running past
its lease.
While the database does not answer, the storage is reported failing (``/readyz`` 503).

After an outage every replica's leases have expired in the database's clock at once. Each
replica first renews and takes back what it held (its orphans) and claims other replicas'
expired links only a renew interval later, by which time their owners have heartbeated
again; a claim also skips links whose owner heartbeats (:func:`service.store.leases.claim`).
Without that, the first replica to reach the database took every link and the others
dropped theirs: a mass swap with a re-listen of every link.

On SQLite the same loop runs with one replica: it holds every link, and no other process
can take one, so a failing renew (a full disk) never stops its links. Nothing outside this
process changes what it holds either (its API adopts and drops links itself), so there the
passes are a safety net and run every :data:`SINGLE_REPLICA_PASS_S` while the storage is
healthy: renewing every lease and reconciling every subscription at the TTL's cadence would
be most of an idle daemon's CPU besides the streams' keep-alive frames. While writes fail the
TTL's cadence stays (a renew is then the write that sees the storage recover).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import secrets
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import structlog

from service.store import Store
from service.store.database import database_errors, describe
from service.store.health import is_unanswered
from service.store.lease_repository import LeaseRepository
from service.store.leases import Claimed, Requested

log = structlog.get_logger("mcpsubd.leases")
RECONCILE_EVERY = 10  # lease passes between full reconciles when nothing changed
SINGLE_REPLICA_PASS_S = 60.0
"""Seconds between lease passes (renew, balance) of a single-replica (SQLite) daemon whose
storage is healthy; with replicas, or while writes fail, a third of the TTL."""


class LinkOwner(Protocol):
    """What the keeper asks of the supervisor (it owns the links)."""

    def held(self) -> set[int]: ...

    async def adopt(self, claimed: Claimed, wanted: Mapping[str, int] | None = None) -> None:
        """Start a claimed link; ``wanted``: its URIs (URI -> subscription id) when read."""
        ...

    async def drop(self, server_id: int, *, release: bool) -> None: ...

    async def reconcile(self) -> None: ...

    def standby(self) -> set[int]:
        """Links listened to in standby, waiting to take their lease."""
        ...

    async def prepare(self, requested: Requested) -> None:
        """Listen to a requested link in standby; take its lease once acknowledged."""
        ...

    async def abandon(self, server_id: int) -> None:
        """Stop a standby link whose request is gone."""
        ...


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
        self.repo = LeaseRepository(store)
        """The lease statements (the supervisor releases and reconciles through it too)."""
        self.owner = owner
        self.ttl_s = ttl_s
        self.replica_id = replica_id
        self.valid_until = 0.0
        """Monotonic time by which the held leases may have expired (no renew since)."""
        self.stats: dict[str, float] = {
            "leases_held": 0.0,
            "leases_standby": 0.0,
            "lease_claims_total": 0.0,
            "lease_handovers_total": 0.0,
            "lease_takeovers_total": 0.0,
            "lease_offers_total": 0.0,
            "lease_releases_total": 0.0,
            "lease_expired_locally_total": 0.0,
            "lease_renew_failures_total": 0.0,
            "lease_renew_seconds": 0.0,
            "replicas_live": 0.0,
        }
        self._task: asyncio.Task[None] | None = None
        self._renewer: asyncio.Task[None] | None = None
        self._stopping = False
        self._handing_over = False
        self._handed_over = asyncio.Event()
        self._wake = asyncio.Event()
        self._offered: set[int] = set()
        """Links we offered and still hold: when one goes, it was handed over, not lost."""
        self._passes = 0
        self._orphans: set[int] = set()
        self._claim_lock = asyncio.Lock()
        """Held from a claim's statement until its links run (see :meth:`_claim_orphans`)."""
        """Links the last renew found ours in the database but not running here."""
        self._renewing: asyncio.Task[set[int]] | None = None
        """The renew in flight: one at most, however long the database takes to answer."""
        self._renew_failing = False
        self._foreign_claims_after = 0.0
        """Monotonic time before which only our own and unowned links are claimed (set after
        an outage: the other replicas need a renew to show they are alive)."""

    @property
    def interval_s(self) -> float:
        return self.ttl_s / 3

    @property
    def pass_interval_s(self) -> float:
        """How long the renew and balance loops wait between passes (see the module)."""
        health = self.store.health
        if self.store.dialect.replicated or health.failing or health.pending_events:
            return self.interval_s
        return max(self.interval_s, SINGLE_REPLICA_PASS_S)

    async def start(self) -> None:
        """Register and take a first share before the API says ready; then ask the others to
        rebalance now (they offer what is above the new share) rather than at their next pass.

        A database that refuses these writes (a full disk) does not stop the start: the API
        comes up and says ``STORAGE_FAILING``, and the renew loop claims the links as soon as
        a write goes through."""
        try:
            await self.repo.heartbeat(self.replica_id, socket.gethostname(), os.getpid())
            await self.tick()
            await self.repo.wake_replicas()
        except database_errors() as exc:
            self._renew_failed(exc)
            log.warning(
                "the database refuses the lease writes; the links start once it takes them",
                error=describe(exc),
            )
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name="leases")
        self._renewer = loop.create_task(self._renew_forever(), name="lease-renew")

    def wake(self) -> None:
        """Run a pass now (another replica offered links, or took one of ours)."""
        self._wake.set()

    async def hand_over(self, timeout_s: float) -> int:
        """Graceful stop, make-before-break: offer every held link and keep running them until
        the other replicas have taken them (each after its own listen was acknowledged), at
        most ``timeout_s``. Returns how many links are still held (the caller stops and
        releases them: break-before-make for those). Nothing to do without another live
        replica (SQLite always)."""
        if not self.store.dialect.replicated or not self.owner.held():
            return len(self.owner.held())
        try:
            live, _ = await self.repo.balance(self.ttl_s)
            if live <= 1:
                return len(self.owner.held())
            self._handing_over = True
            # Counted as offered before the offer commits: the renewer runs meanwhile, and a
            # successor fast enough to take a link before ``offer_leases`` returns here must
            # read as "handed over", not as a lost lease.
            self._offered.update(self.owner.held())
            await self.repo.heartbeat(
                self.replica_id, socket.gethostname(), os.getpid(), stopping=True
            )
            offered = await self.repo.offer(self.replica_id, None)
        except Exception as exc:
            log.warning("could not offer the links for hand-over", error=str(exc))
            return len(self.owner.held())
        self._offered.update(offered)
        self.stats["lease_offers_total"] += len(offered)
        log.info("handing the links over", links=len(self.owner.held()), timeout_s=timeout_s)
        self.wake()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._handed_over.wait()
        left = len(self.owner.held())
        if left:
            log.warning("hand-over incomplete; stopping the rest", links=left)
        return left

    async def stop(self) -> None:
        """Announce the stop (the others stop counting us); the caller then stops the links
        and :meth:`leave` releases every lease still held. Bounded: a database that does not
        answer must not hold up a SIGTERM (the leases then expire after their TTL)."""
        self._stopping = True
        for task in (self._task, self._renewer, self._renewing):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        try:
            async with asyncio.timeout(self.interval_s):
                await self.repo.heartbeat(
                    self.replica_id, socket.gethostname(), os.getpid(), stopping=True
                )
        except Exception as exc:
            log.warning("could not announce the stop", error=describe(exc))

    async def leave(self) -> None:
        try:
            async with asyncio.timeout(self.interval_s):
                await self.repo.leave(self.replica_id)
        except Exception as exc:  # the leases then expire after their TTL
            log.warning("could not release the leases", error=describe(exc))

    async def _run(self) -> None:
        """The balance loop: a pass every third of the TTL, or at once when woken."""
        woken = False
        while not self._stopping:
            self._wake.clear()
            try:
                if woken:  # one of our links may have been taken: renew (and drop it) first
                    await self.tick()
                else:
                    await self.balance(self._orphans)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("lease pass failed", error=str(exc))
            woken = False
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.pass_interval_s):
                    woken = await self._wake.wait()

    async def _renew_forever(self) -> None:
        """Renewing on its own timer: a slow pass (claiming and starting a hundred links after
        a failover, a reconcile) must not delay the renew past the TTL. Under load that made
        leases lapse, the others claim them, the claims add load: a replica-wide flap."""
        while not self._stopping:
            try:
                await self._renew_by_deadline()
                delay = self.pass_interval_s
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.stats["lease_renew_failures_total"] += 1
                self._renew_failed(exc)
                log.warning("lease renew failed", error=describe(exc))
                await self._expire_locally()
                delay = min(1.0, self.ttl_s / 10)
            else:
                if self.store.health.pending_events:  # "failing"/"ok", kept while writes failed
                    await self.store.record_storage_events()
                if self._renew_failing:
                    self._renew_failing = False
                    # Others' expired links only after they had a renew interval to show
                    # they are alive; our own (orphans) at once.
                    if self.store.dialect.replicated:
                        self._foreign_claims_after = time.monotonic() + self.interval_s
                    log.info("lease renew works again")
                    self.wake()
            await asyncio.sleep(delay)

    def renew_deadline_s(self) -> float:
        """How long the next renew may take: until 9/10 of the TTL after the last successful
        renew started, at least a tenth of the TTL. Not 2/3: on a loaded host (or a busy
        pool) a renew that is merely slow stopped every link of every replica for nothing;
        no other replica can claim a link before our heartbeat, written by the same renew,
        is a whole TTL old. An unanswered renew is awaited again by the next attempt, not
        started twice."""
        return max(self.ttl_s / 10, self.valid_until - self.ttl_s / 10 - time.monotonic())

    async def _renew_by_deadline(self) -> None:
        """:meth:`renew` within :meth:`renew_deadline_s`. A renew the database does not answer
        stays in flight (its connection is the pool's problem, not the loop's) and is awaited
        again by the next attempt rather than started a second time beside it."""
        if self._renewing is None:
            self._renewing = asyncio.get_running_loop().create_task(self.renew(), name="renew")
        deadline = self.renew_deadline_s()
        done, _ = await asyncio.wait({self._renewing}, timeout=deadline)
        if not done:
            # Rounded: the deadline is what is left of a TTL, and "within 3.87193 s" in the
            # log, the status and the daemon.storage event reads as noise.
            raise TimeoutError(
                f"the database did not answer the lease renew within {round(deadline, 1):g} s"
            )
        task, self._renewing = self._renewing, None
        task.result()

    def _renew_failed(self, exc: BaseException) -> None:
        """A PostgreSQL that does not answer is the daemon-level storage condition (a refused
        write was counted by the store already; a slow renew on SQLite is a busy writer
        thread, not a database gone)."""
        self._renew_failing = True
        if self.store.dialect.replicated:
            self._foreign_claims_after = math.inf
            if is_unanswered(exc):
                self.store.health.failed(exc)

    async def _expire_locally(self) -> None:
        """No successful renew for 2/3 of the TTL: stop every link before its lease lapses.
        Not on SQLite: one daemon holds every link there and no other can claim one, so a
        failing renew (a full disk) must not stop the links; their reads stay pending."""
        if not self.store.dialect.replicated:
            return
        if time.monotonic() < self.valid_until - self.ttl_s / 3:
            return
        held = self.owner.held()
        if held:
            log.warning(
                "leases about to expire without renewal; stopping links",
                links=len(held),
                server_ids=sorted(held),
            )
            self.stats["lease_expired_locally_total"] += len(held)
        # Together: a link stopped in the middle of a database call waits for that call's
        # connection to be closed, and one after the other that added up past the TTL.
        await asyncio.gather(
            *(self.owner.drop(server_id, release=False) for server_id in sorted(held)),
            return_exceptions=True,
        )

    async def renew(self) -> set[int]:
        """Heartbeat and renew; stop the links the database no longer lists as ours. Returns
        the links the database lists as ours that do not run here."""
        started = time.monotonic()
        held_before = set(self.owner.held())
        await self.repo.heartbeat(
            self.replica_id, socket.gethostname(), os.getpid(), stopping=self._handing_over
        )
        # Only the differences come back: a pass over 1,000 held links returned 1,000 rows.
        renewed = await self.repo.renew_changes(self.replica_id, self.ttl_s, held_before)
        self.valid_until = started + self.ttl_s
        self.stats["lease_renew_seconds"] = time.monotonic() - started
        # Against what runs now: a link adopted (an API subscribe, a standby link's take) or
        # dropped during the renew is neither.
        for server_id in [i for i in renewed.lost if i in self.owner.held()]:
            if server_id in self._offered:
                log.info("link handed over", server_id=server_id)
            else:
                log.warning("lease gone; stopping the link", server_id=server_id)
            await self.owner.drop(server_id, release=False)
        self._offered &= self.owner.held()
        if self._handing_over and not self.owner.held():
            self._handed_over.set()
        self.stats["leases_held"] = float(len(self.owner.held()))
        self._orphans = set(renewed.orphans)
        return self._orphans

    def offered(self, server_id: int) -> bool:
        """Whether this replica offered the link: losing it then is the hand-over working."""
        return server_id in self._offered

    async def tick(self) -> None:
        """One pass: renew, then move towards the fair share."""
        await self.balance(await self.renew())

    async def balance(self, orphans_seen: set[int]) -> None:
        """Claim, request or offer towards the fair share; ``orphans_seen``: links the last
        renew found ours in the database but not running here (the renew loop keeps it)."""
        if self._handing_over:
            return
        held_before = set(self.owner.held())
        await self._claim_orphans(orphans_seen)
        live, links = await self.repo.balance(self.ttl_s)
        self.stats["replicas_live"] = float(live)
        share = math.ceil(links / live) if links else 0
        standby = self.owner.standby()
        if standby:  # a request may have been withdrawn or overtaken by a plain claim
            for server_id in sorted(standby - await self.repo.requested(self.replica_id)):
                await self.owner.abandon(server_id)
            standby = self.owner.standby()
        if standby and time.monotonic() >= self._foreign_claims_after:
            # The owner left (or died) before our standby listen was acknowledged: the link
            # is free, and we count it towards our share, so no replica at its share would
            # ever claim it. Claim it now (a claim takes only free links): a standby whose
            # listen is never acknowledged must not hold a link unowned.
            await self.claim(len(standby), only=sorted(standby))
            standby = self.owner.standby()
        mine = self.owner.held()
        if len(mine) + len(standby) < share:
            # Expired links of others only once they had time to renew after an outage;
            # offered links (their owner is alive and asks) at any time.
            claimed = (
                await self.claim(share - len(mine) - len(standby))
                if time.monotonic() >= self._foreign_claims_after
                else []
            )
            need = share - len(mine) - len(standby) - len(claimed)
            if need > 0 and self.store.dialect.replicated:
                for item in await self.repo.request(self.replica_id, self.ttl_s, need):
                    log.info("listening in standby", server_id=item.server_id, owner=item.owner)
                    await self.owner.prepare(item)
        if len(mine) > share:
            # Offer the newest links beyond the share; we keep running them until a replica
            # below its share has listened and taken them (make-before-break).
            excess = sorted(mine - self._offered, reverse=True)[
                : len(mine) - share - len(self._offered)
            ]
            if excess:
                offered = await self.repo.offer(self.replica_id, excess)
                self._offered.update(offered)
                self.stats["lease_offers_total"] += len(offered)
        elif self._offered and len(mine) <= share:
            # No longer above the share: take back the offers nobody requested yet.
            await self.repo.withdraw_offers(self.replica_id)
            self._offered.clear()
        # Subscriptions added or removed through this replica's API reach its links at once, and
        # another replica's changes arrive by NOTIFY (``_remote_link_change``). A full reconcile
        # (it loads every held subscription: most of an idle daemon's CPU at 10,000 of them) is
        # the safety net for a missed notification: when the held set changed, and every
        # ``RECONCILE_EVERY`` passes otherwise.
        # On SQLite nothing can be missed (no other replica, no NOTIFY): only a changed held set.
        periodic = self.store.dialect.replicated and self._passes % RECONCILE_EVERY == 0
        if self.owner.held() != held_before or periodic:
            await self.owner.reconcile()
        self.stats["leases_held"] = float(len(self.owner.held()))
        self.stats["leases_standby"] = float(len(self.owner.standby()))
        self._passes += 1
        if self._passes % 100 == 1:
            await self.repo.forget_dead_replicas(max(3600.0, self.ttl_s * 20))

    async def _claim_orphans(self, orphans_seen: set[int]) -> None:
        """Claim again the links the database lists as ours that do not run here (a previous
        run of ours, or a link stopped locally). Decided under the claim lock: a claim in
        flight (an API subscribe's, between its commit and the link's start) has committed
        the lease to us before its link runs, so a renew in that window reports the link as
        an orphan; claiming it again bumped the generation under the link just started, which
        then lost its first stream right after the server acknowledged it."""
        async with self._claim_lock:
            orphans = sorted(i for i in orphans_seen if i not in self.owner.held())
            if orphans:
                await self._claim(len(orphans), only=orphans, mine_too=True)

    async def claim(
        self, limit: int, only: list[int] | None = None, *, mine_too: bool = False
    ) -> list[Claimed]:
        """Claim up to ``limit`` links and start them (one claim at a time: see
        :meth:`_claim_orphans`)."""
        async with self._claim_lock:
            return await self._claim(limit, only, mine_too=mine_too)

    async def _claim(
        self, limit: int, only: list[int] | None = None, *, mine_too: bool = False
    ) -> list[Claimed]:
        claimed = await self.repo.claim(self.replica_id, self.ttl_s, limit, only, mine_too=mine_too)
        # The claimed links' URIs in one query, not one per link: with a query per link,
        # claiming 1,000 links took one pass longer than the TTL on a busy host, the next
        # heartbeat came too late, the other replicas counted this one dead and took the
        # links back, and the replicas passed the links to and fro (bench/scaleout.py).
        wanted = (
            await self.store.wanted_uris([item.server_id for item in claimed]) if claimed else {}
        )
        for item in claimed:
            self.stats["lease_claims_total"] += 1
            handed_over = item.previous_owner not in (None, self.replica_id)
            if handed_over:
                self.stats["lease_handovers_total"] += 1
            # Our own previous run's links (a restart) at debug: a line per link at a start
            # of 10,000 says nothing the "supervisor started" line does not.
            (log.info if handed_over else log.debug)(
                "lease claimed",
                server_id=item.server_id,
                epoch=item.epoch,
                previous=item.previous_owner,
            )
            await self.owner.adopt(item, wanted[item.server_id])
        self.stats["leases_held"] = float(len(self.owner.held()))
        return claimed

    async def take(self, server_id: int) -> Claimed | None:
        """A standby link's listen was acknowledged: take its lease (fencing the previous
        owner from this commit on). None when the request is gone."""
        taken = await self.repo.take(self.replica_id, self.ttl_s, server_id)
        if taken is None:
            return None
        self.stats["lease_claims_total"] += 1
        self.stats["lease_takeovers_total"] += 1
        if taken.previous_owner not in (None, self.replica_id):
            self.stats["lease_handovers_total"] += 1
        log.info(
            "lease taken over",
            server_id=server_id,
            epoch=taken.epoch,
            previous=taken.previous_owner,
        )
        return taken
