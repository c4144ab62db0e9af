"""The one client of ``mcpsubd``'s local API: where the API is, and a bounded HTTP/1.1 exchange.

Three programs talk to the daemon through it: ``mcpsubctl``'s daemon commands (the API
calls and their errors are ``cli/localapi.py``'s ``DaemonClient``), ``mcpsubctl hook`` (one
GET, :func:`fetch`) and the stdio agent face (``service/face/remote.py``, through
:class:`AsyncConnection`). One reader serves all three: :class:`ResponseReader`, bytes in and
one answer out, with no I/O of its own; the blocking driver (:class:`Connection`, on
``_socket``) and the asyncio one only move bytes into it.

Why not httpx or ``http.client``: the CLIs and the prompt hook are measured by their
start-up (``results/cli.md``, ``results/agents.md``). httpx imports its models, httpcore,
anyio and ``ssl`` on every call; ``http.client`` imports ``email.parser`` and ``ssl``; even
``socket`` costs CPU for its enum conversions and ``selectors``. This module
imports only what every interpreter has already loaded, and ``_socket``. The peer is our own
uvicorn (h11) on a unix socket or on loopback, the requests are a few small JSON ones, so
the reader is small and strict: it is fuzzed against h11 (``tests/unit/service/
test_localclient_fuzz.py``): it reads an answer as h11 does, or refuses it with
:class:`ProtocolError` or :class:`TooLarge`, within its bounds.

Bounds: status line and headers together :data:`MAX_HEADER_BYTES` (and at most
:data:`MAX_HEADERS` lines), a chunk-size line :data:`MAX_CHUNK_LINE`, the body the caller's
``max_body`` (a stream's events are bounded by their SSE decoder instead), and every wait a
timeout (per read, and for :func:`fetch` a deadline for the whole answer).

Where the API is (first match wins): ``--api`` / ``MCPSUB_API`` (``unix:///path/api.sock``,
or ``http://127.0.0.1:PORT``, ``tcp://127.0.0.1:PORT`` taken as the same); else the state
dir's socket by :mod:`service.statepaths`' rule (the daemon's own), or the systemd user
unit's when only that one exists. Over TCP the bearer token is ``MCPSUB_API_TOKEN`` or the
state dir's ``api.token`` (:func:`service.statepaths.read_token`); it is never printed.

Who is at the socket (docs/operations.md, "Who the clients talk to"): before one byte is
sent, the socket's directory must be a real directory of this user's that no one else can
write (:func:`trusted_peers`), and the process at the other end of the connection must run
as this user (:func:`check_peer`: ``SO_PEERCRED``, ``LOCAL_PEERCRED``). A socket named with
``--api`` / ``MCPSUB_API`` may also be root's (a system daemon the user was told to use), or
a service user's in a directory root made for it (systemd's ``RuntimeDirectory=``); the
rule's socket is only ever the user's own. Anything else is :class:`NotTrusted`
(``SOCKET_NOT_TRUSTED``).
"""

from __future__ import annotations

import _socket
import os
import time

from service import statepaths

TYPE_CHECKING = False  # typing costs more than this whole module: not imported at run time
if TYPE_CHECKING:
    import asyncio
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

CONNECT_TIMEOUT_S = 5.0
MAX_HEADER_BYTES = 64 * 1024
"""Status line and headers (and a chunked body's trailers) together."""
MAX_HEADERS = 100
MAX_CHUNK_LINE = 1024
"""A chunk-size line with its extensions and CRLF."""
MAX_CHUNK_DIGITS = 16
MAX_LENGTH_DIGITS = 20
RECV_BYTES = 65536
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_NOT_IN_VALUE = frozenset(b"\x00\r\n\x0b\x0c")
"""Bytes a header value or reason phrase may not hold (h11's: NUL and whitespace but SP/HT)."""
BAD_API = "--api must be unix:///path/api.sock or http://127.0.0.1:PORT (or tcp://…)"


class ProtocolError(Exception):
    """The answer is not HTTP/1.1 this client reads."""


class Closed(ProtocolError):
    """The connection closed before the answer's first byte."""


class Gone(ProtocolError):
    """The connection closed between two chunks of a chunked body (a stream's daemon left)."""


