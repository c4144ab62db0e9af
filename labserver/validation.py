"""Request validation for POSTs to the MCP endpoint, in the order of spec §2.3.

Theory of operation
-------------------
A request passes a ladder of checks and the first failing rung decides the answer:

1. HTTP layer (:func:`check_http`): 405 for anything but POST, 403 for a foreign
   ``Origin``, 401 when a bearer token is configured and not presented, 413 for a body
   over the limit.
2. Framing (:func:`parse_message`): 400/-32700 for unparseable JSON (``id`` null),
   400/-32600 for anything that is not one JSON-RPC request or notification object.
   Notifications stop here: the caller answers 202 (spec §2.4, leniently: header rules
   for notification POSTs are undefined by this revision).
3. (:func:`check_request`) A *legacy-shaped* ``initialize`` gets 400/-32022 naming the
   one version we speak, because a 2025 client cannot fall forward otherwise (§1.5).
4. Envelope: ``_meta`` with ``protocolVersion`` and ``clientCapabilities``, else 400/-32602.
5. Header/body agreement (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``), else
   400/-32020. It runs before the version check: conformance sends header ``2026-07-28``
   with body ``v999.0.0`` and expects -32020, not -32022.
6. Version supported, else 400/-32022 with ``data: {supported, requested}``.
7. Method exists, else 404/-32601 (removed methods such as ``ping`` included).

Everything here is pure: bytes and header pairs in, a :class:`Rejection` or a parsed
request out. Every rejection echoes the request id whenever the body let us read one.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Final

from service.mcp import wire

SUPPORTED_VERSIONS: Final = (wire.PROTOCOL_VERSION,)
Headers = Sequence[tuple[str, str]]
"""Header pairs with lower-case names, duplicates kept (so duplicates can be refused)."""

_LOCAL_ORIGIN: Final = re.compile(r"^https?://(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?$")


@dataclass(frozen=True, slots=True)
class Rejection:
    """One refused request: the HTTP status and, except for plain HTTP errors, a JSON-RPC error."""

    status: int
    request_id: Any
    code: int
    message: str
    data: Any = None
    headers: tuple[tuple[str, str], ...] = ()

    def body(self) -> dict[str, Any]:
        return wire.error_response(self.request_id, self.code, self.message, self.data)


@dataclass(frozen=True, slots=True)
class Message:
    """A framed JSON-RPC message: a request (has ``id``) or a notification (has none)."""

    request_id: Any
    method: str
    params: Any
    is_notification: bool


@dataclass(frozen=True, slots=True)
class McpRequest:
    """A request that passed the whole ladder; ``params`` always holds a valid ``_meta``."""

    request_id: Any
    method: str
    params: dict[str, Any]
    protocol_version: str
    client_capabilities: dict[str, Any]


def header_values(headers: Headers, name: str) -> list[str]:
    name = name.lower()
    return [value for key, value in headers if key == name]


def peek_id(body: bytes | None) -> Any:
    """Best-effort request id for errors raised before the body is properly parsed."""
    if not body:
        return None
    try:
        message = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(message, dict):
        request_id = message.get("id")
        if _valid_id(request_id):
            return request_id
    return None


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def origin_allowed(origin: str | None) -> bool:
    """Absent Origin (non-browser clients) or a loopback one; anything else is DNS rebinding."""
    return origin is None or _LOCAL_ORIGIN.match(origin) is not None


def bearer_matches(authorization: str | None, token: str) -> bool:
    if authorization is None:
        return False
    scheme, _, presented = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(presented.strip().encode(), token.encode())


def check_http(
    http_method: str,
    headers: Headers,
    body: bytes | None,
    *,
    auth_token: str | None,
) -> Rejection | None:
    """Rung 1. ``body`` is ``None`` when it exceeded the size limit and was not read."""
    request_id = peek_id(body)
    if http_method != "POST":
        return Rejection(
            405,
            None,
            wire.INVALID_REQUEST,
            "Method Not Allowed: this endpoint accepts POST only (MCP 2026-07-28)",
            headers=(("Allow", "POST"),),
        )
    origins = header_values(headers, "origin")
    if len(origins) > 1 or not origin_allowed(origins[0] if origins else None):
        return Rejection(403, request_id, wire.INVALID_REQUEST, "Forbidden: invalid Origin header")
    if auth_token is not None:
        values = header_values(headers, "authorization")
        if len(values) != 1 or not bearer_matches(values[0], auth_token):
            return Rejection(
                401,
                request_id,
                wire.INVALID_REQUEST,
                "Unauthorized: a valid bearer token is required",
                headers=(("WWW-Authenticate", "Bearer"),),
            )
    if body is None:
        return Rejection(413, None, wire.INVALID_REQUEST, "Payload Too Large")
    return None


def parse_message(body: bytes) -> Rejection | Message:
    """Rung 2: exactly one JSON-RPC 2.0 request or notification object."""
    try:
        message = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return Rejection(400, None, wire.PARSE_ERROR, "Parse error: body is not valid JSON")
    request_id = message.get("id") if isinstance(message, dict) else None
    echo_id = request_id if _valid_id(request_id) else None
    if not isinstance(message, dict):
        return Rejection(
            400,
            None,
            wire.INVALID_REQUEST,
            "Invalid Request: expected a single JSON-RPC request object (no batches)",
        )
    if message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        return Rejection(
            400, echo_id, wire.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 request"
        )
    if "id" in message and not _valid_id(request_id):
        return Rejection(
            400, None, wire.INVALID_REQUEST, "Invalid Request: id must be a string or an integer"
        )
    return Message(
        request_id=echo_id,
        method=message["method"],
        params=message.get("params"),
        is_notification="id" not in message,
    )


def _is_legacy_initialize(message: Message, header_version: str | None) -> bool:
    params = message.params if isinstance(message.params, dict) else {}
    meta = params.get("_meta")
    has_modern_meta = isinstance(meta, dict) and wire.META_PROTOCOL_VERSION in meta
    return (
        message.method == "initialize"
        and not has_modern_meta
        and isinstance(params.get("protocolVersion"), str)
        and (header_version is None or header_version.startswith("2025-"))
    )


def unsupported_version(request_id: Any, requested: Any, supported: Sequence[str]) -> Rejection:
    return Rejection(
        400,
        request_id,
        wire.UNSUPPORTED_PROTOCOL_VERSION,
        f"Unsupported protocol version: {requested}. "
        f"This server supports only: {', '.join(supported)}",
        {"supported": list(supported), "requested": requested},
    )


def _mismatch(request_id: Any, message: str) -> Rejection:
    return Rejection(400, request_id, wire.HEADER_MISMATCH, f"Header mismatch: {message}")


def _single(headers: Headers, name: str) -> str | list[str] | None:
    values = header_values(headers, name)
    if len(values) > 1:
        return values
    return values[0] if values else None


def _check_headers(message: Message, params: dict[str, Any], headers: Headers) -> Rejection | None:
    rid = message.request_id
    body_version = params["_meta"][wire.META_PROTOCOL_VERSION]
    checks: list[tuple[str, Any]] = [
        (wire.HEADER_PROTOCOL_VERSION, body_version),
        (wire.HEADER_METHOD, message.method),
    ]
    name_field = wire.NAME_PARAM.get(message.method)
    if name_field is not None:
        checks.append((wire.HEADER_NAME, params.get(name_field)))
    for header, expected in checks:
        value = _single(headers, header)
        if isinstance(value, list):
            return _mismatch(rid, f"{header} header is duplicated")
        if value is None:
            return _mismatch(rid, f"{header} header is required")
        if header == wire.HEADER_NAME:
            try:
                value = wire.decode_header_value(value)
            except ValueError:
                return _mismatch(rid, f"{header} header is not valid base64 sentinel encoding")
        if value != expected:
            return _mismatch(
                rid, f"{header} header {value!r} does not match the body value {expected!r}"
            )
    return None


def check_request(
    message: Message, headers: Headers, known_methods: Collection[str]
) -> Rejection | McpRequest:
    """Rungs 3-7 for a framed request (not a notification)."""
    rid = message.request_id
    header_version = _single(headers, wire.HEADER_PROTOCOL_VERSION)
    if _is_legacy_initialize(message, header_version if isinstance(header_version, str) else None):
        return unsupported_version(rid, message.params["protocolVersion"], SUPPORTED_VERSIONS)
    params = message.params
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return Rejection(400, rid, wire.INVALID_PARAMS, "Invalid params: params must be an object")
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        return Rejection(400, rid, wire.INVALID_PARAMS, "Invalid params: _meta is required")
    version = meta.get(wire.META_PROTOCOL_VERSION)
    if not isinstance(version, str):
        return Rejection(
            400,
            rid,
            wire.INVALID_PARAMS,
            f"Invalid params: _meta[{wire.META_PROTOCOL_VERSION!r}] is required",
        )
    capabilities = meta.get(wire.META_CLIENT_CAPABILITIES)
    if not isinstance(capabilities, dict):
        return Rejection(
            400,
            rid,
            wire.INVALID_PARAMS,
            f"Invalid params: _meta[{wire.META_CLIENT_CAPABILITIES!r}] is required",
        )
    mismatch = _check_headers(message, params, headers)
    if mismatch is not None:
        return mismatch
    if version not in SUPPORTED_VERSIONS:
        return unsupported_version(rid, version, SUPPORTED_VERSIONS)
    if message.method not in known_methods:
        hint = ""
        if message.method == "initialize":
            hint = " (initialize was removed in 2026-07-28; call server/discover instead)"
        return Rejection(
            404,
            rid,
            wire.METHOD_NOT_FOUND,
            f"Method not found: {message.method}{hint}",
            {"method": message.method, "supportedVersions": list(SUPPORTED_VERSIONS)},
        )
    return McpRequest(
        request_id=rid,
        method=message.method,
        params=params,
        protocol_version=version,
        client_capabilities=capabilities,
    )
