"""What a console session opened ends with it: an event stream (``?include=content``), a
long poll and the face's open answer made with the cookie end when the session does (logout, ``mcpsubctl ui
--revoke-all``, expiry) and carry no later revision. Before: a stream opened before
``POST /ui/logout`` kept delivering every revision's content while the same cookie got 401.

A real daemon on loopback TCP, a real lab server, a real cookie from the login form, real
HTTP streams (a thread each, reading until the body ends)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.face import protocol as p
from tests.hostile.helpers import put, subscribe, wait_text
from tests.support.daemon import Daemon, tcp_api_env
from tests.support.lab import LabServer
from tests.support.poll import until

URI = "test://session-stream"


class OpenRequest:
    """One request made with a cookie, read in a thread until its body ends."""

    def __init__(
        self, base: str, cookie: str, path: str, params: dict[str, str], **request: Any
    ) -> None:
        self.text = ""
        self.status: int | None = None
        self.error: BaseException | None = None
        self.ended = threading.Event()
        self.ended_at = 0.0
        args = (base, cookie, path, params, request)
        self._thread = threading.Thread(target=self._run, args=args, daemon=True)
        self._thread.start()

    def _run(
        self, base: str, cookie: str, path: str, params: dict[str, str], request: dict[str, Any]
    ) -> None:
        timeout = httpx.Timeout(10.0, read=120.0)
        method = request.pop("method", "GET")
        headers = {"Cookie": f"mcpsub_session={cookie}", **request.pop("headers", {})}
        try:
            with (
                httpx.Client(base_url=base, timeout=timeout) as client,
                client.stream(method, path, params=params, headers=headers, **request) as answer,
            ):
                self.status = answer.status_code
                for piece in answer.iter_text():
                    self.text += piece
        except BaseException as exc:  # the test reports it
            self.error = exc
        finally:
            self.ended_at = time.monotonic()
            self.ended.set()


@pytest.fixture(scope="module")
def lab() -> Iterator[LabServer]:
    with LabServer() as server:
        yield server


def _daemon(tmp_path: Path, **env: str) -> Daemon:
    return Daemon(tmp_path / "state", {**tcp_api_env(), **env}).start()


def _face_wait(csrf: str) -> dict[str, Any]:
    """``wait_for_change`` on ``/mcp`` (2026-07-28, stateless): an answer that stays open."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "wait_for_change",
            "arguments": {"uri": URI, "timeoutSeconds": 100},
            "_meta": {p.META_VERSION: p.MODERN, p.META_CAPS: {}},
        },
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": p.MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "wait_for_change",
        "X-CSRF-Token": csrf,
    }
    return {"method": "POST", "json": body, "headers": headers}


def _connections(d: Daemon) -> float:
    """Open API connections (the gauge; the request asking counts itself)."""
    for line in d.api("GET", "/metrics").text.splitlines():
        if line.startswith("mcpsub_api_connections_open "):
            return float(line.split()[1])
    raise AssertionError("no mcpsub_api_connections_open gauge")


def _log_in(d: Daemon) -> tuple[str, str]:
    """The cookie and the page's CSRF token, from the login form as a browser gets them."""
    assert d.tcp_url is not None
    with httpx.Client(base_url=d.tcp_url) as browser:
        assert browser.post("/ui/login", data={"token": d.token}).status_code == 303
        page = browser.get("/ui/")
        csrf = page.text.split('name="csrf-token" content="')[1].split('"')[0]
        return browser.cookies["mcpsub_session"], csrf


