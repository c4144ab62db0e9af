"""A server link's decisions as a sans-IO state machine, in the shape of
:mod:`service.mcp.listen` (one stream's frames) and :mod:`service.mcp.relisten` (when to
listen again), which it uses: this one decides what the *link* does and shows.

Theory of operation
-------------------
:class:`service.daemon.link.ServerLink` does the I/O: it discovers, opens listen streams,
reads them, writes the store and sleeps. After each step it tells the machine what happened,
and the machine answers with what to do next and what the link shows (its
:class:`~service.daemon.linkstatus.LinkState`, error, code, hint, retry time)::

    IDLE --connect--> CONNECTING --discovered--> CONNECTING --listening--> CONNECTING
                          |  (nothing offered: Down NOT_HONORED)  (budget spent: Down THROTTLED)
                          |
                          +--acknowledged, opened--> OPEN --acknowledged, opened--> OPEN
                          |  (nothing honored: Down NOT_HONORED)  (a new URI set, a new token,
                          |                                        make-before-break)
                          |                          OPEN --ended(closed | lost)--> CONNECTING
                          |                                 (``Relisten``: at once, jittered)
                          |                          OPEN --ended(young | failed)--> Down BACKOFF
                          +--failed--> Down: BACKOFF (connect, refusal, timeout, 5xx),
                                             LOGIN_REQUIRED (credentials), ERROR (protocol)

    Down --enter--> its state --waited--> (connect again)
    any --idle--> IDLE (no URI wanted)    any --released--> RELEASED    any --stopped--> STOPPED

A :class:`Down` is a decision, not yet a state: the link closes its stream, then ``enter``\\s
it (the state, the error and the retry time move together), writes it to the store and waits
``delay_s``; a changed URI set ends the wait of the states that only a change can fix
(``ends_on_change``), a recheck ends every wait.

What a read of the link needs to know is answered here too: which honored URIs an update
names (sub-resources included, spec §3.3), whether a stored read turns a subscription
``active``, whether a read's failure is shown. The machine never sleeps, reads a clock or
touches a socket: the caller passes ``now`` (monotonic, for the relisten policy) and the wall
time a retry is shown at. A call the current state does not allow raises
:class:`LinkMachineError` (a bug in the caller, never the server's doing).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.backoff import Backoff
from service.daemon.config import Settings
from service.daemon.linkstatus import LinkState
from service.failures import INTERNAL_ERROR_HINT, classify, classify_read_failure, state_hint
from service.mcp.errors import HttpStatusError, JsonRpcError, McpError, ProtocolUnsupported
from service.mcp.listen import Closed, Failed, Lost
from service.mcp.relisten import End, RelistenPolicy
from service.probe import subscribe_offered
from service.store.linkstate import StateChange

RELISTEN_LIMIT_HINT = (
    "the server (or a proxy in front of it) keeps ending listen streams right after "
    "acknowledging them; mcpsubd re-listens at most relisten_per_minute times a minute per "
    "server and waits for the window to pass; check the proxy's response timeouts"
)
NOT_HONORED_CODE = "SUBSCRIPTION_NOT_HONORED"


class LinkMachineError(RuntimeError):
    """The caller reported an event the link's current state does not have."""


class Wake(enum.StrEnum):
    """What ends a :class:`Down`'s wait before ``delay_s`` passes."""

    RECHECK = "recheck"
    """Only a recheck (``mcpsubctl resubscribe``, SIGHUP): a backoff is not cut short by a
    changed URI set, or a failing server would be asked again on every subscribe."""
    CHANGE = "change"
    """A changed URI set too: login, protocol and not-honored waits are final until then."""


