"""A link's state and how ``/v1/status`` and ``/metrics`` show it: :class:`LinkState`, its
circuit view, and :class:`LinkSnapshot`, what a link shows of itself at one moment.

The link produces the snapshot (``ServerLink.snapshot()``); status and metrics render it and
never read the link, so what a script reads can be read and changed without the listen
machine around it, and nothing here imports the link. The snapshot's equality is the status
cache's key (:mod:`service.daemon.statuscache`): a link's part is rebuilt only when it changed.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from service.safetext import redact_urls


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
    NOT_HONORED = "not_honored"
    """The acknowledgement honored none of the link's URIs: no stream is held; listened
    again when the URI set changes, on resubscribe, or after ``not_honored_retry_s``."""
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
    LinkState.NOT_HONORED: "open",
}


@dataclass(frozen=True, slots=True)
class LinkSnapshot:
    """What one link shows at one moment: everything :func:`render` reads, compared field by
    field (the status cache's key)."""

    server_id: int
    url: str
    """Credentials redacted (the link's ``shown_url``)."""
    state: LinkState
    generation: int
    last_error: str | None
    last_error_code: str | None
    last_error_hint: str | None
    backoff_until: float | None
    reconnects: int
    relistens: int
    streams_ended_young: int
    """Acknowledged streams in a row that ended young (the relisten policy backs off)."""
    stream_open: bool
    """A listen stream is held (open only counts while the state is ``open``)."""
    honored: Collection[str]
    """Not a copy: the link's own frozen set (never changed, replaced)."""
    capabilities: dict[str, Any] | None
    wanted: Collection[str]
    """A tuple, or the link's frozen set of the URIs its stream was opened for when that is
    the same set (frozen sets compare as sets, a tuple and a set as unequal: a rebuild)."""


def render(link: LinkSnapshot) -> dict[str, Any]:
    """The link's object in ``/v1/status`` ``links`` (credentials in URLs redacted)."""
    circuit = link.state.circuit
    return {
        "serverId": link.server_id,
        "url": link.url,
        "state": link.state.value,
        "generation": link.generation,
        "lastError": None if link.last_error is None else redact_urls(link.last_error),
        "lastErrorCode": link.last_error_code,
        "lastErrorHint": link.last_error_hint,
        "backoffUntil": link.backoff_until,
        "reconnects": link.reconnects,
        "relistens": link.relistens,
        "streamsEndedYoung": link.streams_ended_young,
        "streamOpen": link.stream_open and link.state is LinkState.OPEN,
        "honoredUris": sorted(link.honored),
        "capabilities": link.capabilities,
        "uris": sorted(link.wanted),
        "circuit": circuit if link.reconnects or link.state is not LinkState.OPEN else "closed",
    }