class TooLarge(Exception):
    """The answer is larger than the caller reads."""


class Unreachable(Exception):
    """:func:`fetch` could not connect; the ``OSError`` is the cause, its reason the text."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error) or type(error).__name__)
        self.error = error


class NotTrusted(OSError):
    """The socket's directory, or the process serving it, is not this user's: nothing was
    sent. An ``OSError`` so that a caller that only knows "unreachable" still sends nothing."""

    error_code = "SOCKET_NOT_TRUSTED"

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


# ---- where the API is -------------------------------------------------------------------------
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
        return os.path.dirname(self.socket) if self.socket else statepaths.state_dir()

    def start_hint(self) -> str:
        if self.socket is not None:
            if self.state is not None and "MCPSUB_STATE_DIR" not in os.environ:
                command = "mcpsubd"
            else:
                import shlex

                command = f"mcpsubd --state-dir {shlex.quote(self.state_dir)}"
            return f"start the daemon with `{command}` (it listens on {self.display})"
        return f"start the daemon with `mcpsubd` and its API on {self.base_url}"

    def request(
        self,
        method: str,
        target: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> bytes:
        """One request's bytes: ``Host`` (and the token over TCP), ``headers`` (default:
        ``Accept: application/json``), and a JSON ``body`` with its length."""
        lines = [f"{method} {self.prefix}{target} HTTP/1.1", f"Host: {self.host_header}"]
        if self.token:
            lines.append(f"Authorization: Bearer {self.token}")
        for name, value in (headers or {"Accept": "application/json"}).items():
            lines.append(f"{name}: {value}")
        if body is not None:
            lines.append("Content-Type: application/json")
            lines.append(f"Content-Length: {len(body)}")
        elif method in ("POST", "PUT", "PATCH"):
            lines.append("Content-Length: 0")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head + body if body is not None else head


def _tcp_endpoint(spec: str, original: str) -> Endpoint:
    """``http://HOST:PORT[/prefix]`` with a loopback HOST, parsed without ``urllib``."""
    bad = ValueError(f"{BAD_API}, got {original!r}")
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
        token=statepaths.read_token(statepaths.state_dir()),
        explicit=True,
    )


def resolve_endpoint(api: str | None = None) -> Endpoint:
    """Parse ``--api`` / ``MCPSUB_API`` or fall back to the default socket; ValueError
    names the accepted spellings."""
    spec = api or os.environ.get("MCPSUB_API")
    if not spec:
        state = statepaths.state_dir()
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
    raise ValueError(f"{BAD_API}, got {original!r}")


def query(params: dict[str, object]) -> str:
    """``?a=1&b=x%20y`` from the params that are not None (RFC 3986 unreserved kept)."""
    parts = []
    for key, value in params.items():
        if value is None:
            continue
        text = str(value).encode()
        quoted = "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in text)
        parts.append(f"{key}={quoted}")
    return "?" + "&".join(parts) if parts else ""


# ---- the answer: bytes in, one HTTP/1.1 response out ----------------------------------------
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _TO_EOF, _DONE = range(8)


