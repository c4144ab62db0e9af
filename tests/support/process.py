"""A server subprocess for tests: start it, know when it listens, read its output, stop it.

The one start/stop helper behind :class:`tests.support.lab.LabServer`,
:class:`tests.peers.peer.PeerServer` and :class:`tests.support.hostile.HostileServer`. The
process's stdout and stderr are read on a thread (so the pipe never fills) into a list of
lines; the line matching ``ready`` (with a ``port`` group, and optionally ``scheme``) marks
it listening. Waiting for a line is a wait on a condition the reader notifies, not a sleep.
"""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Self

REPO_ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 20.0


class ServerProcess:
    """One server process listening on 127.0.0.1; a context manager, or call :meth:`stop`."""

    def __init__(self, argv: list[str], env: dict[str, str], ready: re.Pattern[str]) -> None:
        self.argv = argv
        self.env = env
        self.ready = ready
        self.proc: subprocess.Popen[str] | None = None
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self._ready = threading.Event()
        self._port: int | None = None
        self._scheme = "http"
        self._reader: threading.Thread | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self, timeout: float = STARTUP_TIMEOUT) -> Self:
        self.proc = subprocess.Popen(
            self.argv,
            env={**self.env, "PYTHONUNBUFFERED": "1"},
            cwd=str(REPO_ROOT),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout) or self._port is None:
            self.stop()
            command = " ".join(self.argv[1:])
            raise RuntimeError(f"{command} did not start:\n" + "\n".join(self.lines))
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.rstrip("\n")
            with self._changed:
                self._lines.append(line)
                self._changed.notify_all()
            match = self.ready.search(line)
            if match and self._port is None:
                groups = match.groupdict()
                self._scheme = groups.get("scheme") or "http"
                self._port = int(groups["port"])
                self._ready.set()
        self._ready.set()  # EOF: unblock start() if the process died early
        with self._changed:
            self._changed.notify_all()

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM, wait (SIGKILL after ``timeout``); the exit code, None if never started."""
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

    def __enter__(self) -> Self:
        return self.start() if self.proc is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ---- address and output ------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("server not started")
        return self._port

    @property
    def base_url(self) -> str:
        return f"{self._scheme}://127.0.0.1:{self.port}"

    @property
    def lines(self) -> list[str]:
        """Every stdout/stderr line so far (a copy)."""
        with self._changed:
            return list(self._lines)

    def count(self, text: str) -> int:
        return sum(text in line for line in self.lines)

    def wait_for_count(self, text: str, count: int = 1, timeout: float = 10.0) -> list[str]:
        """Wait until ``count`` output lines contain ``text``; those lines, else TimeoutError."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = [line for line in self._lines if text in line]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{count}x {text!r} not seen in:\n" + "\n".join(self._lines))
                self._changed.wait(left)

    def wait_for_line(self, text: str, timeout: float = 5.0) -> str:
        """The first output line containing ``text``; raises ``TimeoutError``."""
        return self.wait_for_count(text, 1, timeout)[0]


def gone(pid: int) -> bool:
    """A process that is not our child has ended (a zombie counts: whoever adopted it, init
    or a subreaper, may not have reaped it yet). Linux ``/proc``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def stop_detached(pid: int, timeout: float = 30.0) -> None:
    """SIGTERM a process that is not our child (a daemon the face detached) and wait for it."""
    import contextlib
    import os

    from tests.support.poll import until

    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    until(f"process {pid} ends", lambda: gone(pid), timeout=timeout)