@dataclass(frozen=True, slots=True)
class Down:
    """The link goes down: close the stream, show ``state``, write it, wait ``delay_s``."""

    state: LinkState
    code: str
    message: str
    hint: str | None
    delay_s: float
    subscriptions: tuple[str, str] | None = None
    """``(state, reason)`` written on every wanted subscription, or None (nothing, or the
    acknowledgement's transaction wrote them)."""
    counted: bool = False
    """A reconnect (``reconnects``, ``mcpsub_reconnects_total``)."""
    unexpected: bool = False
    """The failure was not one the link knows: log it with its traceback."""

    @property
    def wake(self) -> Wake:
        if self.state in _ENDS_ON_CHANGE:
            return Wake.CHANGE
        return Wake.RECHECK


_NONE_UNREAD: frozenset[int] = frozenset()
"""Every read stored: one empty set shared by every link."""

_ENDS_ON_CHANGE = frozenset({LinkState.LOGIN_REQUIRED, LinkState.ERROR, LinkState.NOT_HONORED})


@dataclass(frozen=True, slots=True)
class Relisten:
    """The acknowledged stream ended as streams do: listen again after ``delay_s``."""

    delay_s: float
    reason: str


@dataclass(frozen=True, slots=True)
class Ack:
    """An acknowledgement's verdict, before its transaction: what to write (``changes``) and
    whether the stream is worth holding (``keep``)."""

    uris: tuple[str, ...]
    honored: frozenset[str]
    not_honored: tuple[int, ...]
    """Subscription ids the acknowledgement left out."""
    changes: tuple[StateChange, ...]
    keep: bool


@dataclass(frozen=True, slots=True)
class Opened:
    """The acknowledged stream is the link's now: re-read ``reread`` (every honored URI on a
    new stream; on a changed set, those the last stream did not carry); ``retry_not_honored`` asks for the slow
    retry of the URIs left out."""

    reread: tuple[str, ...]
    retry_not_honored: bool


StreamEnd = Closed | Lost | Failed | McpError
"""How a reader's stream ended: the listen machine's end events, or the error it raised."""

_TERMINAL = frozenset({LinkState.STOPPED, LinkState.RELEASED})
_LIVE = frozenset({LinkState.CONNECTING, LinkState.OPEN})
_DOWN = frozenset(
    {
        LinkState.BACKOFF,
        LinkState.THROTTLED,
        LinkState.NOT_HONORED,
        LinkState.LOGIN_REQUIRED,
        LinkState.ERROR,
    }
)
_ALIVE = frozenset(LinkState) - _TERMINAL

ALLOWED: dict[str, frozenset[LinkState]] = {
    "connect": _ALIVE,
    "idle": _ALIVE,
    "discovered": frozenset({LinkState.CONNECTING}),
    "listening": _LIVE,
    "acknowledged": _LIVE,
    "opened": _LIVE,
    "ended": frozenset({LinkState.OPEN}),
    "failed": _LIVE,
    "listen_failed": _LIVE,
    "crashed": _ALIVE,
    "enter": _ALIVE,
    "waited": _DOWN,
    "released": frozenset(LinkState),
    "stopped": frozenset(LinkState),
}
"""Event -> the states it may arrive in: the table the tests walk, state by state."""


