"""A throwaway PostgreSQL cluster for the tests, and the ``database_url`` backend fixture.

One cluster per pytest worker (initdb + pg_ctl into a temp dir, a free loopback port, trust
auth on 127.0.0.1 only, fsync off), started only when a test asks for PostgreSQL. Each test
gets its own database, cloned from a migrated template, so tests stay independent at the cost
of one ``CREATE DATABASE``. The server binaries come from Debian's ``postgresql`` package,
which keeps them in ``/usr/lib/postgresql/<version>/bin`` (not on PATH); ``.ci/run``
installs it when they are missing. initdb refuses to run as root, so as root the cluster runs
as the ``postgres`` user.

Missing binaries skip the PostgreSQL half of the suite on a developer's machine, but fail it
under CI (``CI=true``): those tests must run there.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest

from service.store.migrate import upgrade
from tests.support import skips

T = TypeVar("T")
BACKENDS = ("sqlite", "postgresql")


def find_bin_dir() -> Path | None:
    """``MCPSUB_TEST_PG_BIN``, else the newest ``/usr/lib/postgresql/*/bin``, else PATH."""
    explicit = os.environ.get("MCPSUB_TEST_PG_BIN")
    if explicit:
        return Path(explicit)
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code, even when called inside a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(_capture(coro)))
    thread.start()
    thread.join()
    ok, value = box[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def _capture(coro: Coroutine[Any, Any, T]) -> tuple[bool, Any]:
    try:
        return True, asyncio.run(coro)
    except BaseException as exc:
        return False, exc


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PgCluster:
    def __init__(self, bin_dir: Path, server_options: str = "") -> None:
        self.bin_dir = bin_dir
        self.server_options = server_options
        """Extra ``postgres -c`` options (bench.scaleout loads pg_stat_statements)."""
        self.base = Path(tempfile.mkdtemp(prefix="mcpsub-pg-"))
        self.data = self.base / "data"
        self.port = 0
        self._names = itertools.count(1)
        self._as: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.base, user.pw_uid, user.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        result = subprocess.run(
            [*self._as, *args], capture_output=True, text=True, timeout=60, check=False
        )
        if result.returncode != 0:
            log = self.base / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{Path(args[0]).name} failed ({result.returncode}): "
                f"{result.stdout}{result.stderr}\n{tail}"
            )

    def start(self) -> PgCluster:
        self._run(
            str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", "postgres",
            "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync",
        )  # fmt: skip
        for attempt in range(3):
            self.port = _free_port()
            options = (
                f"-p {self.port} -c listen_addresses=127.0.0.1 "
                f"-c unix_socket_directories={self.base} -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=400 "
                + self.server_options
            )
            try:
                self._run(
                    str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60",
                    "-l", str(self.base / "server.log"), "-o", options, "start",
                )  # fmt: skip
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        self.execute("CREATE DATABASE mcpsub_template")
        upgrade(self.url("mcpsub_template"))
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str, database: str = "postgres") -> None:
        async def go() -> None:
            conn = await asyncpg.connect(self.url(database))
            try:
                await conn.execute(sql)
            finally:
                await conn.close()

        run_async(go())

    def fresh_database(self, migrated: bool = True) -> str:
        """A new database of this test only; a copy of the migrated template by default."""
        name = f"t{os.getpid()}_{next(self._names)}"
        template = " TEMPLATE mcpsub_template" if migrated else ""
        self.execute(f"CREATE DATABASE {name}{template}")
        return self.url(name)

    def processes(self) -> list[int]:
        """The postmaster's pid, then every process it started (backends, checkpointer, …)."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        found, todo = [], [postmaster]
        while todo:
            pid = todo.pop()
            found.append(pid)
            with contextlib.suppress(OSError):
                children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
                todo.extend(int(child) for child in children)
        return found

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """The whole cluster stopped (SIGSTOP: a VM pause, a frozen host) until the block
        ends: no statement fails, none is answered, no connection is accepted."""
        stopped: list[int] = []
        try:
            for pid in self.processes():  # the postmaster first: it forks no new backend
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
                    stopped.append(pid)
            yield
        finally:
            for pid in stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.base, ignore_errors=True)


def _unavailable(reason: str) -> None:
    skips.unavailable("postgresql", f"PostgreSQL not available: {reason}")


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    bin_dir = find_bin_dir()
    if bin_dir is None or not (bin_dir / "pg_ctl").exists():
        _unavailable("no initdb/pg_ctl (apt-get install postgresql)")
    assert bin_dir is not None
    cluster = PgCluster(bin_dir)
    try:
        cluster.start()
    except Exception as exc:
        cluster.stop()
        _unavailable(str(exc))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Alembic run per worker; SQLite tests get a copy of this file."""
    path = tmp_path_factory.mktemp("sqlite-template") / "mcpsub.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(params=BACKENDS)
def db_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def database_url(db_backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated, empty database of this test on the parametrized backend."""
    if db_backend == "postgresql":
        cluster: PgCluster = request.getfixturevalue("pg_cluster")
        return cluster.fresh_database()
    template: Path = request.getfixturevalue("sqlite_template")
    path = tmp_path / "mcpsub.db"
    shutil.copyfile(template, path)
    return f"sqlite:///{path}"
