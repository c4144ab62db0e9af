"""``mcpsubd`` picks its database from ``--database-url`` / ``MCPSUB_DATABASE_URL``."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.store.migrate import current
from tests.support.cli import run_cli
from tests.support.postgres import PgCluster


def test_migrate_on_postgresql_prints_no_password(pg_cluster: PgCluster, tmp_path: Path) -> None:
    url = pg_cluster.fresh_database(migrated=False)
    with_password = url.replace("postgres@", "postgres:hunter2@")  # trust auth ignores it
    result = run_cli(
        "mcpsubd", "migrate", "--state-dir", str(tmp_path), "--database-url", with_password
    )
    assert result.code == 0, result.stderr
    assert "hunter2" not in result.stdout + result.stderr
    assert "postgresql://***@" in result.stdout  # the one URL rule: the userinfo goes whole
    assert current(url) is not None
    assert not (tmp_path / "mcpsub.db").exists(), "no SQLite file when PostgreSQL is chosen"


@pytest.mark.parametrize(
    ("url", "code", "message"),
    [
        ("mysql://u:hunter2@127.0.0.1/x", 78, "unsupported backend 'mysql'"),
        ("postgresql://u:hunter2@127.0.0.1:1/x", 69, "cannot migrate postgresql://***@"),
        (  # libpq takes the password as a parameter too
            "postgresql://u@127.0.0.1:1/x?password=hunter2",
            69,
            "cannot migrate postgresql://***@127.0.0.1:1/x?password=***",
        ),
    ],
)
def test_bad_or_unreachable_database_is_one_line_and_a_code(
    tmp_path: Path, url: str, code: int, message: str
) -> None:
    for args, env in (
        (["--database-url", url], {}),
        ([], {"MCPSUB_DATABASE_URL": url}),
    ):
        result = run_cli("mcpsubd", "migrate", "--state-dir", str(tmp_path), *args, env=env)
        assert result.code == code, result.stderr
        assert message in result.stderr
        assert "Traceback" not in result.stderr and "hunter2" not in result.stderr


@pytest.mark.parametrize(
    "url", ["postgresql://u:hunter2@127.0.0.1:1/x", "postgresql://u@127.0.0.1:1/x?password=hunter2"]
)
def test_daemon_without_its_database_exits_69(tmp_path: Path, url: str) -> None:
    """systemd restarts on 69 (the database may come back); the log names it, no password."""
    result = run_cli("mcpsubd", "--state-dir", str(tmp_path), "--database-url", url)
    assert result.code == 69
    assert "database unavailable" in result.stderr and "***@127.0.0.1:1/x" in result.stderr
    assert "Traceback" not in result.stderr and "hunter2" not in result.stderr