class ResponseReader:
    """One HTTP/1.1 answer, read from the bytes it is fed (no I/O: the drivers feed it).

    :meth:`feed` the bytes as they arrive (``b""`` at the end of the connection), then
    :meth:`head` until it is True (``status``, ``reason``, ``headers``: lower-cased names,
    repeats joined with ``, ``), then :meth:`data` until it returns None with :attr:`done`
    set. Every refusal is a :class:`ProtocolError` or :class:`TooLarge`, raised before more
    than a bound is held: the head :data:`MAX_HEADER_BYTES`, a chunk-size line
    :data:`MAX_CHUNK_LINE`, the body ``max_body`` (None: a stream, bounded by its reader).
    An informational (1xx) answer is refused: our requests never ask for one.
    """

    __slots__ = (
        "_buf", "_eof", "_left", "_scan", "_state", "_total",
        "empty_body", "headers", "max_body", "reason", "received", "status", "version",
    )  # fmt: skip

    def __init__(self, max_body: int | None = None, *, empty_body: bool = False) -> None:
        self._buf = bytearray()
        self._eof = False
        self._state = _HEAD
        self._scan = 0
        self._left = 0
        self._total = 0
        self.max_body = max_body
        """The body's bound; a caller that finds a stream in the head may lift it (None)."""
        self.empty_body = empty_body
        """The request was HEAD: the answer has no body whatever its headers say."""
        self.received = 0
        self.status = 0
        self.reason = ""
        self.version = ""
        self.headers: dict[str, str] = {}

    def feed(self, data: bytes) -> None:
        """Bytes from the peer; ``b""`` when the connection ended."""
        if data:
            self._buf += data
            self.received += len(data)
        else:
            self._eof = True

    @property
    def done(self) -> bool:
        return self._state == _DONE

    @property
    def leftover(self) -> bool:
        """Bytes after the end of the answer (a connection that sent them is not reused)."""
        return bool(self._buf)

    @property
    def keep_alive(self) -> bool:
        if self.version != "HTTP/1.1" or self.leftover:
            return False
        return "close" not in self.headers.get("connection", "").lower()

    # -- head ---------------------------------------------------------------------------------
    def _blank_line(self, limit: int) -> int:
        """The end of the head (just after its blank line) in the buffer, -1 if not yet."""
        buf = self._buf
        if buf[:1] == b"\n":
            return 1
        if buf[:2] == b"\r\n":
            return 2
        start = self._scan
        ends = [i for i in (buf.find(b"\n\n", start), buf.find(b"\n\r\n", start)) if i >= 0]
        if ends:
            first = min(ends)
            return first + (2 if buf[first + 1] == 0x0A else 3)
        if len(buf) > limit:
            raise ProtocolError("the headers are too long")
        self._scan = max(0, len(buf) - 2)
        return -1

    def head(self) -> bool:
        """True once the status line and headers are in; False: feed more."""
        if self._state != _HEAD:
            return True
        end = self._blank_line(MAX_HEADER_BYTES)
        if end < 0:
            if self._eof:
                if not self.received:
                    raise Closed("the daemon closed the connection without an answer")
                raise ProtocolError("the connection closed inside the headers")
            return False
        if end > MAX_HEADER_BYTES:
            raise ProtocolError("the headers are too long")
        lines = _lines(self._buf, end)
        del self._buf[:end]
        self._scan = 0
        if not lines:
            raise ProtocolError("no status line")
        self._status_line(lines[0])
        if len(lines) - 1 > MAX_HEADERS:
            raise ProtocolError("too many headers")
        self.headers = _headers(lines[1:])
        self._framing()
        return True

    def _status_line(self, line: bytes) -> None:
        parts = line.split(b" ", 2)
        if len(parts) < 2 or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0"):
            raise ProtocolError(f"not an HTTP/1.1 answer: {bytes(line[:60])!r}")
        code = parts[1]
        if len(code) != 3 or not (code.isascii() and code.isdigit()):
            raise ProtocolError(f"not an HTTP/1.1 answer: {bytes(line[:60])!r}")
        reason = parts[2] if len(parts) == 3 else b""
        if _NOT_IN_VALUE.intersection(reason):
            raise ProtocolError("a control character in the status line")
        self.version = parts[0].decode()
        self.status = int(code)
        self.reason = reason.decode("latin-1")
        if self.status < 200:
            raise ProtocolError(f"an informational answer ({self.status}) where none was asked")

    def _framing(self) -> None:
        """How the body ends. ``Transfer-Encoding`` and ``Content-Length`` are checked even
        where they do not apply (h11 refuses a bad one on any answer); chunked wins."""
        headers = self.headers
        coding = headers.get("transfer-encoding")
        if coding is not None and coding.lower() != "chunked":
            raise ProtocolError("a transfer coding other than chunked")
        length = headers.get("content-length")
        if length is not None and not (
            0 < len(length) <= MAX_LENGTH_DIGITS and length.isascii() and length.isdigit()
        ):
            raise ProtocolError(f"bad Content-Length {length[:40]!r}")
        if self.status in (204, 304) or self.empty_body:
            self._state = _DONE
        elif coding is not None:
            self._state = _CHUNK_SIZE
        elif length is not None:
            self._left = int(length)
            self._count(self._left)
            self._state = _LENGTH if self._left else _DONE
        else:  # the body ends with the connection
            self._state = _TO_EOF

    def _count(self, size: int) -> None:
        self._total += size
        if self.max_body is not None and self._total > self.max_body:
            raise TooLarge

    # -- body ---------------------------------------------------------------------------------
    def data(self) -> bytes | None:
        """The body bytes that are in (never empty); None: feed more, or :attr:`done`."""
        buf = self._buf
        while True:
            state = self._state
            if state in (_LENGTH, _CHUNK_DATA):
                if not buf:
                    if self._eof:
                        raise ProtocolError("the connection closed inside the body")
                    return None
                size = min(self._left, len(buf))
                out = bytes(buf[:size])
                del buf[:size]
                self._left -= size
                if not self._left:
                    self._state = _DONE if state == _LENGTH else _CHUNK_END
                return out
            if state == _TO_EOF:
                if buf:
                    out = bytes(buf)
                    buf.clear()
                    self._count(len(out))
                    return out
                if self._eof:
                    self._state = _DONE
                return None
            if state == _CHUNK_END:
                if len(buf) < 2:
                    if self._eof or (buf and buf[0] != 0x0D):
                        raise ProtocolError("a chunk does not end with CRLF")
                    return None
                if buf[:2] != b"\r\n":
                    raise ProtocolError("a chunk does not end with CRLF")
                del buf[:2]
                self._state = _CHUNK_SIZE
            elif state == _CHUNK_SIZE:
                if not self._chunk_size():
                    return None
            elif state == _TRAILERS:
                end = self._blank_line(MAX_HEADER_BYTES)
                if end < 0:
                    if self._eof:
                        raise ProtocolError("the connection closed inside the trailers")
                    return None
                if end > MAX_HEADER_BYTES:
                    raise ProtocolError("the trailers are too long")
                _headers(_lines(buf, end))  # checked as headers, then dropped
                del buf[:end]
                self._state = _DONE
            else:  # _DONE (or _HEAD: head() first)
                return None

    def _chunk_size(self) -> bool:
        buf = self._buf
        end = buf.find(b"\r\n", 0, MAX_CHUNK_LINE)
        if end < 0:
            if len(buf) >= MAX_CHUNK_LINE:
                raise ProtocolError("a chunk-size line is too long")
            if self._eof:
                if not buf:  # between two chunks: the daemon went away
                    raise Gone("the connection closed")
                raise ProtocolError("the connection closed inside a chunk-size line")
            return False
        line = bytes(buf[:end])
        del buf[: end + 2]
        size_text, semicolon, extension = line.partition(b";")
        if semicolon:
            if b"\n" in extension:
                raise ProtocolError("bad chunk extension")
        else:
            size_text = size_text.rstrip(b" \t")
        if not (0 < len(size_text) <= MAX_CHUNK_DIGITS and _HEX.issuperset(size_text)):
            raise ProtocolError(f"bad chunk size {size_text[:20]!r}")
        size = int(size_text, 16)
        self._count(size)
        self._left = size
        self._state = _CHUNK_DATA if size else _TRAILERS
        return True


