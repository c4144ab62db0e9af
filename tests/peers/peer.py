"""A peer server script from ``tests/peers/servers/`` as a subprocess on 127.0.0.1, port 0.

Each script prints ``PORT <n>`` once uvicorn accepts; every output line (stdout and stderr)
is kept so tests can look for the script's own notes (``LISTEN opened``, ``POST <method>``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType

SERVERS = Path(__file__).resolve().parent / "servers"
REPO_ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 20.0
_PORT = re.compile(r"^PORT (\d+)$")


class PeerServer:
    def __init__(self, script: str, *args: str) -> None:
        self.argv = [sys.executable, str(SERVERS / script), *args]
        self.proc: subprocess.Popen[str] | None = None
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._port: int | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> PeerServer:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            self.argv,
            env=env,
            cwd=str(REPO_ROOT),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(STARTUP_TIMEOUT) or self._port is None:
            self.stop()
            raise RuntimeError(f"{self.argv[1]} did not start:\n" + "\n".join(self.lines))
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.rstrip("\n")
            with self._lock:
                self._lines.append(line)
            match = _PORT.match(line)
            if match and self._port is None:
                self._port = int(match.group(1))
                self._ready.set()
        self._ready.set()

    def stop(self, timeout: float = 5.0) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=2.0)

    def __enter__(self) -> PeerServer:
        return self.start() if self.proc is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._port is not None, "peer server not started"
        return f"http://127.0.0.1:{self._port}/mcp"

    @property
    def lines(self) -> list[str]:
        with self._lock:
            return list(self._lines)

    def count(self, text: str) -> int:
        return sum(text in line for line in self.lines)

    def wait_for_count(self, text: str, count: int = 1, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while self.count(text) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{count}x {text!r} not seen in:\n" + "\n".join(self.lines))
            time.sleep(0.01)
