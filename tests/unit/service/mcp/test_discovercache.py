"""service.mcp.discovercache: a discover result is reused only while the protocol's caching
hints provably allow it (spec §4.1: ttlMs from when it was received, cacheScope)."""

from __future__ import annotations

from typing import Any

import pytest

from service.mcp.discovercache import MAX_STORED_CHARS, reusable, stored

NOW = 1_800_000_000.0


def result(**hints: Any) -> dict[str, Any]:
    return {
        "resultType": "complete",
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"resources": {"subscribe": True}},
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}},
        "instructions": "long text nobody needs again",
        **hints,
    }


def test_a_public_result_is_reused_until_its_ttl_passes() -> None:
    text = stored(result(ttlMs=60_000, cacheScope="public"), with_token=True, now=NOW)
    assert text is not None and "instructions" not in text
    kept = reusable(text, with_token=False, now=NOW + 59.9)
    assert kept is not None
    assert kept["capabilities"] == {"resources": {"subscribe": True}}
    assert kept["supportedVersions"] == ["2026-07-28"]
    assert kept["_meta"] == result()["_meta"]
    assert reusable(text, with_token=False, now=NOW + 60.0) is None


def test_a_clock_that_went_back_is_not_proof_of_freshness() -> None:
    text = stored(result(ttlMs=60_000, cacheScope="public"), with_token=False, now=NOW)
    assert reusable(text, with_token=False, now=NOW - 1) is None


@pytest.mark.parametrize(
    "hints",
    [
        {"ttlMs": 0, "cacheScope": "public"},  # immediately stale
        {"cacheScope": "public"},
        {"ttlMs": -5, "cacheScope": "public"},
        {"ttlMs": True, "cacheScope": "public"},
        {"ttlMs": 1.5, "cacheScope": "public"},
        {"ttlMs": 60_000},
        {"ttlMs": 60_000, "cacheScope": "shared"},
    ],
)
def test_a_result_without_valid_hints_is_not_kept(hints: dict[str, Any]) -> None:
    assert stored(result(**hints), with_token=False, now=NOW) is None


def test_a_private_result_stays_in_the_context_it_was_fetched_in() -> None:
    private = result(ttlMs=60_000, cacheScope="private")
    assert stored(private, with_token=True, now=NOW) is None  # a token's: not kept at all
    text = stored(private, with_token=False, now=NOW)
    assert reusable(text, with_token=False, now=NOW + 1) is not None
    assert reusable(text, with_token=True, now=NOW + 1) is None


def test_an_oversized_result_is_not_kept() -> None:
    big = result(ttlMs=60_000, cacheScope="public")
    big["capabilities"] = {"x": "y" * MAX_STORED_CHARS}
    assert stored(big, with_token=False, now=NOW) is None


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "not json",
        "[]",
        '{"receivedAt": 1800000000, "ttlMs": 60000, "cacheScope": "public"}',
        '{"receivedAt": "x", "ttlMs": 60000, "cacheScope": "public", '
        '"supportedVersions": [], "capabilities": {}}',
        '{"receivedAt": 1800000000, "ttlMs": 60000, "cacheScope": "public", '
        '"supportedVersions": [], "capabilities": []}',
        "[" * 10_000,
        "x" * (MAX_STORED_CHARS + 1),
    ],
)
def test_a_malformed_kept_text_is_asked_again(text: str | None) -> None:
    assert reusable(text, with_token=False, now=NOW + 1) is None
