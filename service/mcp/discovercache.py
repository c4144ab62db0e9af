"""A ``server/discover`` result kept across a daemon's restarts, under the protocol's caching
rules (spec §4.1): reused only while ``ttlMs`` since it was received has not passed, and a
``cacheScope: "private"`` result only within the same authorization context. Pure.

Why: a restart of ``mcpsubd`` otherwise repeats every link's discover before it may listen,
one more exchange per link (and per server) whose answer the server itself said was still
fresh. A server that says ``ttlMs: 0`` (the lab server does) is discovered every time, as
before.

What is kept is what a link uses (versions, capabilities, server info), not the whole result
(``instructions`` may be long): :func:`stored` makes the text the store keeps, at most
:data:`MAX_STORED_CHARS`, and :func:`reusable` reads it back, or says None for anything not
provably still valid (expired, a clock that went back, another scope, malformed).

The authorization context is kept as a yes/no, never as a token or its digest: a private
result is reused only by a link that sends no token, as it was fetched. A link with a token
discovers a private result again after a restart.
"""

from __future__ import annotations

from typing import Any

from service.jsondecode import InvalidJson, loads
from service.jsonencode import json_text

MAX_STORED_CHARS = 64 * 1024
"""A larger discover result (capabilities are small; a server stuffing them is) is not kept."""

__all__ = ["MAX_STORED_CHARS", "reusable", "stored"]


def _ttl_ms(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def stored(result: dict[str, Any], *, with_token: bool, now: float) -> str | None:
    """The text to keep for ``result`` (a discover result received at ``now``, wall clock),
    or None when it may not be reused at all: no valid ``ttlMs`` or ``ttlMs: 0``, an unknown
    ``cacheScope``, a private result fetched with a token, or too large."""
    ttl = _ttl_ms(result.get("ttlMs"))
    scope = result.get("cacheScope")
    if not ttl or scope not in ("public", "private"):
        return None
    if scope == "private" and with_token:
        return None
    meta = result.get("_meta")
    kept = {
        "receivedAt": now,
        "ttlMs": ttl,
        "cacheScope": scope,
        "supportedVersions": result.get("supportedVersions"),
        "capabilities": result.get("capabilities"),
        "_meta": meta if isinstance(meta, dict) else None,
    }
    text = json_text(kept)
    return text if len(text) <= MAX_STORED_CHARS else None


def reusable(text: str | None, *, with_token: bool, now: float) -> dict[str, Any] | None:
    """The kept discover result (``supportedVersions``, ``capabilities``, ``_meta``, as the
    server sent them) if it is still valid at ``now`` for a link that does (not) send a
    token; else None, and the caller discovers again."""
    if not text or len(text) > MAX_STORED_CHARS:
        return None
    try:
        kept = loads(text)
    except InvalidJson:
        return None
    if not isinstance(kept, dict):
        return None
    received = kept.get("receivedAt")
    ttl = _ttl_ms(kept.get("ttlMs"))
    if not isinstance(received, (int, float)) or isinstance(received, bool) or not ttl:
        return None
    if not 0 <= now - received < ttl / 1000:
        return None  # expired, or the clock went back: not provably fresh
    scope = kept.get("cacheScope")
    if scope not in ("public", "private") or (scope == "private" and with_token):
        return None
    if not isinstance(kept.get("capabilities"), dict):
        return None
    if not isinstance(kept.get("supportedVersions"), list):
        return None
    return {
        "supportedVersions": kept["supportedVersions"],
        "capabilities": kept["capabilities"],
        "_meta": kept.get("_meta"),
        "ttlMs": ttl,
        "cacheScope": scope,
    }
