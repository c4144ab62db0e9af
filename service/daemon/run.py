"""The run of ``mcpsubd`` (uvicorn's ``Server``): :class:`DaemonRun`, the composition root, and
:func:`serve`, its start-up, run and shutdown; :mod:`service.daemon.main` is the command line.

Start-up order: state directory (0700) → database migrated → store → supervisor (every
stored subscription re-listened and re-read) → API listening (unix socket 0600, or loopback
TCP with a bearer token) → "ready". SIGTERM/SIGINT: stop taking work, close every listen
stream locally, let uvicorn finish within a short grace, close the store, exit 0.

Under systemd (``Type=notify``, :mod:`service.daemon.sdnotify`): ``READY=1`` once the database
is migrated and the API answers; ``WATCHDOG=1`` at half of ``$WATCHDOG_USEC`` from an asyncio
task (a blocked event loop stops the pings, and systemd restarts us); ``STATUS=`` with the link
counts when they change; ``STOPPING=1`` on SIGTERM. SIGHUP (``systemctl reload``) sends
``RELOADING=1``, re-reads the config and the subscription files (:mod:`service.daemon.reload`)
and sends ``READY=1`` again. Signal handlers only set flags or schedule work on the loop.
"""

from __future__ import annotations

import service.daemon.without_dev_extras  # noqa: F401  # first: no rich, no httpx CLI

# isort: split
import asyncio
import contextlib
import errno
import os
import secrets
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import structlog
import uvicorn

from service._version import __version__
from service.daemon import heaptrim, logs, starting
from service.daemon.config import ConfigError, Settings
from service.daemon.exitcodes import (
    EXIT_ALREADY_RUNNING,
    EXIT_CANNOT_LISTEN,
    EXIT_CONFIG,
    EXIT_DB_UNAVAILABLE,
    EXIT_SOFTWARE,
)
from service.daemon.fdbudget import FdBudget
from service.daemon.linkstatus import LinkState
from service.daemon.logs import set_log_level
from service.daemon.reload import ConfigSource, Reloader
from service.daemon.sdnotify import Notifier
from service.daemon.supervisor import Supervisor, idle_budget
from service.daemon.wiring import supervisor_collaborators
from service.http.connections import ApiLimits, ConnectionTracker, guarded_h11
from service.http.server import WakeOnExitServer
from service.pathowner import owner_of
from service.statusline import StatusLine
from service.store import Store
from service.store.database import database_errors, describe
from service.store.migrate import upgrade_if_needed

log = structlog.get_logger("mcpsubd")

STATUS_INTERVAL_S = 2.0
"""How often the ``STATUS=`` text is recomputed (it is sent only when it changed)."""
BLOCK_LOOP_HOOK = "MCPSUB_TEST_BLOCK_LOOP_ON_SIGUSR1"
"""Test hook: when set to 1, SIGUSR1 blocks the event loop for 2 s (the watchdog must stop)."""


def configure_logging(settings: Settings) -> None:
    logs.configure_logging(settings.log_level, settings.log_format)


