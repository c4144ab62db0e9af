"""The API served by uvicorn on a real socket, in a thread with its own event loop.

The store and the fake supervisor live in that loop; tests drive them with :meth:`call`
and talk to the server like any client would (sync httpx, the CLI in-process).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from service.daemon.webapp import create_app
from service.http.server import bind_loopback, bind_unix_socket, make_server
from tests.api.fakes import FakeSupervisor, make_supervisor
from tests.support.poll import until_async

T = TypeVar("T")


class LiveApi:
    def __init__(
        self,
        state_dir: Path,
        template: Path,
        *,
        token: str | None = None,
        tcp: bool = False,
        database_url: str | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.socket_path = state_dir / "api.sock"
        self.template = template
        self.token = token
        self.tcp = tcp
        self.database_url = database_url
        """A migrated database (the ``database_url`` fixture) instead of a copy of template."""
        self.port = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self.supervisor: FakeSupervisor | None = None
        self.server: Any = None
        self.app: Any = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._error: BaseException | None = None

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}" if self.tcp else f"unix://{self.socket_path}"

    def start(self) -> LiveApi:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not (self.server is not None and self.server.started):
            if self._error is not None:
                raise self._error
            if time.monotonic() > deadline:
                raise TimeoutError("the API server did not start")
            time.sleep(0.01)
        return self

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # surfaced by start()
            self._error = exc

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if self.database_url is not None:
            self.supervisor = await make_supervisor(self.database_url)
        else:
            self.supervisor = await make_supervisor(self.state_dir / "state.db", self.template)
        app = self.app = create_app(
            self.supervisor, self.supervisor.parts, token=self.token, keepalive_s=0.3
        )
        if self.tcp:
            sock = bind_loopback("127.0.0.1", 0)
            self.port = sock.getsockname()[1]
        else:
            sock = bind_unix_socket(self.socket_path)
        self.server = make_server(app, graceful_s=1)
        try:
            await self.server.serve(sockets=[sock])
        finally:
            await self.supervisor.store.close()

    def call(self, factory: Callable[[FakeSupervisor], Awaitable[T]]) -> T:
        assert self.loop is not None and self.supervisor is not None
        sup = self.supervisor

        async def run() -> T:
            return await factory(sup)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def call_when_waiting(self, factory: Callable[[FakeSupervisor], Awaitable[Any]]) -> None:
        """Run ``factory`` once a client is in a long-poll (``/v1/wait``) or SSE stream."""

        async def when_waiting(sup: FakeSupervisor) -> Any:
            await until_async("a client waiting", lambda: self.app.state.api.waiters, 20)
            return await factory(sup)

        assert self.loop is not None
        asyncio.run_coroutine_threadsafe(when_waiting(self.supervisor), self.loop)  # type: ignore[arg-type]

    def call_later(self, delay: float, factory: Callable[[FakeSupervisor], Awaitable[Any]]) -> None:
        timer = threading.Timer(delay, lambda: self.call(factory))
        timer.daemon = True
        timer.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        self._thread.join(10)
