"""cli/localapi.py's bounds (and service.localclient's deadline), against a raw socket peer
that sends what no honest daemon would.

The happy paths run against the real served API in test_daemon_cli.py; here every answer is
hand-written bytes on a unix socket, so the client's reader meets a body larger than its
bound, a peer that never answers, garbage, a kept connection closed while idle, and a
chunked body. The CLI's side of each is checked through the real ``mcpsubctl`` subprocess.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cli.localapi import DaemonClient, DaemonError, Endpoint, _query
from service import localclient
from tests.support.cli import run_cli

Reply = Callable[[socket.socket, bytes], None]


class RawPeer:
    """A unix socket answering each request with ``reply(conn, request_bytes)``."""

    def __init__(self, path: Path, reply: Reply) -> None:
        self.path = path
        self.reply = reply
        self.requests: list[bytes] = []
        self.connections = 0
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(path))
        self._server.listen(8)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._done.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            self.requests.append(data)
            with contextlib.suppress(OSError):
                self.reply(conn, data)

    def close(self) -> None:
        self._done.set()
        self._server.close()


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[Callable[[Reply], RawPeer]]:
    made: list[RawPeer] = []

    def start(reply: Reply) -> RawPeer:
        made.append(RawPeer(tmp_path / f"api{len(made)}.sock", reply))
        return made[-1]

    yield start
    for p in made:
        p.close()


def _answer(status: int, body: bytes, extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{extra}"
    return (head + f"content-length: {len(body)}\r\n\r\n").encode() + body


def test_body_over_the_bound_is_refused(peer: Callable[[Reply], RawPeer]) -> None:
    def huge(conn: socket.socket, _req: bytes) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 999999999999\r\n\r\n" + b"x" * 1024)

    raw = peer(huge)
    result = run_cli("mcpsubctl", "read", "--uri", "x://a", "--api", f"unix://{raw.path}", "--json")
    assert result.code == 4, result
    assert json.loads(result.stdout)["errorCode"] == "RESPONSE_TOO_LARGE"
    assert "Traceback" not in result.stderr

    # A chunked body is counted as it arrives, not only by its announced length.
    def chunked(conn: socket.socket, _req: bytes) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        for _ in range(10):
            conn.sendall(b"400\r\n" + b"x" * 1024 + b"\r\n")
        conn.sendall(b"0\r\n\r\n")

    client = DaemonClient(Endpoint(peer(chunked).path), max_response_bytes=4096)
    with client, pytest.raises(DaemonError) as info:
        client.status()
    assert info.value.error_code == "RESPONSE_TOO_LARGE"


def test_silent_peer_times_out(peer: Callable[[Reply], RawPeer]) -> None:
    stop = threading.Event()
    raw = peer(lambda _conn, _req: stop.wait(10))
    try:
        client = DaemonClient(Endpoint(raw.path), timeout_s=0.2)
        with client, pytest.raises(DaemonError) as info:
            client.status()
        assert info.value.error_code == "REQUEST_TIMEOUT"
    finally:
        stop.set()


@pytest.mark.parametrize(
    "garbage",
    [
        b"SSH-2.0-OpenSSH\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"x-pad: " + b"a" * 70_000 + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 50\r\n\r\n{}",
        b"",
    ],
)
def test_garbage_is_a_network_error(peer: Callable[[Reply], RawPeer], garbage: bytes) -> None:
    raw = peer(lambda conn, _req: conn.sendall(garbage))
    result = run_cli("mcpsubctl", "status", "--api", f"unix://{raw.path}", "--json")
    assert result.code == 5, result
    assert json.loads(result.stdout)["errorCode"] == "NETWORK_ERROR"
    assert "Traceback" not in result.stderr


def test_kept_connection_closed_while_idle_is_retried(peer: Callable[[Reply], RawPeer]) -> None:
    served = 0

    def once_then_close(conn: socket.socket, _req: bytes) -> None:
        nonlocal served
        served += 1
        conn.sendall(_answer(200, b'{"ready": true, "n": %d}' % served))
        # ...and the connection closes (the handler returns): an idle keep-alive timeout.

    raw = peer(once_then_close)
    with DaemonClient(Endpoint(raw.path)) as client:
        assert client.status() == {"ready": True, "n": 1}
        assert client.status() == {"ready": True, "n": 2}
    assert raw.connections == 2


def test_error_answer_and_chunked_json(peer: Callable[[Reply], RawPeer]) -> None:
    def reply(conn: socket.socket, req: bytes) -> None:
        if req.startswith(b"GET /v1/status"):
            body = json.dumps({"errorCode": "API_TOKEN_REQUIRED", "message": "no"}).encode()
            conn.sendall(_answer(401, body))
        else:
            body = b'{"subscriptions": []}'
            conn.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
            conn.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))

    raw = peer(reply)
    with DaemonClient(Endpoint(raw.path)) as client:
        assert client.subscriptions() == []
        with pytest.raises(DaemonError) as info:
            client.status()
    assert info.value.status == 401 and info.value.error_code == "API_TOKEN_REQUIRED"
    result = run_cli("mcpsubctl", "status", "--api", f"unix://{raw.path}")
    assert result.code == 3


def test_query_encoding() -> None:
    assert _query({"uri": "file:///a b?c=d&e", "url": None, "n": 3}) == (
        "?uri=file%3A%2F%2F%2Fa%20b%3Fc%3Dd%26e&n=3"
    )
    assert _query({"uri": "é"}) == "?uri=%C3%A9"
    assert _query({}) == ""


def test_a_daemon_call_loads_no_socket_module(peer: Callable[[Reply], RawPeer]) -> None:
    """A call's cost is mostly imports. The client speaks through ``_socket``; ``socket`` (enum
    conversions, ``selectors``), httpx, ``http.client`` and
    ``typing`` stay unloaded for a whole ``mcpsubctl list`` that reaches its daemon, and so do
    ``gettext`` and ``locale`` (argparse's own words are not looked up in a catalogue)."""
    import subprocess
    import sys

    body = json.dumps({"subscriptions": []}).encode()
    p = peer(lambda conn, _req: conn.sendall(_answer(200, body)))
    code = (
        "import atexit, sys\n"
        "heavy = ('socket', 'selectors', 'httpx', 'http.client', 'typing', 'gettext', 'locale')\n"
        "atexit.register(lambda: sys.stderr.write(\n"
        "    'loaded=' + ','.join(m for m in heavy if m in sys.modules) + '\\n'))\n"
        f"sys.argv = ['mcpsubctl', 'list', '--json', '--api', 'unix://{p.path}']\n"
        "import mcpsub_start\n"
        "sys.exit(mcpsub_start.mcpsubctl())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"subscriptions": []}
    assert "loaded=\n" in done.stderr, done.stderr


def test_wait_after_an_existing_update_is_one_request(peer: Callable[[Reply], RawPeer]) -> None:
    """A script's ``wait --after N`` loop, when the update is already there,
    costs one ``/v1/wait`` (its answer carries the baseline and the link), no ``/v1/content``
    and no ``/v1/subscriptions/{id}``."""
    answer = {
        "event": {"id": 7, "type": "resource.updated", "subscriptionId": 3, "revision": 2,
                  "serverUrl": "http://127.0.0.1:9/mcp", "uri": "x://a",
                  "data": {"trigger": "notification"}},
        "revision": {"revision": 2, "text": "new", "serverUrl": "http://127.0.0.1:9/mcp"},
        "previous": {"revision": 1, "text": "old"},
        "link": {"capabilities": {"resources": {"subscribe": True}}, "streamOpen": True,
                 "honoredUris": ["x://a"]},
    }  # fmt: skip

    def reply(conn: socket.socket, request: bytes) -> None:
        if request.startswith(b"GET /v1/wait?"):
            conn.sendall(_answer(200, json.dumps(answer).encode()))
        else:
            conn.sendall(_answer(404, b'{"errorCode": "NOT_FOUND", "message": "not here"}'))

    raw = peer(reply)
    result = run_cli(
        "mcpsubctl", "wait", "--uri", "x://a", "--after", "5", "--json",
        "--api", f"unix://{raw.path}",
    )  # fmt: skip
    assert result.code == 0, result
    out = json.loads(result.stdout)
    assert (out["initialText"], out["finalText"]) == ("old", "new"), out
    assert out["honoredUris"] == ["x://a"] and out["listenAcknowledged"] is True, out
    assert [r.split(b" ", 2)[1].split(b"?")[0] for r in raw.requests] == [b"/v1/wait"]


def test_a_named_socket_too_long_for_an_address_says_so(tmp_path: Path) -> None:
    """A socket path over 107 bytes can never be connected to: the hint says to name a shorter
    one (it said to start the daemon, which could not listen there either)."""
    long_path = tmp_path / ("x" * 120) / "api.sock"
    result = run_cli("mcpsubctl", "status", env={"MCPSUB_API": f"unix://{long_path}"})
    assert result.code == 10
    assert "longer than a unix socket address holds (107)" in result.stderr
    assert "hint: name a shorter socket with --api" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


# ---- a slow or silent peer, on a real socket --------------------------------------------------
class TricklePeer:
    """A unix socket whose one connection gets ``first`` and then ``piece`` every ``every``
    seconds, forever (never: ``piece`` empty)."""

    def __init__(self, path: Path, first: bytes, piece: bytes, every: float) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(1)
        self.stop = threading.Event()
        self.path = path

        def serve() -> None:
            conn, _ = self.server.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(first)
                while piece and not self.stop.wait(every):
                    conn.sendall(piece)
                self.stop.wait()

        threading.Thread(target=serve, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.server.close()


@pytest.mark.parametrize(
    ("first", "piece"),
    [(b"", b""), (b"HTTP/1.1 200 OK\r\n", b"x-a: b\r\n"), (b"HTTP/1.1 200 OK\r\n\r\n", b"x")],
    ids=["silent", "trickled-headers", "trickled-body"],
)
def test_fetch_ends_a_slow_answer_at_its_deadline(
    tmp_path: Path, first: bytes, piece: bytes
) -> None:
    peer = TricklePeer(tmp_path / "api.sock", first, piece, every=0.02)
    try:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            localclient.fetch(Endpoint(peer.path), "/v1/status", timeout_s=0.5, max_body=1 << 20)
        assert time.monotonic() - started < 5  # the deadline, not the 100 headers' bound
    finally:
        peer.close()


def test_a_connection_waits_at_most_its_timeout_per_read(tmp_path: Path) -> None:
    peer = TricklePeer(tmp_path / "api.sock", b"HTTP/1.1 200 OK\r\n", b"", every=1)
    try:
        connection = localclient.Connection(localclient.connect(Endpoint(peer.path)))
        with pytest.raises(TimeoutError):
            connection.exchange(b"GET / HTTP/1.1\r\n\r\n", 100, timeout_s=0.2)
        connection.close()
    finally:
        peer.close()


def test_service_status_probes_readyz_through_the_one_client(
    tmp_path: Path, peer: Callable[[Reply], RawPeer]
) -> None:
    """``mcpsubctl service status``'s probe of the unit's socket (it used httpx)."""
    from cli.service_cmds import probe_socket

    assert probe_socket(tmp_path / "none.sock") == (False, "no socket")
    ready = peer(lambda conn, _req: conn.sendall(_answer(200, b'{"status": "ok"}')))
    assert probe_socket(ready.path) == (True, "ready")
    assert ready.requests[0].startswith(b"GET /readyz HTTP/1.1\r\n")
    starting = peer(lambda conn, _req: conn.sendall(_answer(503, b"{}")))
    assert probe_socket(starting.path) == (False, "answering but not ready (HTTP 503)")
    dead = tmp_path / "dead.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as unbound:
        unbound.bind(str(dead))  # bound, never listening: connections are refused
        assert probe_socket(dead) == (False, "not answering (ConnectionRefusedError)")
