"""Names, codes and message shapes of MCP revision 2026-07-28 on Streamable HTTP.

This module is pure: no sockets, no asyncio, no httpx. Both our client and the lab server
import it, so the two sides of every test agree on spelling by construction, and a typo
cannot make a test pass against itself (the lab server's tests use literal strings).

Theory of operation
-------------------
2026-07-28 has no handshake and no session. Every request is a POST that carries, in
``params._meta``, the protocol version and the client's capabilities, and repeats the
version and the method (and for some methods a name) in HTTP headers, so that gateways can
route without parsing bodies. A server checks the headers against the body and refuses a
mismatch with ``-32020``. Header values that are not plain printable ASCII travel as
``=?base64?<b64 of UTF-8>?=`` (spec §2.2).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Final

PROTOCOL_VERSION: Final = "2026-07-28"

# ---- _meta keys (spec §1.1, §3.3) -------------------------------------------------------
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"

# ---- HTTP headers (spec §2.2) -----------------------------------------------------------
HEADER_PROTOCOL_VERSION: Final = "MCP-Protocol-Version"
HEADER_METHOD: Final = "Mcp-Method"
HEADER_NAME: Final = "Mcp-Name"
ACCEPT_BOTH: Final = "application/json, text/event-stream"

# ---- methods ----------------------------------------------------------------------------
DISCOVER: Final = "server/discover"
RESOURCES_LIST: Final = "resources/list"
RESOURCES_READ: Final = "resources/read"
RESOURCES_TEMPLATES_LIST: Final = "resources/templates/list"
TOOLS_LIST: Final = "tools/list"
TOOLS_CALL: Final = "tools/call"
PROMPTS_GET: Final = "prompts/get"
LISTEN: Final = "subscriptions/listen"

ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
RESOURCE_UPDATED: Final = "notifications/resources/updated"
RESOURCES_LIST_CHANGED: Final = "notifications/resources/list_changed"
TOOLS_LIST_CHANGED: Final = "notifications/tools/list_changed"
PROMPTS_LIST_CHANGED: Final = "notifications/prompts/list_changed"
CANCELLED: Final = "notifications/cancelled"

# Methods whose ``Mcp-Name`` header mirrors a params field (spec §2.2).
NAME_PARAM: Final[dict[str, str]] = {TOOLS_CALL: "name", PROMPTS_GET: "name", RESOURCES_READ: "uri"}

# ---- JSON-RPC error codes (spec §4.4) ---------------------------------------------------
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
HEADER_MISMATCH: Final = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
LEGACY_RESOURCE_NOT_FOUND: Final = -32002

# ---- header value encoding (spec §2.2) --------------------------------------------------
_SENTINEL = re.compile(r"^=\?base64\?(.*)\?=$", re.DOTALL)
_PLAIN = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$")


def encode_header_value(value: str) -> str:
    """Return ``value`` as it must travel in ``Mcp-Name`` / ``Mcp-Param-*``.

    Plain printable ASCII without leading or trailing blanks goes as is. Anything else,
    and anything that already looks like the sentinel, is wrapped, so decoding is never
    ambiguous.
    """
    if _PLAIN.fullmatch(value) and not _SENTINEL.fullmatch(value):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def decode_header_value(value: str) -> str:
    """Inverse of :func:`encode_header_value`; a broken sentinel raises ``ValueError``."""
    match = _SENTINEL.fullmatch(value)
    if match is None:
        return value
    try:
        return base64.b64decode(match.group(1), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ValueError(f"invalid base64 header value: {value!r}") from exc


# ---- message construction ---------------------------------------------------------------
def request_meta(
    client_info: dict[str, Any] | None = None,
    capabilities: dict[str, Any] | None = None,
    version: str = PROTOCOL_VERSION,
) -> dict[str, Any]:
    """The ``_meta`` every request carries (spec §1.1)."""
    meta: dict[str, Any] = {
        META_PROTOCOL_VERSION: version,
        META_CLIENT_CAPABILITIES: dict(capabilities or {}),
    }
    if client_info is not None:
        meta[META_CLIENT_INFO] = dict(client_info)
    return meta


def request_headers(
    method: str, params: dict[str, Any], version: str = PROTOCOL_VERSION
) -> dict[str, str]:
    """The HTTP headers that mirror the body of one request (spec §2.2)."""
    headers = {
        "Content-Type": "application/json",
        "Accept": ACCEPT_BOTH,
        HEADER_PROTOCOL_VERSION: version,
        HEADER_METHOD: method,
    }
    name_field = NAME_PARAM.get(method)
    if name_field is not None and isinstance(params.get(name_field), str):
        headers[HEADER_NAME] = encode_header_value(params[name_field])
    return headers


def error_object(code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


def error_response(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error_object(code, message, data)}


def result_response(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}
