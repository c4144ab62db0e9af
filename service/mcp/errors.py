"""Everything that can go wrong talking to an MCP server, as a small tree of exceptions.

::

    McpError                      base; every instance has .error_code and .hint
    ├── TransportError            no usable HTTP exchange (refused, DNS, TLS, reset, timeout)
    ├── HttpStatusError           an HTTP error status without a JSON-RPC body we could read
    ├── JsonRpcError              the server answered with a JSON-RPC error object
    ├── ProtocolUnsupported       the server cannot serve revision 2026-07-28
    │   └── EndpointNotFound      … a plain 404: most likely nothing is served at that path
    ├── ProtocolViolation         the server broke the protocol (bad frame, missing ack, …)
    └── ListenEnded               a listen stream ended before the caller was done
        ├── ListenClosed          … gracefully: the server sent the empty result
        └── ListenLost            … abruptly: EOF, reset, or no bytes for too long

Only :mod:`service.mcp.client` creates :class:`TransportError` (it is where httpx
exceptions enter); it keeps the original exception as ``__cause__`` so that
:func:`service.mcp.classify.network_error_code` can walk the chain the way the TypeScript
CLI walks ``cause``. Error codes are the stable strings users' scripts match on; the exit
code for each is a front door's decision (see ``cli/``), not the engine's.
"""

from __future__ import annotations

from typing import Any

from service.mcp.wire import PROTOCOL_VERSION
from service.safetext import redact_known

PROTOCOL_UNSUPPORTED_HINT = (
    f"The server does not offer MCP protocol revision {PROTOCOL_VERSION}. This client speaks "
    f"only {PROTOCOL_VERSION} and never falls back to older revisions: upgrade the server "
    f"(or the gateway in front of it) to a release that supports {PROTOCOL_VERSION}, then retry."
)


class McpError(Exception):
    """Base class. ``error_code`` is stable; ``hint`` tells a person what to do next."""

    error_code = "INTERNAL_ERROR"
    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint

    @property
    def message(self) -> str:
        return str(self)


class TransportError(McpError):
    """The HTTP exchange itself failed. ``kind`` is ``connect``, ``timeout`` or ``read``."""

    def __init__(self, message: str, *, kind: str = "connect") -> None:
        super().__init__(message)
        self.kind = kind


class HttpStatusError(McpError):
    """An HTTP error status whose body is not a JSON-RPC error."""

    def __init__(self, status: int, body: str = "", *, www_authenticate: str | None = None):
        snippet = body.strip().replace("\n", " ")[:200]
        super().__init__(f"HTTP {status}" + (f": {snippet}" if snippet else ""))
        self.status = status
        self.body = body
        self.www_authenticate = www_authenticate
        if status in (401, 403):
            self.error_code = "AUTH_FAILED"


class JsonRpcError(McpError):
    """A JSON-RPC error object, whatever HTTP status carried it."""

    def __init__(
        self,
        code: int,
        message: str,
        data: Any = None,
        *,
        http_status: int | None = None,
        method: str | None = None,
    ) -> None:
        super().__init__(f"{message} (JSON-RPC {code})")
        self.code = code
        self.rpc_message = message
        self.data = data
        self.http_status = http_status
        self.method = method
        if http_status in (401, 403):
            self.error_code = "AUTH_FAILED"


class ProtocolUnsupported(McpError):
    error_code = "PROTOCOL_UNSUPPORTED"
    hint = PROTOCOL_UNSUPPORTED_HINT


ENDPOINT_NOT_FOUND_HINT = (
    "nothing is served at this URL path (HTTP 404 without a JSON-RPC answer); check the path "
    "in --url against the server's documentation (MCP endpoints are often /mcp)"
)


class EndpointNotFound(ProtocolUnsupported):
    """A plain 404 on the endpoint: most often a wrong path, not an old server.

    A subclass so every ``except ProtocolUnsupported`` (the daemon's terminal state, the
    drop-in's original classification) still applies; ``mcpsubctl`` reports its own code.
    """

    error_code = "ENDPOINT_NOT_FOUND"
    hint = ENDPOINT_NOT_FOUND_HINT


class InvalidUrl(McpError):
    """The URL cannot be used at all (a host no resolver can encode: an IDNA label empty or
    over 63 characters). Both transports raise it, so a caller sees the same error whichever
    one its URL chose (the lean one met a bare ``UnicodeError``, the httpx one
    ``httpx.InvalidURL``), and no caller needs to know either library's exceptions."""

    error_code = "INVALID_URL"


class ProtocolViolation(McpError):
    """The server sent something 2026-07-28 forbids; we report it rather than guess."""

    error_code = "PROTOCOL_ERROR"


class ListenEnded(McpError):
    close_reason = "remote"


class ListenClosed(ListenEnded):
    error_code = "SUBSCRIPTION_CLOSED"
    close_reason = "graceful"


class ListenLost(ListenEnded):
    error_code = "SUBSCRIPTION_DISCONNECTED"
    close_reason = "remote"


PEER_TEXT_ATTRIBUTES = ("rpc_message", "body", "www_authenticate")
"""What an error keeps of a peer's words besides its message (``data`` is walked apart)."""
_CHAIN_LIMIT = 8


def redact_error(exc: BaseException, secrets: tuple[str, ...]) -> None:
    """Cut ``secrets`` (:func:`service.safetext.known_secrets`: what the client sent the
    peer) out of ``exc`` and the MCP errors it was raised from, in place: the message, the
    peer's ``message``/``data``, an HTTP error body. A server may echo its request in its
    error text, and that text is stored, logged and shown (``lastError``, ``probe``, the face).
    Every other URL and ``Basic``/``Bearer`` credential in it goes too (``redact_urls``)."""
    seen: set[int] = set()
    item: BaseException | None = exc
    while item is not None and id(item) not in seen and len(seen) < _CHAIN_LIMIT:
        seen.add(id(item))
        if isinstance(item, McpError):
            item.args = tuple(
                redact_known(arg, secrets) if isinstance(arg, str) else arg for arg in item.args
            )
            for name in PEER_TEXT_ATTRIBUTES:
                value = getattr(item, name, None)
                if isinstance(value, str):
                    setattr(item, name, redact_known(value, secrets))
            if getattr(item, "data", None) is not None:
                item.data = _redacted_value(item.data, secrets, 0)  # type: ignore[attr-defined]
        item = item.__cause__ or item.__context__


def _redacted_value(value: Any, secrets: tuple[str, ...], depth: int) -> Any:
    """A JSON value with its strings redacted (it came through ``jsondecode``'s depth bound;
    past 64 levels it is dropped rather than walked)."""
    if depth > 64:
        return None
    if isinstance(value, str):
        return redact_known(value, secrets)
    if isinstance(value, dict):
        return {
            redact_known(str(key), secrets): _redacted_value(item, secrets, depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_redacted_value(item, secrets, depth + 1) for item in value]
    return value
