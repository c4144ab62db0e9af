"""One server link: a single ``subscriptions/listen`` stream carrying every URI wanted there.

Lifecycle (one task per link, readable top to bottom in :meth:`ServerLink.run`)::

    resolve token -> discover -> listen(all URIs) -> ack -> generation+1 -> re-read
         ^                                             ^       |
         |                                             |       +-- notifications -> re-read URI
         |                    closed / lost / silent --+-------+   (re-listen at once, jitter)
         |  backoff (full jitter) <- connect / listen / discover failed, 5xx
         |
         +-- URI set changed: listen(new set) -> ack -> close old stream (make-before-break)

Nothing is replayed by MCP servers, so every new acknowledgement is followed by a re-read of
every URI; a URI-set change re-reads the added URIs. A stream that ends after its ack (the
server's graceful close, or a drop; proxies cut long responses every 30-100 s) is not a
failure: the link re-listens at once, and the backoff, which grows only while connecting
fails, resets on every ack. While streams keep ending young (right after their ack) the link
backs off instead (state ``backoff``, ``streamsEndedYoung`` in its status), and an ack that
honors none of the link's URIs parks it in ``not_honored`` with no stream held. Those
decisions are :class:`service.mcp.relisten.RelistenPolicy`'s (pure, shared with
``probe --follow``); this module does the I/O around them. A per-link budget
(``relisten_per_minute``) is the last guard against a loop (state ``throttled``). A keep-alive watchdog treats a stream
that sent no byte for three keep-alive intervals as lost (the replacement is opened before
the silent one is closed). Authentication problems park the link in ``login_required`` and a
server that cannot speak 2026-07-28 in ``error``; both retry on a slow schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from service.backoff import Backoff
from service.daemon import linkstatus
from service.daemon.config import Settings
from service.daemon.inbox import LeanEvent, LinkInbox
from service.daemon.linkstatus import LinkSnapshot, LinkState
from service.daemon.refresher import ReadTarget, UriRefresher, read_error_code
from service.failures import INTERNAL_ERROR_HINT, classify, state_hint
from service.mcp import wire
from service.mcp.client import ListenStream, McpClient
from service.mcp.errors import (
    HttpStatusError,
    JsonRpcError,
    ListenLost,
    McpError,
    ProtocolUnsupported,
)
from service.mcp.listen import Closed, Failed, ListenEvent, Lost, Notified
from service.mcp.relisten import End, RelistenPolicy
from service.mcp.transports.base import Transport
from service.probe import subscribe_offered
from service.safetext import redact_urls
from service.store import Store
from service.store.database import database_errors, describe
from service.store.linkstate import StateChange

log = structlog.get_logger("mcpsubd.link")

TokenProvider = Callable[[str], Awaitable[str | None]]


class LoginRequired(McpError):
    error_code = "AUTH_LOGIN_REQUIRED"


RELISTEN_LIMIT_HINT = (
    "the server (or a proxy in front of it) keeps ending listen streams right after "
    "acknowledging them; mcpsubd re-listens at most relisten_per_minute times a minute per "
    "server and waits for the window to pass; check the proxy's response timeouts"
)


class _Throttled(Exception):
    """Internal: the link used its listen budget; wait ``wait_s`` before listening again."""

    def __init__(self, used: int, wait_s: float) -> None:
        super().__init__(
            f"{used} listens in the last minute (relisten_per_minute); "
            f"listening again in {wait_s:.1f} s"
        )
        self.wait_s = wait_s


READS_PER_LINK = 2
"""Reads in flight per link (``read_concurrency`` bounds all links together). A listen
acknowledgement re-reads every URI of the link at once; unbounded, each of those reads opened
its own connection (ten per link at a cold start, closed again but for the idle ones), and
connecting was ~9 % of a cold start's CPU. Two, and the link's transport keeps a
connection alive for each (``Supervisor._new_transport``)."""


class _ReadSlot:
    """One of the link's read slots, then one of the daemon-wide ones: a read waiting for its
    link holds no global slot that a read of another link could use."""

    __slots__ = ("_global", "_link")

    def __init__(self, link: asyncio.Semaphore, shared: asyncio.Semaphore) -> None:
        self._link = link
        self._global = shared

    async def __aenter__(self) -> None:
        await self._link.acquire()
        try:
            await self._global.acquire()
        except BaseException:
            self._link.release()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._global.release()
        self._link.release()


class _Restart(Exception):
    """Internal: the session ended and the link should reconnect (after backoff).

    ``failed``: the stream itself went wrong after its ack (a frame over a bound, a broken
    rule, an error answer). That backs off like a failed connect instead of re-listening at
    once: a server that acks and then sends a 5 MB event would otherwise be asked again and
    again, pulling the event each time (issue 22 §1)."""

    def __init__(
        self,
        reason: str,
        code: str = "SUBSCRIPTION_DISCONNECTED",
        *,
        failed: bool = False,
        delay_s: float | None = None,
    ) -> None:
        super().__init__(reason)
        self.code = code
        self.failed = failed
        self.delay_s = delay_s
        """Set when the relisten policy already decided the pause (streams ending young)."""


class _NotHonored(Exception):
    """Internal: the acknowledgement honored none of the link's URIs (final for that listen:
    the stream is closed and the link waits for a change, a recheck or the slow retry)."""


class _NotOffered(_NotHonored):
    """Internal: discover said the server offers no resource subscriptions, so no listen was
    sent; the subscriptions' states are written here, as there is no acknowledgement."""


