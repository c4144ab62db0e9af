"""Who sent a request, in which protocol era, with which headers: the ``mcp.request`` event.

The per-client verdicts (:mod:`labserver.verdicts`) judge clients, not requests, so every
POST to the MCP endpoint is logged once, before validation, with what identifies its
sender (``clientInfo`` from ``_meta`` or, for a 2025-era ``initialize``, from ``params``;
the ``User-Agent``; the remote host) and with the state of its routing headers. Every
other event recorded while that request is handled carries ``request: <seq>`` of this
entry (a context variable read by :class:`~labserver.eventlog.EventLog`), which ties
``resources.read``, ``listen.*`` and ``http.error`` entries to their sender without
guessing from timing.

Pure except for the context variable: bytes and header pairs in, a dict out.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Any, Final

from labserver.validation import Headers, header_values
from service.mcp import wire

CURRENT_REQUEST: ContextVar[int | None] = ContextVar("lab_current_request", default=None)
"""``seq`` of the ``mcp.request`` entry of the request being handled (``None`` outside one)."""

MAX_FIELD: Final = 200  # client-chosen strings are logged; keep them short


def _short(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    return value if len(value) <= MAX_FIELD else value[:MAX_FIELD] + "…"


def _client_info(params: dict[str, Any]) -> dict[str, str] | None:
    meta = params.get("_meta")
    info = meta.get(wire.META_CLIENT_INFO) if isinstance(meta, dict) else None
    if not isinstance(info, dict):
        info = params.get("clientInfo")  # 2025-era initialize
    if not isinstance(info, dict) or not isinstance(info.get("name"), str):
        return None
    return {"name": _short(info["name"]) or "", "version": _short(info.get("version")) or ""}


def _era(message: dict[str, Any], params: dict[str, Any], header_version: str | None) -> str:
    """``2026-07-28`` (or whatever modern version the ``_meta`` names), ``2025`` or ``unknown``."""
    meta = params.get("_meta")
    if isinstance(meta, dict) and isinstance(meta.get(wire.META_PROTOCOL_VERSION), str):
        return _short(meta[wire.META_PROTOCOL_VERSION]) or "unknown"
    if message.get("method") == "initialize" and isinstance(params.get("protocolVersion"), str):
        return "2025"
    if header_version is not None and header_version.startswith("2025-"):
        return "2025"
    return "unknown"


def header_state(headers: Headers, name: str, expected: Any) -> str:
    """``ok``, ``missing``, ``duplicated``, ``mismatch`` or ``n/a`` (nothing expected)."""
    values = header_values(headers, name)
    if expected is None:
        return "n/a" if not values else "ok"
    if not values:
        return "missing"
    if len(values) > 1:
        return "duplicated"
    value = values[0]
    if name == wire.HEADER_NAME:
        try:
            value = wire.decode_header_value(value)
        except ValueError:
            return "mismatch"
    return "ok" if value == expected else "mismatch"


def describe(
    http_method: str, headers: Headers, body: bytes | None, remote: str | None
) -> dict[str, Any]:
    """The fields of the ``mcp.request`` event for one HTTP request to the MCP endpoint."""
    ua = header_values(headers, "user-agent")
    versions = header_values(headers, wire.HEADER_PROTOCOL_VERSION)
    fields: dict[str, Any] = {
        "httpMethod": http_method,
        "userAgent": _short(ua[0]) if ua else None,
        "remote": remote,
        "method": None,
        "id": None,
        "clientInfo": None,
        "era": "unknown",
    }
    try:
        message = json.loads(body) if body else None
    except ValueError:
        message = None
    if not isinstance(message, dict):
        return fields
    method = message.get("method")
    params = message.get("params")
    if not isinstance(params, dict):
        params = {}
    fields["method"] = _short(method)
    rid = message.get("id")
    fields["id"] = rid if isinstance(rid, int | str) and not isinstance(rid, bool) else None
    fields["notification"] = "id" not in message
    fields["clientInfo"] = _client_info(params)
    if method == wire.RESOURCES_READ:
        # The verdicts count a re-read when it is asked for, not only once it is served (a
        # slow read may outlive the client's run).
        fields["uri"] = _short(params.get("uri"))
    fields["era"] = _era(message, params, versions[0] if versions else None)
    # Notifications are answered 202 before any header check, so only requests are judged.
    if fields["era"] != "2025" and isinstance(method, str) and not fields["notification"]:
        name_field = wire.NAME_PARAM.get(method)
        fields["headers"] = {
            "method": header_state(headers, wire.HEADER_METHOD, method),
            "name": header_state(
                headers, wire.HEADER_NAME, params.get(name_field) if name_field else None
            ),
        }
    return fields
