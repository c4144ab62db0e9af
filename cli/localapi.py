"""The thin client for the ``mcpsubd`` local API: one blocking socket, HTTP/1.1, JSON.

Agent scripts call ``mcpsubctl read``/``events``/``wait`` in loops, so every millisecond of a
call's start-up counts (issue 21 §3). This module is what those commands, ``mcpsubctl tail``,
``hook`` and the stdio agent face use to reach the daemon, and it imports only ``_socket``,
``json`` and ``os`` on its way to an answer:

* not even ``socket``: that module's enum conversions and its ``selectors`` import cost
  about 3.5 ms of CPU, a quarter of a bare interpreter's start, for ``create_connection``
  and ``makefile``, which :func:`_connect_tcp` and :class:`_SocketReader` do here in a few
  lines;
* not httpx (about 100 ms of a call: its models, httpcore, anyio, and ``ssl``);
* not the standard library's ``http.client`` either, which imports ``email.parser`` and
  ``ssl`` and alone costs three times a bare interpreter's start-up (``results/cli.md``).
  The peer is our own daemon (uvicorn's h11) on a unix socket or on loopback, the requests
  are a handful of GET/POST/DELETE with small JSON bodies, so the answer reader below is a
  short, bounded HTTP/1.1 reader: status line, headers, a ``Content-Length`` or chunked body.

Where the API is (first match wins):

1. ``--api`` / ``MCPSUB_API``: ``unix:///path/api.sock``, or ``http://127.0.0.1:PORT``
   (``tcp://127.0.0.1:PORT``, accepted by ``mcpsubd --api`` too, is taken as the same);
2. the state dir's unix socket, by the one rule of :mod:`service.statepaths` (that the
   daemon, the hook and the face follow too): ``<state dir>/api.sock``, or a short private
   directory's when that path is too long for a socket address; else the systemd user
   unit's ``$XDG_RUNTIME_DIR/mcpsubd/api.sock`` when only that one exists.

Over TCP the bearer token comes from ``MCPSUB_API_TOKEN`` or ``<state dir>/api.token``; it is
never printed. Failures are two exception classes the CLI maps to exit codes
(``cli.failures``): :class:`DaemonUnavailable` (nothing listens: exit 10, with the command
that starts the daemon) and :class:`DaemonError` (the daemon answered an error, e.g. 401
``API_TOKEN_REQUIRED`` → exit 3; or the exchange failed: ``REQUEST_TIMEOUT`` → 6,
``NETWORK_ERROR`` → 5, ``RESPONSE_TOO_LARGE`` → 4). Every answer is bounded: headers by
:data:`MAX_HEADER_BYTES`, bodies by ``max_response_bytes``, each SSE event by the decoder's
limit, and every wait by a socket timeout.
"""

from __future__ import annotations

import _socket
import io
import json
import os
import sys
import time
from collections.abc import Iterator

from service import statepaths

TYPE_CHECKING = False  # typing costs more than socket+json: not imported at run time
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

DEFAULT_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 5.0
WAIT_SLACK_S = 5.0
"""Extra seconds a long-poll request may take beyond the wait it asks the daemon for."""
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""Largest answer body read (the largest resource content, JSON-escaped, with room)."""
MAX_HEADER_BYTES = 64 * 1024
MAX_HEADERS = 100
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


class DaemonUnavailable(Exception):
    """Nothing answers where the API should be; the hint names the command that starts it."""

    error_code = "DAEMON_UNAVAILABLE"

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class DaemonError(Exception):
    """The daemon answered with an error (non-2xx), or the exchange failed midway."""

    def __init__(
        self, status: int, error_code: str, message: str, hint: str | None, body: dict[str, Any]
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message
        self.hint = hint
        self.body = body


class _ProtocolError(Exception):
    """The answer is not HTTP/1.1 we can read."""


class _Closed(_ProtocolError):
    """The connection closed before the answer's first byte."""


class _Gone(_ProtocolError):
    """The connection ended inside an answer that was streaming: the daemon went away."""


class _TooLarge(Exception):
    """The answer is larger than the client reads."""


def state_dir() -> str:
    """The state directory (:func:`service.statepaths.state_dir`), as a string."""
    return statepaths.state_dir()


