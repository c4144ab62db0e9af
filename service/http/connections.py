"""Bounded API connections: a cap, a header deadline, and shedding of idle connections.

uvicorn holds a connection that never sends a request forever (its keep-alive timer starts
only after a first response), and accepts without limit until the process runs out of
descriptors, after which its accept loop fails on every attempt. :func:`guarded_h11` builds
an ``H11Protocol`` subclass that

* closes a connection whose request head has not fully arrived within ``header_timeout_s``
  of the connection (or of the previous response): a client trickling bytes does not
  extend it;
* keeps at most ``max_connections`` open: over the cap, the connection that has waited
  longest without sending a request head is closed to make room (so idle or half-open
  connections cannot lock legitimate clients out); when every connection is busy with a
  request, the new one is closed instead.

It also refuses a request whose body framing is ambiguous: h11 lets ``Transfer-Encoding``
win over a ``Content-Length`` sent beside it, but a proxy in front may have framed the body by
the other one, and the difference is where request smuggling lives. RFC 9112 §6.3 says such a
message "ought to be handled as an error" and the connection closed after answering: it gets
a 400 and the connection is closed (:func:`ambiguous_framing`, :class:`StrictH11Connection`).

Counters live in a :class:`ConnectionTracker`, which ``/metrics`` and the descriptor budget
read.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import h11
from h11._writers import ChunkedWriter
from uvicorn.protocols.http.h11_impl import H11Protocol


@dataclass(frozen=True)
class ApiLimits:
    max_connections: int = 512
    header_timeout_s: float = 10.0


@dataclass
class ConnectionTracker:
    open: int = 0
    shed_total: int = 0
    """Connections closed to stay under the cap."""
    header_timeouts_total: int = 0
    """Connections closed because no complete request head arrived in time."""


def ambiguous_framing(headers: Any) -> bool:
    """True when a request carries both ``Content-Length`` and ``Transfer-Encoding`` (h11's
    lower-cased header pairs). Pure."""
    names = {name.lower() for name, _ in headers}
    return b"content-length" in names and b"transfer-encoding" in names


class StrictH11Connection(h11.Connection):
    """An h11 server connection that raises ``RemoteProtocolError`` for a request head with
    ambiguous framing, before any of its body is read. uvicorn answers a
    ``RemoteProtocolError`` with 400 and closes the connection, as RFC 9112 §6.3 asks.

    It also frames a chunked response's body pieces itself (:meth:`send`): an SSE stream
    sends one piece per event, and h11's state machine, consulted for each, was a fifth of
    the event stream's CPU, though a body piece never changes its state."""

    def send(self, event: Any) -> Any:
        if (
            type(event) is h11.Data
            and self.our_state is h11.SEND_BODY
            and type(self._writer) is ChunkedWriter
        ):
            # What h11 would write (ChunkedWriter.send_data): an empty piece is nothing,
            # since a zero-length chunk would end the body.
            data = event.data
            return b"%x\r\n%b\r\n" % (len(data), data) if data else b""
        return super().send(event)

    def next_event(self) -> Any:
        event = super().next_event()
        if isinstance(event, h11.Request) and ambiguous_framing(event.headers):
            raise h11.RemoteProtocolError(
                "both Content-Length and Transfer-Encoding", error_status_hint=400
            )
        return event


def guarded_h11(limits: ApiLimits, tracker: ConnectionTracker) -> type[H11Protocol]:
    """An ``H11Protocol`` class enforcing ``limits`` (pass it as ``uvicorn.Config(http=…)``)."""

    class GuardedH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _armed_for: Any = None
        waiting_since: float | None = None
        """Monotonic time since when this connection owes us a request head (None: busy)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            size = self.config.h11_max_incomplete_event_size
            self.conn = StrictH11Connection(
                h11.SERVER, **({} if size is None else {"max_incomplete_event_size": size})
            )

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            tracker.open += 1
            self._arm()
            if len(self.connections) > limits.max_connections:
                self._shed()

        def connection_lost(self, exc: Exception | None) -> None:
            tracker.open -= 1
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.waiting_since is not None and self.cycle is not self._armed_for:
                self._disarm()  # a new request head arrived: it has its own cycle

        def on_response_complete(self) -> None:
            if not self.transport.is_closing():
                self._arm()  # the next request head is owed from now
            super().on_response_complete()
            if self.cycle is not self._armed_for:
                self._disarm()  # a pipelined request was already waiting

        # ---- helpers ---------------------------------------------------------------------
        def _arm(self) -> None:
            self._disarm()
            self._armed_for = self.cycle
            self.waiting_since = time.monotonic()
            self._deadline = self.loop.call_later(limits.header_timeout_s, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            self.waiting_since = None

        def _expired(self) -> None:
            self._deadline = None
            if self.waiting_since is not None and not self.transport.is_closing():
                tracker.header_timeouts_total += 1
                self.transport.close()

        def _shed(self) -> None:
            idle = [
                conn
                for conn in self.connections
                if isinstance(conn, GuardedH11Protocol)
                and conn is not self
                and conn.waiting_since is not None
                and not conn.transport.is_closing()
            ]
            victim = min(idle, key=lambda c: c.waiting_since or 0.0) if idle else self
            tracker.shed_total += 1
            victim.transport.close()

    return GuardedH11Protocol
