"""A transport without a socket: a function answers each request, for unit tests.

The client, the listen reader and the dispatcher take any :class:`~.base.Transport`, so their
decisions (what is sent, how an answer or a stream of frames is read, which error a broken
one becomes) can be tested in memory, in the same process and in microseconds, the way
httpx's ``MockTransport`` tests httpx. What only a real socket shows (framing, keep-alive,
hang-ups) is tested against both real transports on loopback
(``tests/unit/service/mcp/test_transports.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Mapping

from service.mcp.coding import BodyRefused
from service.mcp.errors import TransportError
from service.mcp.transports.base import MAX_BODY_BYTES, Answer


class MemoryStream:
    """A :class:`~.base.StreamAnswer` whose body is the chunks given (an iterable, or an
    async one to hand frames over as a test produces them); raising
    :class:`TransportError` from the async iterable is a stream that breaks."""

    def __init__(
        self,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        chunks: Iterable[bytes] | AsyncIterable[bytes] = (),
    ) -> None:
        self.status = status
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        self._chunks = chunks
        self._closed = False

    async def chunks(self) -> AsyncIterator[bytes]:
        if isinstance(self._chunks, AsyncIterable):
            async for chunk in self._chunks:
                if self._closed:
                    return
                yield chunk
        else:
            for chunk in self._chunks:
                if self._closed:
                    return
                yield chunk
        self._closed = True

    async def read_all(self, limit: int) -> bytes:
        body = bytearray()
        async for chunk in self.chunks():
            body += chunk
            if len(body) > limit:
                raise BodyRefused(f"the answer is larger than {limit} bytes")
        return bytes(body)

    async def aclose(self) -> None:
        self._closed = True

    @property
    def is_closed(self) -> bool:
        return self._closed


Handler = Callable[[bytes, dict[str, str]], Awaitable[Answer | MemoryStream]]
"""Answers one request (its body and headers) with a whole answer or a stream."""


class MemoryTransport:
    """Sends every request to ``handler``; keeps what was sent in :attr:`sent`."""

    accept_encoding = "identity"

    def __init__(self, url: str, handler: Handler) -> None:
        self.url = url
        self.handler = handler
        self.sent: list[tuple[bytes, dict[str, str]]] = []
        self.closed = False

    async def _answer(self, content: bytes, headers: dict[str, str]) -> Answer | MemoryStream:
        if self.closed:
            raise TransportError(f"connect error talking to {self.url}: closed", kind="connect")
        self.sent.append((content, dict(headers)))
        return await self.handler(content, headers)

    async def post(
        self, content: bytes, headers: dict[str, str], *, idempotent: bool = True
    ) -> Answer:
        answer = await self._answer(content, headers)
        if isinstance(answer, Answer):
            return answer
        return Answer(answer.status, answer.headers, await answer.read_all(MAX_BODY_BYTES))

    async def open_stream(self, content: bytes, headers: dict[str, str]) -> MemoryStream:
        answer = await self._answer(content, headers)
        if isinstance(answer, MemoryStream):
            return answer
        return MemoryStream(answer.status, answer.headers, [answer.body])

    def close_idle(self, before: float) -> None:
        """No connections to close."""

    async def aclose(self) -> None:
        self.closed = True
