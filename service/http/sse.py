"""Server-Sent Events as the daemon writes them: one encoder for ``/v1/events/stream`` and
the face's ``/mcp`` streams (pure: values in, bytes out).

The reader's rules (WHATWG, as ``service/mcp/sse.py`` decodes them) decide what is safe to
write: a line ends at CR, LF or CRLF, a blank line ends the event, and a line's first word
names its field. So data is written one ``data:`` line per line of it (a reader joins them
with LF), a comment one ``:`` line per line, and an event's type and id, which are ours and
never a server's, must be one line each: nothing inside an event's data can end the event,
start another field or forge another event. JSON from ``service.jsonencode`` escapes its
newlines, so a JSON event is one ``data:`` line and costs no split.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Final

from service.jsonencode import json_bytes

LINE_BREAK: Final = re.compile(rb"\r\n|\r|\n")
LF: Final = ord("\n")
CR: Final = ord("\r")
"""As ints: a byte's membership test is one memchr, the check every event of a stream pays."""


def _field(name: str, value: str | int) -> bytes:
    text = str(value)
    if "\r" in text or "\n" in text or "\0" in text:
        raise ValueError(f"an SSE {name} must be one line: {text!r}")
    return f"{name}: {text}\n".encode()


@functools.lru_cache(maxsize=64)
def _type_line(event_type: str) -> bytes:
    """An ``event:`` line, checked once per type (a stream writes a few types many times)."""
    return _field("event", event_type)


def event(
    data: bytes, *, event_type: str | None = None, event_id: int | str | None = None
) -> bytes:
    """One event: its ``id`` and ``event`` lines when given, then ``data`` one ``data:``
    line per line of it. A type or id that is not one line is a ValueError (a NUL in an id
    would make the reader ignore it)."""
    head = b""
    if event_id is not None:
        head = b"id: %d\n" % event_id if type(event_id) is int else _field("id", event_id)
    if event_type is not None:
        head += _type_line(event_type)
    if LF in data or CR in data:
        lines = LINE_BREAK.split(data)
        return head + b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"
    return b"".join((head, b"data: ", data, b"\n\n"))


def json_event(
    payload: Any, *, event_type: str | None = None, event_id: int | str | None = None
) -> bytes:
    """One event whose data is ``payload`` as JSON (``service.jsonencode``: one line)."""
    return event(json_bytes(payload), event_type=event_type, event_id=event_id)


def comment(text: str) -> bytes:
    """A comment (a keep-alive, a stream's opening): readers skip it, proxies see traffic.
    Each line of ``text`` is a ``:`` line of its own."""
    lines = LINE_BREAK.split(text.encode())
    return b"".join(b": " + line + b"\n" for line in lines) + b"\n"


def retry(ms: int) -> bytes:
    """How long a reader waits before it reconnects."""
    if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
        raise ValueError(f"an SSE retry is a whole number of milliseconds: {ms!r}")
    return f"retry: {ms}\n\n".encode()