def raise_open_file_limit() -> tuple[int, int]:
    """Each server link holds a few sockets (its stream and pooled reads): with the common
    soft limit of 1,024 a daemon with a few hundred links would fail reads with "connect
    error". Raise the soft limit to the hard one, as servers usually do."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return (0, 0)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft, hard


def api_limits(settings: Settings, open_files: int) -> tuple[ApiLimits, ConnectionTracker]:
    """The API's connection cap: the setting, but at most a quarter of the open-file limit so
    that idle clients can never take the descriptors links and the database need."""
    cap = settings.api_max_connections
    if open_files > 0:
        cap = max(4, min(cap, open_files // 4))
    return ApiLimits(cap, settings.api_header_timeout_s), ConnectionTracker()


def prepare_state_dir(path: Path) -> None:
    """Create the state directory (0700) or raise :class:`ConfigError` saying why it is unusable.

    A directory we cannot use is a configuration problem (exit 78, no restart loop under
    systemd), reported in one line that names the path and the cause, not a traceback.
    """
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(path, 0o700)
    except OSError as exc:
        raise ConfigError(state_dir_problem(path, exc)) from None
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        raise ConfigError(state_dir_problem(path, PermissionError(errno.EACCES, "denied")))


def state_dir_problem(path: Path, exc: OSError) -> str:
    """One line naming the state directory and what is wrong with it."""
    where = f"state directory {path}"
    if isinstance(exc, PermissionError):
        owner = owner_of(path)
        who = f" (owned by {owner}; run mcpsubd as that user" if owner else " ("
        return f"{where}: permission denied{who} or pass --state-dir)"
    if isinstance(exc, FileExistsError):
        return f"{where}: exists and is not a directory"
    if isinstance(exc, NotADirectoryError):
        for parent in reversed(path.parents):
            if parent.exists() and not parent.is_dir():
                return f"{where}: {parent} is a file, not a directory"
        return f"{where}: a part of the path is not a directory"
    if isinstance(exc, FileNotFoundError):
        return f"{where}: cannot be created (a parent cannot hold directories)"
    return f"{where}: {exc.strerror or exc}"


def api_token(settings: Settings) -> str:
    """The bearer token for the TCP API: created once, 0600, never logged."""
    path = settings.token_path
    try:
        if path.exists():
            return path.read_text().strip()
        token = secrets.token_urlsafe(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(token + "\n")
    except OSError as exc:
        raise ConfigError(f"API token file {path}: {exc.strerror or exc}") from None
    return token


def bind_tcp(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    # IPPROTO_TCP so that asyncio turns on TCP_NODELAY for accepted connections.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(256)
    return sock


class DaemonServer(WakeOnExitServer):
    """uvicorn, with a signal that means "shut down cleanly and exit 0"."""

    def __init__(self, config: uvicorn.Config, on_exit: Any) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        first = not self.should_exit
        super().handle_exit(sig, frame)
        self._captured_signals.clear()
        if first:
            self._on_exit()


def status_text(supervisor: Supervisor, reloader: Reloader | None = None) -> str:
    """``STATUS=`` for systemctl status: "3 links, 3 open, 12 subscriptions"."""
    links = list(supervisor.links.values())
    opened = sum(1 for link in links if link.state is LinkState.OPEN)
    subscriptions = sum(len(link.wanted) for link in links)
    text = f"{len(links)} links, {opened} open, {subscriptions} subscriptions"
    if reloader is not None and reloader.last_error:
        text += "; last reload failed (see the log)"
    return text


class ServiceSignals:
    """SIGHUP (reload) and the SIGUSR1 test hook: the handlers only set flags on the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, block_on_usr1: bool) -> None:
        self.loop = loop
        self.reload_requested = asyncio.Event()
        self.installed: list[int] = []
        self._install(signal.SIGHUP, self.reload_requested.set)
        if block_on_usr1:
            self._install(signal.SIGUSR1, lambda: loop.call_soon(self._block_loop))

    def _install(self, sig: int, callback: Callable[[], object]) -> None:
        try:
            self.loop.add_signal_handler(sig, callback)
        except (ValueError, RuntimeError, NotImplementedError):  # not the main thread
            return
        self.installed.append(sig)

    @staticmethod
    def _block_loop() -> None:
        log.warning("test hook: blocking the event loop", seconds=2)
        time.sleep(2)

    def remove(self) -> None:
        for sig in self.installed:
            with contextlib.suppress(Exception):
                self.loop.remove_signal_handler(sig)
        self.installed.clear()


async def _watchdog(notifier: Notifier, interval: float) -> None:
    # Runs on the event loop on purpose: if the loop is blocked the pings stop.
    while True:
        notifier.watchdog()
        await asyncio.sleep(interval)


async def _status_updates(notifier: Notifier, current: Callable[[], str], sent: str) -> None:
    while True:
        await asyncio.sleep(STATUS_INTERVAL_S)
        text = current()
        if text != sent:
            notifier.status(text)
            sent = text


async def _reloads(
    signals: ServiceSignals,
    reloader: Reloader,
    notifier: Notifier,
    current: Callable[[], str],
    recheck: Callable[[], list[str]] | None = None,
) -> None:
    while True:
        await signals.reload_requested.wait()
        signals.reload_requested.clear()
        log.info("reloading", reason="SIGHUP")
        notifier.reloading()
        try:
            await reloader.reload()
            # A reload is also "try again now" for links parked on a slow schedule.
            if recheck is not None:
                log.info("links rechecked", links=len(recheck()))
        except Exception as exc:  # a reload must never take the daemon down
            reloader.last_error = str(exc)
            log.exception("reload failed")
        notifier.ready(current())


async def serve(
    settings: Settings, source: ConfigSource | None = None, progress: StatusLine | None = None
) -> int:
    """``progress``: the terminal's start-up status line (stopped once the API listens)."""
    loop = asyncio.get_running_loop()
    signals = ServiceSignals(loop, os.environ.get(BLOCK_LOOP_HOOK) == "1")
    progress = progress or StatusLine(None)
    run = DaemonRun(settings, source or ConfigSource(), Notifier.from_env(), signals, progress)
    try:
        return await run.serve()
    finally:
        progress.stop()
        starting.clear(settings.state_dir)
        signals.remove()