class Endpoint:
    """Where the API listens: a unix socket path, or a loopback host, port (+ token)."""

    __slots__ = ("explicit", "host", "port", "prefix", "socket", "state", "token")

    def __init__(
        self,
        socket: str | Path | None = None,
        *,
        host: str = "localhost",
        port: int = 80,
        prefix: str = "",
        token: str | None = None,
        explicit: bool = False,
        state: str | None = None,
    ) -> None:
        self.socket = os.fspath(socket) if socket is not None else None
        self.state = state
        """The daemon's state dir when the socket was found by the rule (not named)."""
        self.host = host
        self.port = port
        self.prefix = prefix
        self.token = token
        self.explicit = explicit

    @property
    def base_url(self) -> str:
        if self.socket is not None:
            return "http://localhost"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.prefix}"

    @property
    def host_header(self) -> str:
        """``localhost`` over the socket; ``host:port`` over TCP (the API checks it)."""
        if self.socket is not None:
            return "localhost"
        return self.base_url[len("http://") :].split("/", 1)[0]

    @property
    def display(self) -> str:
        return f"unix://{self.socket}" if self.socket else self.base_url

    @property
    def state_dir(self) -> str:
        """The daemon's state dir: the rule's, or a named socket's directory."""
        if self.state is not None:
            return self.state
        return os.path.dirname(self.socket) if self.socket else state_dir()

    def start_hint(self) -> str:
        if self.socket is not None:
            if self.state is not None and "MCPSUB_STATE_DIR" not in os.environ:
                command = "mcpsubd"
            else:
                import shlex

                command = f"mcpsubd --state-dir {shlex.quote(self.state_dir)}"
            return f"start the daemon with `{command}` (it listens on {self.display})"
        return f"start the daemon with `mcpsubd` and its API on {self.base_url}"


def _read_token(directory: str) -> str | None:
    token = os.environ.get("MCPSUB_API_TOKEN")
    if token:
        return token.strip()
    try:
        with open(os.path.join(directory, "api.token"), encoding="utf-8") as handle:
            return handle.read().strip() or None
    except (OSError, ValueError):
        return None


def permission_problem(path: str | Path) -> DaemonError | None:
    """A :class:`DaemonError` when this user may not reach the socket ``path`` (else None).

    Someone else's daemon (a system unit, another user) is running: suggesting to start one
    would be wrong; saying whose it probably is helps.
    """
    try:
        os.stat(path)
        allowed = os.access(path, os.R_OK | os.W_OK)
    except PermissionError:
        allowed = False
    except OSError:
        return None
    if allowed:
        return None
    from pathlib import Path

    from service.pathowner import owner_of

    owner = owner_of(Path(path))
    message = f"permission denied on {path}" + (f" (the daemon runs as {owner}?)" if owner else "")
    sudo = "sudo" if owner == "root" else f"sudo -u {owner}"
    hint = (
        f"run the command as {owner} (e.g. `{sudo} mcpsubctl …`) or pass --api"
        if owner
        else "run the command as the daemon's user or pass --api"
    )
    return DaemonError(0, "PERMISSION_DENIED", message, hint, {})


def _tcp_endpoint(spec: str, original: str) -> Endpoint:
    """``http://HOST:PORT[/prefix]`` with a loopback HOST, parsed without ``urllib``."""
    bad = ValueError(
        "--api must be unix:///path/api.sock or http://127.0.0.1:PORT (or tcp://…), "
        f"got {original!r}"
    )
    rest = spec[len("http://") :]
    netloc, slash, path = rest.partition("/")
    if "@" in netloc or "?" in rest or "#" in rest:
        raise bad
    if netloc.startswith("["):
        host, _, port_text = netloc[1:].partition("]")
        if port_text and not port_text.startswith(":"):
            raise bad
        port_text = port_text[1:]
    else:
        host, _, port_text = netloc.partition(":")
    if host.lower() not in LOOPBACK_HOSTS:
        raise bad
    if port_text and not (port_text.isascii() and port_text.isdigit()):
        raise bad
    port = int(port_text) if port_text else 80
    if not 0 < port < 65536:
        raise bad
    prefix = (slash + path).rstrip("/")
    return Endpoint(
        host=host.lower(),
        port=port,
        prefix=prefix,
        token=_read_token(state_dir()),
        explicit=True,
    )


