"""Browser sessions for the console on the TCP API: the bearer token, typed once, becomes an
HttpOnly cookie; every change also needs a CSRF token the page carries (pure but the clock).

A session is server-side, so it can be ended: the cookie is ``v2.<random>``, and the daemon
keeps, per live session, a digest of it, its CSRF token and when it was last used. Logout
forgets the session (the same cookie then gets 401), a session unused for
:data:`SESSION_IDLE_S` or older than :data:`SESSION_MAX_AGE_S` is forgotten too, and
:meth:`BrowserSessions.revoke_all` (``mcpsubctl ui --revoke-all``) forgets every one. The
table lives in memory only: a daemon restart ends every session (a person logs in again;
nothing a restart could lose can revive a cookie that was logged out). At most
:data:`MAX_SESSIONS` are kept; past it the least recently used is ended.

Ending a session also ends what is still open with it: a request made with the cookie is
watched (:meth:`BrowserSessions.watch`, by the guard) and told when its session ends, however
it ends (logout, revoke-all, eviction, expiry found by :meth:`BrowserSessions.alive`), so an
event stream or a long poll opened before a logout does not outlive it.

The one-time login links ``mcpsubctl ui`` prints are a few random tickets, each good once and
for :data:`TICKET_TTL_S`.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

COOKIE = "mcpsub_session"
CSRF_HEADER = "x-csrf-token"
SESSION_MAX_AGE_S = 7 * 24 * 3600
"""A session ends this long after login, however busy."""
SESSION_IDLE_S = 8 * 3600
"""A session no request has used for this long ends."""
MAX_SESSIONS = 64
"""Live sessions kept; a login past it ends the least recently used one."""
TICKET_TTL_S = 120.0
MAX_TICKETS = 16
"""Outstanding login links; the oldest is dropped past this."""
_PREFIX = "v2."


def cookie_value(value: str | None) -> str | None:
    """Our cookie's value out of a ``Cookie`` header (None when absent)."""
    if not value:
        return None
    for part in value.split(";"):
        name, _, rest = part.strip().partition("=")
        if name == COOKIE:
            return rest.strip()
    return None


def _digest(cookie: str) -> str:
    """What the table is keyed by: a digest, so the table holds nothing a browser could send."""
    return hashlib.sha256(cookie.encode()).hexdigest()


@dataclass(slots=True)
class _Session:
    created: float
    last_used: float
    csrf: str


