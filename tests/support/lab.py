"""The real lab server as a subprocess, for every test that needs an MCP peer.

``LabServer`` starts ``python -m labserver --host 127.0.0.1 --port 0``, waits for its
"listening on" line, and keeps reading stdout on a thread (so the pipe never fills and
tests can look at the log lines). The control surface (``/lab/*``) is enabled by default,
the update delay is short (0.05 s) and the log level is ``info``.

Fixtures: ``lab_server`` (one default server per test) and ``lab_server_factory`` (call it
with env overrides; every server it made is stopped at teardown).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any, Self

import httpx
import pytest

from tests.support.process import REPO_ROOT, ServerProcess

DEFAULT_ENV: dict[str, str] = {
    "MCP_TEST_UPDATE_DELAY_SECONDS": "0.05",
    "MCP_TEST_CONTROL": "true",
    "MCP_TEST_LOG_LEVEL": "info",
}
_LISTENING = re.compile(r"listening on (?P<scheme>https?)://127\.0\.0\.1:(?P<port>\d+)/mcp")
STARTUP_TIMEOUT = 10.0


class LabServer(ServerProcess):
    """One lab server process. Use as a context manager or call :meth:`stop`."""

    def __init__(self, env: dict[str, str] | None = None, *, args: list[str] | None = None) -> None:
        full_env = {**os.environ, **DEFAULT_ENV, **(env or {})}
        # The lab must import from this checkout, whatever the current directory is.
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
        )
        self.args = args or []
        argv = [sys.executable, "-m", "labserver", "--host", "127.0.0.1", "--port", "0"]
        super().__init__([*argv, *self.args], full_env, _LISTENING)
        self._http: httpx.Client | None = None

    def start(self, timeout: float = STARTUP_TIMEOUT) -> Self:
        return super().start(timeout)

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM, wait, and return the exit code (``None`` if it was never started)."""
        if self._http is not None:
            self._http.close()
            self._http = None
        return super().stop(timeout)

    @property
    def url(self) -> str:
        return f"{self.base_url}/mcp"

    # ---- control surface -------------------------------------------------------------
    @property
    def http(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(base_url=self.base_url, timeout=10.0)
        return self._http

    def control(self, method: str, path: str, json: Any = None) -> httpx.Response:
        """One request to the ``/lab`` control surface (``path`` like ``/lab/state``)."""
        return self.http.request(method, path, json=json)

    def configure(self, **patch: Any) -> dict[str, Any]:
        """``PATCH /lab/config`` with camelCase keys; returns the new config."""
        response = self.control("PATCH", "/lab/config", json=patch)
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def state(self) -> dict[str, Any]:
        result: dict[str, Any] = self.control("GET", "/lab/state").json()
        return result

    def log(self, since: int = 0) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = self.http.get("/lab/log", params={"since": since}).json()[
            "entries"
        ]
        return entries

    def wait_event(
        self, name: str, count: int = 1, timeout: float = 5.0, since: int = 0
    ) -> list[dict[str, Any]]:
        """Entries of event ``name`` once ``count`` exist; raises ``TimeoutError``."""
        response = self.http.get(
            "/lab/wait",
            params={
                "event": name,
                "count": count,
                "timeoutMs": int(timeout * 1000),
                "since": since,
            },
            timeout=timeout + 5.0,
        )
        if response.status_code == 408:
            raise TimeoutError(f"lab event {name!r} x{count} not seen: {response.json()}")
        response.raise_for_status()
        entries: list[dict[str, Any]] = response.json()["entries"]
        return entries


@pytest.fixture
def lab_server() -> Iterator[LabServer]:
    """A lab server with the test defaults, stopped after the test."""
    with LabServer() as server:
        yield server


@pytest.fixture
def lab_server_factory() -> Iterator[Callable[..., LabServer]]:
    """``factory(env=None, **kwargs)`` starts a lab server; all are stopped at teardown."""
    servers: list[LabServer] = []

    def start(env: dict[str, str] | None = None, **kwargs: Any) -> LabServer:
        server = LabServer(env, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
