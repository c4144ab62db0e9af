"""A link's state and how ``/v1/status`` shows it: :class:`LinkState`, its circuit view, and
the status object of one :class:`~service.daemon.link.ServerLink`.

Kept apart from the link's loop so that what a script reads (the status fields) can be read
and changed without the listen machine around it; :func:`status_key` and :func:`render` read
the same fields, so the status JSON cache (:mod:`service.daemon.statuscache`) can tell when a
link's part must be built again.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

from service.safetext import redact_urls

if TYPE_CHECKING:
    from service.daemon.link import ServerLink


class LinkState(enum.StrEnum):
    """Where a :class:`ServerLink` is, as its status shows it (``/v1/status`` ``state``); the
    listen stream's own states are :class:`service.mcp.listen.ListenState`.

    A ``StrEnum``, so that wherever a state is written out (``str()``, an f-string, a log
    line, a JSON body) it reads as its value, ``open``, and never as ``LinkState.OPEN``."""

    IDLE = "idle"
    """Nothing to listen for (no URI wanted), or not started."""
    CONNECTING = "connecting"
    """Discover and listen sent; no acknowledgement yet."""
    OPEN = "open"
    """The listen stream is acknowledged and read."""
    BACKOFF = "backoff"
    """Connecting failed; the next attempt is at ``backoffUntil`` (full jitter)."""
    THROTTLED = "throttled"
    """Re-listened too often in the last minute (``RELISTEN_LIMIT``)."""
    LOGIN_REQUIRED = "login_required"
    """The server wants credentials we do not have; rechecked on a slow schedule."""
    ERROR = "error"
    """The server cannot serve us (e.g. ``PROTOCOL_UNSUPPORTED``); rechecked slowly."""
    RELEASED = "released"
    """Another replica took the link."""
    STOPPED = "stopped"

    @property
    def circuit(self) -> str:
        """The circuit-breaker view scripts read: closed (working), open (failing: waiting
        out a backoff or a terminal condition), half_open (trying again)."""
        return _CIRCUIT.get(self, "closed")


_CIRCUIT = {
    LinkState.OPEN: "closed",
    LinkState.BACKOFF: "open",
    LinkState.CONNECTING: "half_open",
    LinkState.LOGIN_REQUIRED: "open",
    LinkState.ERROR: "open",
    LinkState.THROTTLED: "open",
}


def status_key(link: ServerLink) -> tuple[Any, ...]:
    """Everything :func:`render` reads, cheap to compare: the status cache serialises a
    link's status again only when this changed (keep the two functions in step)."""
    return (
        link.state,
        link.generation,
        link.last_error,
        link.last_error_code,
        link.last_error_hint,
        link.backoff_until,
        link.reconnects,
        link.relistens,
        link.stream is not None,
        tuple(link.honored),
        link.capabilities,
        tuple(link.wanted),
    )


def render(link: ServerLink) -> dict[str, Any]:
    """The link's object in ``/v1/status`` ``links`` (credentials in URLs redacted)."""
    circuit = link.state.circuit
    return {
        "serverId": link.server_id,
        "url": link.shown_url,
        "state": link.state.value,
        "generation": link.generation,
        "lastError": None if link.last_error is None else redact_urls(link.last_error),
        "lastErrorCode": link.last_error_code,
        "lastErrorHint": link.last_error_hint,
        "backoffUntil": link.backoff_until,
        "reconnects": link.reconnects,
        "relistens": link.relistens,
        "streamOpen": link.stream is not None and link.state is LinkState.OPEN,
        "honoredUris": sorted(link.honored),
        "capabilities": link.capabilities,
        "uris": sorted(link.wanted),
        "circuit": circuit if link.reconnects or link.state is not LinkState.OPEN else "closed",
    }
