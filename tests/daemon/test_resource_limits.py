"""A real daemon with a low open-file limit: idle and trickling API
clients cannot lock the API out, the log stays small, and links that would eat the API's and
the database's descriptors wait with RESOURCE_LIMIT instead of failing everything."""

from __future__ import annotations

import contextlib
import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import Daemon
from tests.support.poll import until

NOFILE = 160  # the daemon's API cap becomes 160 // 4 = 40 connections


def _lower_nofile() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


@pytest.fixture
def low_fd_daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(tmp_path / "state", {"MCPSUB_API_HEADER_TIMEOUT_S": "1"})
    d.preexec = _lower_nofile
    d.start()
    try:
        yield d
    finally:
        d.stop()


def _metric(d: Daemon, name: str) -> float:
    for line in d.api("GET", "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def _idle_connections(path: Path, count: int) -> list[socket.socket]:
    conns = []
    for _ in range(count):
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(path))
        conns.append(s)
    return conns


def _closed_by_peer(s: socket.socket, within: float = 30.0) -> bool:
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except (TimeoutError, OSError):
        return False


def test_idle_connections_beyond_the_descriptor_limit_do_not_lock_the_api_out(
    low_fd_daemon: Daemon,
) -> None:
    d = low_fd_daemon
    before = len(d.lines)
    conns = _idle_connections(d.socket_path, 3 * NOFILE)  # far more than the daemon can hold
    try:
        for _ in range(5):
            response = d.api("GET", "/v1/status")  # answered: the longest-idle one was shed
            assert response.status_code == 200

        # Every connection beyond the cap is shed, or cut by the 1 s header timeout when the
        # daemon gets to it late (a loaded machine): poll, the accept loop may still be busy.
        def dropped() -> float:
            return _metric(d, "mcpsub_api_connections_shed_total") + _metric(
                d, "mcpsub_api_header_timeouts_total"
            )

        until("every connection past the cap dropped", lambda: dropped() >= 3 * NOFILE - 40, 30)
        assert _metric(d, "mcpsub_api_connections_open") <= 40
        assert _closed_by_peer(conns[0]), "the oldest idle connection was closed"
    finally:
        for s in conns:
            s.close()
    assert d.stop() == 0
    assert len(d.lines) - before < 20, d.lines[before:]


def test_a_trickled_request_head_is_cut_at_the_header_timeout(low_fd_daemon: Daemon) -> None:
    d = low_fd_daemon
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(d.socket_path))
        closed = False
        for byte in b"GET /v1/status HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 200:
            try:
                s.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            time.sleep(0.02)  # pacing the attacker, not waiting for the daemon
        assert closed or _closed_by_peer(s)
    assert _metric(d, "mcpsub_api_header_timeouts_total") >= 1
    assert d.api("GET", "/healthz").status_code == 200


def test_links_wait_with_resource_limit_when_descriptors_are_reserved(tmp_path: Path) -> None:
    d = Daemon(tmp_path / "state", {"MCPSUB_FD_RESERVE": "100000"})
    d.start()
    try:
        created = d.api(
            "POST", "/v1/subscriptions", json={"url": "http://127.0.0.1:9/mcp", "uri": "test://x"}
        )
        assert created.status_code == 201
        sub_id = created.json()["id"]

        def failed_link() -> Any:
            link = d.api("GET", f"/v1/subscriptions/{sub_id}").json()["link"]
            # In backoff: between two attempts (the test's backoff is short, and a link that
            # connects again keeps its last error).
            return link if link and link["lastErrorCode"] and link["state"] == "backoff" else None

        link = until("the link fails", failed_link, 15)
        assert link["lastErrorCode"] == "RESOURCE_LIMIT", link
        assert link["state"] == "backoff"
        assert d.api("GET", "/v1/status").status_code == 200
        assert _metric(d, "mcpsub_descriptors_free_for_links") < 1
    finally:
        with contextlib.suppress(Exception):
            d.stop()
