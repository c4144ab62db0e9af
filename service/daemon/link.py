"""One server link: a single ``subscriptions/listen`` stream carrying every URI wanted there.

Lifecycle (one task per link, readable top to bottom in :meth:`ServerLink.run`)::

    resolve token -> discover -> listen(all URIs) -> ack -> generation+1 -> re-read
         ^                                             ^       |
         |                                             |       +-- notifications -> re-read URI
         |                    closed / lost / silent --+-------+   (re-listen at once, jitter)
         |  backoff (full jitter) <- connect / listen / discover failed, 5xx
         |
         +-- URI set changed: listen(new set) -> ack -> close old stream (make-before-break)

Every decision (what an acknowledgement means, how a stream's end is taken, which failure
parks the link in which state and for how long, what the link shows) is
:class:`service.daemon.linkmachine.LinkMachine`'s, which is pure and uses the relisten policy
shared with ``probe --follow`` (:mod:`service.mcp.relisten`). This module does the I/O around
it: discover, listen streams and their readers, the store's writes, the waits. A keep-alive
watchdog (the supervisor's :meth:`ServerLink.tick`) treats a stream that sent no byte for
three keep-alive intervals as lost; the replacement is opened before the silent one is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from sqlalchemy.exc import SQLAlchemyError

from service.daemon import linkstatus
from service.daemon.config import Settings
from service.daemon.inbox import LeanEvent, LinkInbox, first_of
from service.daemon.linkmachine import Down, LinkMachine, StreamEnd, Wake, read_error
from service.daemon.linkstatus import LinkSnapshot, LinkState
from service.daemon.refresher import ReadTarget, Refresher
from service.mcp import discovercache, wire
from service.mcp.classify import iter_causes
from service.mcp.client import DiscoverResult, ListenStream, McpClient
from service.mcp.errors import McpError, TransportError
from service.mcp.listen import Closed, Failed, ListenEvent, Lost, Notified
from service.mcp.transports.base import Transport
from service.safetext import redact_urls
from service.store import Store
from service.store.database import database_errors, describe
from service.store.health import is_storage_failure
from service.store.records import Event, Revision

log = structlog.get_logger("mcpsubd.link")

TokenProvider = Callable[[str], Awaitable[str | None]]


IDLE_CONNECTION_S = 15.0
"""A read connection idle this long is closed on the supervisor's next tick: an idle link
then holds only its listen stream's socket (a descriptor and its buffers per link), and a
link read again soon after keeps its connection (a server that closes sooner, as uvicorn
after 5 s, closes it first)."""


class _Down(Exception):
    """Internal: the machine decided the session ends (:class:`Down`); unwinds to
    :meth:`ServerLink.run`, which applies it."""

    def __init__(self, down: Down) -> None:
        super().__init__(down.message)
        self.down = down


class LeaseLost(Exception):
    """A fenced write was rejected: another replica claimed this link (scale-out)."""


class ServerLink:
    # Slots, not an attribute dict: a link is made per server, thousands of them.
    __slots__ = (
        "__weakref__",
        "_changed",
        "_client",
        "_discover_to_keep",
        "_first_session",
        "_session_token",
        "_settings",
        "_silent_for",
        "_stats",
        "_stopping",
        "_store",
        "_task",
        "_token_checked",
        "_tokens",
        "_transport",
        "_unsubscribed_count",
        "_unsubscribed_logged_at",
        "_wake",
        "admit",
        "capabilities",
        "connecting",
        "descriptors_short",
        "machine",
        "on_lease_lost",
        "reads",
        "server_id",
        "shown_url",
        "stream",
        "takeover",
        "url",
    )

    def __init__(
        self,
        server_id: int,
        url: str,
        store: Store,
        settings: Settings,
        new_transport: Callable[[str], Transport],
        limiter: asyncio.Semaphore,
        stats: dict[str, int],
        token_provider: TokenProvider | None = None,
    ) -> None:
        self.server_id = server_id
        self.url = url
        """The URL connected to: credentials included, never shown (:attr:`shown_url` is)."""
        self.shown_url = redact_urls(url)
        self._store = store
        self._settings = settings
        self._transport = new_transport(url)
        """Every exchange of this link (discover, listen, re-reads), across its sessions: on
        plain http:// the lean transport (:mod:`service.mcp.transports`)."""
        self._stats = stats
        self._tokens = token_provider
        self.machine = LinkMachine(settings)
        """The link's state and decisions (pure; :mod:`service.daemon.linkmachine`)."""
        self.reads = Refresher(self, limiter)
        """The link's re-reads: one reader task, ``READS_PER_LINK`` reads in flight, each
        holding one of the daemon-wide slots (``limiter``) while it runs."""
        self._unsubscribed_count = 0
        self._unsubscribed_logged_at = -float("inf")
        self.capabilities: dict[str, Any] | None = None
        """The ``resources`` capability from the last discover (``wait`` prints it)."""
        self._first_session = True
        """A discover result kept from the daemon's last run may stand in for this link's
        first discover (:mod:`service.mcp.discovercache`); later sessions always ask."""
        self._discover_to_keep: str | None = None
        """This session's discover result, to keep with the next acknowledgement."""
        self.stream: ListenStream | None = None
        self._client: McpClient | None = None
        """The session's client; the reads use it too."""
        self._session_token: str | None = None
        self._silent_for: float | None = None
        self._token_checked = 0.0
        self._changed = LeanEvent()
        self.admit: Callable[[], None] | None = None
        """Set by the supervisor: raises ``ResourceLimit`` when descriptors run short."""
        self.descriptors_short: Callable[[], None] | None = None
        """Set by the supervisor: a read's connection failed for want of a descriptor; the
        links' idle read connections are closed (rate-limited) so the retry finds one."""
        self.connecting: asyncio.Semaphore | None = None
        """Set by the supervisor: held from a session's discover to its first listen's
        acknowledgement (``connect_concurrency`` links at once, all servers together)."""
        self._wake = LeanEvent()
        """Set by :meth:`recheck`: end any wait (backoff, login, protocol) at once."""
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.on_lease_lost: Callable[[int], object] | None = None
        """Called with the server id when a fenced write shows another replica owns the link."""
        self.takeover: Callable[[], Awaitable[int | None]] | None = None
        """Set on a standby link (make-before-break handover, :mod:`service.daemon.takeover`):
        it writes nothing until its first listen is acknowledged, then this takes the lease
        and returns the generation to write under (None: the request is gone)."""

    # ---- what the supervisor and the status read (the machine's) ---------------------------
    @property
    def state(self) -> LinkState:
        return self.machine.state

    @state.setter
    def state(self, state: LinkState) -> None:
        self.machine.state = state

    @property
    def generation(self) -> int:
        return self.machine.generation

    @generation.setter
    def generation(self, generation: int) -> None:
        self.machine.generation = generation

    @property
    def wanted(self) -> dict[str, int]:
        """URI -> subscription id."""
        return self.machine.wanted

    @property
    def honored(self) -> frozenset[str]:
        return self.machine.honored

    # ---- control from the supervisor ----------------------------------------------------
    def want(self, uri: str, subscription_id: int) -> None:
        replaced = self.machine.wanted.get(uri, subscription_id) != subscription_id
        if self.machine.want(uri, subscription_id):
            if replaced:
                self.reads.forget(uri)  # another subscription of the URI: not its failure
            self._changed.set()

    def unwant(self, uri: str) -> None:
        if self.machine.unwant(uri):
            self.reads.forget(uri)
            self._changed.set()

    def recheck(self) -> None:
        """Try again now (``mcpsubctl resubscribe``, SIGHUP): ends a backoff or terminal wait."""
        self._wake.set()
        self._changed.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run(), name=f"link {self.url}")

    async def stop(self) -> None:
        """Close the stream locally (that is the unsubscribe) and end the task."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self.reads.stop()
        await self._close_stream(self.stream)
        self.stream = None
        self.machine.stopped()
        await self._transport.aclose()

    def snapshot(self) -> LinkSnapshot:
        """What this link shows now (``/v1/status``, ``/metrics``): a frozen copy, so whoever
        renders it never reads the link. The status cache keeps it for every link: it shares
        the machine's frozen sets of URIs (the listened one stands for the wanted keys when
        they are the same) instead of copying them."""
        m = self.machine
        wanted = m.wanted
        return LinkSnapshot(
            server_id=self.server_id,
            url=self.shown_url,
            state=m.state,
            generation=m.generation,
            last_error=m.last_error,
            last_error_code=m.last_error_code,
            last_error_hint=m.last_error_hint,
            backoff_until=m.backoff_until,
            reconnects=m.reconnects,
            relistens=m.relistens,
            streams_ended_young=m.policy.young_streak,
            stream_open=self.stream is not None,
            honored=m.honored,
            capabilities=self.capabilities,
            wanted=m.listened if wanted.keys() == m.listened else tuple(wanted),
        )

    def status(self) -> dict[str, Any]:
        """This link's part of ``/v1/status`` (:func:`service.daemon.linkstatus.render`)."""
        return linkstatus.render(self.snapshot())

    async def _take_on_ack(self, stream: ListenStream) -> None:
        """Standby (:mod:`service.daemon.takeover`): our listen is acknowledged while the
        current owner still listens; take the lease now and write under the generation it
        gave (closes ``stream`` when it cannot)."""
        takeover = self.takeover
        if takeover is None:
            return
        try:
            taken = await takeover()
        except BaseException:
            await stream.aclose()
            raise
        if taken is None:
            await stream.aclose()
            raise LeaseLost(f"the hand-over of {self.url} was withdrawn")
        self.takeover = None
        self.machine.generation = taken

    # ---- the loop -------------------------------------------------------------------------
    async def run(self) -> None:
        """The link's task: sessions, and the waits between them, until it stops.

        Its boundary catches what nothing inside did (a bug): the crash is logged with its
        traceback, shown as ``INTERNAL_ERROR`` and the loop restarted after a backoff, so a
        link never dies silently while its subscriptions look fine. One coroutine for the
        loop and its boundary, and a session awaited from it directly: every idle link's task
        holds its chain of suspended frames for the session's life (a few hundred bytes
        each, thousands of links)."""
        crashes = 0
        machine = self.machine
        while not self._stopping:
            try:
                if not machine.wanted:
                    machine.idle()
                    await self._close_stream(self.stream)
                    self.stream = None
                    self._changed.clear()
                    await self._changed.wait()
                    continue
                try:
                    await self._session()
                    continue  # nothing is wanted any more
                except asyncio.CancelledError:
                    raise
                except LeaseLost:
                    raise
                except Exception as exc:
                    down = self._down_of(exc)
                await self._fail(down)
                if down.counted:
                    self._stats["reconnects_total"] = self._stats.get("reconnects_total", 0) + 1
                self._changed.clear()
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(down.delay_s):
                        if down.wake is Wake.CHANGE:
                            await self._changed.wait()
                        else:
                            await self._wake.wait()
                machine.waited(recheck=self._wake.is_set(), changed=self._changed.is_set())
            except asyncio.CancelledError:
                raise
            except LeaseLost as lost:
                # A fenced write (the session's, or writing the link down) shows the link
                # is gone.
                await self._lease_lost(str(lost))
                return
            except Exception as exc:
                crashes += 1
                log.exception("link task crashed; restarting it", url=self.url)
                down = self.machine.crashed(exc, crashes)
                try:
                    await self._fail(down)
                except LeaseLost as lost:
                    await self._lease_lost(str(lost))
                    return
                except Exception:
                    log.exception("recording the crashed link's state failed", url=self.url)
                await asyncio.sleep(down.delay_s)

    def _down_of(self, exc: Exception) -> Down:
        """The machine's decision on what ended a session."""
        if isinstance(exc, _Down):
            return exc.down
        if _store_failed(exc):
            return self.machine.storage_failed(describe(exc))
        down = self.machine.failed(exc)
        if down.unexpected:
            log.exception("link failed with an unexpected error", url=self.url)
        return down

    async def _lease_lost(self, reason: str) -> None:
        """Fenced out: another replica claimed this link. Stop touching it at once."""
        if self.takeover is not None:
            log.info("standby link dropped", server_id=self.server_id, reason=reason)
        else:
            log.warning(
                "lease lost; giving the link up",
                server_id=self.server_id,
                url=self.url,
                reason=reason,
            )
        self._stopping = True
        await self._close_stream(self.stream)
        self.stream = None
        self.machine.released()
        if self.takeover is None:
            self._stats["leases_lost_total"] = self._stats.get("leases_lost_total", 0) + 1
        if self.on_lease_lost is not None:
            self.on_lease_lost(self.server_id)

    async def _fail(self, down: Down) -> None:
        """Go down as the machine decided: close the stream, show it, write it."""
        await self._close_stream(self.stream)
        self.stream = None
        machine = self.machine
        machine.enter(down, time.time())
        log.warning(
            "link down",
            url=self.url,
            state=down.state,
            code=down.code,
            error=down.message,
            retry_in=round(down.delay_s, 3),
        )
        if self.takeover is not None:
            return  # in standby the link's rows are the current owner's: write nothing
        try:
            held = await self._store.set_server_state(
                self.server_id,
                down.state.value,
                error=down.message,
                error_code=down.code,
                backoff_until=machine.backoff_until,
                reconnect=down.state is LinkState.BACKOFF,
                generation=machine.generation,
            )
            if held and down.subscriptions is not None:
                state, reason = down.subscriptions
                await self._store.set_subscription_state(
                    list(machine.wanted.values()),
                    state,
                    reason,
                    generation=machine.generation,
                    code=down.code,
                )
        except database_errors() as exc:
            # A full disk must not kill the link: the in-memory status above still tells the
            # truth, and the store reports the daemon-level storage condition.
            log.warning("recording the link state failed", url=self.url, error=describe(exc))
            return
        if not held:
            raise LeaseLost(f"another replica holds {self.url} now")

    async def _token(self) -> str | None:
        if self._tokens is None:
            return None
        return await self._tokens(self.url)

    async def _capabilities(self, client: McpClient, with_token: bool) -> dict[str, Any] | None:
        """The discover's ``resources`` capability, all a session uses of it: the parsed
        answer is not kept (in this session's frame or by the client, which the reads use
        for the session's life)."""
        capabilities = (await self._discover(client, with_token)).resources_capability
        client.discovered = None
        return capabilities

    async def _discover(self, client: McpClient, with_token: bool) -> DiscoverResult:
        """``server/discover``, or on the link's first session the result kept from the
        daemon's last run while its ``ttlMs`` and ``cacheScope`` still allow it."""
        if self._first_session:
            self._first_session = False
            stored = None
            # Bounded like the discover it saves: a database that does not answer must not
            # hold the link; it discovers instead.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._settings.request_timeout_s):
                    stored = await self._store.stored_discover(self.server_id)
            kept = discovercache.reusable(stored, with_token=with_token, now=time.time())
            if kept is not None:
                with contextlib.suppress(McpError):  # not usable after all: ask
                    return client.reuse_discover(kept)
        async with asyncio.timeout(self._settings.request_timeout_s):
            discovered = await client.discover()
        self._discover_to_keep = discovercache.stored(
            discovered.raw, with_token=with_token, now=time.time()
        )
        return discovered

    async def _session(self) -> None:
        """One connected period: discover, listen, then serve events until something ends it."""
        machine = self.machine
        machine.connect()
        if self.admit is not None:
            self.admit()  # RESOURCE_LIMIT: keep the API's and the database's descriptors
        gate = self.connecting
        if gate is not None:
            # A start with thousands of links connects them in turns of connect_concurrency:
            # all at once, their discovers queued on the loop past the request deadline.
            await gate.acquire()
        try:
            stream, client, queue = await self._connect()
        finally:
            if gate is not None:
                gate.release()
        self.stream = stream
        await self._serve(client, queue)

    async def _connect(self) -> tuple[ListenStream, McpClient, LinkInbox[StreamEnd]]:
        """A session's start: the token, discover, the first listen until acknowledged."""
        machine = self.machine
        token = self._session_token = await self._token()
        self._token_checked = time.monotonic()
        client = self._client = self._new_client(token)
        self.capabilities = await self._capabilities(client, token is not None)
        down = machine.discovered(self.capabilities)
        if down is not None:
            raise _Down(down)
        queue: LinkInbox[StreamEnd] = LinkInbox(self._settings.link_inbox_max)
        down = machine.listening(time.monotonic())
        if down is not None:
            raise _Down(down)
        stream = await self._relisten(client, queue, reread_all=True)
        return stream, client, queue

    async def _serve(self, client: McpClient, queue: LinkInbox[StreamEnd]) -> None:
        """A connected session: serve its stream's ends and the link's changes until the link
        wants nothing (return) or the machine says down (``_Down``). The stream of the moment
        is no longer followed on the way out."""
        machine = self.machine
        try:
            while True:
                if not machine.wanted:
                    return
                # No timeout here: one supervisor task checks every link's stream for
                # silence (tick) instead of every link waking up on a timer of its own. One
                # future for both (first_of), not a task each under asyncio.wait.
                await first_of(queue.ready(), self._changed)
                if len(queue):
                    _, ends = queue.take()
                    for generation, item in ends:
                        if generation != machine.generation:
                            continue
                        self.stream = await self._reopen(client, queue, item)
                if self._changed.is_set():
                    self._changed.clear()
                    if machine.wants_relisten():
                        self.stream = await self._relisten(client, queue)
                if await self._token_rotated(client):
                    # Spec gap 14: a listen is authorised once; re-listen (make-before-break)
                    # with the refreshed token before the old one lapses.
                    self.stream = await self._relisten(client, queue)
                if self._silent_for is not None:
                    self._silent_for = None
                    watchdog = self._settings.keepalive_s * 3
                    # Make-before-break: the silent stream is closed once the new one is acked.
                    silent = Lost(f"no bytes for {watchdog:g} s (keep-alive watchdog)")
                    self.stream = await self._reopen(client, queue, silent)
        finally:
            if self.stream is not None:
                self.stream.unfollow()

    async def _reopen(
        self,
        client: McpClient,
        queue: LinkInbox[StreamEnd],
        end: StreamEnd,
    ) -> ListenStream:
        """Listen again after the current stream ended, when and if the machine says."""
        decided = self.machine.ended(time.monotonic(), end)
        if isinstance(decided, Down):
            raise _Down(decided)
        self._stats["relistens_total"] = self._stats.get("relistens_total", 0) + 1
        log.info("listen stream ended; re-listening", url=self.url, reason=decided.reason)
        if decided.delay_s > 0:
            await asyncio.sleep(decided.delay_s)
        return await self._relisten(client, queue, reread_all=True)

    def close_idle(self, before: float) -> None:
        """Close this link's read connections idle since before ``before`` (monotonic)."""
        self._transport.close_idle(before)

    def tick(self, now: float, tokens_available: bool = True) -> None:
        """The supervisor's periodic check (one task for all links, not a timer per link).

        Flags a stream that sent no byte for three keep-alive intervals, and wakes the link
        when its token is due for a re-check. ``tokens_available`` False (no token store on
        disk, checked once per tick for every link) skips the re-check of a link that has no
        token either: nothing could have changed, and waking every link every minute to find
        that out is a share of an idle daemon's CPU. A link that has one still re-checks (a
        logout removes the store). It also closes read connections idle for
        ``IDLE_CONNECTION_S`` and retires the reads' idle reader (``retire_idle``), so an idle
        link holds its listen socket and no more."""
        self.close_idle(now - IDLE_CONNECTION_S)
        self.reads.retire_idle()
        if self.machine.state is not LinkState.OPEN:
            return
        stream = self.stream
        if stream is not None and self.machine.silent(now, stream.last_activity):
            self._silent_for = now - stream.last_activity
            self._changed.set()
        elif (
            self._tokens is not None
            and (tokens_available or self._session_token is not None)
            and now - self._token_checked >= self._settings.token_check_s
        ):
            self._changed.set()

    async def _token_rotated(self, client: McpClient) -> bool:
        """Re-resolve the token now and then; True when it changed (refreshed or re-login)."""
        if self._tokens is None:
            return False
        now = time.monotonic()
        if now - self._token_checked < self._settings.token_check_s:
            return False
        self._token_checked = now
        token = await self._token()
        if token == self._session_token:
            return False
        self._session_token = client.token = token
        log.info("token changed; re-listening", url=self.url)
        return True

    async def _relisten(
        self,
        client: McpClient,
        queue: LinkInbox[StreamEnd],
        *,
        reread_all: bool = False,
    ) -> ListenStream:
        """Make-before-break: open and acknowledge the new stream, then close the old one.
        ``reread_all``: re-read every honored URI (a new stream), else the added ones."""
        machine = self.machine
        uris = sorted(machine.wanted)
        stream = client.listen(
            {"resourceSubscriptions": uris},
            max_frames_per_s=self._settings.stream_max_frames_per_s,
        )
        try:
            async with asyncio.timeout(self._settings.ack_timeout_s):
                await stream.open()
        except Exception as exc:
            await stream.aclose()
            raise _Down(machine.listen_failed(exc)) from exc
        if self.takeover is not None:
            await self._take_on_ack(stream)
        ack = machine.acknowledged(time.monotonic(), uris, stream.honored_uris, self.reads.failing)
        try:
            # The generation bump, the server's "open" and the subscriptions' states: one
            # transaction (service.store.linkstate), fenced on the generation we hold.
            acked = await self._store.listen_acknowledged(
                self.server_id, machine.generation, list(ack.changes), self._discover_to_keep
            )
        except BaseException:
            await stream.aclose()
            raise
        if acked is None:
            await stream.aclose()
            raise LeaseLost(f"another replica holds {self.url} now (generation moved on)")
        self._discover_to_keep = None  # kept
        opened = machine.opened(ack, acked.generation, acked.unread, reread_all=reread_all)
        if isinstance(opened, Down):
            # Nothing wanted can ever arrive on it: hold no stream (the old one carried a
            # subset of these URIs, now refused too) and send no listen loop for it.
            await stream.aclose()
            raise _Down(opened)
        await self._close_stream(self.stream)  # no longer followed: its end is not told
        self._stats["streams_opened_total"] = self._stats.get("streams_opened_total", 0) + 1
        if opened.retry_not_honored:
            loop = asyncio.get_running_loop()
            loop.call_later(self._settings.not_honored_retry_s, self._retry_not_honored)
        # A link's first stream is debug: a start of 10,000 links wrote 10,000 lines (2 % of
        # its event loop); the supervisor's tick logs how many links listen instead
        # ("links listening"). A stream after a loss or a failure stays info.
        first = self.stream is None and machine.reconnects == 0
        (log.debug if first else log.info)(
            "listening",
            url=self.url,
            generation=machine.generation,
            uris=len(uris),
            honored=len(machine.honored),
        )
        reads = self.reads
        for uri in opened.reread:
            reads.trigger(uri, "acknowledged")
        stream.follow(functools.partial(self._take, machine.generation, queue))
        return stream

    def _retry_not_honored(self) -> None:
        if self.machine.retry_not_honored():
            self._changed.set()

    def _take(
        self, generation: int, queue: LinkInbox[StreamEnd], event: ListenEvent | McpError
    ) -> None:
        """One event of a followed stream (:meth:`ListenStream.follow`, in the socket's
        callback on the lean transport): each update straight to the link's reads, the
        stream's end to the link's inbox (the link decides what follows).

        An update costs a dict entry at most, coalesced per URI in the reads' ready set,
        which holds only URIs the link wants: a flood for other URIs costs a counter, and
        one for ours no more than one pending read per URI. No task reads the stream, and
        no hop through the link's own task: the reads' reader is woken directly. Whatever
        raises here ends the following and reaches the link as the stream's end at once
        (a reader that died silently would leave a link "open" until the watchdog fired).
        """
        if isinstance(event, McpError | Closed | Lost | Failed):
            queue.put_end(generation, event)
            return
        if not isinstance(event, Notified):
            return  # the acknowledgement, which open() consumed already
        stats = self._stats
        machine = self.machine
        try:
            stats["notifications_total"] = stats.get("notifications_total", 0) + 1
            if event.method != wire.RESOURCE_UPDATED or not event.uri:
                return
            targets = machine.targets(event.uri)
            if not targets:
                self._unsubscribed(event.uri)
            reads = self.reads
            for uri in targets:
                if machine.reads(uri) and not reads.trigger(uri):
                    key = "notifications_coalesced_total"
                    stats[key] = stats.get(key, 0) + 1
        except Exception:
            log.exception("listen reader crashed", url=self.url)
            raise

    def _unsubscribed(self, uri: str) -> None:
        """Count an update for a URI we did not subscribe; log it at most once per interval."""
        key = "notifications_unsubscribed_total"
        self._stats[key] = self._stats.get(key, 0) + 1
        self._unsubscribed_count += 1
        now = time.monotonic()
        if now - self._unsubscribed_logged_at >= self._settings.unsubscribed_log_interval_s:
            log.info(
                "updates for unsubscribed URIs ignored",
                url=self.url,
                count=self._unsubscribed_count,
                example=uri[:200],
            )
            self._unsubscribed_logged_at = now
            self._unsubscribed_count = 0

    # ---- what the link's reads need of it (service.daemon.refresher.LinkReads) ------------
    @property
    def stats(self) -> dict[str, int]:
        return self._stats

    def target(self, uri: str) -> ReadTarget | None:
        subscription_id = self.machine.wanted.get(uri)
        if subscription_id is None:
            return None
        return ReadTarget(subscription_id, self.server_id, uri)

    async def read(self, uri: str) -> dict[str, Any]:
        """One ``resources/read``, through the session's client (its token; a new session
        resolves and refreshes it again). The client bounds the whole exchange by the request
        timeout on the timer its exchanges share (:mod:`service.mcp.deadline`) and raises a
        ``TransportError`` of kind ``timeout`` (``REQUEST_TIMEOUT``): no timer of its own."""
        client = self._client
        if client is None:
            client = self._client = self._new_client(self._session_token)
        try:
            return await client.read_resource(uri)
        except TransportError as exc:
            if self.descriptors_short is not None and _out_of_descriptors(exc):
                self.descriptors_short()
            raise

    def _new_client(self, token: str | None) -> McpClient:
        return McpClient(
            self.url,
            token=token,
            client_name="mcpsubd",
            transport=self._transport,
            timeout=self._settings.request_timeout_s,
        )

    def record(
        self,
        target: ReadTarget,
        generation: int,
        contents: list[dict[str, Any]],
        text: str | None,
        *,
        trigger: str | None,
        failing: bool,
    ) -> asyncio.Future[tuple[Revision, Event] | None]:
        return self._store.submit_read(
            target.subscription_id,
            target.server_id,
            generation,
            contents,
            text,
            read_at=time.time(),
            trigger=trigger,
            # In the same transaction: a first read, or the first good one after failures,
            # on an open link makes the subscription active.
            activate=self.machine.activates(target.uri, target.subscription_id, failing),
        )

    def is_unread(self, target: ReadTarget) -> bool:
        return self.machine.is_unread(target.subscription_id)

    def read_ok(self, target: ReadTarget, generation: int) -> None:
        self.machine.read_stored(target.subscription_id, generation)

    async def read_failed(self, target: ReadTarget, exc: McpError) -> None:
        if not self.machine.shows_read_errors():
            return
        change = read_error(target.subscription_id, exc)
        await self._store.set_subscription_state(
            change.ids, change.state, change.reason, generation=self.generation, code=change.code
        )

    @staticmethod
    async def _close_stream(stream: ListenStream | None) -> None:
        if stream is not None:
            with contextlib.suppress(Exception):
                await stream.aclose()


def _out_of_descriptors(exc: BaseException) -> bool:
    """The process (EMFILE) or the system (ENFILE) has no file descriptor left."""
    return any(
        isinstance(item, OSError) and item.errno in (errno.EMFILE, errno.ENFILE)
        for item in iter_causes(exc)
    )


def _store_failed(exc: BaseException) -> bool:
    """The session's own write to the store failed (SQLAlchemy's error, or a full disk),
    not the server: a server's error is an :class:`McpError` whatever its text says."""
    if isinstance(exc, McpError):
        return False
    return isinstance(exc, SQLAlchemyError) or is_storage_failure(exc)
