"""``mcpsubctl mcp`` as a subprocess spoken to line by line (raw JSON-RPC), for the cases
an SDK client cannot produce: oversized lines, floods of requests, cancellation."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

from tests.support.cli import BIN, cli_env


class StdioPeer:
    def __init__(
        self,
        state_dir: Path,
        *args: str,
        env: dict[str, str] | None = None,
        wrapper: tuple[str, ...] = (),
        exact_env: dict[str, str] | None = None,
    ) -> None:
        """``wrapper``: a command that runs ``mcpsubctl mcp …`` as its child (an agent's
        process tree); the face's stdio passes through it. Its own process group.
        ``exact_env``: the whole environment, as given (``state_dir`` is then not set)."""
        if exact_env is None:
            exact_env = cli_env({"MCPSUB_STATE_DIR": str(state_dir), **(env or {})})
        self.proc = subprocess.Popen(
            [*wrapper, str(BIN / "mcpsubctl"), "mcp", *args],
            env=exact_env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=bool(wrapper),
        )
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.messages.put(json.loads(line))

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.decode(errors="replace").rstrip("\n"))

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.write(json.dumps(message).encode() + b"\n")

    def request(self, msg_id: Any, method: str, params: dict[str, Any] | None = None) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params or {}})

    def next(self, timeout: float = 20.0) -> dict[str, Any]:
        return self.messages.get(timeout=timeout)

    def until(self, match: Any, timeout: float = 20.0) -> dict[str, Any]:
        """The first message for which ``match(message)`` is true (others are skipped)."""
        while True:
            message = self.next(timeout)
            if match(message):
                return message

    def answer(self, msg_id: Any, timeout: float = 20.0) -> dict[str, Any]:
        return self.until(lambda m: m.get("id") == msg_id and "method" not in m, timeout)

    def close(self) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
