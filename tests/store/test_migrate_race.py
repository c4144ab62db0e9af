"""Replicas started at the same instant on a fresh PostgreSQL database, as a deployment of
three does, race each other's ``CREATE TABLE``; a loser would die with ``IntegrityError …
pg_type_typname_nsp_index`` (exit 69). Migrations take an advisory lock, and a start that loses a race anyway migrates again instead of exiting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from service.store.migrate import current, script_head
from tests.support.cli import BIN, cli_env
from tests.support.daemon import Daemon
from tests.support.poll import until
from tests.support.postgres import PgCluster

STARTERS = 3
AT_ONCE = """
import sys, time
from pathlib import Path
Path(sys.argv[2]).touch()
go = Path(sys.argv[3])
while not go.exists():
    time.sleep(0.001)
from service.store.migrate import upgrade_if_needed
upgrade_if_needed(sys.argv[1])
"""


def test_concurrent_migrations_of_a_fresh_database_all_succeed(
    pg_cluster: PgCluster, tmp_path: Path
) -> None:
    """Separate processes (Alembic's ``context`` is process-global), released together;
    without the lock two of three died in one round."""
    url = pg_cluster.fresh_database(migrated=False)
    go = tmp_path / "go"
    ready = [tmp_path / f"ready{i}" for i in range(STARTERS)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", AT_ONCE, url, str(path), str(go)],
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for path in ready
    ]

    def at_barrier() -> bool:
        assert all(proc.poll() is None for proc in procs)
        return all(path.exists() for path in ready)

    until("every migrating process is at the barrier", at_barrier, 60)
    go.touch()
    outputs = [proc.communicate(timeout=120)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * STARTERS, outputs
    assert current(url) == script_head()


def test_replicas_started_at_once_on_a_fresh_database_all_come_up(
    pg_cluster: PgCluster, tmp_path: Path
) -> None:
    url = pg_cluster.fresh_database(migrated=False)
    daemons = [
        Daemon(tmp_path / f"r{i}", {"MCPSUB_DATABASE_URL": url, "MCPSUB_LEASE_TTL_S": "3"})
        for i in range(3)
    ]
    procs = [
        subprocess.Popen(
            [str(BIN / "mcpsubd")],
            env=cli_env(d.env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for d in daemons
    ]
    try:
        for d, proc in zip(daemons, procs, strict=True):
            d.proc = proc

            def up(proc: subprocess.Popen[str] = proc, d: Daemon = d) -> bool:
                assert proc.poll() is None, proc.communicate()[0]  # died at start: exit 69
                if not d.socket_path.exists():
                    return False
                try:  # the socket file exists a moment before it listens
                    return d.api("GET", "/readyz").status_code == 200
                except httpx.TransportError:
                    return False

            until("the replica is ready", up, 60)
    finally:
        for d in daemons:
            d.stop()
    assert [d.proc.returncode for d in daemons if d.proc] == [0, 0, 0]
