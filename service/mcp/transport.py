"""The one HTTP seam: a transport POSTs, opens a stream, and closes; which one is chosen once.

Everything above this seam (:class:`~service.mcp.client.McpClient`, the daemon's links, the
webhook dispatcher) holds one :class:`Transport` and never asks which library is behind it
(the shape of httpx's own ``BaseTransport``). Two implementations:

- :class:`~service.mcp.lean.LeanHttp`: h11 on an asyncio protocol, for plain ``http://``
  with no proxy variable. It exists for CPU: through httpx a re-read cost 1.2–1.6 ms where
  the exchange on a kept-alive socket needs ~0.2 ms (``results/hotpath.md``), and its idle
  listen streams cost nothing between frames. It never imports httpx (a third of a probe's
  start-up).
- :class:`~service.mcp.viahttpx.HttpxTransport`: httpx, for TLS and proxies.

:func:`make_transport` is the only place the choice is made. Both raise the same errors:
:class:`~service.mcp.errors.TransportError` (kind ``connect``/``read``/``timeout``) when the
exchange fails, :class:`~service.mcp.errors.InvalidUrl` when the URL's host cannot be encoded
(:func:`invalid_host`), :class:`BodyRefused` when an answer's body is refused (content coding
stacked, unknown or broken, or decoded size past the limit). Neither follows redirects.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from service.mcp.coding import BodyRefused
from service.mcp.errors import InvalidUrl
from service.netguard import AddressCheck
from service.safetext import redact_urls

if TYPE_CHECKING:
    import ssl  # a probe on plain http:// never loads it (~15 ms of start-up)

__all__ = [
    "Answer",
    "BodyRefused",
    "InvalidUrl",
    "StreamAnswer",
    "Transport",
    "invalid_host",
    "lean_usable",
    "make_transport",
]

PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")
MAX_BODY_BYTES = 16 * 1024 * 1024
"""A complete answer larger than this (decoded) is refused rather than buffered."""


def invalid_host(url: str, exc: BaseException) -> InvalidUrl:
    """The one error for a host no resolver can encode, whichever transport met it (the lean
    one as a ``UnicodeError`` from the resolver, httpx as ``httpx.InvalidURL``)."""
    return InvalidUrl(f"cannot use {redact_urls(url)}: its host is not a valid DNS name ({exc})")


@dataclass(frozen=True, slots=True)
class Answer:
    """A complete answer: status, headers (looked up by lower-case name), decoded body."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class StreamAnswer(Protocol):
    """An answer read as it arrives: status and headers now, the body as raw chunks."""

    status: int
    headers: Mapping[str, str]

    def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as sent (content coding not undone) until the answer ends;
        :class:`TransportError` when the stream breaks."""
        ...

    async def read_all(self, limit: int) -> bytes:
        """The whole (short) body, decoded, :class:`BodyRefused` past ``limit`` bytes."""
        ...

    async def aclose(self) -> None:
        """Close the connection under it: for a listen stream that is the unsubscribe."""
        ...

    @property
    def is_closed(self) -> bool: ...


class Transport(Protocol):
    """POSTs to one URL. Made by :func:`make_transport`; closed by whoever made it."""

    url: str
    accept_encoding: str
    """What to ask servers for: the lean path asks for ``identity`` (inflating costs CPU on
    every re-read) and still decodes a server that compresses anyway."""

    async def post(
        self, content: bytes, headers: dict[str, str], *, idempotent: bool = True
    ) -> Answer:
        """POST and read the whole answer. ``idempotent``: the request may be sent once
        more when a kept-alive connection turns out dead before any byte of the answer."""
        ...

    async def open_stream(self, content: bytes, headers: dict[str, str]) -> StreamAnswer:
        """POST on a connection of its own and return once the answer's head is in; never
        sent twice (a listen is not idempotent)."""
        ...

    async def aclose(self) -> None: ...


def lean_usable(url: str) -> bool:
    """Plain ``http://`` with no proxy variable that httpx would honour for it."""
    return urlsplit(url).scheme == "http" and not any(os.environ.get(k) for k in PROXY_VARIABLES)


def default_tls() -> ssl.SSLContext:
    """The trust httpx gives by default (certifi, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``)."""
    import httpx

    return httpx.create_ssl_context()


def make_transport(
    url: str,
    *,
    timeout: float | None = 30.0,
    connect_timeout: float | None = None,
    max_connections: int = 10,
    max_idle: int = 2,
    ca_cert: str | None = None,
    tls: Callable[[], ssl.SSLContext] | None = None,
    address_check: AddressCheck | None = None,
) -> Transport:
    """The transport for ``url``: lean on plain ``http://`` without a proxy, httpx otherwise.

    ``timeout`` bounds each socket operation on httpx (callers bound whole exchanges);
    ``connect_timeout`` (default: ``timeout``) bounds connecting on both. ``max_idle`` is how
    many kept-alive connections the lean transport keeps (memory per link at 1,000 links);
    httpx keeps up to ``max_connections``. ``tls`` (called when an httpx client is first made)
    shares one loaded CA bundle between many transports (see :func:`default_tls`); otherwise ``ca_cert`` names the CA file (default: the system's trust).
    ``address_check`` judges every address a host name resolves to before connecting
    (:mod:`service.netguard`, webhook targets).
    """
    connect = timeout if connect_timeout is None else connect_timeout
    if lean_usable(url):
        from service.mcp.lean import LeanHttp

        return LeanHttp(
            url, connect_timeout=connect, max_idle=max_idle, address_check=address_check
        )
    from service.mcp.viahttpx import HttpxTransport

    return HttpxTransport(
        url,
        timeout=timeout,
        connect_timeout=connect,
        max_connections=max_connections,
        ca_cert=ca_cert,
        tls=tls,
        address_check=address_check,
    )