class StartupFailed(Exception):
    """Start-up stopped before serving; ``code`` is the exit code (what was made is closed)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class DaemonRun:
    """One run of the daemon, read in order as uvicorn's ``Server``: :meth:`startup` (state
    dir, database, store, supervisor, API socket, links, uvicorn), :meth:`run` (serve until a
    signal), :meth:`shutdown` (hand links over, stop them, close the store and the socket)."""

    def __init__(
        self,
        settings: Settings,
        source: ConfigSource,
        notifier: Notifier,
        signals: ServiceSignals,
        progress: StatusLine,
    ) -> None:
        self.settings = settings
        self.source = source
        self.notifier = notifier
        self.signals = signals
        self.progress = progress
        self.stopping = asyncio.Event()
        """Set by the first SIGTERM/SIGINT (through uvicorn) or when uvicorn ends."""
        self.background: list[asyncio.Task[None]] = []

    async def serve(self) -> int:
        try:
            await self.startup()
        except StartupFailed as failed:
            return failed.code
        try:
            await self.run()
        finally:
            await self.shutdown()
        return 0

    # ---- startup --------------------------------------------------------------------------
    async def startup(self) -> None:
        settings = self.settings
        prepare_state_dir(settings.state_dir)
        starting.mark(settings.state_dir)
        self.open_files, _hard = raise_open_file_limit()
        self.store = await self._open_store()
        try:
            await self._start_work()
        except BaseException as exc:
            # Whatever was made is closed again (links, socket, store): a start that fails
            # half-way must not leave streams open or the database's writer thread running.
            await self._undo_startup()
            if isinstance(exc, StartupFailed):
                raise
            if isinstance(exc, database_errors()):
                log.error("database unavailable", database=settings.db_display, error=describe(exc))
                raise StartupFailed(EXIT_DB_UNAVAILABLE) from exc
            if isinstance(exc, Exception):
                log.error("start-up failed", error=describe(exc), exc_info=exc)
                raise StartupFailed(EXIT_SOFTWARE) from exc
            raise
        self.progress.stop()
        starting.clear(settings.state_dir)
        if self.server.started:
            self._ready()

    async def _start_work(self) -> None:
        """Supervisor, API socket, links, uvicorn: everything after the store opened."""
        settings = self.settings
        # The same dispatcher and runner go to the supervisor and to the app's use cases.
        self.collaborators = supervisor_collaborators(self.store, settings)
        self.supervisor = Supervisor(
            self.store,
            settings,
            *self.collaborators,
            token_provider=_token_provider(),
            tokens_available=_token_store_exists,
        )
        self.reloader = Reloader(self.supervisor, settings, self.source, set_log_level)
        self.server, self.sock, self.api = self._api()
        self.progress.phase("mcpsubd: starting the links")
        await self.supervisor.start()
        await self.reloader.initial()
        self.progress.phase(f"mcpsubd: starting the API on {self.api}")
        loop = asyncio.get_running_loop()
        self.stopper = loop.create_task(self._stop_work_on_signal())
        self.serving = loop.create_task(self.server.serve(sockets=[self.sock]))
        await self._api_started()

    async def _undo_startup(self) -> None:
        """Close what :meth:`_start_work` made before it failed, in reverse order, each step
        bounded and on its own (one failing close must not keep the store open)."""
        serving: asyncio.Task[None] | None = getattr(self, "serving", None)
        stopper: asyncio.Task[None] | None = getattr(self, "stopper", None)
        for task in (serving, stopper):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        supervisor: Supervisor | None = getattr(self, "supervisor", None)
        if supervisor is not None:
            try:
                async with asyncio.timeout(self.settings.shutdown_timeout_s):
                    await supervisor.stop()
            except Exception as exc:  # the start-up error is the one to report
                log.warning("links did not stop after the failed start", error=describe(exc))
        sock: socket.socket | None = getattr(self, "sock", None)
        if sock is not None:
            sock.close()
            socket_path = self.settings.api_socket  # None: a TCP listener
            if socket_path is not None:
                with contextlib.suppress(OSError):
                    socket_path.unlink()
        with contextlib.suppress(Exception):
            await self.store.close()

    async def _open_store(self) -> Store:
        settings = self.settings
        self.progress.phase(f"mcpsubd: migrating {settings.db_display}")
        try:
            await asyncio.to_thread(upgrade_if_needed, settings.db_url)
        except database_errors() as exc:
            log.error("database unavailable", database=settings.db_display, error=describe(exc))
            raise StartupFailed(EXIT_DB_UNAVAILABLE) from exc
        # A replica frozen inside a transaction stalls the others' writes for at most a
        # lease TTL (PostgreSQL; see Store.open).
        store = Store.open(settings.db_url, idle_in_transaction_s=settings.lease_ttl_s)
        store.health.recovery_s = settings.storage_recovery_s
        return store

    def _check_socket_path(self, path: Path) -> None:
        """A socket path no address can hold, or a short directory that is not ours, ends the
        start with exit 71 and one line that says what to do (never "another mcpsubd")."""
        from service import statepaths

        if not statepaths.fits(str(path)):
            log.error(
                "cannot listen",
                error=f"the socket path {path} is {len(os.fsencode(str(path)))} bytes, longer "
                f"than a unix socket address holds ({statepaths.max_socket_path()}); hint: "
                "name a shorter one with --api unix:///PATH, or leave --api out: the state "
                "dir's socket then goes to a short private directory (docs/operations.md)",
            )
            raise StartupFailed(EXIT_CANNOT_LISTEN)
        if not self.settings.api and path.parent != self.settings.state_dir:
            try:
                statepaths.ensure_private_dir(str(path.parent))
            except statepaths.UnusableDir as exc:
                log.error(
                    "cannot listen",
                    error=f"{exc}; hint: remove it (the daemon makes it 0700 for its socket), "
                    "or name a socket with --api unix:///PATH (docs/operations.md)",
                )
                raise StartupFailed(EXIT_CANNOT_LISTEN) from exc

    def _api(self) -> tuple[DaemonServer, socket.socket, str]:
        """The API app, its connection limits and descriptor budget, and its bound socket:
        a path that is not a socket is refused (exit 78), a live daemon on it is exit 75."""
        from service.app.usecases import DaemonParts
        from service.daemon.webapp import AppSettings, build_app, guarded
        from service.http.listener import ConsoleListener
        from service.http.server import NotASocket, SocketInUse, bind_unix_socket

        settings, store, supervisor = self.settings, self.store, self.supervisor
        tcp = settings.api_tcp
        app_settings = AppSettings.of(settings)
        parts = DaemonParts(store, self.collaborators.webhooks, self.collaborators.triggers)
        self.app = app = build_app(supervisor, parts, app_settings)  # one app for every listener
        served = guarded(app, app_settings, api_token(settings) if tcp else None)
        if not tcp:  # `mcpsubctl ui` may ask for a loopback TCP listener a browser can reach
            app.state.api.console_listener = ConsoleListener(
                lambda token: guarded(app, app_settings, token), lambda: api_token(settings)
            )
        limits, tracker = api_limits(settings, self.open_files)
        budget = FdBudget(
            self.open_files,
            settings.fd_reserve,
            limits.max_connections,
            lambda: tracker.open,
            relieve=supervisor.close_idle_connections,
        )
        supervisor.idle_pool.max_idle = idle_budget(self.open_files)
        supervisor.admit_link = budget.check
        supervisor.descriptors_short = budget.relieve_now
        supervisor.gauges.update(
            {
                "api_connections_open": lambda: tracker.open,
                "api_connections_shed_total": lambda: tracker.shed_total,
                "api_header_timeouts_total": lambda: tracker.header_timeouts_total,
                "descriptors_free_for_links": lambda: budget.free_for_links() or 0,
                "storage_ok": lambda: 0 if store.health.failing else 1,
                "storage_write_failures_total": lambda: store.health.failures_total,
                "storage_recoveries_total": lambda: store.health.recoveries_total,
            }
        )
        path = settings.api_socket  # None exactly when ``tcp`` is set (unix:// or tcp:// only)
        if path is not None:
            self._check_socket_path(path)
        try:
            if tcp is not None:
                sock = bind_tcp(*tcp)
            else:
                assert path is not None  # the settings take unix:// or tcp:// (http://) only
                sock = bind_unix_socket(path, backlog=256)
        except NotASocket as exc:
            log.error("cannot listen", error=f"{exc}; hint: name a socket path with --api")
            raise StartupFailed(EXIT_CONFIG) from exc
        except SocketInUse as exc:
            log.error("cannot listen", error=str(exc))
            raise StartupFailed(EXIT_ALREADY_RUNNING) from exc
        except OSError as exc:
            if tcp and exc.errno == errno.EADDRINUSE:
                log.error("cannot listen", error=str(exc))
                raise StartupFailed(EXIT_ALREADY_RUNNING) from exc
            where = f"{tcp[0]}:{tcp[1]}" if tcp else str(path)
            log.error(
                "cannot listen",
                error=f"cannot listen on {where}: {exc.strerror or exc}; hint: "
                "name another address with --api (docs/operations.md, exit 71)",
            )
            raise StartupFailed(EXIT_CANNOT_LISTEN) from exc
        host, port = sock.getsockname()[:2] if tcp else ("", 0)
        api = f"http://{host}:{port}" if tcp else f"unix://{path}"
        config = uvicorn.Config(
            served,
            lifespan="off",
            access_log=False,
            log_config=None,
            log_level="warning",
            timeout_graceful_shutdown=2,
            http=guarded_h11(limits, tracker),
        )
        loop = asyncio.get_running_loop()
        server = DaemonServer(config, lambda: loop.call_soon_threadsafe(self.stopping.set))
        if app.state.api.console_listener is not None:  # stops taking browsers with the API
            app.state.api.console_listener.close_when(self.stopping)
        return server, sock, api

    async def _api_started(self) -> None:
        """Until uvicorn listens (or gave up): it has no event for it, so poll its flag."""
        while not self.server.started and not self.serving.done():
            await asyncio.sleep(0.01)

    def _ready(self) -> None:
        settings, supervisor, notifier = self.settings, self.supervisor, self.notifier
        log.info(
            "ready",
            api=self.api,
            version=__version__,
            state_dir=str(settings.state_dir),
            database=settings.db_display,
            links=len(supervisor.links),
            open_files=self.open_files,
        )
        status = self.status()
        notifier.ready(status)
        loop = asyncio.get_running_loop()
        interval = notifier.watchdog_interval_s
        if interval is not None:
            self.background.append(loop.create_task(_watchdog(notifier, interval), name="watchdog"))
        if notifier.enabled:
            self.background.append(loop.create_task(_status_updates(notifier, self.status, status)))
        self.background.append(
            loop.create_task(
                _reloads(self.signals, self.reloader, notifier, self.status, supervisor.recheck)
            )
        )
        self.background.append(
            loop.create_task(
                heaptrim.trim_after_work(lambda: supervisor.events.last_id), name="heap-trim"
            )
        )

    def status(self) -> str:
        return status_text(self.supervisor, self.reloader)

    # ---- run ------------------------------------------------------------------------------
    async def run(self) -> None:
        """Serve the API until uvicorn ends (a signal, or it failed to start)."""
        await self.serving

    # ---- shutdown -------------------------------------------------------------------------
    async def _stop_work_on_signal(self) -> None:
        await self.stopping.wait()
        self.app.state.api.closing.set()  # long-lived answers (agent listens) end gracefully
        self.notifier.stopping()
        log.info("stopping", reason="signal")
        try:
            # Make-before-break: the other replicas listen and take our links first; bounded
            # by handover_timeout_s inside (the rest is stopped and released below).
            await self.supervisor.hand_over()
        except Exception as exc:
            log.warning("hand-over failed; stopping the links", error=str(exc))
        try:
            # Bounded: systemd (TimeoutStopSec=15) and launchd (ExitTimeOut 20) kill us after.
            async with asyncio.timeout(self.settings.shutdown_timeout_s):
                await self.supervisor.stop()
        except TimeoutError:
            log.warning("links did not stop in time", timeout_s=self.settings.shutdown_timeout_s)

    async def shutdown(self) -> None:
        self.stopping.set()
        await self.stopper
        if self.app.state.api.console_listener is not None:
            await self.app.state.api.console_listener.close()
        for task in self.background:
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        await self.store.close()
        settings = self.settings
        if settings.api_socket is not None and not settings.api_tcp:
            with contextlib.suppress(FileNotFoundError):
                settings.api_socket.unlink()
        log.info("stopped")


def _token_store_exists() -> bool:
    """Whether ``mcpsubctl login`` left a token store (the provider's only source)."""
    from service.auth.store import default_store_path

    return default_store_path().is_file()


def _token_provider() -> Any:
    try:
        from service.auth.resolve import resolve_token
    except ImportError:  # pragma: no cover
        return None

    async def provide(url: str) -> str | None:
        token, _source = await resolve_token(url, 30.0, program="mcpsubctl")
        return token

    return provide
