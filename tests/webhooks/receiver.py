"""A real HTTP webhook receiver on 127.0.0.1, in threads, with a response plan per path.

Every request is recorded with its raw body and headers and verified with the
``standardwebhooks`` package against every secret registered for its path (the test
oracle: we sign with our own stdlib code, a third party checks it). The fixture fails the
test at teardown if any request did not verify.

A plan is a queue of :class:`Step` per path (status, delay, extra headers, or ``hold``: keep
the request open until released); when the queue is empty the path answers ``then``
(200 by default).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from standardwebhooks import Webhook


class QuietServer(ThreadingHTTPServer):
    """A sender that goes away mid-request (a daemon killed by a test) is what the tests do,
    not an error: no traceback on the run's output for it."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass(frozen=True)
class Step:
    status: int = 200
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    hold: bool = False
    """Keep the request open until :meth:`Receiver.release` (or teardown)."""
    body: bytes = b""


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float
    """``time.time()`` when the request arrived (before the plan's delay)."""
    status: int = 0
    verified_with: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]

    @property
    def json(self) -> dict[str, Any]:
        value = json.loads(self.body)
        assert isinstance(value, dict)
        return value


class Receiver:
    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.secrets: dict[str, list[str]] = {}
        self._plans: dict[str, deque[Step]] = {}
        self._then: dict[str, Step] = {}
        self._cond = threading.Condition()
        self._released = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # ---- lifecycle ------------------------------------------------------------------
    def start(self, port: int = 0) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                receiver._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = QuietServer(("127.0.0.1", port), Handler)
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening (the port is then closed: connections are refused)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def close(self) -> None:
        self._released.set()
        self.stop()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    # ---- plan -----------------------------------------------------------------------
    def plan(self, path: str, *steps: Step, then: Step | None = None) -> None:
        with self._cond:
            self._plans[path] = deque(steps)
            if then is not None:
                self._then[path] = then

    def expect_secret(self, path: str, *secrets: str) -> None:
        """Requests to ``path`` must verify with every one of ``secrets``."""
        with self._cond:
            self.secrets[path] = list(secrets)

    def release(self) -> None:
        self._released.set()

    # ---- observations -----------------------------------------------------------------
    def received(self, path: str | None = None) -> list[Received]:
        with self._cond:
            return [r for r in self.requests if path is None or r.path == path]

    def wait_for(
        self,
        predicate: Callable[[list[Received]], bool],
        path: str | None = None,
        timeout: float = 15.0,
    ) -> list[Received]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [r for r in self.requests if path is None or r.path == path]
                if predicate(found):
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"receiver: condition not met in {timeout} s; {path or 'all'}: "
                        + repr([(r.path, r.status, r.webhook_id) for r in found])
                    )
                self._cond.wait(left)

    def wait_count(self, path: str, n: int, timeout: float = 15.0) -> list[Received]:
        return self.wait_for(lambda found: len(found) >= n, path, timeout)

    def verification_errors(self) -> list[str]:
        with self._cond:
            errors = []
            for r in self.requests:
                if not r.verified_with and not r.errors:
                    errors.append(f"{r.path}: no secret registered to verify with")
                errors += [f"{r.path}: {e}" for e in r.errors]
            return errors

    # ---- the handler ----------------------------------------------------------------
    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        body = handler.rfile.read(length)
        path = handler.path
        headers = {k.lower(): v for k, v in handler.headers.items()}
        received = Received(path=path, headers=headers, body=body, at=time.time())
        for secret in self.secrets.get(path, []):
            try:
                Webhook(secret).verify(body, headers)
            except Exception as exc:  # the oracle's verdict, recorded for the test
                received.errors.append(f"{type(exc).__name__}: {exc}")
            else:
                received.verified_with.append(secret)
        with self._cond:
            plan = self._plans.get(path)
            step = plan.popleft() if plan else self._then.get(path, Step())
            received.status = step.status
            self.requests.append(received)
            self._cond.notify_all()
        if step.hold:
            self._released.wait(60)
        if step.delay:
            self._released.wait(step.delay)  # a sleep that teardown can cut short
        try:
            handler.send_response(step.status)
            for name, value in step.headers.items():
                handler.send_header(name, value)
            handler.send_header("content-length", str(len(step.body)))
            handler.end_headers()
            handler.wfile.write(step.body)
        except OSError:
            pass  # the sender went away (killed daemon, timeout)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rx = Receiver().start()
    try:
        yield rx
    finally:
        rx.close()
    errors = rx.verification_errors()
    assert not errors, "webhook requests that did not verify:\n" + "\n".join(errors)