def _read_error(subscription_id: int, exc: McpError) -> StateChange:
    """The ``error`` state a failed read shows: ``CODE: message`` and the code."""
    code = read_error_code(exc)
    return StateChange([subscription_id], "error", f"{code}: {exc}", code)


class LeaseLost(Exception):
    """A fenced write was rejected: another replica claimed this link (scale-out)."""


class ServerLink:
    # Slots, not an attribute dict: the dict of a link's 41 attributes took 1.6 kB, 1.6 MB at
    # 1,000 links, against RSS's 150 MB target (issue 29).
    __slots__ = (
        "__weakref__",
        "_acked_this_session",
        "_background",
        "_changed",
        "_limiter",
        "_roots",
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
        "_unread",
        "_unsubscribed_count",
        "_unsubscribed_logged_at",
        "_wake",
        "admit",
        "backoff",
        "backoff_until",
        "capabilities",
        "generation",
        "honored",
        "last_error",
        "last_error_code",
        "last_error_hint",
        "listened",
        "on_lease_lost",
        "policy",
        "reconnects",
        "refreshers",
        "relistens",
        "server_id",
        "shown_url",
        "state",
        "stream",
        "takeover",
        "url",
        "wanted",
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
        self._background: set[asyncio.Task[Any]] = set()
        self._store = store
        self._settings = settings
        self._transport = new_transport(url)
        """Every exchange of this link (discover, listen, re-reads), across its sessions: on
        plain http:// the lean h11 transport (:mod:`service.mcp.transports`)."""
        self._limiter = _ReadSlot(asyncio.Semaphore(READS_PER_LINK), limiter)
        self._stats = stats
        self._tokens = token_provider
        self.backoff = Backoff(
            base_s=settings.backoff_base_s,
            cap_s=settings.backoff_cap_s,
        )
        self.policy = RelistenPolicy(
            self.backoff,
            listens_per_minute=settings.relisten_per_minute,
            relisten_jitter_s=settings.relisten_jitter_s,
        )
        """When to listen again (pure; :mod:`service.mcp.relisten`)."""
        self.relistens = 0
        """Streams re-opened at once after a close or loss (not failures)."""
        self._acked_this_session = False
        self._unread: set[int] = set()
        """Subscriptions (ids) with no read stored at the last ack: they turn ``active`` when
        their first read is stored, and show a failed first read at once."""
        self.wanted: dict[str, int] = {}
        """URI -> subscription id."""
        self.refreshers: dict[str, UriRefresher] = {}
        self.state = LinkState.IDLE
        self.generation = 0
        self.last_error: str | None = None
        self.last_error_code: str | None = None
        self.last_error_hint: str | None = None
        self.backoff_until: float | None = None
        self.reconnects = 0
        self.honored: set[str] = set()
        self._roots: dict[str, list[str]] = {}
        """Honored URIs by their form without a trailing slash, for sub-resource matching."""
        self._unsubscribed_count = 0
        self._unsubscribed_logged_at = -float("inf")
        self.capabilities: dict[str, Any] | None = None
        """The ``resources`` capability from the last discover (``wait`` prints it)."""
        self.listened: set[str] = set()
        self.stream: ListenStream | None = None
        self._session_token: str | None = None
        self._silent_for: float | None = None
        self._token_checked = 0.0
        self._changed = LeanEvent()
        self.admit: Callable[[], None] | None = None
        """Set by the supervisor: raises ``ResourceLimit`` when descriptors run short."""
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

    # ---- control from the supervisor ----------------------------------------------------
    def want(self, uri: str, subscription_id: int) -> None:
        if self.wanted.get(uri) == subscription_id:
            return
        self.wanted[uri] = subscription_id
        self._changed.set()

    def unwant(self, uri: str) -> None:
        if self.wanted.pop(uri, None) is not None:
            refresher = self.refreshers.pop(uri, None)
            if refresher is not None:
                self._keep(asyncio.get_running_loop().create_task(refresher.stop()))
            self._changed.set()

    def _keep(self, task: asyncio.Task[Any]) -> None:
        """Hold a fire-and-forget task until it ends (the loop keeps only a weak reference)."""
        self._background.add(task)
        task.add_done_callback(self._background.discard)

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
        for refresher in list(self.refreshers.values()):
            await refresher.stop()
        for task in list(self._background):  # refreshers unwanted just before the stop
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._close_stream(self.stream)
        self.stream = None
        self.state = LinkState.STOPPED
        await self._transport.aclose()

    def snapshot(self) -> LinkSnapshot:
        """What this link shows now (``/v1/status``, ``/metrics``): a frozen copy, so whoever
        renders it never reads the link."""
        return LinkSnapshot(
            server_id=self.server_id,
            url=self.shown_url,
            state=self.state,
            generation=self.generation,
            last_error=self.last_error,
            last_error_code=self.last_error_code,
            last_error_hint=self.last_error_hint,
            backoff_until=self.backoff_until,
            reconnects=self.reconnects,
            relistens=self.relistens,
            streams_ended_young=self.policy.young_streak,
            stream_open=self.stream is not None,
            honored=tuple(self.honored),
            capabilities=self.capabilities,
            wanted=tuple(self.wanted),
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
        self.generation = taken

    # ---- the loop -------------------------------------------------------------------------
    async def run(self) -> None:
        """The link's task. Its boundary catches what nothing inside did (a bug): the crash
        is logged with its traceback, shown as ``INTERNAL_ERROR`` and the loop restarted after
        a backoff, so a link never dies silently while its subscriptions look fine."""
        crashes = 0
        while not self._stopping:
            try:
                await self._loop()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                crashes += 1
                log.exception("link task crashed; restarting it", url=self.url)
                delay = self.backoff.delay(crashes)
                try:
                    await self._fail(
                        LinkState.BACKOFF,
                        "INTERNAL_ERROR",
                        f"link task crashed: {exc!r}"[:300],
                        delay,
                        hint=INTERNAL_ERROR_HINT,
                    )
                except LeaseLost as lost:
                    await self._lease_lost(str(lost))
                    return
                except Exception:
                    log.exception("recording the crashed link's state failed", url=self.url)
                await asyncio.sleep(delay)

    async def _loop(self) -> None:
        attempt = 0
        while not self._stopping:
            if not self.wanted:
                self.state = LinkState.IDLE
                await self._close_stream(self.stream)
                self.stream = None
                self._changed.clear()
                await self._changed.wait()
                continue
            self._acked_this_session = False
            try:
                delay, attempt = await self._attempt(attempt)
            except LeaseLost as lost:
                await self._lease_lost(str(lost))
                return
            if delay:
                self._changed.clear()
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        # A changed URI set ends a login/protocol wait early; backoff stays
                        # unless a recheck was asked for.
                        if self.state in (
                            LinkState.LOGIN_REQUIRED,
                            LinkState.ERROR,
                            LinkState.NOT_HONORED,
                        ):
                            await self._changed.wait()
                        else:
                            await self._wake.wait()
                if self._wake.is_set():
                    attempt = 0
                    self.policy.recheck()
                elif self._changed.is_set():
                    self.policy.changed()

    async def _attempt(self, attempt: int) -> tuple[float, int]:
        """One session and its failure handling: the delay before the next one and the
        backoff attempt count. Raises LeaseLost when a fenced write shows the link is gone."""
        try:
            await self._session()
            return 0.0, attempt
        except asyncio.CancelledError:
            raise
        except LeaseLost:
            raise
        except _Throttled as exc:
            await self._fail(
                LinkState.THROTTLED,
                "RELISTEN_LIMIT",
                str(exc),
                exc.wait_s,
                hint=RELISTEN_LIMIT_HINT,
            )
            return exc.wait_s, attempt
        except _NotHonored as exc:
            # Final for that listen: no stream is held and no loop of listens is sent for
            # it; the URI set changing, a resubscribe or not_honored_retry_s listens again.
            slow = self._settings.not_honored_retry_s
            code = "SUBSCRIPTION_NOT_HONORED"
            await self._fail(LinkState.NOT_HONORED, code, str(exc), slow, hint=state_hint(code))
            if isinstance(exc, _NotOffered) and self.takeover is None:
                await self._store.set_subscription_state(
                    list(self.wanted.values()),
                    "not_honored",
                    str(exc),
                    generation=self.generation,
                    code=code,
                )
            return slow, attempt
        except (LoginRequired, ProtocolUnsupported) as exc:
            # Terminal until something changes: no fast loop. A server that cannot speak
            # 2026-07-28 is re-checked hourly (protocol_recheck_s), on resubscribe or
            # on SIGHUP; a login on login_retry_s or when the token store changes.
            if isinstance(exc, LoginRequired):
                state, slow = LinkState.LOGIN_REQUIRED, self._settings.login_retry_s
            else:
                state, slow = LinkState.ERROR, self._settings.protocol_recheck_s
            await self._fail(state, exc.error_code, str(exc), slow, hint=exc.hint)
            return slow, attempt
        except Exception as exc:
            # Backoff grows only while connecting fails (or a stream fails after its ack);
            # an ack followed by an ordinary end resets it.
            failed = not self._acked_this_session or (isinstance(exc, _Restart) and exc.failed)
            attempt = attempt + 1 if failed else 0
            if isinstance(exc, _Restart) and exc.delay_s is not None:
                delay = exc.delay_s  # the policy's pause for streams that keep ending young
            elif failed:
                delay = self.policy.failed().delay_s
            else:
                delay = self.backoff.delay(attempt)
            if isinstance(exc, _Restart):
                code, hint = exc.code, state_hint(exc.code)
            else:
                # The CLI's classifier: CONNECTION_REFUSED, TLS_CERT_UNTRUSTED, ...
                failure = classify(exc, mode="subscribe", compat=False)
                code, hint = failure.code, failure.hint
                if code == "INTERNAL_ERROR":
                    log.exception("link failed with an unexpected error", url=self.url)
            await self._fail(
                LinkState.BACKOFF, code, str(exc) or type(exc).__name__, delay, hint=hint
            )
            self._stats["reconnects_total"] = self._stats.get("reconnects_total", 0) + 1
            self.reconnects += 1
            return delay, attempt

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
        self.state = LinkState.RELEASED
        if self.takeover is None:
            self._stats["leases_lost_total"] = self._stats.get("leases_lost_total", 0) + 1
        if self.on_lease_lost is not None:
            self.on_lease_lost(self.server_id)

    async def _fail(
        self, state: LinkState, code: str, message: str, delay: float, *, hint: str | None
    ) -> None:
        await self._close_stream(self.stream)
        self.stream = None
        self.state = state
        self.last_error, self.last_error_code, self.last_error_hint = message, code, hint
        self.backoff_until = time.time() + delay
        log.warning(
            "link down",
            url=self.url,
            state=state,
            code=code,
            error=message,
            retry_in=round(delay, 3),
        )
        if self.takeover is not None:
            return  # in standby the link's rows are the current owner's: write nothing
        try:
            held = await self._store.set_server_state(
                self.server_id,
                state.value,
                error=message,
                error_code=code,
                backoff_until=self.backoff_until,
                reconnect=state is LinkState.BACKOFF,
                generation=self.generation,
            )
            if held and state in (LinkState.LOGIN_REQUIRED, LinkState.ERROR):
                await self._store.set_subscription_state(
                    list(self.wanted.values()),
                    state.value,
                    message,
                    generation=self.generation,
                    code=code,
                )
            elif held and state is LinkState.BACKOFF:
                # Not "active": nothing is being watched until the stream is back (issue 11.7).
                # The next acknowledgement sets "active" again.
                await self._store.set_subscription_state(
                    list(self.wanted.values()),
                    "backoff",
                    f"{code}: {message}",
                    generation=self.generation,
                    code=code,
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
        try:
            return await self._tokens(self.url)
        except McpError as exc:
            if exc.error_code == "AUTH_LOGIN_REQUIRED":
                raise LoginRequired(str(exc)) from exc
            raise

    async def _session(self) -> None:
        """One connected period: discover, listen, then serve events until something ends it."""
        self.state = LinkState.CONNECTING
        if self.admit is not None:
            self.admit()  # RESOURCE_LIMIT: keep the API's and the database's descriptors
        token = self._session_token = await self._token()
        self._token_checked = time.monotonic()
        client = McpClient(
            self.url,
            token=token,
            client_name="mcpsubd",
            transport=self._transport,
            timeout=self._settings.request_timeout_s,
        )
        try:
            async with asyncio.timeout(self._settings.request_timeout_s):
                discovered = await client.discover()
            self.capabilities = discovered.resources_capability
        except (HttpStatusError, JsonRpcError) as exc:
            if exc.error_code == "AUTH_FAILED":
                raise LoginRequired(f"the server refused our credentials: {exc}") from exc
            raise
        if not subscribe_offered(self.capabilities):
            # Seed 003: a server whose resources.subscribe is not true is not asked to listen;
            # every subscription says so, as a listen that honored none of them would.
            raise _NotOffered(
                "the server does not advertise resources.subscribe: it cannot honor a "
                "subscription, so none was requested"
            )
        queue: LinkInbox[ListenEvent | McpError] = LinkInbox(self._settings.link_inbox_max)
        reader: asyncio.Task[None] | None = None
        try:
            self._spend_listen()
            stream, reader = await self._relisten(client, queue, reader, reread="all")
            self.stream = stream
            while True:
                if not self.wanted:
                    return
                watchdog = self._settings.keepalive_s * 3
                get = asyncio.ensure_future(queue.wait())
                change = asyncio.ensure_future(self._changed.wait())
                # No timeout here: one supervisor task checks every link's stream for
                # silence (check_silence) instead of 1,000 links each waking up on a timer.
                try:
                    done, _ = await asyncio.wait({get, change}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    # Also when the link is stopped mid-wait (unsubscribe, SIGTERM, a lost
                    # lease): a waiter left pending is destroyed later with asyncio's
                    # "Task was destroyed but it is pending!" at error level.
                    for pending in (get, change):
                        if not pending.done():
                            pending.cancel()
                if get in done:
                    updates, ends = queue.take()
                    for uri in updates:
                        self._on_updated(uri)
                    for generation, item in ends:
                        if generation != self.generation:
                            continue
                        ended = await self._handle(item)
                        if ended is not None:
                            why, end = ended
                            stream, reader = await self._reopen(client, queue, reader, why, end)
                            self.stream = stream
                if change in done:
                    self._changed.clear()
                    if self.wanted and set(self.wanted) != self.listened:
                        stream, reader = await self._relisten(client, queue, reader, reread="added")
                        self.stream = stream
                if await self._token_rotated(client):
                    # Spec gap 14: a listen is authorised once; re-listen (make-before-break)
                    # with the refreshed token before the old one lapses.
                    stream, reader = await self._relisten(client, queue, reader, reread="added")
                    self.stream = stream
                if self._silent_for is not None:
                    self._silent_for = None
                    # Make-before-break: the silent stream is closed once the new one is acked.
                    stream, reader = await self._reopen(
                        client, queue, reader, f"no bytes for {watchdog:g} s (keep-alive watchdog)"
                    )
                    self.stream = stream
        finally:
            if reader is not None:
                reader.cancel()

    def _spend_listen(self) -> None:
        now = time.monotonic()
        wait = self.policy.listening(now)
        if wait > 0:
            raise _Throttled(self.policy.budget.used(now), wait)

    async def _reopen(
        self,
        client: McpClient,
        queue: LinkInbox[ListenEvent | McpError],
        reader: asyncio.Task[None] | None,
        reason: str,
        end: End = End.LOST,
    ) -> tuple[ListenStream, asyncio.Task[None]]:
        """Listen again after an acknowledged stream ended, when the policy says.

        A stream that lived is not a failure: no backoff, only a small random pause so that
        a server that closes every stream at once (a restart, a proxy timeout) is not hit by
        all links together. While streams keep ending young the policy's pause grows and the
        session ends here (state ``backoff``). A failure to re-listen propagates and is backed
        off by :meth:`run`.
        """
        decided = self.policy.ended(time.monotonic(), end)
        if decided.backing_off:
            lived = self.policy.last_lifetime_s or 0.0
            raise _Restart(
                f"{reason}; listen streams keep ending young ({decided.young_streak} in a row, "
                f"the last {lived:.2f} s after its acknowledgement): listening again in "
                f"{decided.delay_s:.1f} s",
                delay_s=decided.delay_s,
            )
        self._spend_listen()
        self.relistens += 1
        self.reconnects += 1
        self._stats["relistens_total"] = self._stats.get("relistens_total", 0) + 1
        log.info("listen stream ended; re-listening", url=self.url, reason=reason)
        self.state = LinkState.CONNECTING
        if decided.delay_s > 0:
            await asyncio.sleep(decided.delay_s)
        return await self._relisten(client, queue, reader, reread="all")

    def tick(self, now: float, tokens_available: bool = True) -> None:
        """The supervisor's periodic check (one task for all links, not a timer per link).

        Flags a stream that sent no byte for three keep-alive intervals, and wakes the link
        when its token is due for a re-check. ``tokens_available`` False (no token store on
        disk, checked once per tick for every link) skips the re-check of a link that has no
        token either: nothing could have changed, and 1,000 links woken every minute to find
        that out were a share of an idle daemon's CPU. A link that has one still re-checks (a
        logout removes the store)."""
        if self.state is not LinkState.OPEN:
            return
        stream = self.stream
        if stream is not None and now - stream.last_activity > self._settings.keepalive_s * 3:
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
        queue: LinkInbox[ListenEvent | McpError],
        old_reader: asyncio.Task[None] | None,
        *,
        reread: str,
    ) -> tuple[ListenStream, asyncio.Task[None]]:
        """Make-before-break: open and acknowledge the new stream, then close the old one."""
        uris = sorted(self.wanted)
        previous = set(self.listened)
        stream = client.listen(
            {"resourceSubscriptions": uris},
            max_frames_per_s=self._settings.stream_max_frames_per_s,
        )
        try:
            async with asyncio.timeout(self._settings.ack_timeout_s):
                await stream.open()
        except TimeoutError as exc:
            await stream.aclose()
            raise _Restart("listen not acknowledged in time", "SUBSCRIPTION_FAILED") from exc
        except (HttpStatusError, JsonRpcError) as exc:
            await stream.aclose()
            if exc.error_code == "AUTH_FAILED":
                raise LoginRequired(f"the server refused our credentials: {exc}") from exc
            raise _Restart(f"listen refused: {exc}", "SUBSCRIPTION_FAILED") from exc
        self._acked_this_session = True
        ack = self.policy.acknowledged(time.monotonic(), uris, stream.honored_uris)
        if self.takeover is not None:
            await self._take_on_ack(stream)
        honored = {u for u in ack.honored if u in self.wanted}
        not_honored = [self.wanted[u] for u in uris if u not in honored and u in self.wanted]
        # State moves on evidence only (issue 22 §1): the ack proves the link is open, not
        # that a read works. A subscription whose reads are failing keeps its error until a
        # read succeeds; one with no stored read stays "pending" until its first is stored.
        failing = {u: r.error for u in honored if (r := self.refreshers.get(u)) and r.failing}
        try:
            # The generation bump, the server's "open" and the subscriptions' states: one
            # transaction (service.store.linkstate), fenced on the generation we hold.
            acked = await self._store.listen_acknowledged(
                self.server_id,
                self.generation,
                [
                    StateChange(
                        [self.wanted[u] for u in sorted(honored - set(failing))],
                        "active",
                        unread="pending",
                    ),
                    StateChange(
                        not_honored,
                        "not_honored",
                        "the server's acknowledgement did not include this URI",
                        "SUBSCRIPTION_NOT_HONORED",
                    ),
                    *(
                        _read_error(self.wanted[u], error)
                        for u, error in sorted(failing.items())
                        if error is not None
                    ),
                ],
            )
        except BaseException:
            await stream.aclose()
            raise
        if acked is None:
            await stream.aclose()
            raise LeaseLost(f"another replica holds {self.url} now (generation moved on)")
        self.generation = acked.generation
        self._unread = set(acked.unread)
        if not ack.keep:
            # Nothing wanted can ever arrive on it: hold no stream (the old one carried a
            # subset of these URIs, now refused too) and send no listen loop for it.
            await stream.aclose()
            raise _NotHonored(
                f"the server's acknowledgement honored none of the {len(uris)} URI(s) listened for"
            )
        old_stream = self.stream
        if old_reader is not None:
            old_reader.cancel()
        await self._close_stream(old_stream)
        self._stats["streams_opened_total"] = self._stats.get("streams_opened_total", 0) + 1
        self.listened = set(uris)
        self.honored = honored
        self._roots = {}
        for uri in self.honored:
            self._roots.setdefault(uri.rstrip("/"), []).append(uri)
        self.state = LinkState.OPEN
        self.last_error = self.last_error_code = self.last_error_hint = None
        self.backoff_until = None
        if not_honored:
            loop = asyncio.get_running_loop()
            loop.call_later(self._settings.not_honored_retry_s, self._retry_not_honored)
        log.info(
            "listening",
            url=self.url,
            generation=self.generation,
            uris=len(uris),
            honored=len(self.honored),
        )
        targets = self.honored if reread == "all" else self.honored - previous
        for uri in sorted(targets):
            self._refresher(uri).trigger("acknowledged")
        generation = self.generation
        reader = asyncio.get_running_loop().create_task(self._pump(stream, generation, queue))
        return stream, reader

    def _retry_not_honored(self) -> None:
        if self.listened - self.honored:
            self.listened = set()  # forces a fresh listen of the whole set
            self._changed.set()

    async def _pump(
        self,
        stream: ListenStream,
        generation: int,
        queue: LinkInbox[ListenEvent | McpError],
    ) -> None:
        """Read one stream into the inbox: only URIs we re-read, coalesced, with back-pressure.

        Filtering here (not in the link's loop) means a flood for other URIs costs a counter
        and never a queue entry; ``put_update`` waits when the inbox is full, and while it
        waits this task reads no more bytes from the socket.
        """
        stats = self._stats
        try:
            while True:
                event = await stream.next_event()
                if not isinstance(event, Notified):
                    queue.put_end(generation, event)
                    return
                stats["notifications_total"] = stats.get("notifications_total", 0) + 1
                if event.method != wire.RESOURCE_UPDATED or not event.uri:
                    continue
                targets = self._targets(event.uri)
                if not targets:
                    self._unsubscribed(event.uri)
                for uri in targets:
                    if not await queue.put_update(uri):
                        key = "notifications_coalesced_total"
                        stats[key] = stats.get(key, 0) + 1
        except McpError as exc:
            queue.put_end(generation, exc)
        except Exception as exc:
            # Whatever kills the reader must reach the link at once: a reader that died
            # silently left a link "open" until the keep-alive watchdog fired (issue 11.4).
            log.exception("listen reader crashed", url=self.url)
            queue.put_end(generation, McpError(f"listen reader crashed: {exc!r}"[:300]))

    def _targets(self, uri: str) -> list[str]:
        """The honored URIs an update for ``uri`` asks us to re-read.

        Spec §3.3: the URI may be a sub-resource of one we subscribed to. Walking the
        URI's own ``/`` positions costs O(len(uri)), not O(subscriptions), per notification.
        """
        if uri in self.honored:
            return [uri]
        found: list[str] = []
        cut = uri.find("/")
        while cut != -1:
            found.extend(self._roots.get(uri[:cut], ()))
            cut = uri.find("/", cut + 1)
        return list(dict.fromkeys(found))

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

    async def _handle(self, item: ListenEvent | McpError) -> tuple[str, End] | None:
        """Act on one stream event; returns why and how the stream ended when it should be
        reopened."""
        if isinstance(item, McpError):
            failure = classify(item, mode="subscribe", compat=False)
            raise _Restart(f"listen stream broke the protocol: {item}", failure.code, failed=True)
        if isinstance(item, Closed):
            return "the server closed the listen stream", End.CLOSED
        if isinstance(item, Lost):
            return f"the listen stream was lost: {item.reason}", End.LOST
        if isinstance(item, Failed):
            raise _Restart(
                f"the listen stream failed: {item.error}", "SUBSCRIPTION_FAILED", failed=True
            )
        raise ListenLost(f"unexpected listen event {item!r}")

    def _on_updated(self, uri: str) -> None:
        """Re-read ``uri`` (an honored URI the reader picked); it may be gone by now."""
        if uri in self.honored and uri in self.wanted:
            self._refresher(uri).trigger()

    def _refresher(self, uri: str) -> UriRefresher:
        refresher = self.refreshers.get(uri)
        if refresher is None or refresher.target.subscription_id != self.wanted[uri]:
            target = ReadTarget(self.wanted[uri], self.server_id, uri)
            refresher = UriRefresher(
                target,
                self._store,
                self._read,
                lambda: self.generation,
                self._limiter,
                self._stats,
                self._on_read_error,
                self._on_read_ok,
                self._refresher_idle,
                self._is_unread,
                self._activates,
            )
            self.refreshers[uri] = refresher
        return refresher

    def _refresher_idle(self, refresher: UriRefresher) -> None:
        """Forget a refresher with nothing to do: at 10,000 subscriptions the idle ones held
        ~6.6 MB (tracemalloc), and a new one costs microseconds next to the read it serves.
        A failing one stays: its next good read clears the subscription's error state."""
        uri = refresher.target.uri
        if self.refreshers.get(uri) is refresher:
            del self.refreshers[uri]

    async def _read(self, uri: str) -> dict[str, Any]:
        """One ``resources/read``. The client bounds the whole exchange by the request timeout
        on the timer its exchanges share (:mod:`service.mcp.deadline`) and raises a
        ``TransportError`` of kind ``timeout`` (``REQUEST_TIMEOUT``); a second
        ``asyncio.timeout`` of the same length here armed and cancelled a timer per read."""
        # The token resolved for this session; a new session resolves (and refreshes) again.
        client = McpClient(
            self.url,
            token=self._session_token,
            client_name="mcpsubd",
            transport=self._transport,
            timeout=self._settings.request_timeout_s,
        )
        return await client.read_resource(uri)

    def _is_unread(self, target: ReadTarget) -> bool:
        return target.subscription_id in self._unread

    def _activates(self, target: ReadTarget, failing: bool) -> bool:
        """Whether storing this read makes the subscription ``active`` (in the same
        transaction): it had no stored read or was failing, and the link is open on it."""
        return (
            self.state is LinkState.OPEN
            and target.uri in self.honored
            and (failing or target.subscription_id in self._unread)
        )

    async def _on_read_ok(self, target: ReadTarget, generation: int) -> None:
        """A read was stored under ``generation`` after the subscription had none (or was
        failing): it has one now."""
        if generation == self.generation:
            self._unread.discard(target.subscription_id)

    async def _on_read_error(self, target: ReadTarget, exc: McpError) -> None:
        if self.state is not LinkState.OPEN:
            # The link is down: its own state (backoff, …) is what the subscription shows;
            # the read's error is written again with the next acknowledgement if it lasts.
            return
        change = _read_error(target.subscription_id, exc)
        await self._store.set_subscription_state(
            change.ids, change.state, change.reason, generation=self.generation, code=change.code
        )

    @staticmethod
    async def _close_stream(stream: ListenStream | None) -> None:
        if stream is not None:
            with contextlib.suppress(Exception):
                await stream.aclose()