def resolve_endpoint(api: str | None = None) -> Endpoint:
    """Parse ``--api`` / ``MCPSUB_API`` or fall back to the default socket."""
    spec = api or os.environ.get("MCPSUB_API")
    if not spec:
        state = state_dir()
        found = statepaths.client_socket(state)
        if found == statepaths.unit_socket():  # the systemd user unit's RuntimeDirectory
            return Endpoint(socket=found)
        return Endpoint(socket=found, state=state)
    original = spec
    if spec.startswith("tcp://"):  # the daemon's own spelling of its TCP listener
        spec = "http://" + spec[len("tcp://") :]
    if spec.startswith("unix:"):
        path = spec[len("unix:") :]
        if "%" in path:
            from urllib.parse import unquote

            path = unquote(path)
        if path.startswith("//"):
            path = path[2:]
        if not path:
            raise ValueError(f"--api {original!r}: no socket path")
        return Endpoint(socket=os.path.expanduser(path), explicit=True)
    if spec.startswith("http://"):
        return _tcp_endpoint(spec, original)
    raise ValueError(
        "--api must be unix:///path/api.sock or http://127.0.0.1:PORT (or tcp://…), "
        f"got {original!r}"
    )


def _query(params: dict[str, Any]) -> str:
    """``?a=1&b=x%20y`` from the params that are not None (RFC 3986 unreserved kept)."""
    parts = []
    for key, value in params.items():
        if value is None:
            continue
        text = str(value).encode()
        quoted = "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in text)
        parts.append(f"{key}={quoted}")
    return "?" + "&".join(parts) if parts else ""


class _Answer:
    """Status, lower-cased headers and the reader positioned at the body."""

    __slots__ = ("headers", "reader", "status")

    def __init__(self, status: int, headers: dict[str, str], reader: Any) -> None:
        self.status = status
        self.headers = headers
        self.reader = reader

    @property
    def keep_alive(self) -> bool:
        return "close" not in self.headers.get("connection", "").lower()

    def body(self, limit: int) -> bytes:
        """The whole body, at most ``limit`` bytes."""
        if self.status in (204, 304) or 100 <= self.status < 200:
            return b""
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            return b"".join(self.chunks(limit))
        length_text = self.headers.get("content-length")
        if length_text is None:  # read to the end of the connection
            data = self.reader.read(limit + 1)
            if len(data) > limit:
                raise _TooLarge
            return bytes(data)
        if not (length_text.isascii() and length_text.isdigit()):
            raise _ProtocolError(f"bad Content-Length {length_text[:40]!r}")
        length = int(length_text)
        if length > limit:
            raise _TooLarge
        data = self.reader.read(length)
        if len(data) != length:
            raise _ProtocolError("the connection closed inside the body")
        return bytes(data)

    def stream_chunks(self) -> Iterator[bytes]:
        """The body as it arrives, for a stream that has no end (bounded by its decoder)."""
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            yield from self.chunks(sys.maxsize)
            return
        while chunk := self.reader.read1(65536):
            yield bytes(chunk)

    def chunks(self, limit: int) -> Iterator[bytes]:
        """A chunked body chunk by chunk, at most ``limit`` bytes in all."""
        total = 0
        while True:
            line = self.reader.readline(1025)
            if not line:  # the end of the connection between two chunks (a daemon restart)
                raise _Gone("the connection closed")
            if not line.endswith(b"\n"):
                raise _ProtocolError("bad chunk size line")
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise _ProtocolError("bad chunk size") from None
            if size == 0:
                while self.reader.readline(MAX_HEADER_BYTES + 1) not in (b"\r\n", b"\n", b""):
                    pass  # trailers: none from our daemon, skipped if any
                return
            total += size
            if total > limit:
                raise _TooLarge
            data = self.reader.read(size)
            if len(data) != size or self.reader.readline(3) not in (b"\r\n", b"\n"):
                raise _ProtocolError("the connection closed inside a chunk")
            yield bytes(data)


