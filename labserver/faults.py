"""Pure decisions for the fault-injection knobs that answer *instead of* the real server.

``legacyMode`` makes the lab look like a 2025-era server, each variant copying what a real
one answers to a 2026-07-28 request (spec §1.6), so a client's "this server is too old"
path can be tested against a real HTTP peer. ``failMethods`` answers one method with a bare
HTTP status and a plain-text body, the way a proxy or a crashing server would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from labserver.labconfig import LegacyMode
from labserver.validation import Headers, Message, header_values
from service.mcp import wire

LEGACY_SUPPORTED: Final = ["2025-11-25", "2025-06-18"]


@dataclass(frozen=True, slots=True)
class Injected:
    """A canned answer: JSON-RPC ``body`` when set, else ``text`` as text/plain."""

    status: int
    body: dict[str, Any] | None = None
    text: str = ""


def legacy_answer(mode: LegacyMode, message: Message, headers: Headers) -> Injected:
    """What a 2025-era server of each kind answers a 2026-07-28 request (spec §1.6)."""
    rid = message.request_id
    if mode == "not-initialized":
        # TypeScript SDK 1.x stateful transport, the most common server in the wild: no
        # session yet, so 400 and -32000 with id null, whatever the method.
        return Injected(
            400,
            {
                "jsonrpc": "2.0",
                "error": {"code": -32000, "message": "Bad Request: Server not initialized"},
                "id": None,
            },
        )
    if mode == "not-found":
        # Nothing MCP at this path: a plain 404 the way a web framework answers it.
        return Injected(404, text="Not Found")
    if mode == "discover-2025":
        # go-sdk's stateful server answers discover but lists only handshake-era revisions.
        if message.method == wire.DISCOVER:
            return Injected(
                200,
                wire.result_response(
                    rid,
                    {
                        "resultType": "complete",
                        "supportedVersions": list(LEGACY_SUPPORTED),
                        "capabilities": {"resources": {"subscribe": True}},
                        "ttlMs": 0,
                        "cacheScope": "public",
                    },
                ),
            )
        return Injected(
            400,
            wire.error_response(rid, wire.INVALID_REQUEST, "Bad Request: Missing session ID"),
        )
    if mode == "method-not-found":
        # Legacy servers that ignore the header: -32601 on HTTP 200.
        return Injected(200, wire.error_response(rid, wire.METHOD_NOT_FOUND, "Method not found"))
    if mode == "missing-session":
        # python mcp 1.x stateful: the session check runs before anything else.
        return Injected(
            400,
            wire.error_response(rid, wire.INVALID_REQUEST, "Bad Request: Missing session ID"),
        )
    requested: Any = next(iter(header_values(headers, wire.HEADER_PROTOCOL_VERSION)), None)
    params = message.params if isinstance(message.params, dict) else {}
    meta = params.get("_meta")
    if isinstance(meta, dict) and isinstance(meta.get(wire.META_PROTOCOL_VERSION), str):
        requested = meta[wire.META_PROTOCOL_VERSION]
    return Injected(
        400,
        wire.error_response(
            rid,
            wire.UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": list(LEGACY_SUPPORTED), "requested": requested},
        ),
    )


def injected_answer(
    legacy_mode: LegacyMode | None,
    fail_methods: Mapping[str, int],
    message: Message,
    headers: Headers,
) -> Injected | None:
    """The canned answer for this request, or ``None`` to let the real server answer."""
    if legacy_mode is not None:
        return legacy_answer(legacy_mode, message, headers)
    status = fail_methods.get(message.method)
    if status is not None:
        return Injected(status, text=f"lab: injected HTTP {status} for {message.method}\n")
    return None
