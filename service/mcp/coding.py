"""Undo a response's ``Content-Encoding`` without ever holding more than the limit.

Why not httpx's own decoders: they inflate each received chunk in one call, so a 1 KB
``gzip, gzip`` body becomes 512 MiB in memory before any size check can run.
Here the caller feeds raw bytes and gets decoded pieces of at most :data:`PIECE_BYTES`
each, produced lazily; it stops pulling the moment its own limit is passed, and the
inflater never gets to produce the rest.

We accept at most one content-coding layer (``gzip``, ``x-gzip`` or ``deflate``;
``identity`` counts as none), and ask servers for exactly those (:data:`ACCEPT_ENCODING`).
Stacked layers have no legitimate use on an MCP answer and are how a small body expands
by a factor of a million. Pure: no sockets, no asyncio.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Final

from service.mcp.errors import ProtocolViolation

ACCEPT_ENCODING: Final = "gzip, deflate"
PIECE_BYTES: Final = 64 * 1024
"""Largest piece one inflate step produces."""

_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS


class BodyRefused(ProtocolViolation):
    """An answer's body was refused: its content coding or its decoded size (either transport)."""


class BadContentEncoding(BodyRefused):
    """A coding we do not accept, stacked codings, or a body that does not inflate."""


def codings(header: str | None) -> list[str]:
    """The content codings named by a ``Content-Encoding`` header, identity left out."""
    if not header:
        return []
    names = [part.strip().lower() for part in header.split(",")]
    return [n for n in names if n and n != "identity"]


class BodyTooLarge(BodyRefused):
    """The decoded body passed the limit (the rest was never inflated)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"response larger than {limit} bytes (after decompression)")
        self.limit = limit


class ContentDecoder:
    """Incremental decoder for one response body; ``decode``/``flush`` yield bounded pieces."""

    def __init__(self, content_encoding: str | None, piece_bytes: int = PIECE_BYTES) -> None:
        self.piece_bytes = piece_bytes
        layers = codings(content_encoding)
        if len(layers) > 1:
            raise BadContentEncoding(
                f"response uses {len(layers)} stacked content codings ({content_encoding}); "
                "at most one is accepted"
            )
        self.coding = layers[0] if layers else None
        self._inflater: zlib._Decompress | None = None
        self._deflate_sniffed = False
        if self.coding in ("gzip", "x-gzip"):
            self._inflater = zlib.decompressobj(_GZIP_WBITS)
        elif self.coding == "deflate":
            self._inflater = None  # zlib-wrapped or raw: decided by the first bytes
        elif self.coding is not None:
            raise BadContentEncoding(f"response uses unsupported content coding {self.coding!r}")

    def decode(self, data: bytes) -> Iterator[bytes]:
        """Decoded pieces for ``data``; stop iterating and nothing more is inflated."""
        if self.coding is None:
            step = self.piece_bytes
            for start in range(0, len(data), step):
                yield data[start : start + step]
            return
        if not data:
            return
        inflater = self._inflater
        if inflater is None:
            # RFC 9110 says zlib-wrapped; some servers send raw deflate. The first byte of a
            # zlib stream has 8 in its low nibble and a header checksum divisible by 31.
            raw = not (
                len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
            )
            inflater = self._inflater = zlib.decompressobj(-zlib.MAX_WBITS if raw else _ZLIB_WBITS)
        pending = data
        while pending:
            try:
                piece = inflater.decompress(pending, self.piece_bytes)
            except zlib.error as exc:
                raise BadContentEncoding(f"response body does not inflate ({exc})") from None
            pending = inflater.unconsumed_tail
            if piece:
                yield piece
            if inflater.eof:
                # gzip allows several members one after the other.
                rest = inflater.unused_data
                if not rest or self.coding == "deflate":
                    return
                inflater = self._inflater = zlib.decompressobj(_GZIP_WBITS)
                pending = rest

    def flush(self) -> Iterator[bytes]:
        """At the end of the body: whatever the inflater still holds, in bounded pieces."""
        inflater = self._inflater
        if inflater is None:
            return
        while True:
            try:
                piece = inflater.decompress(inflater.unconsumed_tail, self.piece_bytes)
            except zlib.error as exc:
                raise BadContentEncoding(f"response body does not inflate ({exc})") from None
            if not piece:
                return
            yield piece


class LimitedBody:
    """A whole response body, decoded as it arrives; passing ``limit`` raises at once."""

    def __init__(self, content_encoding: str | None, limit: int) -> None:
        self._decoder = ContentDecoder(content_encoding)
        self._body = bytearray()
        self.limit = limit

    def feed(self, raw: bytes) -> None:
        self._add(self._decoder.decode(raw))

    def finish(self) -> bytes:
        self._add(self._decoder.flush())
        return bytes(self._body)

    def _add(self, pieces: Iterator[bytes]) -> None:
        for piece in pieces:
            self._body += piece
            if len(self._body) > self.limit:
                # Dropping the iterator here means the inflater never produces the rest.
                raise BodyTooLarge(self.limit)
