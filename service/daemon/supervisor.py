"""The supervisor: one :class:`ServerLink` per server, started from the store, changed by the API.

``serve`` order (uvicorn's model): :meth:`start` loads every subscription and starts its
link (after a restart, or a kill -9, every link re-listens and every URI is re-read), the API
then changes the set through :meth:`subscribe` / :meth:`unsubscribe`, and :meth:`stop` closes
every stream locally. A background task prunes history on a timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from service.auth.store import store_signature
from service.daemon import metrics
from service.daemon.config import Settings
from service.daemon.leases import LeaseKeeper, LinkOwner
from service.daemon.link import ServerLink, TokenProvider
from service.daemon.linkstatus import LinkState
from service.daemon.refresher import READS_PER_LINK
from service.daemon.statuscache import StatusCache
from service.daemon.subscribe_batch import SubscribeBatcher
from service.daemon.takeover import Handover
from service.daemon.tokens import SharedTokens
from service.mcp.transports.base import Transport
from service.mcp.transports.choose import default_tls, make_transport
from service.mcp.transports.lean import IdlePool
from service.store import Store, Subscription
from service.store.database import describe
from service.store.eventhub import EventHub
from service.store.leases import OFFERED, Claimed, Requested, uri_set_digest
from service.store.notify import PgListener
from service.triggers.runner import TriggerRunner
from service.webhooks.dispatcher import Dispatcher

log = structlog.get_logger("mcpsubd.supervisor")


IDLE_SHARE_OF_DESCRIPTORS = 8
"""The links' idle connections may hold one descriptor in this many: with one listen
stream per link, links fill half a 20,000 limit at 10,000, and what a start has in flight
(``connect_concurrency`` discovers, ``read_concurrency`` reads) stays well inside the rest."""
DEFAULT_IDLE = 1024
"""The pool's size where the descriptor limit is unknown."""


