"""Browser sessions for the console on the TCP API: the bearer token, typed once, becomes an
HttpOnly cookie; every change also needs a CSRF token the page carries (pure but the clock).

Nothing is stored per session: the cookie is ``v1.<issued>.<mac>`` with
``mac = HMAC-SHA256(token, "session:" + issued)``, and the CSRF token is
``HMAC-SHA256(token, "csrf:" + issued)``, so a new API token ends every session, and the
daemon keeps no state a restart would lose. The one-time login links ``mcpsubctl ui`` prints
are the exception: a few random tickets, each good once and for :data:`TICKET_TTL_S`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict

COOKIE = "mcpsub_session"
CSRF_HEADER = "x-csrf-token"
SESSION_MAX_AGE_S = 7 * 24 * 3600
TICKET_TTL_S = 120.0
MAX_TICKETS = 16
"""Outstanding login links; the oldest is dropped past this."""


def _mac(token: str, purpose: str) -> str:
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


def cookie_value(value: str | None) -> str | None:
    """Our cookie's value out of a ``Cookie`` header (None when absent)."""
    if not value:
        return None
    for part in value.split(";"):
        name, _, rest = part.strip().partition("=")
        if name == COOKIE:
            return rest.strip()
    return None


class BrowserSessions:
    """Mints and checks the cookie, the CSRF token and one-time login tickets for one API
    token."""

    def __init__(self, token: str) -> None:
        self._token = token
        self._tickets: OrderedDict[str, float] = OrderedDict()

    def token_matches(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.strip().encode(), self._token.encode())

    def new_session(self, now: float | None = None) -> str:
        issued = str(int(time.time() if now is None else now))
        return f"v1.{issued}.{_mac(self._token, 'session:' + issued)}"

    def session_issued(self, value: str | None, now: float | None = None) -> str | None:
        """The session's issue time when ``value`` is a valid, unexpired cookie, else None."""
        if not value:
            return None
        version, _, rest = value.partition(".")
        issued, _, mac = rest.partition(".")
        if version != "v1" or not issued.isdigit() or len(issued) > 12:
            return None
        if not hmac.compare_digest(mac.encode(), _mac(self._token, "session:" + issued).encode()):
            return None
        age = (time.time() if now is None else now) - int(issued)
        return issued if -60 <= age <= SESSION_MAX_AGE_S else None

    def csrf_for(self, issued: str) -> str:
        return _mac(self._token, "csrf:" + issued)

    def csrf_matches(self, issued: str, header: str | None) -> bool:
        return header is not None and hmac.compare_digest(
            header.strip().encode(), self.csrf_for(issued).encode()
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