class BrowserSessions:
    """Mints, checks and ends the cookie's sessions, their CSRF tokens and one-time login
    tickets, for one API token."""

    def __init__(
        self,
        token: str,
        *,
        idle_s: float = SESSION_IDLE_S,
        max_age_s: float = SESSION_MAX_AGE_S,
    ) -> None:
        self._token = token
        self.idle_s = idle_s
        self.max_age_s = max_age_s
        self._tickets: OrderedDict[str, float] = OrderedDict()
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._watchers: dict[str, list[Callable[[], None]]] = {}
        """Per session, what to call when it ends: one entry per open request made with it."""

    def token_matches(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.strip().encode(), self._token.encode())

    # ---- sessions ------------------------------------------------------------------------
    def new_session(self, now: float | None = None) -> str:
        """A new session's cookie value (the least recently used one ends past the bound)."""
        now = time.time() if now is None else now
        self._expire_sessions(now)
        while len(self._sessions) >= MAX_SESSIONS:
            self._forget(next(iter(self._sessions)))
        cookie = _PREFIX + secrets.token_urlsafe(32)
        self._sessions[_digest(cookie)] = _Session(now, now, secrets.token_hex(32))
        return cookie

    def session_of(self, value: str | None, now: float | None = None) -> str | None:
        """The session's handle when ``value`` is the cookie of a live session (and marks it
        used), else None: unknown, logged out, revoked, idle or too old."""
        if not value or not value.startswith(_PREFIX) or len(value) > 128:
            return None
        handle = _digest(value)
        session = self._sessions.get(handle)
        if session is None:
            return None
        now = time.time() if now is None else now
        if self._expired(session, now):
            self._forget(handle)
            return None
        session.last_used = now
        self._sessions.move_to_end(handle)
        return handle

    def end(self, value: str | None) -> bool:
        """Logout: forget the session of cookie ``value``; True when there was one."""
        if not value:
            return False
        return self._forget(_digest(value))

    def revoke_all(self) -> int:
        """End every session (``mcpsubctl ui --revoke-all``); how many there were."""
        count = len(self._sessions)
        for handle in list(self._sessions):
            self._forget(handle)
        return count

    def watch(self, handle: str, ended: Callable[[], None]) -> Callable[[], None]:
        """Call ``ended`` once when session ``handle`` ends (now, if it already has); returns
        the call that stops watching (a request done before its session ended)."""
        if handle not in self._sessions:
            ended()
            return _nothing
        watchers = self._watchers.setdefault(handle, [])
        watchers.append(ended)

        def unwatch() -> None:
            with contextlib.suppress(ValueError):
                watchers.remove(ended)
            if not watchers and self._watchers.get(handle) is watchers:
                del self._watchers[handle]

        return unwatch

    def expires_at(self, handle: str) -> float | None:
        """When session ``handle`` ends unless it is used before (wall-clock seconds), or
        None when it has ended: the moment a watcher's timer looks again."""
        session = self._sessions.get(handle)
        if session is None:
            return None
        return min(session.last_used + self.idle_s, session.created + self.max_age_s)

    def alive(self, handle: str, now: float | None = None) -> bool:
        """Whether session ``handle`` is live, without marking it used; one found expired is
        ended here (its watchers told)."""
        session = self._sessions.get(handle)
        if session is None:
            return False
        if self._expired(session, time.time() if now is None else now):
            self._forget(handle)
            return False
        return True

    def _expired(self, session: _Session, now: float) -> bool:
        return now - session.last_used > self.idle_s or now - session.created > self.max_age_s

    def _forget(self, handle: str) -> bool:
        """End session ``handle``: gone from the table, and every request open with it told."""
        known = self._sessions.pop(handle, None) is not None
        for ended in self._watchers.pop(handle, ()):
            ended()
        return known

    @property
    def live(self) -> int:
        return len(self._sessions)

    def _expire_sessions(self, now: float) -> None:
        for handle, session in list(self._sessions.items()):
            if self._expired(session, now):
                self._forget(handle)

    def csrf_for(self, handle: str) -> str:
        session = self._sessions.get(handle)
        return "" if session is None else session.csrf

    def csrf_matches(self, handle: str, header: str | None) -> bool:
        expected = self.csrf_for(handle)
        return (
            bool(expected)
            and header is not None
            and hmac.compare_digest(header.strip().encode(), expected.encode())
        )

    # ---- one-time login links ----------------------------------------------------------
    def new_ticket(self, now: float | None = None) -> tuple[str, float]:
        now = time.monotonic() if now is None else now
        self._expire(now)
        while len(self._tickets) >= MAX_TICKETS:
            self._tickets.popitem(last=False)
        ticket = secrets.token_urlsafe(24)
        self._tickets[ticket] = now + TICKET_TTL_S
        return ticket, TICKET_TTL_S

    def redeem(self, ticket: str, now: float | None = None) -> bool:
        """True once for a ticket minted less than :data:`TICKET_TTL_S` ago."""
        now = time.monotonic() if now is None else now
        self._expire(now)
        for known in list(self._tickets):
            if hmac.compare_digest(known.encode(), ticket.encode()):
                del self._tickets[known]
                return True
        return False

    def _expire(self, now: float) -> None:
        for ticket, until in list(self._tickets.items()):
            if until <= now:
                del self._tickets[ticket]


def _nothing() -> None:
    """What :meth:`BrowserSessions.watch` returns for a session that had already ended."""
