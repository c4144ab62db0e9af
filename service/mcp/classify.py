"""Pure decisions about what the server said and what went wrong.

* :func:`parse_response` turns one HTTP answer (status, content type, body bytes) into the
  JSON-RPC result for our request id, or raises the matching :mod:`errors` exception.
  JSON-RPC errors are read from the body whatever the HTTP status (spec §8 gap 2).
* :func:`discover_failure` decides whether a failed ``server/discover`` means "this server
  cannot speak 2026-07-28" (spec §1.6) or is some other error that keeps its own code.
* :func:`network_error_code` walks an exception's cause chain for the TLS / DNS / refused
  classes, as the TypeScript CLI does with ``cause`` (seed §2), in Python terms.
"""

from __future__ import annotations

import errno
import socket
import ssl
from typing import Any

from service import jsondecode
from service.mcp import wire
from service.mcp.errors import (
    EndpointNotFound,
    HttpStatusError,
    JsonRpcError,
    McpError,
    ProtocolUnsupported,
    ProtocolViolation,
)
from service.mcp.listen import same_id
from service.mcp.sse import Event, EventTooLarge, SSEDecoder

TLS_HINT = (
    "the server's TLS certificate is not trusted: add the CA that issued it to the operating "
    "system's trust store (used by default), or pass --ca-cert FILE with that CA (for mkcert: "
    "$(mkcert -CAROOT)/rootCA.pem), or set SSL_CERT_FILE to a CA bundle that contains it"
)
DROPIN_TLS_HINT = (
    "the server's TLS certificate is not trusted: set NODE_EXTRA_CA_CERTS to the CA that "
    "issued it (for mkcert: $(mkcert -CAROOT)/rootCA.pem) or pass --ca-cert FILE, or add that "
    "CA to the operating system's trust store (used by default; NODE_USE_SYSTEM_CA=1 is "
    "accepted), or set SSL_CERT_FILE to a CA bundle that contains it"
)
DNS_HINT = (
    "the hostname in --url could not be resolved; check its spelling and your DNS, VPN or "
    "/etc/hosts settings"
)
REFUSED_HINT = (
    "nothing accepted the connection; check that --url's host and port are correct and the "
    "server is running"
)
NETWORK_HINTS = {
    "TLS_CERT_UNTRUSTED": TLS_HINT,
    "DNS_LOOKUP_FAILED": DNS_HINT,
    "CONNECTION_REFUSED": REFUSED_HINT,
}

_MAX_CAUSE_DEPTH = 8


def parse_json_message(text: str) -> dict[str, Any]:
    """Decode one JSON-RPC message; anything but an object is a protocol violation.

    Depth and every other decode failure are a :class:`ProtocolViolation` at once (a
    ``RecursionError`` escaping here once killed the daemon's stream reader silently).
    """
    try:
        message = jsondecode.loads(text)
    except jsondecode.InvalidJson as exc:
        what = "over-nested" if exc.too_deep else "invalid"
        raise ProtocolViolation(f"server sent {what} JSON: {text[:120]!r}") from exc
    if not isinstance(message, dict):
        raise ProtocolViolation(f"server sent a JSON {type(message).__name__}, not an object")
    return message


def result_of(message: dict[str, Any], *, http_status: int, method: str) -> dict[str, Any]:
    """The ``result`` of a response message, or the :class:`JsonRpcError` it carries."""
    error = message.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        raise JsonRpcError(
            code if isinstance(code, int) else wire.INTERNAL_ERROR,
            str(error.get("message", "")),
            error.get("data"),
            http_status=http_status,
            method=method,
        )
    result = message.get("result")
    if not isinstance(result, dict):
        raise ProtocolViolation(f"{method}: response has neither a result object nor an error")
    return result


def parse_response(
    status: int,
    content_type: str,
    body: bytes,
    request_id: Any,
    method: str,
    *,
    www_authenticate: str | None = None,
) -> dict[str, Any]:
    """Classify one complete HTTP answer to a request we sent."""
    mime = content_type.split(";", 1)[0].strip().lower()
    message: dict[str, Any] | None = None
    if mime == "text/event-stream":
        decoder = SSEDecoder()
        try:
            items = decoder.feed(body) + decoder.feed(b"\n\n")
        except EventTooLarge as exc:
            # An over-bound answer is the server's protocol error, like an oversized frame
            # on a listen stream; unhandled, it crashed the daemon's read task.
            raise ProtocolViolation(f"{method}: {exc}") from exc
        for item in items:
            if isinstance(item, Event) and item.event == "message":
                candidate = parse_json_message(item.data)
                if "method" not in candidate and same_id(candidate.get("id"), request_id):
                    message = candidate
                    break
        if message is None:
            if status >= 400:
                raise HttpStatusError(status, "", www_authenticate=www_authenticate)
            raise ProtocolViolation(f"{method}: SSE response ended without a response")
    else:
        text = body.decode("utf-8", errors="replace")
        try:
            decoded = jsondecode.loads(text) if text.strip() else None
        except jsondecode.InvalidJson as exc:
            if exc.too_deep:
                raise ProtocolViolation(f"{method}: server sent over-nested JSON") from exc
            decoded = None
        if isinstance(decoded, dict) and (
            isinstance(decoded.get("error"), dict) or "result" in decoded
        ):
            message = decoded
        elif status >= 400:
            raise HttpStatusError(status, text, www_authenticate=www_authenticate)
        else:
            raise ProtocolViolation(f"{method}: HTTP {status} without a JSON-RPC response")
    if "error" not in message and status >= 400:
        raise HttpStatusError(
            status, body.decode("utf-8", errors="replace"), www_authenticate=www_authenticate
        )
    if not same_id(message.get("id"), request_id) and "error" not in message:
        raise ProtocolViolation(
            f"{method}: response id {message.get('id')!r} does not match request {request_id!r}"
        )
    return result_of(message, http_status=status, method=method)


