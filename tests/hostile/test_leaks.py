"""Issue 22 §3 against the real daemon: host names no resolver can take, credentials in URLs,
ambiguous HTTP framing, and what the log says when tasks stop or clients go away."""

from __future__ import annotations

import itertools
import socket
from typing import Any

import pytest

from tests.support.daemon import Daemon, tcp_api_env

UNENCODABLE = {
    "an IDNA label over 63 characters": "ß" * 250 + ".com",
    "an ASCII label over 63 characters": "a" * 250 + ".com",
    "an empty label": "a..example",
}
PATHS = ("/v1/webhooks", "/v1/subscriptions")


def _nothing_stored(d: Daemon) -> None:
    assert d.api("GET", "/v1/subscriptions").json()["subscriptions"] == []
    assert d.api("GET", "/v1/webhooks").json()["webhooks"] == []


def test_a_host_no_resolver_can_encode_is_refused_at_creation(daemon_factory: Any) -> None:
    """Before: 201, then the target showed INTERNAL_ERROR and its test ping answered 500."""
    d = daemon_factory()
    for (what, host), path in itertools.product(UNENCODABLE.items(), PATHS):
        body: dict[str, Any] = {"url": f"http://{host}/h"}
        if path == "/v1/subscriptions":
            body["uri"] = "test://x"
        response = d.api("POST", path, json=body)
        assert response.status_code == 400, (what, response.text)
        error = response.json()
        assert error["errorCode"] == "INVALID_URL" and error["field"] == "url", (what, error)
        assert "not a valid DNS name" in error["message"], (what, error)
        assert error["hint"], error
    _nothing_stored(d)
    # A name that encodes (IDNA) is still accepted.
    assert d.api("POST", "/v1/webhooks", json={"url": "http://bücher.example/h"}).status_code == 201


AMBIGUOUS = (
    b"POST /v1/subscriptions HTTP/1.1\r\nHost: localhost\r\n"
    b"Content-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"0\r\n\r\n"
    # A second request pipelined behind it: it must never be answered.
    b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
)


def _exchange(d: Daemon, data: bytes) -> bytes:
    """Send ``data`` on one raw connection and read until the daemon closes it."""
    if d.tcp_url is not None:
        host, port = d.tcp_url.removeprefix("http://").rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=10)
    else:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        sock.connect(str(d.socket_path))
    with sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):  # a socket.timeout here: the connection stayed open
            received += chunk
        return received


@pytest.mark.parametrize("listener", ["unix", "tcp"])
def test_content_length_beside_transfer_encoding_is_400_and_closes(
    daemon_factory: Any, listener: str
) -> None:
    """RFC 9112 §6.3. Before: accepted, and the connection kept open for the next request."""
    d = daemon_factory(env=tcp_api_env() if listener == "tcp" else {})
    answer = _exchange(d, AMBIGUOUS)
    assert answer.startswith(b"HTTP/1.1 400 "), answer
    assert answer.count(b"HTTP/1.1 ") == 1, answer  # the pipelined request was not served
    assert b"connection: close" in answer.lower(), answer
    _nothing_stored(d)
    assert d.api("GET", "/healthz").status_code == 200  # the daemon serves on
