"""An incremental Server-Sent Events decoder: bytes in, finished events out.

Theory of operation
-------------------
MCP servers answer a request either with one JSON body or with an SSE stream, and a
``subscriptions/listen`` answer is an SSE stream that stays open for days. The decoder is
fed whatever chunks the socket delivers and hands back the events those chunks complete,
so it never blocks, never buffers more than one unfinished event, and can be tested with
plain bytes (the model is h11's receive buffer).

The WHATWG rules we implement: lines end in CRLF, LF or a lone CR (a CR at the very end of a
chunk may be the first half of a CRLF, so we hold it back); a line starting with ``:`` is a
comment; ``field: value`` with one optional space after the colon; ``data`` lines of one
event are joined with LF; a blank line dispatches; an event without ``event:`` has type
``message``; ``id`` and ``retry`` are kept (2026-07-28 servers send neither, but a gateway
may). Comments are reported too, as :class:`Comment`, because a keep-alive comment is the
only proof of life a quiet listen stream gives, and the daemon's watchdog needs it.

Limits: an event (or a single line) larger than ``max_event_bytes`` raises
:class:`EventTooLarge`. The default, 4 MiB, matches the largest request body the Python SDK
server accepts; a resource read bigger than that should not come through a notification
channel anyway, and without a bound a broken server could make us buffer forever.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_EVENT_BYTES = 4 * 1024 * 1024
MAX_QUIET_PIECE_BYTES = 256
"""The longest piece :meth:`SSEDecoder.comments_only` looks at: keep-alive frames are short,
and anything longer is fed as usual."""


@dataclass(slots=True)  # not frozen: a frozen init costs 5x, once per event
class Event:
    """One dispatched SSE event."""

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


@dataclass(frozen=True, slots=True)
class Comment:
    """A ``:`` line, e.g. a keep-alive. Carries the text after the colon."""

    text: str


class EventTooLarge(ValueError):
    """The stream sent an event or line beyond the decoder's limit."""


class SSEDecoder:
    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._max = max_event_bytes
        self._buffer = bytearray()
        self._pending_cr = False
        self._data: list[str] = []
        self._event_type = ""
        self._last_id: str | None = None
        self._retry: int | None = None
        self._event_bytes = 0
        self._has_fields = False
        self._bom_pending = True

    def feed(self, chunk: bytes) -> list[Event | Comment]:
        """Consume ``chunk``; return every event and comment it completes, in order."""
        out: list[Event | Comment] = []
        if not chunk:
            return out
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._pending_cr = False
        buf = self._buffer
        if b"\r" in chunk or b"\r" in buf:
            self._feed_any_line_end(chunk, out)
        else:
            # Lines that end in LF alone, as servers send them: one split, not a search for
            # CR and one for LF per line (the decoder was a sixth of probe --follow's CPU).
            if buf:
                buf += chunk
                lines = bytes(buf).split(b"\n")
            else:
                lines = chunk.split(b"\n")
            rest = lines.pop()
            for raw in lines:
                self._line(raw, out)
            buf[:] = rest
        if len(buf) > self._max:
            raise EventTooLarge(f"SSE line longer than {self._max} bytes")
        return out

    def _feed_any_line_end(self, chunk: bytes, out: list[Event | Comment]) -> None:
        """The general case: lines may end in CRLF, LF or a lone CR."""
        self._buffer += chunk
        start = 0
        buf = self._buffer
        length = len(buf)
        while start < length:
            cr = buf.find(b"\r", start)
            lf = buf.find(b"\n", start)
            if cr == -1 and lf == -1:
                break
            if cr == -1 or (lf != -1 and lf < cr):
                end, next_start = lf, lf + 1
            else:
                end = cr
                if cr + 1 < length:
                    next_start = cr + 2 if buf[cr + 1] == 0x0A else cr + 1
                else:
                    next_start = cr + 1
                    self._pending_cr = True
            self._line(bytes(buf[start:end]), out)
            start = next_start
        del buf[:start]

    def comments_only(self, piece: bytes) -> int:
        """How many comments ``piece`` holds when feeding it would report them and change
        nothing else; 0 when it must be fed.

        True only between events (nothing buffered, no field of an unfinished event, no CR
        held back) for a short piece of whole comment lines and blank lines, each ending in
        LF: a keep-alive frame as servers send it. Then a blank line dispatches nothing and
        the decoder's state is the same after :meth:`feed` as before, so the caller may count
        the comments and skip the feed (the listen stream's quiet path).
        """
        if (
            len(piece) > MAX_QUIET_PIECE_BYTES
            or piece[:1] not in (b":", b"\n")  # an event's frame: told at its first byte
            or self._buffer
            or self._pending_cr
            or self._bom_pending
            or self._has_fields
            or not piece.endswith(b"\n")
            or b"\r" in piece
        ):
            return 0
        comments = 0
        for line in piece[:-1].split(b"\n"):
            if not line:
                continue
            if line[0] != 0x3A:  # ":"
                return 0
            comments += 1
        return comments

    def flush(self) -> list[Event | Comment]:
        """At EOF: an unterminated event is discarded, as the SSE spec says."""
        self._buffer.clear()
        self._reset_event()
        return []

    # ---- internals ----------------------------------------------------------------------
    def _reset_event(self) -> None:
        self._data = []
        self._event_type = ""
        self._event_bytes = 0
        self._has_fields = False

    def _line(self, raw: bytes, out: list[Event | Comment]) -> None:
        line = raw.decode("utf-8", errors="replace")
        if self._bom_pending:
            # The stream may start with a UTF-8 byte order mark, which is not a field name.
            self._bom_pending = False
            line = line.removeprefix("\ufeff")
        if not line:
            if self._has_fields and self._data:
                out.append(
                    Event(
                        data="\n".join(self._data),
                        event=self._event_type or "message",
                        id=self._last_id,
                        retry=self._retry,
                    )
                )
            self._reset_event()
            return
        if line.startswith(":"):
            out.append(Comment(line[1:].lstrip(" ")))
            return
        self._event_bytes += len(raw)
        if self._event_bytes > self._max:
            raise EventTooLarge(f"SSE event larger than {self._max} bytes")
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        self._has_fields = True
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event_type = value
        elif name == "id":
            if "\x00" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)
