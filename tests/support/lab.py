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
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_ENV: dict[str, str] = {
    "MCP_TEST_UPDATE_DELAY_SECONDS": "0.05",
    "MCP_TEST_CONTROL": "true",
    "MCP_TEST_LOG_LEVEL": "info",
}
_LISTENING = re.compile(r"listening on (https?)://127\.0\.0\.1:(\d+)/mcp")
STARTUP_TIMEOUT = 10.0


class LabServer:
    """One lab server process. Use as a context manager or call :meth:`stop`."""

    def __init__(self, env: dict[str, str] | None = None, *, args: list[str] | None = None) -> None:
        self.env = {**os.environ, **DEFAULT_ENV, **(env or {})}
        # The lab must import from this checkout, whatever the current directory is.
        self.env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
        )
        self.env.setdefault("PYTHONUNBUFFERED", "1")
        self.args = args or []
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._port: int | None = None
        self._scheme = "http"
        self.proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._http: httpx.Client | None = None

    # ---- lifecycle -------------------------------------------------------------------
    def start(self) -> LabServer:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "labserver", "--host", "127.0.0.1", "--port", "0", *self.args],
            env=self.env,
            cwd=str(REPO_ROOT),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()
        if not self._ready.wait(STARTUP_TIMEOUT) or self._port is None:
            self.stop()
            raise RuntimeError("lab server did not start:\n" + "\n".join(self.lines))
        return self

    def _read_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.rstrip("\n")
            with self._lock:
                self._lines.append(line)
            match = _LISTENING.search(line)
            if match and self._port is None:
                self._scheme = match.group(1)
                self._port = int(match.group(2))
                self._ready.set()
        self._ready.set()  # EOF: unblock start() if the process died early

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM, wait, and return the exit code (``None`` if it was never started)."""
        if self._http is not None:
            self._http.close()
            self._http = None
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=2.0)
        return self.proc.returncode

    def __enter__(self) -> LabServer:
        return self.start() if self.proc is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ---- addresses and output --------------------------------------------------------
    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("lab server not started")
        return self._port

    @property
    def base_url(self) -> str:
        # ``https`` when the lab was started with --ssl-certfile/--ssl-keyfile.
        return f"{self._scheme}://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/mcp"

    @property
    def lines(self) -> list[str]:
        """Every stdout/stderr line so far (a copy)."""
        with self._lock:
            return list(self._lines)

    def wait_for_line(self, text: str, timeout: float = 5.0) -> str:
        """The first output line containing ``text``; raises ``TimeoutError``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines:
                if text in line:
                    return line
            time.sleep(0.01)
        raise TimeoutError(f"no line containing {text!r} in:\n" + "\n".join(self.lines))

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
