"""Serve the daemon's app (the API, the face, the console): a unix socket created 0600
(uvicorn's own ``uds=`` makes it 0666) or a loopback TCP port. The caller owns the event loop
and the shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import stat
from collections.abc import Generator
from pathlib import Path

import uvicorn
from fastapi import FastAPI

from service import statepaths
from service.pathowner import user_name

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


class SocketInUse(RuntimeError):
    """Another process is listening on the API socket (a second daemon?)."""


class NotASocket(SocketInUse):
    """Something that is not a socket (a file, a directory, a symlink) is at the path: it is
    left alone, never replaced (a mistyped ``--api`` must not cost a file)."""


class UntrustedDir(OSError):
    """The socket's directory is a link, or another user's, or others may write there: they
    could replace the socket between two runs, or pose as the daemon before it starts."""


def bind_unix_socket(path: Path, backlog: int = 128) -> socket.socket:
    """A listening unix socket at ``path``, mode 0600, in a directory we make 0700.

    A directory that is not ours (or root's), is a link, or is writable by others raises
    UntrustedDir (the clients would refuse it too). A stale socket file (nothing listening)
    is replaced; a live one raises SocketInUse; anything else raises NotASocket and stays
    as it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    problem = statepaths.socket_dir_problem(str(path.parent), (os.geteuid(), 0))
    if problem is not None:
        text, owner = problem
        raise UntrustedDir(f"its directory {path.parent} {text} ({user_name(owner)})")
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise NotASocket(f"{path} exists and is not a socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()
        else:
            raise SocketInUse(f"another process is listening on {path}")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError:
        sock.close()
        raise
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(backlog)
    sock.setblocking(False)
    return sock


def bind_loopback(host: str, port: int) -> socket.socket:
    if host not in LOOPBACK:
        raise ValueError(f"the API binds the loopback only, not {host!r}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def make_server(app: FastAPI, *, graceful_s: int = 5) -> uvicorn.Server:
    """A uvicorn server for ``app``; run ``await server.serve(sockets=[sock])``, stop with
    ``server.should_exit = True``. Logging stays with the daemon (no uvicorn log config)."""
    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=graceful_s,
        server_header=False,
    )
    return _QuietServer(config)


class WakeOnExitServer(uvicorn.Server):
    """uvicorn whose main loop sleeps until it is told to exit, waking once a second to
    refresh the ``Date`` header.

    uvicorn's own loop wakes ten times a second to look at ``should_exit``: on an idle daemon
    those wake-ups were the largest share of its CPU, whatever the number of links. Here
    setting ``should_exit`` (from a signal handler, another thread or the loop) wakes the
    loop at once, so a stop is as prompt as before.
    """

    _should_exit = False
    _loop: asyncio.AbstractEventLoop | None = None
    _exit_requested: asyncio.Event | None = None

    @property
    def should_exit(self) -> bool:
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._should_exit = value
        loop, requested = self._loop, self._exit_requested
        if value and loop is not None and requested is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody to wake
                loop.call_soon_threadsafe(requested.set)

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        requested = self._exit_requested = asyncio.Event()
        if self._should_exit:
            requested.set()
        counter = 0  # on_tick refreshes the Date header when counter % 10 == 0
        while not await self.on_tick(counter):
            counter = (counter + 10) % 864000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await requested.wait()


class _QuietServer(WakeOnExitServer):
    """Leaves SIGINT/SIGTERM to the daemon (uvicorn would install its own handlers)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield
