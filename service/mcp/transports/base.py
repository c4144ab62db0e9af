"""The one HTTP seam: what a transport is (POST, open a stream, close) and what it answers.

Everything above this seam (:class:`~service.mcp.client.McpClient`, the daemon's links, the
webhook dispatcher) holds one :class:`Transport` and never asks which library is behind it
(the shape of httpx's own ``BaseTransport``). This module knows no implementation; they are
its siblings (:mod:`.lean`, :mod:`.viahttpx`, :mod:`.memory`), and
:func:`service.mcp.transports.choose.make_transport` is the only place one is chosen.
Every implementation raises the same errors:
:class:`~service.mcp.errors.TransportError` (kind ``connect``/``read``/``timeout``) when the
exchange fails, :class:`~service.mcp.errors.InvalidUrl` when the URL's host cannot be encoded
(:func:`invalid_host`), :class:`BodyRefused` when an answer's body is refused (content coding
stacked, unknown or broken, or decoded size past the limit). Neither follows redirects.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from service.mcp.coding import BodyRefused
from service.mcp.errors import InvalidUrl
from service.safetext import redact_urls

__all__ = [
    "Answer",
    "BodyRefused",
    "InvalidUrl",
    "StreamAnswer",
    "Transport",
    "invalid_host",
    "lean_usable",
]

PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")
MAX_BODY_BYTES = 16 * 1024 * 1024
"""A complete answer larger than this (decoded) is refused rather than buffered."""


def invalid_host(url: str, exc: BaseException) -> InvalidUrl:
    """The one error for a host no resolver can encode, whichever transport met it (the lean
    one as a ``UnicodeError`` from the resolver, httpx as ``httpx.InvalidURL``)."""
    return InvalidUrl(f"cannot use {redact_urls(url)}: its host is not a valid DNS name ({exc})")


@dataclass(slots=True)  # not frozen: a frozen init costs 5x, once per answer
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

    def close_idle(self, before: float) -> None:
        """Close the kept-alive connections idle since before ``before`` (``time.monotonic``).
        Called from a timer its owner already has (the daemon's links: the supervisor's tick),
        so an idle link holds its listen stream's socket and nothing else; httpx expires its
        own pool's connections."""
        ...

    async def aclose(self) -> None: ...


def lean_usable(url: str) -> bool:
    """Plain ``http://`` with no proxy variable that httpx would honour for it."""
    return urlsplit(url).scheme == "http" and not any(os.environ.get(k) for k in PROXY_VARIABLES)