class LinkMachine:
    """One link's state, what it wants and holds, and every decision about them."""

    __slots__ = (
        "_slashes",
        "acked_this_session",
        "backoff",
        "backoff_until",
        "generation",
        "honored",
        "last_error",
        "last_error_code",
        "last_error_hint",
        "listened",
        "policy",
        "reconnects",
        "relistens",
        "settings",
        "state",
        "unread",
        "wanted",
    )

    def __init__(self, settings: Settings, policy: RelistenPolicy | None = None) -> None:
        self.settings = settings
        self.policy = policy or RelistenPolicy(
            _backoff(settings.backoff_base_s, settings.backoff_cap_s),
            listens_per_minute=settings.relisten_per_minute,
            relisten_jitter_s=settings.relisten_jitter_s,
        )
        """When to listen again (pure; :mod:`service.mcp.relisten`)."""
        self.backoff = self.policy.backoff
        self.state = LinkState.IDLE
        self.generation = 0
        self.wanted: dict[str, int] = {}
        """URI -> subscription id."""
        self.listened: frozenset[str] = frozenset()
        """The URIs the current stream was opened for: the same set as :attr:`honored` when
        the acknowledgement honored them all (a link holds thousands of these sets)."""
        self.honored: frozenset[str] = frozenset()
        """The acknowledged URIs, as :attr:`wanted`'s own strings (not the server's copies)."""
        self._slashes = 0
        """The most trailing slashes on an honored URI, for sub-resource matching
        (:meth:`targets`): a number where a table of the honored URIs was."""
        self.unread: set[int] | frozenset[int] = _NONE_UNREAD
        """Subscriptions (ids) with no read stored at the last ack: they turn ``active`` when
        their first read is stored, and show a failed first read at once. Once all are read
        it is the one shared empty set again (a set keeps the size it grew to)."""
        self.acked_this_session = False
        self.last_error: str | None = None
        self.last_error_code: str | None = None
        self.last_error_hint: str | None = None
        self.backoff_until: float | None = None
        self.reconnects = 0
        self.relistens = 0
        """Streams re-opened at once after a close or loss (not failures)."""

    # -- what the link wants ---------------------------------------------------------------
    def want(self, uri: str, subscription_id: int) -> bool:
        """True when this changed the wanted set."""
        if self.wanted.get(uri) == subscription_id:
            return False
        self.wanted[uri] = subscription_id
        return True

    def unwant(self, uri: str) -> bool:
        return self.wanted.pop(uri, None) is not None

    def wants_relisten(self) -> bool:
        """The wanted set is not what the stream was opened for: listen for the new set."""
        return bool(self.wanted) and self.wanted.keys() != self.listened

    def retry_not_honored(self) -> bool:
        """The slow retry of URIs an acknowledgement left out: True when some still are (the
        next listen is then for the whole set)."""
        if self.listened - self.honored:
            self.listened = frozenset()
            return True
        return False

    # -- the table -------------------------------------------------------------------------
    def connect(self) -> None:
        """A session starts: discover, then listen."""
        self._require("connect")
        self.state = LinkState.CONNECTING
        self.acked_this_session = False

    def idle(self) -> None:
        """Nothing is wanted: hold no stream."""
        self._require("idle")
        self.state = LinkState.IDLE

    def discovered(self, capabilities: Any) -> Down | None:
        """Discover answered: a server that does not offer resource subscriptions is not
        asked to listen, and every subscription says so, as a listen that honored none of
        them would."""
        self._require("discovered")
        if subscribe_offered(capabilities):
            return None
        message = (
            "the server does not advertise resources.subscribe: it cannot honor a "
            "subscription, so none was requested"
        )
        return self._not_honored(message, subscriptions=("not_honored", message))

    def listening(self, now: float) -> Down | None:
        """A new listen is about to be sent; None: go ahead. Down (``THROTTLED``): the
        per-minute budget is spent."""
        self._require("listening")
        wait = self.policy.listening(now)
        if wait <= 0:
            return None
        used = self.policy.budget.used(now)
        message = (
            f"{used} listens in the last minute (relisten_per_minute); "
            f"listening again in {wait:.1f} s"
        )
        return Down(LinkState.THROTTLED, "RELISTEN_LIMIT", message, RELISTEN_LIMIT_HINT, wait)

    def acknowledged(
        self,
        now: float,
        uris: Sequence[str],
        honored: Collection[str],
        failing: Mapping[str, McpError | None],
    ) -> Ack:
        """The listen for ``uris`` was acknowledged with ``honored``. ``failing``: the URIs
        whose reads are failing now, with their error.

        State moves on evidence only: the ack proves the link is open, not that a read works.
        A subscription whose reads are failing keeps its error until a read succeeds; one
        with no stored read stays ``pending`` until its first is stored."""
        self._require("acknowledged")
        self.acked_this_session = True
        verdict = self.policy.acknowledged(now, uris, honored)
        wanted = self.wanted
        # Our own strings (``uris`` are the wanted set's keys), not the server's copies of them.
        kept = frozenset(u for u in uris if u in verdict.honored and u in wanted)
        left_out = tuple(wanted[u] for u in uris if u not in kept and u in wanted)
        failing_now = {u: failing[u] for u in kept if u in failing}
        changes = (
            StateChange(
                [wanted[u] for u in sorted(kept - failing_now.keys())], "active", unread="pending"
            ),
            StateChange(
                left_out,
                "not_honored",
                "the server's acknowledgement did not include this URI",
                NOT_HONORED_CODE,
            ),
            *(
                read_error(wanted[u], error)
                for u, error in sorted(failing_now.items())
                if error is not None
            ),
        )
        return Ack(tuple(uris), kept, left_out, changes, verdict.keep)

    def opened(
        self, ack: Ack, generation: int, unread: Collection[int], *, reread_all: bool
    ) -> Opened | Down:
        """The acknowledgement's transaction committed under ``generation``."""
        self._require("opened")
        self.generation = generation
        self.unread = set(unread) if unread else _NONE_UNREAD
        if not ack.keep:
            # Nothing wanted can ever arrive on it: hold no stream, send no listen loop.
            return self._not_honored(
                "the server's acknowledgement honored none of the "
                f"{len(ack.uris)} URI(s) listened for"
            )
        previous = self.honored
        listened = frozenset(ack.uris)
        self.listened = ack.honored if listened == ack.honored else listened
        self.honored = ack.honored
        self._slashes = max((len(u) - len(u.rstrip("/")) for u in ack.honored), default=0)
        self.state = LinkState.OPEN
        self.last_error = self.last_error_code = self.last_error_hint = None
        self.backoff_until = None
        targets = ack.honored if reread_all else ack.honored - previous
        return Opened(tuple(sorted(targets)), bool(ack.not_honored))

    def ended(self, now: float, end: StreamEnd) -> Relisten | Down:
        """The current stream ended. Closed or lost: listen again (at once, or back off
        while streams keep ending young). An error answer, or a broken rule after the ack
        (a frame over a bound): back off like a failed connect, or a server that acks and
        then sends an oversized event would be asked for it again and again."""
        self._require("ended")
        if isinstance(end, McpError):
            code = classify(end, mode="subscribe", compat=False).code
            return self._backoff(code, f"listen stream broke the protocol: {end}", failed=True)
        if isinstance(end, Failed):
            message = f"the listen stream failed: {end.error}"
            return self._backoff("SUBSCRIPTION_FAILED", message, failed=True)
        if isinstance(end, Closed):
            reason, how = "the server closed the listen stream", End.CLOSED
        else:
            reason, how = f"the listen stream was lost: {end.reason}", End.LOST
        decided = self.policy.ended(now, how)
        if decided.backing_off:
            lived = self.policy.last_lifetime_s or 0.0
            message = (
                f"{reason}; listen streams keep ending young ({decided.young_streak} in a "
                f"row, the last {lived:.2f} s after its acknowledgement): listening again in "
                f"{decided.delay_s:.1f} s"
            )
            return self._down_backoff("SUBSCRIPTION_DISCONNECTED", message, decided.delay_s)
        throttled = self.listening(now)
        if throttled is not None:
            return throttled
        self.relistens += 1
        self.reconnects += 1
        self.state = LinkState.CONNECTING
        return Relisten(decided.delay_s, reason)

    def listen_failed(self, exc: BaseException) -> Down:
        """Opening a listen failed: no acknowledgement in time, a refusal, or the transport."""
        self._require("listen_failed")
        if isinstance(exc, TimeoutError):
            return self._backoff("SUBSCRIPTION_FAILED", "listen not acknowledged in time")
        if isinstance(exc, (HttpStatusError, JsonRpcError)) and exc.error_code != "AUTH_FAILED":
            return self._backoff("SUBSCRIPTION_FAILED", f"listen refused: {exc}")
        return self.failed(exc)

    def failed(self, exc: BaseException) -> Down:
        """The session failed with ``exc`` (the failure's class decides the state)."""
        self._require("failed")
        if isinstance(exc, ProtocolUnsupported):
            # Terminal until something changes: re-checked hourly, on resubscribe, on SIGHUP.
            delay = self.settings.protocol_recheck_s
            return self._terminal(LinkState.ERROR, exc.error_code, str(exc), exc.hint, delay)
        if getattr(exc, "error_code", None) == "AUTH_LOGIN_REQUIRED":
            return self._login(str(exc))
        if isinstance(exc, (HttpStatusError, JsonRpcError)) and exc.error_code == "AUTH_FAILED":
            return self._login(f"the server refused our credentials: {exc}")
        failure = classify(exc, mode="subscribe", compat=False)
        return self._backoff(
            failure.code,
            str(exc) or type(exc).__name__,
            hint=failure.hint,
            unexpected=failure.code == "INTERNAL_ERROR",
        )

    def storage_failed(self, message: str) -> Down:
        """The store could not write what the session needed (a full disk, the database
        gone): neither the server's doing nor a bug, so no traceback and no
        ``INTERNAL_ERROR``. Back off on the failure schedule; the store reports the
        daemon-level storage condition, and the next session writes again."""
        self._require("failed")
        return self._backoff(
            "STORAGE_FAILING", f"the link's state could not be stored: {message}", failed=True
        )

    def crashed(self, exc: BaseException, crashes: int) -> Down:
        """The link's task raised what nothing inside caught (a bug): shown as
        ``INTERNAL_ERROR``, and the loop restarts after a backoff."""
        self._require("crashed")
        message = f"link task crashed: {exc!r}"[:300]
        return Down(
            LinkState.BACKOFF,
            "INTERNAL_ERROR",
            message,
            INTERNAL_ERROR_HINT,
            self.backoff.delay(crashes, rng=self.policy.rng),
            subscriptions=("backoff", f"INTERNAL_ERROR: {message}"),
        )

    def enter(self, down: Down, wall: float) -> None:
        """Show ``down`` from now (``wall``: ``time.time()``), until the next connect."""
        self._require("enter")
        self.state = down.state
        self.last_error, self.last_error_code, self.last_error_hint = (
            down.message,
            down.code,
            down.hint,
        )
        self.backoff_until = wall + down.delay_s
        if down.counted:
            self.reconnects += 1

    def waited(self, *, recheck: bool, changed: bool) -> None:
        """The wait after a :class:`Down` ended: a recheck forgets the failures so far, a
        changed URI set lets a parked link listen now."""
        self._require("waited")
        if recheck:
            self.policy.recheck()
        elif changed:
            self.policy.changed()

    def released(self) -> None:
        """Another replica holds the link now."""
        self.state = LinkState.RELEASED

    def stopped(self) -> None:
        self.state = LinkState.STOPPED

    # -- what the link's reads ask ---------------------------------------------------------
    def targets(self, uri: str) -> list[str]:
        """The honored URIs an update for ``uri`` asks us to re-read.

        Spec §3.3: the URI may be a sub-resource of one we subscribed to: an honored URI
        that, without its trailing slashes, is the part of ``uri`` before one of its ``/``.
        Walking the URI's own ``/`` positions (each prefix with as many trailing slashes as
        an honored URI has) costs O(len(uri)), not O(subscriptions), per notification, and
        no table beside the honored set.
        """
        honored = self.honored
        if uri in honored:
            return [uri]
        found: list[str] = []
        slashes = self._slashes
        cut = uri.find("/")
        while cut != -1:
            root = uri[:cut]
            if not root.endswith("/"):
                found.extend(
                    candidate
                    for candidate in (root + "/" * n for n in range(slashes + 1))
                    if candidate in honored
                )
            cut = uri.find("/", cut + 1)
        return found

    def reads(self, uri: str) -> bool:
        """An update for ``uri`` (an honored URI a reader picked) is still to be re-read."""
        return uri in self.honored and uri in self.wanted

    def is_unread(self, subscription_id: int) -> bool:
        return subscription_id in self.unread

    def activates(self, uri: str, subscription_id: int, failing: bool) -> bool:
        """Whether storing a read makes the subscription ``active`` (in the same
        transaction): it had no stored read or was failing, and the link is open on it."""
        return (
            self.state is LinkState.OPEN
            and uri in self.honored
            and (failing or subscription_id in self.unread)
        )

    def read_stored(self, subscription_id: int, generation: int) -> None:
        """A read was stored under ``generation`` after the subscription had none (or was
        failing): it has one now."""
        unread = self.unread
        if generation == self.generation and subscription_id in unread:
            assert isinstance(unread, set)  # the shared empty one has no member
            unread.discard(subscription_id)
            if not unread:
                self.unread = _NONE_UNREAD

    def shows_read_errors(self) -> bool:
        """A failed read is shown on its subscription only while the link is open: when it
        is down, its own state (backoff, …) is what the subscription shows, and the read's
        error is written again with the next acknowledgement if it lasts."""
        return self.state is LinkState.OPEN

    def silent(self, now: float, last_activity: float) -> bool:
        """The open stream sent no byte for three keep-alive intervals (the watchdog)."""
        return self.state is LinkState.OPEN and now - last_activity > self.settings.keepalive_s * 3

    # -- helpers ---------------------------------------------------------------------------
    def _backoff(
        self,
        code: str,
        message: str,
        *,
        failed: bool = False,
        hint: str | None = None,
        unexpected: bool = False,
    ) -> Down:
        """Back off: the policy's growing schedule while connecting fails (or a stream
        failed after its ack); an ordinary end after an ack this session waits the first
        step only."""
        if failed or not self.acked_this_session:
            delay = self.policy.failed().delay_s
        else:
            delay = self.backoff.delay(0, rng=self.policy.rng)
        return self._down_backoff(code, message, delay, hint=hint, unexpected=unexpected)

    @staticmethod
    def _down_backoff(
        code: str, message: str, delay: float, *, hint: str | None = None, unexpected: bool = False
    ) -> Down:
        # Not "active": nothing is being watched until the stream is back; the next
        # acknowledgement sets "active" again.
        return Down(
            LinkState.BACKOFF,
            code,
            message,
            hint if hint is not None else state_hint(code),
            delay,
            subscriptions=("backoff", f"{code}: {message}"),
            counted=True,
            unexpected=unexpected,
        )

    def _not_honored(self, message: str, subscriptions: tuple[str, str] | None = None) -> Down:
        # Final for that listen: the URI set changing, a resubscribe or not_honored_retry_s
        # listens again.
        return Down(
            LinkState.NOT_HONORED,
            NOT_HONORED_CODE,
            message,
            state_hint(NOT_HONORED_CODE),
            self.settings.not_honored_retry_s,
            subscriptions=subscriptions,
        )

    def _login(self, message: str) -> Down:
        delay = self.settings.login_retry_s
        code = "AUTH_LOGIN_REQUIRED"
        return self._terminal(LinkState.LOGIN_REQUIRED, code, message, state_hint(code), delay)

    @staticmethod
    def _terminal(
        state: LinkState, code: str, message: str, hint: str | None, delay: float
    ) -> Down:
        return Down(state, code, message, hint, delay, subscriptions=(state.value, message))

    def _require(self, event: str) -> None:
        if self.state not in ALLOWED[event]:
            raise LinkMachineError(f"{event} is not allowed in state {self.state.value}")


@functools.cache
def _backoff(base_s: float, cap_s: float) -> Backoff:
    """One (frozen) schedule for every link of the same settings, not one per link."""
    return Backoff(base_s=base_s, cap_s=cap_s)


def read_error(subscription_id: int, exc: McpError) -> StateChange:
    """The ``error`` state a failed read shows: ``CODE: message`` and the code."""
    code = classify_read_failure(exc).code
    return StateChange([subscription_id], "error", f"{code}: {exc}", code)
