"""A loopback TCP listener for the console, opened when ``mcpsubctl ui`` asks a daemon that
serves only its unix socket (a browser cannot reach a unix socket).

It serves the daemon's one app behind a guard of its own with the TCP rules: the bearer token
of ``api.token``, or the console's cookie. It is opened once, on the first request, on a port
the kernel picks, and closed with the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from service.http.server import bind_loopback, make_server
from service.http.sessions import BrowserSessions

START_TIMEOUT_S = 5.0
GRACEFUL_S = 1
"""On shutdown, open requests (a browser's event stream) get this long, then are cut."""


class ConsoleListener:
    def __init__(self, make_app: Callable[[str], Any], token: Callable[[], str]) -> None:
        """``make_app(token)`` is what the listener serves for a token: the daemon's app
        behind a guard whose ``sessions`` are the console's login sessions; ``token()`` reads
        (or makes) the daemon's API token."""
        self._make_app = make_app
        self._token = token
        self._lock = asyncio.Lock()
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None
        self.url: str | None = None
        self.sessions: BrowserSessions | None = None
        self._watch: asyncio.Task[None] | None = None

    async def open(self) -> tuple[str, BrowserSessions]:
        """The listener's base URL and its sessions (login tickets), opening it if needed."""
        async with self._lock:
            if self._server is None or self.url is None or self.sessions is None:
                token = self._token()
                app = self._make_app(token)
                sock = bind_loopback("127.0.0.1", 0)
                server = make_server(app, graceful_s=GRACEFUL_S)
                task = asyncio.create_task(server.serve(sockets=[sock]), name="console-listener")
                async with asyncio.timeout(START_TIMEOUT_S):
                    while not server.started:
                        if task.done():
                            task.result()  # raises what stopped it
                        await asyncio.sleep(0.01)
                self._server, self._task = server, task
                self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
                self.sessions = app.sessions
            return self.url, self.sessions

    def close_when(self, stopping: asyncio.Event) -> None:
        """Close once ``stopping`` is set: together with the daemon's own listener."""

        async def watch() -> None:
            await stopping.wait()
            await self.close()

        self._watch = asyncio.get_running_loop().create_task(watch(), name="console-close")

    async def close(self) -> None:
        async with self._lock:  # not while it is being opened
            if self._server is None or self._task is None:
                return
            self._server.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._task), GRACEFUL_S + 4.0)
