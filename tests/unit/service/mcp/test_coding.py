"""Bounded content decoding: one layer at most, inflation stops at the limit."""

from __future__ import annotations

import gzip
import zlib

import pytest

from service.mcp.coding import (
    PIECE_BYTES,
    BadContentEncoding,
    BodyTooLarge,
    ContentDecoder,
    LimitedBody,
    codings,
)


def test_codings_ignore_identity_and_case() -> None:
    assert codings(None) == []
    assert codings("identity") == []
    assert codings("GZip") == ["gzip"]
    assert codings("gzip, gzip") == ["gzip", "gzip"]


@pytest.mark.parametrize("header", ["gzip, gzip", "deflate, gzip", "gzip,identity,gzip"])
def test_stacked_codings_are_refused_before_any_inflation(header: str) -> None:
    with pytest.raises(BadContentEncoding, match="stacked"):
        ContentDecoder(header)


@pytest.mark.parametrize("header", ["br", "zstd", "compress"])
def test_unknown_codings_are_refused(header: str) -> None:
    with pytest.raises(BadContentEncoding, match="unsupported"):
        ContentDecoder(header)


def body(header: str | None, raw: bytes, limit: int = 1 << 20, chunk: int = 7) -> bytes:
    decoded = LimitedBody(header, limit)
    for start in range(0, len(raw), chunk):
        decoded.feed(raw[start : start + chunk])
    return decoded.finish()


def test_round_trips_in_small_chunks() -> None:
    text = b'{"jsonrpc": "2.0", "id": 1, "result": {}}' * 50
    assert body(None, text) == text
    assert body("gzip", gzip.compress(text)) == text
    assert body("x-gzip", gzip.compress(text) + gzip.compress(text)) == text * 2
    assert body("deflate", zlib.compress(text)) == text
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    assert body("deflate", raw.compress(text) + raw.flush()) == text


def test_single_layer_bomb_stops_at_the_limit() -> None:
    bomb = gzip.compress(b"A" * (64 << 20), 9)  # 64 MiB in about 64 KiB
    decoder = ContentDecoder("gzip")
    produced = 0
    with pytest.raises(BodyTooLarge):
        body("gzip", bomb, limit=1 << 20, chunk=len(bomb))
    # And the decoder itself only ever hands out bounded pieces.
    for piece in decoder.decode(bomb):
        assert len(piece) <= PIECE_BYTES
        produced += len(piece)
        if produced > 2 << 20:
            break
    assert produced <= (2 << 20) + PIECE_BYTES


def test_identity_limit_counts_raw_bytes() -> None:
    with pytest.raises(BodyTooLarge):
        body(None, b"x" * 2000, limit=1000, chunk=1500)


def test_garbage_is_bad_content_encoding() -> None:
    with pytest.raises(BadContentEncoding, match="inflate"):
        body("gzip", b"definitely not gzip")