def _lines(buf: bytearray, end: int) -> list[bytes]:
    """The head's lines (without the blank line), each without its CRLF or LF."""
    lines = bytes(buf[:end]).split(b"\n")[:-2]
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def _headers(lines: list[bytes]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines:
        name, colon, raw = line.partition(b":")
        if not colon or not name or not _TOKEN.issuperset(name):
            raise ProtocolError(f"a bad header line: {line[:60]!r}")
        raw = raw.strip(b" \t")
        if _NOT_IN_VALUE.intersection(raw):
            raise ProtocolError(f"a control character in the header {name[:40]!r}")
        key = name.decode("ascii").lower()
        value = raw.decode("latin-1")
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return headers


# ---- the blocking driver (the CLIs and the hook) ---------------------------------------------
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


# ---- who is at the socket ----------------------------------------------------------------------
def trusted_peers(socket: str, *, explicit: bool) -> tuple[int, ...]:
    """Before connecting to ``socket``: the uids that may serve it, or :class:`NotTrusted`
    when its directory is one another user made or can write (they could have put their own
    socket there). A directory that cannot be looked at raises its OSError (the connect would
    fail the same way)."""
    me = os.geteuid()
    directory = os.path.dirname(os.path.abspath(socket))
    owners = (me, 0) if explicit else (me,)
    problem = statepaths.socket_dir_problem(directory, owners)
    if problem is None:
        return owners
    text, owner = problem
    if explicit and text == statepaths.OTHER_OWNER and _made_by_root(directory):
        return (me, 0, owner)  # a system unit's RuntimeDirectory=, handed to its user
    if owner != me and _out_of_reach(socket):
        # Another user's daemon this user may not talk to anyway (a system unit's socket,
        # MCPSUB_STATE_DIR at someone's state): "permission denied", naming whose it is.
        raise PermissionError(13, "Permission denied", socket)
    name = _user_name(owner)
    if text.startswith("is writable") and owner == me:
        hint = f"{directory} is yours: make it writable only by you (chmod 700 {directory})"
    else:
        hint = (
            f"{directory} is {name}'s: have it removed (by {name} or root), or name a socket "
            "of your own with --api unix:///PATH (docs/operations.md)"
        )
    raise NotTrusted(f"not connecting to {socket}: its directory {directory} {text} ({name})", hint)


def _out_of_reach(socket: str) -> bool:
    """Whether this user may not connect to an existing ``socket`` (nothing could be sent)."""
    try:
        os.stat(socket)
    except PermissionError:
        return True
    except OSError:
        return False  # none there yet: the name is still another user's to fill
    return not os.access(socket, os.R_OK | os.W_OK)


def _made_by_root(directory: str) -> bool:
    """Whether only root could have made ``directory`` (its parent is root's, and no one
    else may write there)."""
    problem = statepaths.socket_dir_problem(os.path.dirname(directory), (0,))
    return problem is None


def peer_uid(sock: _socket.socket) -> int | None:
    """The uid of the process at the other end of a connected unix socket; None on a system
    with no way to ask (only the directory check then stands)."""
    import sys

    if sys.platform.startswith("linux"):
        # struct ucred {pid_t pid; uid_t uid; gid_t gid;}
        raw = sock.getsockopt(_socket.SOL_SOCKET, getattr(_socket, "SO_PEERCRED", 17), 12)
    elif sys.platform == "darwin" or sys.platform.startswith("freebsd"):
        # LOCAL_PEERCRED at level SOL_LOCAL (0), what getpeereid(3) reads: struct xucred
        # {u_int cr_version; uid_t cr_uid; short cr_ngroups; gid_t cr_groups[16]; …}
        # (OpenBSD's SO_PEERCRED and NetBSD's LOCAL_PEEREID lay it out otherwise: not read)
        raw = sock.getsockopt(0, getattr(_socket, "LOCAL_PEERCRED", 1), 76)
    else:
        return None
    if len(raw) < 8:
        raise OSError(f"the peer's credentials are {len(raw)} bytes")
    return int.from_bytes(raw[4:8], sys.byteorder)


def check_peer(sock: _socket.socket, socket: str, peers: tuple[int, ...]) -> None:
    """:class:`NotTrusted` unless the process serving ``socket`` runs as one of ``peers``."""
    uid = peer_uid(sock)
    if uid is None or uid in peers:
        return
    name = _user_name(uid)
    directory = os.path.dirname(os.path.abspath(socket))
    try:
        holder = _user_name(os.lstat(directory).st_uid)
    except OSError:
        holder = "unknown"
    raise NotTrusted(
        f"not talking to {socket}: the process serving it runs as {name}, not as you",
        f"{directory} is {holder}'s; stop what {name} runs there, or name your own daemon's "
        "socket with --api unix:///PATH (docs/operations.md)",
    )


def _proc_net_address(address: tuple[object, ...], family: int) -> str:
    """``address`` as /proc/net/tcp{,6} prints it: the address's 32-bit words in host byte
    order, in hex, then the port in hex (``0100007F:1F90`` is 127.0.0.1:8080 on x86)."""
    import sys

    host, port = str(address[0]), int(address[1])  # type: ignore[call-overload]
    packed = _socket.inet_pton(family, host)
    words = (packed[i : i + 4] for i in range(0, len(packed), 4))
    return "".join(f"{int.from_bytes(w, sys.byteorder):08X}" for w in words) + f":{port:04X}"


def tcp_peer_uid(sock: _socket.socket) -> int | None:
    """The uid of the process holding the other end of a connected loopback TCP socket, read
    from /proc/net/tcp (tcp6): the established entry whose local address is our peer and whose
    remote address is us. None without /proc (not Linux) or when no entry says (the check
    then does not stand, as :func:`peer_uid` on a system with no way to ask)."""
    import sys

    if not sys.platform.startswith("linux"):
        return None
    family = sock.family
    try:
        key = (
            f" {_proc_net_address(sock.getpeername(), family)}"
            f" {_proc_net_address(sock.getsockname(), family)} 01 "
        ).encode()
        table = "/proc/net/tcp6" if family == _socket.AF_INET6 else "/proc/net/tcp"
        with open(table, "rb") as listing:
            data = listing.read()
    except (OSError, ValueError):
        return None
    at = data.find(key)
    if at < 0:
        return None
    fields = data[at : data.find(b"\n", at)].split()
    # local, remote, state, tx:rx queues, timer, retransmits, uid, ...
    return int(fields[6]) if len(fields) > 6 and fields[6].isdigit() else None


def check_tcp_peer(sock: _socket.socket, host: str, port: int) -> None:
    """:class:`NotTrusted` unless the process at the other end of a TCP connection to the API
    runs as this user or root. The port is no secret either: a local user who binds it while
    the daemon is down would otherwise be sent the bearer token."""
    uid = tcp_peer_uid(sock)
    if uid is None or uid in (os.getuid(), 0):
        return
    name = _user_name(uid)
    raise NotTrusted(
        f"not talking to http://{host}:{port}: the process listening there runs as {name}, "
        "not as you",
        f"{name}'s program holds the port your API is set to; have it stopped (by {name} or "
        "root), or run mcpsubd on a port of your own: --api http://127.0.0.1:PORT "
        "(docs/operations.md)",
    )


def _user_name(uid: int) -> str:
    from service.pathowner import user_name

    return user_name(uid)


def connect(endpoint: Endpoint, timeout_s: float = CONNECT_TIMEOUT_S) -> _socket.socket:
    """A new connection to the API; raises OSError (the caller says "unavailable"), of which
    :class:`NotTrusted` when the socket may be another user's (nothing was sent)."""
    if endpoint.socket is None:
        tcp = _connect_tcp(endpoint.host, endpoint.port, timeout_s)
        try:
            check_tcp_peer(tcp, endpoint.host, endpoint.port)
        except BaseException:
            tcp.close()
            raise
        return tcp
    peers = trusted_peers(endpoint.socket, explicit=endpoint.explicit)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        sock.connect(endpoint.socket)
        check_peer(sock, endpoint.socket, peers)
    except BaseException:
        sock.close()
        raise
    return sock


class Connection:
    """One blocking connection, one exchange at a time. Each read waits at most
    ``timeout_s`` (None: forever), and all of an answer's reads end by ``deadline``
    (``time.monotonic()``) when one is set; either raises ``TimeoutError``."""

    __slots__ = ("deadline", "sock", "timeout_s")

    def __init__(self, sock: _socket.socket) -> None:
        self.sock = sock
        self.timeout_s: float | None = None
        self.deadline: float | None = None

    def exchange(
        self, payload: bytes, max_body: int | None, *, timeout_s: float | None
    ) -> ResponseReader:
        """Send ``payload``; the reader once the answer's head is in."""
        self.timeout_s = timeout_s
        self.sock.settimeout(timeout_s)
        self.sock.sendall(payload)
        reader = ResponseReader(max_body, empty_body=payload.startswith(b"HEAD "))
        while not reader.head():
            self._fill(reader)
        return reader

    def _fill(self, reader: ResponseReader) -> None:
        if self.deadline is not None:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the answer's deadline passed")
            if self.timeout_s is not None:
                remaining = min(remaining, self.timeout_s)
            self.sock.settimeout(remaining)
        reader.feed(self.sock.recv(RECV_BYTES))

    def body(self, reader: ResponseReader) -> bytes:
        """The rest of the answer's body (bounded by the reader's ``max_body``)."""
        return b"".join(self._pieces(reader))

    def stream(self, reader: ResponseReader, idle_timeout_s: float | None) -> Iterator[bytes]:
        """The body as it arrives, for a stream that has no end; each read waits at most
        ``idle_timeout_s``."""
        self.timeout_s = idle_timeout_s
        self.sock.settimeout(idle_timeout_s)
        return self._pieces(reader)

    def _pieces(self, reader: ResponseReader) -> Iterator[bytes]:
        while True:
            data = reader.data()
            if data is not None:
                yield data
            elif reader.done:
                return
            else:
                self._fill(reader)

    def close(self) -> None:
        self.sock.close()


def fetch(
    endpoint: Endpoint,
    target: str,
    *,
    timeout_s: float,
    max_body: int,
    deadline: float | None = None,
) -> tuple[int, bytes]:
    """One GET on a connection of its own: (status, body). The connect and the whole answer
    each take at most ``timeout_s`` (a peer that trickles is cut off too); with ``deadline``
    (``time.monotonic()``) the answer ends by then instead, connect included. Raises
    :class:`Unreachable` (the connect failed), OSError (``TimeoutError``: too slow),
    :class:`ProtocolError` or :class:`TooLarge`."""
    try:
        sock = connect(endpoint, timeout_s)
    except OSError as exc:
        raise Unreachable(exc) from None
    connection = Connection(sock)
    try:
        connection.deadline = time.monotonic() + timeout_s if deadline is None else deadline
        payload = endpoint.request(
            "GET", target, None, {"Accept": "application/json", "Connection": "close"}
        )
        reader = connection.exchange(payload, max_body, timeout_s=timeout_s)
        return reader.status, connection.body(reader)
    finally:
        connection.close()


# ---- the asyncio driver (the stdio face) --------------------------------------------------------
class AsyncConnection:
    """One connection on the event loop, one exchange at a time (the face's requests and
    its events stream); the same reader and bounds as :class:`Connection`."""

    __slots__ = ("_reader", "_writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    @classmethod
    async def open(
        cls, endpoint: Endpoint, timeout_s: float = CONNECT_TIMEOUT_S
    ) -> AsyncConnection:
        """Raises OSError (``TimeoutError`` after ``timeout_s``; :class:`NotTrusted`)."""
        import asyncio

        async with asyncio.timeout(timeout_s):
            if endpoint.socket is not None:
                peers = trusted_peers(endpoint.socket, explicit=endpoint.explicit)
                reader, writer = await asyncio.open_unix_connection(endpoint.socket)
                try:
                    check_peer(writer.get_extra_info("socket"), endpoint.socket, peers)
                except BaseException:
                    writer.close()
                    raise
            else:
                reader, writer = await asyncio.open_connection(endpoint.host, endpoint.port)
                try:
                    check_tcp_peer(writer.get_extra_info("socket"), endpoint.host, endpoint.port)
                except BaseException:
                    writer.close()
                    raise
        return cls(reader, writer)

    async def exchange(self, payload: bytes, max_body: int | None) -> ResponseReader:
        """Send ``payload``; the reader once the answer's head is in (no timeout here: the
        caller bounds the exchange)."""
        self._writer.write(payload)
        await self._writer.drain()
        answer = ResponseReader(max_body, empty_body=payload.startswith(b"HEAD "))
        while not answer.head():
            answer.feed(await self._reader.read(RECV_BYTES))
        return answer

    async def body(self, answer: ResponseReader) -> bytes:
        parts = []
        async for data in self.stream(answer):
            parts.append(data)
        return b"".join(parts)

    async def stream(self, answer: ResponseReader) -> AsyncIterator[bytes]:
        while True:
            data = answer.data()
            if data is not None:
                yield data
            elif answer.done:
                return
            else:
                answer.feed(await self._reader.read(RECV_BYTES))

    def close(self) -> None:
        self._writer.close()