def _read_head(reader: Any) -> _Answer | None:
    """Status line and headers; None when the peer closed before sending a byte."""
    line = reader.readline(MAX_HEADER_BYTES + 1)
    if not line:
        return None
    if len(line) > MAX_HEADER_BYTES or not line.endswith(b"\n"):
        raise _ProtocolError("the status line is too long")
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise _ProtocolError(f"not an HTTP/1.1 answer: {line[:60]!r}")
    status = int(parts[1])
    headers: dict[str, str] = {}
    size = len(line)
    for _ in range(MAX_HEADERS + 1):
        line = reader.readline(MAX_HEADER_BYTES + 1)
        size += len(line)
        if size > MAX_HEADER_BYTES or not line.endswith(b"\n"):
            raise _ProtocolError("the headers are too long or cut short")
        if line in (b"\r\n", b"\n"):
            if parts[0] == b"HTTP/1.0" and "connection" not in headers:
                headers["connection"] = "close"
            return _Answer(status, headers, reader)
        name, colon, value = line.decode("latin-1").partition(":")
        if not colon:
            raise _ProtocolError("a header line without a colon")
        key = name.strip().lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    raise _ProtocolError("too many headers")


def _connect_tcp(host: str, port: int, timeout_s: float) -> _socket.socket:
    """``socket.create_connection`` on ``_socket``: each address of ``host`` in turn (the
    loopback: ``localhost`` may be ``::1`` or ``127.0.0.1``); the last error if none takes."""
    error: OSError | None = None
    for family, kind, proto, _name, address in _socket.getaddrinfo(
        host, port, 0, _socket.SOCK_STREAM
    ):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout_s)
            sock.connect(address)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        return sock
    raise error or OSError(f"no address for {host}")


class _SocketReader(io.RawIOBase):
    """The raw layer of ``socket.makefile("rb")`` on ``_socket`` (buffered by the caller).
    A timeout raises ``TimeoutError`` from ``recv_into``, a closed peer reads as EOF."""

    def __init__(self, sock: _socket.socket) -> None:
        super().__init__()
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._sock.recv_into(buffer)