def idle_budget(open_files: int) -> int:
    """How many idle connections the links may keep, all origins together."""
    if open_files <= 0:
        return DEFAULT_IDLE
    return max(READS_PER_LINK, open_files // IDLE_SHARE_OF_DESCRIPTORS)


class Supervisor:
    def __init__(
        self,
        store: Store,
        settings: Settings,
        webhooks: Dispatcher,
        leases: Callable[[LinkOwner], LeaseKeeper],
        triggers: TriggerRunner,
        token_provider: TokenProvider | None = None,
        tokens_available: Callable[[], bool] | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.events = EventHub()
        self.started_at = time.time()
        self.ready = False
        self.links: dict[int, ServerLink] = {}
        self.stats: dict[str, int] = {}
        self._tokens = (
            SharedTokens(token_provider, store_signature, settings.token_check_s)
            if token_provider is not None
            else None
        )
        """Every link's token look-up: one per origin and re-check interval (service.daemon.tokens)."""
        self._tokens_available = tokens_available
        """Whether ``token_provider`` could find any token now (its store exists): asked once
        per tick for every link (see :meth:`ServerLink.tick`); None: always."""
        self._limiter = asyncio.Semaphore(settings.read_concurrency)
        self._connecting = asyncio.Semaphore(max(1, settings.connect_concurrency))
        # One TLS context for every https link (loading the CA bundle once, when the first
        # one is made), and one small connection pool per link: httpcore scans its whole pool
        # on every request, and with one shared pool holding 1,000 listen streams that scan
        # was most of the daemon's CPU per update (results/daemon.md).
        self._tls: ssl.SSLContext | None = None
        self.idle_pool = IdlePool(idle_budget(0))
        """The links' idle plain-http connections, shared per origin (a read takes what
        another link's read left); sized to the descriptor limit by :func:`idle_budget`."""
        self._lock = asyncio.Lock()
        self._prune_task: asyncio.Task[None] | None = None
        self._tick_task: asyncio.Task[None] | None = None
        store.on_event.append(self.events.publish)
        self.gauges: dict[str, Callable[[], float]] = {}
        """Extra ``/metrics`` values the daemon wires in (API connections, descriptors)."""
        self.admit_link: Callable[[], None] | None = None
        self.descriptors_short: Callable[[], None] | None = None
        """Set with ``admit_link``: a link's connection failed for want of a descriptor."""
        """Raises ``ResourceLimit`` when a link must not open connections now (descriptors)."""
        self.webhooks = webhooks
        self.triggers = triggers
        self.gauges.update(triggers.gauges())  # /metrics: mcpsub_trigger_runs_started_total, …
        self.leases = leases(self)
        """Made by the composition root (``service.daemon.wiring``), given this supervisor."""
        self.replica_id = self.leases.replica_id
        self.handover = Handover(
            store, self.leases.take, self.new_link, self.links, self.lease_lost
        )
        """The links listened to in standby (make-before-break): not ours until taken."""
        self._listener: PgListener | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._batcher = SubscribeBatcher(
            store,
            self._lock,
            lambda server_id: self.links.get(server_id),
            lambda count, only: self.leases.claim(count, only=only),
        )
        """Subscribe requests that queue up, written in one batch (``subscribe_many``)."""
        self._status_cache = StatusCache()
        """Each link's last status JSON (``link_status_json``)."""

    async def start(self) -> None:
        self.events.last_id = await self.store.last_event_id()
        # Claims this replica's share of the links (all of them on SQLite) and starts them.
        await self.leases.start()
        if self.store.database.is_postgresql:
            # Events and subscription changes committed by the other replicas wake us too.
            self._listener = PgListener(
                self.settings.db_url,
                self._remote_event,
                self._remote_link_change,
                newest_id=self.store.last_event_id,
                on_lease=self._remote_lease,
            )
            self._listener.start()
        self._prune_task = asyncio.get_running_loop().create_task(self._prune_forever())
        self._tick_task = asyncio.get_running_loop().create_task(self._tick_forever())
        self.webhooks.start()
        self.triggers.start()
        self.ready = True
        log.info("supervisor started", links=len(self.links))

    async def hand_over(self) -> None:
        """SIGTERM, first step (PostgreSQL with other live replicas): offer every link and keep
        running them until the other replicas have listened and taken them, at most
        ``handover_timeout_s`` (make-before-break). :meth:`stop` then stops what is left."""
        self.ready = False
        for server_id in sorted(self.handover.links):
            await self.abandon(server_id)
        await self.leases.hand_over(self.settings.handover_timeout_s)

    async def stop(self) -> None:
        """Stop renewing, close every stream, then release the leases still held (after
        :meth:`hand_over`, none unless it timed out) so the others claim them at once."""
        self.ready = False
        for task in (self._prune_task, self._tick_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        await self.leases.stop()
        if self._listener is not None:
            await self._listener.stop()
        async with self._lock:
            links = [*self.links.values(), *self.handover.links.values()]
            self.links.clear()
            self.handover.links.clear()
        await asyncio.gather(*(link.stop() for link in links), return_exceptions=True)
        # Links stopped on a lost lease, reconciles: ended on purpose, not left to be destroyed.
        await asyncio.gather(*list(self._background), return_exceptions=True)
        self.idle_pool.close_all()
        await self.leases.leave()
        await self.webhooks.stop()
        await self.triggers.stop()

    # ---- the lease keeper's side (service.daemon.leases.LinkOwner) -------------------------
    def held(self) -> set[int]:
        return set(self.links)

    def standby(self) -> set[int]:
        return set(self.handover.links)

    def new_link(self, server_id: int, url: str, wanted: Mapping[str, int]) -> ServerLink:
        """A link wanting ``wanted`` (URI -> subscription id), not started."""
        link = ServerLink(
            server_id,
            url,
            self.store,
            self.settings,
            self._new_transport,
            self._limiter,
            self.stats,
            self._tokens,
        )
        link.admit = self.admit_link
        link.descriptors_short = self.descriptors_short
        link.connecting = self._connecting
        for uri, subscription_id in wanted.items():
            link.want(uri, subscription_id)
        return link

    async def adopt(self, claimed: Claimed, wanted: Mapping[str, int] | None = None) -> None:
        """Start the link we just leased, under the generation the claim gave it (``wanted``:
        its URIs, URI -> subscription id, when the caller read them already)."""
        if wanted is None:
            wanted = (await self.store.wanted_uris([claimed.server_id]))[claimed.server_id]
        for stale in (
            self.links.pop(claimed.server_id, None),  # an old run of ours, fenced by the claim
            self.handover.pop(claimed.server_id),  # its request overtaken
        ):
            if stale is not None:
                await stale.stop()
        link = self.new_link(claimed.server_id, claimed.url, wanted)
        link.generation = claimed.generation
        link.on_lease_lost = self.lease_lost
        self.links[claimed.server_id] = link
        link.start()

    async def prepare(self, requested: Requested) -> None:
        """Listen to a link another replica offered, in standby: it writes nothing until its
        listen is acknowledged, then takes the lease and re-reads every URI while the previous
        owner is told to close its stream (:class:`service.daemon.takeover.Handover`)."""
        await self.handover.prepare(requested)

    async def abandon(self, server_id: int) -> None:
        await self.handover.abandon(server_id)

    async def drop(self, server_id: int, *, release: bool) -> None:
        """Stop a link; with ``release`` hand its lease back afterwards (never before)."""
        link = self.links.pop(server_id, None)
        if link is not None:
            await link.stop()
        if release:
            await self.leases.repo.release(self.replica_id, [server_id])

    async def reconcile(self) -> None:
        """Bring the held links' URI sets in line with the database (a subscription may have
        been added or removed through another replica's API).

        One digest row per link first (count, id sum, URI length sum); only links whose
        digest differs from what they hold are reloaded. Loading all 10,000 subscriptions of
        an idle daemon on every reconcile was most of its CPU (results/daemon.md)."""
        async with self._lock:
            if not self.links:
                return
            digests = await self.leases.repo.uri_set_digests(self.replica_id)
            stale = sorted(
                server_id
                for server_id, link in self.links.items()
                if digests.get(server_id, (0, 0, 0)) != uri_set_digest(link.wanted)
            )
            if not stale:
                return
            wanted = await self.store.wanted_uris(stale)
            for server_id in stale:
                link = self.links.get(server_id)
                if link is None:
                    continue
                uris = wanted.get(server_id, {})
                for uri in set(link.wanted) - set(uris):
                    link.unwant(uri)
                for uri, subscription_id in uris.items():
                    link.want(uri, subscription_id)
                if not uris:
                    await self.drop(server_id, release=True)

    def _remote_event(self, event_id: int) -> None:
        self.events.seen(event_id)
        self.webhooks.remote_events()  # its outbox rows may be ours to deliver
        self.triggers.remote_events()

    def _remote_link_change(self, server_id: int) -> None:
        if server_id in self.links:
            task = asyncio.get_running_loop().create_task(self.reconcile())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    def _remote_lease(self, whom: str) -> None:
        if whom in (self.replica_id, OFFERED):
            self.leases.wake()

    def lease_lost(self, server_id: int) -> None:
        """A held link's fenced write was refused: another replica took it. During a hand-over
        a successor can take an offered link before our renew notices; that is the hand-over
        working, and is logged as the renew would have logged it."""
        link = self.links.pop(server_id, None)
        if link is not None and self.leases.offered(server_id):
            log.info("link handed over", server_id=server_id)
        if link is not None:
            task = asyncio.get_running_loop().create_task(link.stop())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    def close_idle_connections(self) -> None:
        """Every link's idle read connections, closed now: the descriptor budget's relief when
        it refuses a link (a read connects again; the descriptors go on the loop's next turn)."""
        now = time.monotonic()
        for link in (*self.links.values(), *self.handover.links.values()):
            link.close_idle(now)

    def _new_transport(self, url: str) -> Transport:
        """A link's transport. The listen stream holds one connection, and each of the link's
        read slots one more, kept alive between reads: with one kept for two slots, every
        other read of a burst (ten at an acknowledgement) connected and closed a socket, a
        large share of the event loop's CPU at a cold start. A server
        closes what it does not want kept (the lab after 15 s), and the socket goes then."""
        settings = self.settings
        return make_transport(
            url,
            timeout=settings.request_timeout_s,
            connect_timeout=settings.connect_timeout_s,
            max_connections=8,
            max_idle=READS_PER_LINK,
            tls=self._shared_tls,
            pool=self.idle_pool,
        )

    def _shared_tls(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = default_tls()
        return self._tls

    async def subscribe(self, url: str, uri: str) -> tuple[Subscription, bool]:
        return (await self.subscribe_many(url, [uri]))[0]

    async def subscribe_many(
        self, url: str, uris: list[str], *, created_by: str = "person"
    ) -> list[tuple[Subscription, bool]]:
        """Several URIs of one server in one transaction; the link re-listens once for all.
        A new subscription records ``created_by`` (``agent`` from the MCP face).

        Requests that arrive while a write is under way are gathered and written together
        (:mod:`service.daemon.subscribe_batch`)."""
        return await self._batcher.subscribe_many(url, uris, created_by)

    async def unsubscribe(
        self, subscription_id: int, *, created_by: str | None = None
    ) -> Subscription | None:
        """``created_by``: remove it only if that one still made it (``Store.remove_subscription``
        raises ``KeptForCreator`` otherwise)."""
        async with self._lock:
            sub = await self.store.remove_subscription(subscription_id, created_by=created_by)
            if sub is None:
                return None
            link = self.links.get(sub.server_id)
            if link is not None:
                link.unwant(sub.uri)
                if not link.wanted:
                    await self.drop(sub.server_id, release=True)
        return sub

    def recheck(self, url: str | None = None) -> list[str]:
        """Wake links (all, or the one for ``url``) to reconnect now; returns their URLs.

        This is how a link parked in ``error`` (server too old) or ``login_required`` is
        tried again without waiting for its slow schedule: ``mcpsubctl resubscribe``, SIGHUP.
        """
        woken = [
            link for link in self.links.values() if url is None or url in (link.url, link.shown_url)
        ]
        for link in woken:
            link.recheck()
        return [link.shown_url for link in woken]

    def link_status(self) -> list[dict[str, Any]]:
        return [link.status() for link in self.links.values()]

    def link_status_of(self, server_id: int) -> dict[str, Any] | None:
        link = self.links.get(server_id)
        return None if link is None else link.status()

    def link_status_json(self) -> bytes:
        """``link_status()`` as a JSON array, each link's part kept until the link changes
        (:mod:`service.daemon.statuscache`)."""
        return self._status_cache.link_status_json(link.snapshot() for link in self.links.values())

    def metrics_snapshot(self) -> dict[str, float]:
        return metrics.metrics_snapshot(
            [link.state for link in self.links.values()],
            self.stats,
            {"event_ring_hits_total": self.events.ring_hits,
             "event_ring_misses_total": self.events.ring_misses},
            self.leases.stats,
            self.webhooks.stats,
            self.gauges,
        )  # fmt: skip

    async def _tick_forever(self) -> None:
        """Keep-alive watchdog and token re-checks for every link, from one timer."""
        interval = max(0.05, min(self.settings.keepalive_s, self.settings.token_check_s) / 2)
        logged = 0
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            available = self._tokens_available is None or self._tokens_available()
            listening = 0
            for link in list(self.links.values()):
                link.tick(now, available)
                listening += link.machine.state is LinkState.OPEN
            if listening != logged:
                # In place of a "listening" line per link's first stream (now debug): a
                # start's progress in a few lines, and a count that drops when links go down.
                log.info("links listening", listening=listening, links=len(self.links))
                logged = listening

    async def _prune_forever(self) -> None:
        settings = self.settings
        while True:
            await asyncio.sleep(settings.prune_interval_s)
            try:
                removed = await self.store.prune(
                    keep_revisions=settings.keep_revisions,
                    max_age_s=settings.max_age_days * 86400,
                    keep_events=settings.keep_events,
                )
            except Exception as exc:  # retried next interval; said, not swallowed
                log.warning(
                    "pruning history failed; trying again next interval",
                    error=describe(exc),
                    error_type=type(exc).__name__,
                    retry_in_s=settings.prune_interval_s,
                )
                continue
            log.info("pruned history", **removed)
