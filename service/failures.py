"""One classifier for every front door: an exception in, a stable (errorCode, hint) out.

``mcp-resource-subscriber`` (``compat=True``) keeps the TypeScript CLI's codes exactly,
quirks included; ``mcpsubctl`` and ``mcpsubd`` (``compat=False``) name every class. The
daemon uses the very same function for its links and reads, so ``status``,
``show``, events, logs and ``wait`` hints carry the codes ``mcpsubctl probe`` prints, and
``INTERNAL_ERROR`` means a bug in mcpsub and nothing else. Exit codes stay a front door's
decision (``cli/failures.py``).
"""

from __future__ import annotations

import ssl
import sys
from dataclasses import dataclass

from service.errorcodes import CODES
from service.mcp import wire
from service.mcp.classify import (
    DROPIN_TLS_HINT,
    NETWORK_HINTS,
    malformed_http,
    network_error_code,
)
from service.mcp.errors import (
    PROTOCOL_UNSUPPORTED_HINT,
    EndpointNotFound,
    HttpStatusError,
    InvalidUrl,
    JsonRpcError,
    McpError,
    ProtocolUnsupported,
    ProtocolViolation,
    TransportError,
)

AUTH_CODES = frozenset(
    {"AUTH_LOGIN_REQUIRED", "AUTH_TIMEOUT", "AUTH_REFRESH_FAILED", "AUTH_FAILED"}
)
TOOL_REJECTED_HINT = (
    "the server rejected tools/call before running the tool (unknown tool name or invalid "
    "arguments); check --tool and --args against the server's tools/list"
)
TLS_NOT_SPOKEN_HINT = (
    "the server did not answer TLS on that port: it probably speaks plain HTTP; use http:// "
    "instead of https:// in --url (or check the port)"
)
INVALID_URL_HINT = "--url must be an absolute http:// or https:// URL with a host"
_NOT_TLS_MARKERS = (
    "WRONG_VERSION_NUMBER",
    "record layer failure",
    "UNKNOWN_PROTOCOL",
    "http request",
)


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an MCP endpoint (pure, checked before any I/O), or None."""
    from urllib.parse import urlsplit

    if any(ch.isspace() for ch in url):
        return "it contains whitespace"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"it is malformed ({exc})"
    if parts.scheme not in ("http", "https"):
        shown_scheme = f"{parts.scheme}://" if parts.scheme else "no scheme"
        return f"it has {shown_scheme}; only http:// and https:// are served"
    if not parts.hostname:
        return "it has no host"
    if port == 0:
        return "port 0 cannot be connected to"
    return None


def _tls_not_spoken(exc: BaseException) -> bool:
    """An https:// URL whose server answered in plain HTTP (``WRONG_VERSION_NUMBER``)."""
    from service.mcp.classify import iter_causes

    return any(
        isinstance(item, ssl.SSLError) and any(m in str(item) for m in _NOT_TLS_MARKERS)
        for item in iter_causes(exc)
    )


def _invalid_url(exc: BaseException) -> bool:
    """The URL itself is unusable: a host no resolver can encode (``InvalidUrl``, from either
    transport), or httpx refused it (no or an unsupported scheme; OAuth's requests).

    httpx is looked up, never imported here: an httpx error means httpx is loaded. Importing
    it to classify a failure cost the one-shot CLI its start-up, and failed in a daemon out
    of file descriptors (the import opens files), which lost the read being classified."""
    from service.mcp.classify import iter_causes

    httpx = sys.modules.get("httpx")
    kinds: tuple[type[BaseException], ...] = (InvalidUrl,)
    if httpx is not None:
        kinds = (InvalidUrl, httpx.UnsupportedProtocol, httpx.InvalidURL)
    return any(isinstance(item, kinds) for item in iter_causes(exc))


PROTOCOL_ERROR_HINT = (
    "the server broke MCP 2026-07-28; report it to its maintainers with this message"
)
REQUEST_TIMEOUT_HINT = "the server did not answer in time"
INTERNAL_ERROR_HINT = "a bug in mcpsub: the daemon log has its traceback; please report it"
NETWORK_ERROR_HINT = "the connection to the server failed; retry later"
RESOURCE_NOT_FOUND_HINT = (
    "the server does not know this URI (resources/read answered -32602); check the URI with "
    "`mcpsubctl probe --url URL --uri URI`, or unsubscribe"
)


@dataclass(frozen=True)
class Failure:
    code: str
    hint: str | None
    message: str


def _auth_code(exc: BaseException) -> str | None:
    code = getattr(exc, "error_code", None)
    if isinstance(code, str) and code in AUTH_CODES - {"AUTH_FAILED"}:
        return code
    return None