class DaemonClient:
    """Blocking requests to the local API on one kept-alive connection.

    Cheap to make; the connection opens at the first request and is reused while the daemon
    keeps it alive (``subscribe`` polls a subscription's first state on it). A request that
    finds a reused connection closed before any answer byte is sent once more on a new one.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        quiet: bool = False,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.endpoint = endpoint
        self.quiet = quiet
        self.timeout_s = timeout_s
        self.max_response_bytes = max_response_bytes
        self._waited_for_start = False
        self._sock: _socket.socket | None = None
        self._reader: Any = None
        head = [f"Host: {endpoint.host_header}"]
        if endpoint.token:
            head.append(f"Authorization: Bearer {endpoint.token}")
        self._fixed_headers = "\r\n".join(head)

    @classmethod
    def from_options(cls, api: str | None = None, *, quiet: bool = False) -> DaemonClient:
        return cls(resolve_endpoint(api), quiet=quiet)

    def reread_token(self) -> bool:
        """Read the TCP API's token again (``MCPSUB_API_TOKEN`` or ``<state dir>/api.token``);
        True when it changed. A client started just before the daemon read no token, or the
        previous run's: the daemon writes the file while it starts, so a client that waits
        for it (``status --wait-ready``) must look again after a 401."""
        if self.endpoint.socket is not None:
            return False
        token = _read_token(state_dir())
        if token is None or token == self.endpoint.token:
            return False
        self.endpoint.token = token
        head = [f"Host: {self.endpoint.host_header}", f"Authorization: Bearer {token}"]
        self._fixed_headers = "\r\n".join(head)
        return True

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> DaemonClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ---- plumbing -----------------------------------------------------------------------
    def _connect(self) -> _socket.socket:
        """A new connection; raises OSError (the caller decides it is "unavailable")."""
        if self.endpoint.socket is not None:
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            try:
                sock.settimeout(CONNECT_TIMEOUT_S)
                sock.connect(self.endpoint.socket)
            except BaseException:
                sock.close()
                raise
            return sock
        return _connect_tcp(self.endpoint.host, self.endpoint.port, CONNECT_TIMEOUT_S)

    def _unavailable(self, exc: BaseException) -> DaemonUnavailable | DaemonError:
        if self.endpoint.socket is not None:
            denied = permission_problem(self.endpoint.socket)
            if denied is not None:
                return denied
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        hint = self.endpoint.start_hint()
        socket = self.endpoint.socket
        if socket is not None and not statepaths.fits(socket):
            reason = (
                f"the path is {len(os.fsencode(socket))} bytes, longer than a unix socket "
                f"address holds ({statepaths.max_socket_path()})"
            )
            hint = (
                "name a shorter socket with --api unix:///PATH, or leave --api and MCPSUB_API "
                "out: the default socket always fits (docs/operations.md)"
            )
        return DaemonUnavailable(
            f"the daemon is not reachable at {self.endpoint.display}: {reason or 'timed out'}",
            hint,
        )

    def _open(self) -> None:
        """Connect, or wait (once) for a daemon that is starting; raises DaemonUnavailable."""
        try:
            self._sock = self._connect()
        except OSError as exc:
            if not self.wait_for_start():
                raise self._unavailable(exc) from None
            try:
                self._sock = self._connect()
            except OSError as again:
                raise self._unavailable(again) from None
        self._reader = io.BufferedReader(_SocketReader(self._sock))

    def _exchange(self, payload: bytes, timeout_s: float | None) -> _Answer:
        """Send ``payload`` and read the answer's head, on the kept connection or a new one.

        A kept connection the daemon closed while idle (uvicorn's keep-alive timeout) fails
        before any answer byte: the request is sent once more on a new connection.
        """
        reused = self._sock is not None
        if not reused:
            self._open()
        try:
            return self._send(payload, timeout_s)
        except (_Closed, ConnectionResetError, BrokenPipeError):
            if not reused:
                raise
        self.close()
        self._open()
        return self._send(payload, timeout_s)

    def _send(self, payload: bytes, timeout_s: float | None) -> _Answer:
        assert self._sock is not None
        self._sock.settimeout(timeout_s)
        self._sock.sendall(payload)
        answer = _read_head(self._reader)
        if answer is None:
            raise _Closed("the daemon closed the connection without an answer")
        return answer

    def _payload(
        self, method: str, target: str, body: bytes | None, extra: dict[str, str] | None
    ) -> bytes:
        lines = [f"{method} {self.endpoint.prefix}{target} HTTP/1.1", self._fixed_headers]
        for name, value in (extra or {"Accept": "application/json"}).items():
            lines.append(f"{name}: {value}")
        if body is not None:
            lines.append("Content-Type: application/json")
            lines.append(f"Content-Length: {len(body)}")
        elif method in ("POST", "PUT", "PATCH"):
            lines.append("Content-Length: 0")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head + body if body is not None else head

    def _failed(self, exc: BaseException) -> DaemonError:
        """An exchange that broke after the connect, as the error the CLI prints."""
        self.close()
        if isinstance(exc, TimeoutError):
            return DaemonError(
                0, "REQUEST_TIMEOUT", "the daemon did not answer in time", _RETRY_HINT, {}
            )
        if isinstance(exc, _TooLarge):
            return DaemonError(
                0,
                "RESPONSE_TOO_LARGE",
                f"the daemon's answer is larger than {self.max_response_bytes} bytes",
                "is --api pointing at mcpsubd? otherwise narrow the request (e.g. --limit)",
                {},
            )
        detail = str(exc) or type(exc).__name__
        return DaemonError(
            0, "NETWORK_ERROR", f"talking to the daemon failed: {detail}", _RETRY_HINT, {}
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """Send one request; return (status, JSON body) for 2xx, raise otherwise."""
        data = json.dumps(body).encode() if body is not None else None
        payload = self._payload(method, path + _query(params or {}), data, None)
        try:
            answer = self._exchange(payload, timeout_s or self.timeout_s)
            raw = answer.body(self.max_response_bytes)
        except (OSError, _ProtocolError, _TooLarge, ValueError) as exc:
            raise self._failed(exc) from None
        if not answer.keep_alive:
            self.close()
        return answer.status, _json_or_error(answer.status, raw)

    def _state_dir(self) -> str:
        return self.endpoint.state_dir

    def _connectable(self) -> bool:
        try:
            self._connect().close()
        except OSError:
            return False
        return True

    def wait_for_start(self) -> bool:
        """After a failed connect: wait (at most ``CLIENT_WAIT_S``, once per client) while a
        daemon is starting in the state dir; True when its API now accepts connections."""
        from pathlib import Path

        from service.daemon import starting

        directory = Path(self._state_dir())
        if self._waited_for_start or not starting.starting(directory):
            return False
        self._waited_for_start = True
        from service.statusline import StatusLine

        deadline = time.monotonic() + starting.CLIENT_WAIT_S
        with StatusLine.for_terminal(self.quiet) as status:
            status.phase(f"waiting for mcpsubd to start ({self.endpoint.display})")
            while time.monotonic() < deadline:
                if self._connectable():
                    return True
                if not starting.starting(directory) and not self._connectable():
                    return False  # it gave up (or finished and failed)
                time.sleep(0.05)
        return False

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        return self.request("GET", path, params=params)[1]

    # ---- API ----------------------------------------------------------------------------
    def subscribe(self, url: str, uri: str) -> tuple[dict[str, Any], bool]:
        status, body = self.request("POST", "/v1/subscriptions", body={"url": url, "uri": uri})
        return body, status == 201

    def unsubscribe(self, subscription_id: int) -> dict[str, Any]:
        return self.request("DELETE", f"/v1/subscriptions/{subscription_id}")[1]

    def subscriptions(self) -> list[dict[str, Any]]:
        return list(self.get("/v1/subscriptions")["subscriptions"])

    def subscription(self, subscription_id: int) -> dict[str, Any]:
        return self.get(f"/v1/subscriptions/{subscription_id}")

    def status(self) -> dict[str, Any]:
        return self.get("/v1/status")

    def resubscribe(self, url: str | None = None) -> list[str]:
        return list(self.request("POST", "/v1/resubscribe", params={"url": url})[1]["rechecked"])

    def content(self, uri: str, url: str | None = None) -> dict[str, Any]:
        return self.get("/v1/content", uri=uri, url=url)

    def events(
        self, after: int = 0, limit: int = 100, uri: str | None = None, types: str | None = None
    ) -> dict[str, Any]:
        return self.get("/v1/events", after=after, limit=limit, uri=uri, type=types)

    def wait(
        self, uri: str, *, url: str | None, after: int | None, timeout_ms: float
    ) -> dict[str, Any]:
        """Long-poll; raises DaemonError NOTIFICATION_TIMEOUT (408) when nothing came."""
        params = {"uri": uri, "url": url, "after": after, "timeout_ms": int(timeout_ms)}
        return self.request(
            "GET", "/v1/wait", params=params, timeout_s=timeout_ms / 1000 + WAIT_SLACK_S
        )[1]

    # ---- webhooks -------------------------------------------------------------------------
    def add_webhook(
        self,
        url: str,
        *,
        uri_patterns: list[str] | None = None,
        subscription_ids: list[int] | None = None,
        mode: str | None = None,
        secret: str | None = None,
        allow_private_target: bool = False,
    ) -> dict[str, Any]:
        """A new target; the answer's ``secret`` is the only time the daemon shows it."""
        body: dict[str, Any] = {"url": url}
        if uri_patterns:
            body["uriPatterns"] = uri_patterns
        if subscription_ids:
            body["subscriptionIds"] = subscription_ids
        if mode is not None:
            body["mode"] = mode
        if secret is not None:
            body["secret"] = secret
        if allow_private_target:
            body["allowPrivateTarget"] = True
        return self.request("POST", "/v1/webhooks", body=body)[1]

    def webhooks(self) -> list[dict[str, Any]]:
        return list(self.get("/v1/webhooks")["webhooks"])

    def webhook(self, target_id: int) -> dict[str, Any]:
        return self.get(f"/v1/webhooks/{target_id}")

    def remove_webhook(self, target_id: int) -> dict[str, Any]:
        return self.request("DELETE", f"/v1/webhooks/{target_id}")[1]

    def webhook_action(self, target_id: int, action: str) -> dict[str, Any]:
        """``enable``, ``disable``, ``test`` or ``rotate-secret``."""
        return self.request("POST", f"/v1/webhooks/{target_id}/{action}", body={})[1]

    def deliveries(
        self,
        *,
        target: int | None = None,
        state: str | None = None,
        after: int = 0,
        limit: int = 100,
    ) -> dict[str, Any]:
        return self.get("/v1/deliveries", target=target, state=state, after=after, limit=limit)

    def delivery(self, delivery_id: int) -> dict[str, Any]:
        return self.get(f"/v1/deliveries/{delivery_id}")

    def retry_delivery(self, delivery_id: int) -> dict[str, Any]:
        return self.request("POST", f"/v1/deliveries/{delivery_id}/retry")[1]

    def recover_deliveries(self, target: int, since: str) -> dict[str, Any]:
        body = {"target": target, "since": since}
        return self.request("POST", "/v1/deliveries/recover", body=body)[1]

    # ---- the event stream -------------------------------------------------------------------
    def stream(
        self,
        *,
        last_event_id: int | None = None,
        uri: str | None = None,
        types: str | None = None,
        idle_timeout_s: float | None = None,
    ) -> Iterator[tuple[int | None, str, dict[str, Any]]]:
        """Server-sent events of ``/v1/events/stream`` as (id, type, data) until the daemon
        closes the stream.

        Decoded by ``service.mcp.sse`` (the bounded decoder the daemon's listen streams use):
        an event beyond its limit ends the stream with ``NETWORK_ERROR`` instead of growing a
        buffer. ``idle_timeout_s`` (default: none) bounds the silence between two reads; the
        daemon sends a keep-alive comment every 15 s, so 45 s or more is safe.
        """
        from service.mcp.sse import Event, EventTooLarge, SSEDecoder

        extra = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            extra["Last-Event-ID"] = str(last_event_id)
        target = "/v1/events/stream" + _query({"uri": uri, "type": types})
        self.close()  # the stream gets a connection of its own, closed when it ends
        try:
            answer = self._exchange(self._payload("GET", target, None, extra), self.timeout_s)
            if answer.status != 200:
                _json_or_error(answer.status, answer.body(self.max_response_bytes))
            assert self._sock is not None
            self._sock.settimeout(idle_timeout_s)
            decoder = SSEDecoder()
            for chunk in answer.stream_chunks():
                for item in decoder.feed(chunk):
                    if isinstance(item, Event) and item.data:
                        yield sse_frame(item.id, item.event, item.data)
        except (_Gone, ConnectionResetError, BrokenPipeError):
            # Killed, restarted, or stopped without ending the stream: not a bad answer.
            raise DaemonUnavailable(
                f"the daemon went away ({self.endpoint.display} closed the stream)",
                self.endpoint.start_hint(),
            ) from None
        except (OSError, _ProtocolError, _TooLarge, EventTooLarge, ValueError) as exc:
            raise self._failed(exc) from None
        finally:
            self.close()


_RETRY_HINT = "retry; check the daemon log"
NOT_MCPSUBD = "NOT_MCPSUBD"
NOT_MCPSUBD_HINT = (
    "check --api / MCPSUB_API: mcpsubd's socket (unix://<state dir>/api.sock) or the "
    "http://127.0.0.1:PORT it logs at start"
)


def sse_frame(
    event_id: str | None, event_type: str, data: str
) -> tuple[int | None, str, dict[str, Any]]:
    """One decoded event as (id, type, JSON data); data that is not an object is wrapped."""
    number = int(event_id) if event_id and event_id.isascii() and event_id.isdigit() else None
    try:
        payload = json.loads(data)
    except ValueError:
        payload = {"raw": data}
    return number, event_type, payload if isinstance(payload, dict) else {"value": payload}


def _json_or_error(status: int, raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {}
    if 200 <= status < 300:
        return body
    if not isinstance(body.get("errorCode"), str):  # every mcpsubd error carries one
        raise DaemonError(
            status,
            NOT_MCPSUBD,
            f"what answers there does not look like mcpsubd (HTTP {status} without an "
            "mcpsub error body)",
            NOT_MCPSUBD_HINT,
            body,
        )
    code = body["errorCode"]
    message = body.get("message") or f"the daemon answered HTTP {status}"
    hint = body.get("hint")
    raise DaemonError(
        status, str(code), str(message), hint if isinstance(hint, str) else None, body
    )
