"""A datagram socket standing in for systemd's ``$NOTIFY_SOCKET``, for the service tests."""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.support.poll import until


@dataclass
class Message:
    at: float
    """time.monotonic() when it arrived."""
    fields: dict[str, str]
    observed: object = None
    """What ``on_ready`` returned, for messages that carry READY=1."""


class NotifyListener:
    """Binds an AF_UNIX SOCK_DGRAM socket in a short /tmp directory and records every message.

    ``on_ready`` runs on the reader thread the moment a ``READY=1`` datagram arrives, so a test
    can check what was true *then* (for example: does the API answer yet).
    """

    def __init__(self, on_ready: Callable[[], object] | None = None) -> None:
        # AF_UNIX paths are limited to ~107 bytes: pytest's tmp_path can be longer.
        self.directory = Path(tempfile.mkdtemp(prefix="sdn", dir="/tmp"))
        self.path = self.directory / "notify.sock"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        self.sock.settimeout(0.1)
        self.on_ready = on_ready
        self.messages: list[Message] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            now = time.monotonic()
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            message = Message(now, fields)
            if fields.get("READY") == "1" and self.on_ready is not None:
                message.observed = self.on_ready()
            with self._lock:
                self.messages.append(message)

    def snapshot(self) -> list[Message]:
        with self._lock:
            return list(self.messages)

    def having(self, key: str, value: str | None = None, since: float = 0.0) -> list[Message]:
        return [
            m
            for m in self.snapshot()
            if m.at >= since and key in m.fields and (value is None or m.fields[key] == value)
        ]

    def wait_for(
        self, key: str, value: str | None = None, since: float = 0.0, timeout: float = 20.0
    ) -> Message:
        try:
            found: list[Message] = until(
                f"{key}={value}", lambda: self.having(key, value, since), timeout
            )
        except AssertionError as exc:  # with every message received, to see what came instead
            raise AssertionError(f"{exc}; got {[m.fields for m in self.snapshot()]}") from None
        return found[0]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()
        shutil.rmtree(self.directory, ignore_errors=True)