def _stream_then_end(d: Daemon, lab: LabServer, text: str, end: Any) -> float:
    """Open the event stream and a long poll with a fresh session, see a revision arrive on
    the stream, ``end`` the session; both requests end, and the next revision is not sent.
    Returns how long after ``end`` the stream ended (seconds)."""
    assert d.tcp_url is not None
    cookie, csrf = _log_in(d)
    session = httpx.Client(base_url=d.tcp_url, headers={"Cookie": f"mcpsub_session={cookie}"})

    def used(check: Any) -> Any:
        """``check``, after a request with the cookie: the session stays in use (a short
        ``console_session_idle_s`` must not end it before the test ends it)."""
        assert session.get("/v1/status").status_code == 200
        return lambda: session.get("/v1/status").status_code == 200 and check()

    stream = OpenRequest(d.tcp_url, cookie, "/v1/events/stream", {"include": "content"})
    until("the stream is open", used(lambda: "retry:" in stream.text or stream.ended.is_set()))
    put(lab, URI, f"{text}-before")
    until("the stream carries the revision", used(lambda: f"{text}-before" in stream.text))
    before = _connections(d)
    poll = OpenRequest(d.tcp_url, cookie, "/v1/wait", {"uri": URI, "timeout_ms": "100000"})
    until("the long poll is connected", used(lambda: _connections(d) > before))
    face = OpenRequest(d.tcp_url, cookie, "/mcp", {}, **_face_wait(csrf))
    until("the face's wait is connected", used(lambda: _connections(d) > before + 1))
    session.close()
    started = time.monotonic()
    end(cookie, csrf)
    assert stream.ended.wait(30), "the stream outlived its session"
    assert poll.ended.wait(30), "the long poll outlived its session"
    assert stream.error is None and stream.status == 200, stream.error
    assert poll.error is None and poll.status == 401, (poll.status, poll.text)
    # SESSION_ENDED when it was waiting; API_TOKEN_REQUIRED in the rare case its head was
    # read only after the session ended.
    assert '"SESSION_ENDED"' in poll.text or '"API_TOKEN_REQUIRED"' in poll.text, poll.text
    assert face.ended.wait(30), "the face's open answer outlived its session"
    assert face.error is None and f"{text}-after" not in face.text, face.error
    put(lab, URI, f"{text}-after")
    wait_text(d, URI, f"{text}-after")  # stored: a live stream would have carried it
    assert f"{text}-after" not in stream.text
    refused = httpx.get(f"{d.tcp_url}/v1/status", headers={"Cookie": f"mcpsub_session={cookie}"})
    assert refused.status_code == 401
    return stream.ended_at - started


def test_logout_and_revoke_all_end_the_streams_opened_with_the_session(
    tmp_path: Path, lab: LabServer
) -> None:
    d = _daemon(tmp_path)
    try:
        subscribe(d, lab.url, URI)

        def logout(cookie: str, csrf: str) -> None:
            assert d.tcp_url is not None
            headers = {"Cookie": f"mcpsub_session={cookie}", "X-CSRF-Token": csrf}
            out = httpx.post(f"{d.tcp_url}/ui/logout", headers=headers)
            assert out.status_code == 303, out.text  # the logout itself is answered

        def revoke_all(_cookie: str, _csrf: str) -> None:
            revoked = d.ctl("ui", "--revoke-all")
            assert revoked.code == 0 and revoked.stdout == "ended 1 console session\n", revoked

        took = [_stream_then_end(d, lab, "logout", logout)]
        took.append(_stream_then_end(d, lab, "revoke", revoke_all))
        print(f"stream ended {took[0]:.3f} s after logout, {took[1]:.3f} s after revoke-all")
        assert d.stop() == 0
        assert not [line for line in d.lines if '"level": "error"' in line]
    finally:
        d.kill()


def test_an_expired_session_ends_its_streams(tmp_path: Path, lab: LabServer) -> None:
    """Idle for ``console_session_idle_s``: nothing used the session after the stream
    opened, so it expires, and the stream ends with it (one timer, set for that moment)."""
    d = _daemon(tmp_path, MCPSUB_CONSOLE_SESSION_IDLE_S="6")
    try:
        subscribe(d, lab.url, URI)

        def expire(cookie: str, _csrf: str) -> None:
            """Nothing: the timer ends it. The test's own calls use the bearer token."""

        _stream_then_end(d, lab, "expiry", expire)
        assert d.stop() == 0
    finally:
        d.kill()
