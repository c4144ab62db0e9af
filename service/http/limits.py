"""The request limits every front end shares: a body read within a size and a time, and one
pool of waiter slots that SSE streams, long-polls and the MCP face's open answers all count
against (``max_waiters``: more get 503 ``TOO_MANY_WAITERS``).

One object per app: the REST API's state is one (:class:`service.api.state.ApiState`
extends it) and the face is handed the same one, so the pool is one pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from starlette.requests import Request

from service.app.errors import BodyTimeout, BodyTooLarge, TooBusy


@dataclass(kw_only=True)
class RequestLimits:
    keepalive_s: float = 15.0
    """Seconds of silence before a stream sends a keep-alive (an SSE ``:`` comment)."""
    max_waiters: int = 256
    """Open SSE streams plus pending long-polls (and the face's open answers)."""
    max_body_bytes: int = 64 * 1024
    read_timeout_s: float = 10.0
    """A request body must arrive within this (a trickling client holds a connection)."""
    waiters: int = field(default=0)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the daemon stops: streams that can end with a result do so at once."""

    async def read_body(
        self, request: Request, max_bytes: int | None = None, what: str = "body"
    ) -> bytes:
        """The whole body, at most ``max_bytes`` (default ``max_body_bytes``; else 413),
        within ``read_timeout_s`` (else 408)."""
        limit = self.max_body_bytes if max_bytes is None else max_bytes
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.read_timeout_s):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > limit:
                        raise BodyTooLarge(f"the {what} is larger than {limit} bytes")
                    chunks.append(chunk)
        except TimeoutError:
            raise BodyTimeout(f"the body did not arrive within {self.read_timeout_s:g} s") from None
        return b"".join(chunks)

    def check_capacity(self) -> None:
        if self.waiters >= self.max_waiters:
            raise TooBusy(f"{self.waiters} streams and long-polls open (limit {self.max_waiters})")

    @asynccontextmanager
    async def waiter_slot(self) -> AsyncIterator[None]:
        """Count one open stream or long-poll (call :meth:`check_capacity` first)."""
        self.waiters += 1
        try:
            yield
        finally:
            self.waiters -= 1