def classify(exc: BaseException, *, mode: str, compat: bool) -> Failure:
    """``mode`` is ``subscribe`` or ``call``; ``compat`` selects the drop-in's codes."""
    message = str(exc) or type(exc).__name__
    hint = getattr(exc, "hint", None)
    auth = _auth_code(exc)
    if auth is not None:
        return Failure(auth, hint, message)
    http_auth = getattr(exc, "error_code", None) == "AUTH_FAILED"
    if http_auth and (mode == "call" or not compat):
        return Failure(
            "AUTH_FAILED",
            hint or "the server refused the credentials; check --auth-token or run --login",
            message,
        )
    if isinstance(exc, ProtocolUnsupported):
        if compat or not isinstance(exc, EndpointNotFound):
            # The drop-in keeps the original's verdict for a plain 404 too.
            return Failure("PROTOCOL_UNSUPPORTED", PROTOCOL_UNSUPPORTED_HINT, message)
        return Failure(exc.error_code, exc.hint, message)
    if (
        mode == "call"
        and isinstance(exc, JsonRpcError)
        and exc.code in (wire.INVALID_PARAMS, wire.METHOD_NOT_FOUND)
        and not http_auth
    ):
        return Failure("TOOL_REQUEST_REJECTED", TOOL_REJECTED_HINT, message)
    network = network_error_code(exc)
    if network is not None:
        if compat and network == "TLS_CERT_UNTRUSTED":
            return Failure(network, DROPIN_TLS_HINT, message)  # the TypeScript CLI's remedy
        return Failure(network, NETWORK_HINTS[network], message)
    fallback = "CALL_FAILED" if mode == "call" else "INTERNAL_ERROR"
    if compat:
        return Failure(fallback, None, message)
    if _invalid_url(exc):
        return Failure("INVALID_URL", INVALID_URL_HINT, message)
    if _tls_not_spoken(exc):
        return Failure("TLS_HANDSHAKE_FAILED", TLS_NOT_SPOKEN_HINT, message)
    if isinstance(exc, ProtocolViolation) or malformed_http(exc):
        return Failure("PROTOCOL_ERROR", PROTOCOL_ERROR_HINT, message)
    if isinstance(exc, TransportError):
        if exc.kind == "timeout":
            return Failure("REQUEST_TIMEOUT", REQUEST_TIMEOUT_HINT, message)
        return Failure("NETWORK_ERROR", NETWORK_ERROR_HINT, message)
    if isinstance(exc, TimeoutError) or getattr(exc, "error_code", None) == "NOTIFICATION_TIMEOUT":
        return Failure(
            "REQUEST_TIMEOUT", "--timeout-ms elapsed before the server answered", message
        )
    if isinstance(exc, McpError) and exc.error_code != "INTERNAL_ERROR":
        return Failure(exc.error_code, hint, message)
    if isinstance(exc, (JsonRpcError, HttpStatusError)):
        return Failure("SERVER_ERROR", hint, message)
    return Failure(fallback, None, message)


_STATE_HINTS: dict[str, str] = {
    **NETWORK_HINTS,
    "RESOURCE_NOT_FOUND": RESOURCE_NOT_FOUND_HINT,
    "PROTOCOL_ERROR": PROTOCOL_ERROR_HINT,
    "REQUEST_TIMEOUT": REQUEST_TIMEOUT_HINT,
    "NETWORK_ERROR": NETWORK_ERROR_HINT,
    "PROTOCOL_UNSUPPORTED": PROTOCOL_UNSUPPORTED_HINT,
    "ENDPOINT_NOT_FOUND": EndpointNotFound.hint or "",
    "SUBSCRIPTION_NOT_HONORED": "the server acknowledged the stream without this URI; check "
    "it with `mcpsubctl probe --url URL --uri URI`",
    "AUTH_LOGIN_REQUIRED": "run `mcpsubctl login URL`; the daemon picks the token up",
    "SERVER_ERROR": "the server answered with an error; the daemon retries",
    "SUBSCRIPTION_FAILED": "the server refused the listen or did not acknowledge it in time; "
    "the daemon retries with backoff; check it with `mcpsubctl probe --url URL --uri URI`",
    "SUBSCRIPTION_DISCONNECTED": "the server keeps closing listen streams soon after "
    "acknowledging them; the daemon listens again with backoff; look at the server's logs",
    "INTERNAL_ERROR": INTERNAL_ERROR_HINT,
    "STORAGE_FAILING": CODES["STORAGE_FAILING"].hint or "",
}


def state_hint(code: str | None) -> str | None:
    """The hint a subscription's ``stateCode`` shows (``stateHint``): what to do about it.

    Kept by code, not stored: the code is the stable part, and a hint can improve without a
    migration of every stored row."""
    return _STATE_HINTS.get(code) if code else None


def classify_read_failure(exc: BaseException) -> Failure:
    """A failed ``resources/read`` in the daemon: an unknown URI is ``RESOURCE_NOT_FOUND``.

    2026-07-28 answers an unknown URI with ``-32602`` (2025 used ``-32002``); anything else
    is classified as for a probe.
    """
    if (
        isinstance(exc, JsonRpcError)
        and exc.code in (wire.INVALID_PARAMS, -32002)
        and exc.error_code != "AUTH_FAILED"
    ):
        return Failure("RESOURCE_NOT_FOUND", RESOURCE_NOT_FOUND_HINT, str(exc))
    return classify(exc, mode="subscribe", compat=False)
