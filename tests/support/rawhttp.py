"""The pieces of a raw HTTP/1.1 peer written on asyncio streams, for the tests whose server
must write each byte itself (a chunk at a time, a stream held open, a cut mid-body): read a
request's JSON body by its ``content-length``, frame a chunk, frame an SSE ``data:`` event."""

from __future__ import annotations

import asyncio
import json
from typing import Any


def content_length(head: bytes) -> int:
    """The ``content-length`` of a request head (the bytes up to its blank line)."""
    return next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )


async def read_json_request(reader: asyncio.StreamReader) -> Any:
    """The next request's JSON body: its head, then ``content-length`` bytes, parsed."""
    head = await reader.readuntil(b"\r\n\r\n")
    return json.loads(await reader.readexactly(content_length(head)))


def chunk(data: bytes) -> bytes:
    """``data`` as one chunk of a chunked body."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse_frame(message: dict[str, Any]) -> bytes:
    """``message`` as one SSE ``data:`` event."""
    return b"data: " + json.dumps(message).encode() + b"\n\n"