_TRANSIENT_4XX = frozenset({408, 429})
"""4xx statuses that say "try later" (timeout, rate limit), not anything about the era."""


def discover_failure(exc: McpError) -> McpError:
    """Map a failed ``server/discover`` to :class:`ProtocolUnsupported` when it means that.

    The rule is the official SDKs' *denylist* (python-sdk ``client/_probe.py``, spec §1.6):
    modern servers MUST implement discover, so anything that is not positive evidence of a
    2026-07-28 server is evidence of a 2025-era one. Every JSON-RPC error and every HTTP 4xx
    answer maps to ``PROTOCOL_UNSUPPORTED`` except:

    * 401/403: authentication, never confused with negotiation (``AUTH_FAILED``);
    * ``-32022`` whose ``supported`` lists 2026-07-28: modern, the caller retries at it;
    * HTTP 5xx and 408/429: the server (or a proxy) failing or asking for patience, which
      says nothing about the revision it speaks; they keep their own classes;
    * network and TLS failures, which never reach here as an answer.

    A 404 with no JSON-RPC body becomes :class:`EndpointNotFound` (a subclass), so
    ``mcpsubctl`` can say "check the URL path" while the drop-in keeps the original's
    ``PROTOCOL_UNSUPPORTED``.
    """
    if isinstance(exc, JsonRpcError):
        status = exc.http_status
        if status in (401, 403):
            return exc
        if status is not None and (status >= 500 or status in _TRANSIENT_4XX):
            return exc
        if exc.code == wire.UNSUPPORTED_PROTOCOL_VERSION:
            supported = exc.data.get("supported") if isinstance(exc.data, dict) else None
            if isinstance(supported, list) and wire.PROTOCOL_VERSION in supported:
                return exc
            return _unsupported(
                f"server/discover: server supports {supported!r}, not {wire.PROTOCOL_VERSION}",
                exc,
            )
        where = f"HTTP {status}, " if status is not None else ""
        return _unsupported(
            f"server/discover answered {where}JSON-RPC {exc.code} {exc.rpc_message!r}, "
            "as a pre-2026 server does",
            exc,
        )
    if isinstance(exc, HttpStatusError):
        status = exc.status
        if status == 404:
            error: ProtocolUnsupported = EndpointNotFound(
                "server/discover answered HTTP 404 without a JSON-RPC body: "
                "nothing is served at this path"
            )
            error.__cause__ = exc
            return error
        if 400 <= status < 500 and status not in (401, 403) and status not in _TRANSIENT_4XX:
            return _unsupported(
                f"server/discover answered HTTP {status} without a modern JSON-RPC error, "
                "as a pre-2026 server does",
                exc,
            )
    return exc


def _unsupported(message: str, cause: McpError) -> ProtocolUnsupported:
    error = ProtocolUnsupported(message)
    error.__cause__ = cause
    return error


def iter_causes(exc: BaseException) -> list[BaseException]:
    """The exception and its causes, outermost first, at most eight deep, without loops."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < _MAX_CAUSE_DEPTH:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


_PEER_WENT_AWAY = ("closed", "disconnected")
"""Words in a RemoteProtocolError that mean the connection ended early (a network failure),
not that the server sent malformed HTTP."""


def malformed_http(exc: BaseException) -> bool:
    """The server's HTTP itself was broken: a response head over the parser's bound (a 1 MB
    header), an illegal status line, a bad ``Content-Length``. h11, httpcore, httpx and the
    lean transport each raise a ``RemoteProtocolError`` (matched by name: httpx is imported
    lazily); one that says the peer closed the connection is a network failure instead
    (pure)."""
    return any(
        type(item).__name__ == "RemoteProtocolError"
        and not any(word in str(item).lower() for word in _PEER_WENT_AWAY)
        for item in iter_causes(exc)
    )


def network_error_code(exc: BaseException) -> str | None:
    """``TLS_CERT_UNTRUSTED`` / ``DNS_LOOKUP_FAILED`` / ``CONNECTION_REFUSED`` or None.

    An outer exception of an unrelated kind never stops the walk (the seed's bug #154).
    Messages are a fallback for exceptions flattened into strings by a library on the way.
    """
    for item in iter_causes(exc):
        if isinstance(item, ssl.SSLCertVerificationError):
            return "TLS_CERT_UNTRUSTED"
        if isinstance(item, ssl.SSLError) and "CERTIFICATE_VERIFY_FAILED" in str(item):
            return "TLS_CERT_UNTRUSTED"
        if isinstance(item, socket.gaierror):
            return "DNS_LOOKUP_FAILED"
        if isinstance(item, ConnectionRefusedError) or (
            isinstance(item, OSError) and item.errno == errno.ECONNREFUSED
        ):
            return "CONNECTION_REFUSED"
    for item in iter_causes(exc):
        text = str(item)
        if "CERTIFICATE_VERIFY_FAILED" in text:
            return "TLS_CERT_UNTRUSTED"
        if any(
            s in text
            for s in (
                "Name or service not known",
                "nodename nor servname",
                "Temporary failure in name resolution",
                "No address associated",
            )
        ):
            return "DNS_LOOKUP_FAILED"
        if "Connection refused" in text or "Errno 111" in text:
            return "CONNECTION_REFUSED"
    return None
