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
import json
import socket
import ssl
from typing import Any

from service.mcp import wire
from service.mcp.errors import (
    HttpStatusError,
    JsonRpcError,
    McpError,
    ProtocolUnsupported,
    ProtocolViolation,
)
from service.mcp.listen import same_id
from service.mcp.sse import Event, SSEDecoder

TLS_HINT = (
    "the server's TLS certificate is not trusted: pass --ca-cert FILE with the CA that issued "
    "it (for mkcert: $(mkcert -CAROOT)/rootCA.pem), or set SSL_CERT_FILE to a CA bundle that "
    "contains it, or add that CA to the system trust store"
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
    """Decode one JSON-RPC message; anything but an object is a protocol violation."""
    try:
        message = json.loads(text)
    except ValueError as exc:
        raise ProtocolViolation(f"server sent invalid JSON: {text[:120]!r}") from exc
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
        for item in decoder.feed(body) + decoder.feed(b"\n\n"):
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
            decoded = json.loads(text) if text.strip() else None
        except ValueError:
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


def discover_failure(exc: McpError) -> McpError:
    """Map a failed ``server/discover`` to :class:`ProtocolUnsupported` when it means that.

    Modern servers MUST implement discover and answer any problem with a modern error, so
    ``-32601`` on discover, a ``-32022`` not offering 2026-07-28, or a 4xx body that is not
    a modern JSON-RPC error all mean "a 2025-era server" (spec §1.6). Authentication
    failures are never confused with negotiation: 401/403 keep ``AUTH_FAILED``.
    """
    if isinstance(exc, JsonRpcError):
        if exc.http_status in (401, 403):
            return exc
        if exc.code == wire.UNSUPPORTED_PROTOCOL_VERSION:
            supported = exc.data.get("supported") if isinstance(exc.data, dict) else None
            if not (isinstance(supported, list) and wire.PROTOCOL_VERSION in supported):
                return _unsupported(
                    f"server supports {supported!r}, not {wire.PROTOCOL_VERSION}", exc
                )
            return exc
        if exc.code in (wire.METHOD_NOT_FOUND, wire.INVALID_REQUEST):
            return _unsupported(f"server/discover answered: {exc.rpc_message}", exc)
        return exc
    if isinstance(exc, HttpStatusError) and exc.status in (400, 404, 405, 406, 415):
        return _unsupported(
            f"server/discover answered HTTP {exc.status} without a modern error", exc
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
