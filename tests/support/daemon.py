"""The real ``mcpsubd`` as a subprocess with its own state dir, for integration tests."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.cli import CliResult, cli_env, run_cli
from tests.support.http import tcp_client, uds_client

BIN = Path(sys.executable).parent
FAST_ENV = {
    "MCPSUB_BACKOFF_BASE_S": "0.05",
    "MCPSUB_BACKOFF_CAP_S": "0.5",
    "MCPSUB_HEALTHY_RESET_S": "5",
    "MCPSUB_KEEPALIVE_S": "2",
    "MCPSUB_ACK_TIMEOUT_S": "5",
    "MCPSUB_REQUEST_TIMEOUT_S": "5",
    "MCPSUB_LOG_FORMAT": "json",
}


def free_port() -> int:
    """A loopback port nothing listens on now (for a daemon's TCP API)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def tcp_api_env() -> dict[str, str]:
    """Env that makes the daemon listen on loopback TCP (a free port) instead of its socket."""
    return {"MCPSUB_API": f"http://127.0.0.1:{free_port()}"}


class Daemon:
    def __init__(self, state_dir: Path, env: dict[str, str] | None = None) -> None:
        self.state_dir = state_dir
        self.env = cli_env({**FAST_ENV, "MCPSUB_STATE_DIR": str(state_dir), **(env or {})})
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self._reader: threading.Thread | None = None
        self.preexec: Callable[[], None] | None = None
        """Runs in the child before exec (e.g. to lower RLIMIT_NOFILE)."""

    @property
    def socket_path(self) -> Path:
        """The state dir's socket by the one rule (``service.statepaths``)."""
        from service import statepaths

        return Path(statepaths.socket_path(str(self.state_dir)))

    def start(self, timeout: float = 20.0, *, ready: bool = True) -> Daemon:
        """Start and wait until ``/readyz`` says 200 (``ready=False``: until the API answers at
        all, e.g. a daemon that starts on a full disk and says 503 ``STORAGE_FAILING``)."""
        self.proc = subprocess.Popen(
            [str(BIN / "mcpsubd")],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=self.preexec,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("mcpsubd exited:\n" + "\n".join(self.lines))
            if self.tcp_url is not None or self.socket_path.exists():
                try:
                    if self.api("GET", "/readyz").status_code == 200 or not ready:
                        return self
                except httpx.TransportError:
                    pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError("mcpsubd did not become ready:\n" + "\n".join(self.lines))

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def tcp_url(self) -> str | None:
        """``http://127.0.0.1:PORT`` when started with ``MCPSUB_API=http://…`` or ``tcp://…``."""
        api = self.env.get("MCPSUB_API", "")
        for scheme in ("tcp://", "http://"):  # both spellings are accepted
            if api.startswith(scheme):
                return "http://" + api[len(scheme) :]
        return None

    @property
    def token(self) -> str:
        """The bearer token of a TCP daemon (written to the state dir at start)."""
        return (self.state_dir / "api.token").read_text().strip()

    def client(self, timeout: float = 30.0) -> httpx.Client:
        if self.tcp_url is not None:
            headers = {}
            if (self.state_dir / "api.token").exists():
                headers["Authorization"] = f"Bearer {self.token}"
            return tcp_client(self.tcp_url, headers=headers, timeout=timeout)
        return uds_client(str(self.socket_path), timeout=timeout)

    def api(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        with self.client() as client:
            return client.request(method, path, **kwargs)

    def ctl(self, *args: str, timeout: float = 60.0) -> CliResult:
        env = {"MCPSUB_STATE_DIR": str(self.state_dir)}
        if self.tcp_url is not None:
            env["MCPSUB_API"] = self.tcp_url
        return run_cli("mcpsubctl", *args, env=env, timeout=timeout)

    @property
    def database_url(self) -> str:
        return self.env.get("MCPSUB_DATABASE_URL") or f"sqlite:///{self.state_dir / 'mcpsub.db'}"

    def query(self, sql: str, **params: Any) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` (named ``:params``) from this daemon's database, either backend."""
        from sqlalchemy import text
        from sqlalchemy.ext.asyncio import create_async_engine
        from sqlalchemy.pool import NullPool

        from service.store.database import parse
        from tests.support.postgres import run_async

        async def go() -> list[tuple[Any, ...]]:
            engine = create_async_engine(parse(self.database_url).async_url, poolclass=NullPool)
            try:
                async with engine.connect() as conn:
                    return [tuple(row) for row in await conn.execute(text(sql), params)]
            finally:
                await engine.dispose()

        return run_async(go())

    def stop(self, timeout: float = 10.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def daemon_factory(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Daemon]]:
    """Starts daemons; a test that also uses ``database_url`` (parametrized over both
    backends) gets daemons on that database: on PostgreSQL they all share it."""
    daemons: list[Daemon] = []
    backend: dict[str, str] = {}
    if "database_url" in request.fixturenames and request.getfixturevalue("db_backend") == (
        "postgresql"
    ):
        backend["MCPSUB_DATABASE_URL"] = request.getfixturevalue("database_url")

    def start(
        state_dir: Path | None = None, env: dict[str, str] | None = None, *, ready: bool = True
    ) -> Daemon:
        d = Daemon(state_dir or tmp_path / f"state{len(daemons)}", {**backend, **(env or {})})
        daemons.append(d.start(ready=ready))
        return d

    yield start
    for d in daemons:
        d.stop()
