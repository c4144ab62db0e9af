"""The daemon's start-up migration check: Alembic only when the stored revision is not the
newest script's (importing it would keep memory for nothing); and what else a daemon on
SQLite does not import (asyncpg, rich), for the daemon's RSS target (docs/benchmarks.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import Connection

from service.store import migrate
from service.store.migrate import (
    _on_connection,
    alembic_config,
    current,
    script_head,
    upgrade_if_needed,
)

CHECK = """
import sys
import service.daemon.main
from service.store.migrate import upgrade_if_needed
upgrade_if_needed(sys.argv[1])
unwanted = sys.argv[2].split(",")
loaded = sorted(m for m in sys.modules if m.split(".")[0] in unwanted and sys.modules[m])
print(",".join(loaded) or "none")
"""
SQLITE_UNWANTED = "alembic,asyncpg,rich,pygments,tenacity"
"""Not imported by a SQLite daemon: alembic and tenacity (only to migrate), asyncpg (only for PostgreSQL,
see ``database_errors``), rich and pygments (structlog's and httpx's optional extras, see
``service.daemon.without_dev_extras``)."""


def test_the_head_read_from_the_scripts_is_alembics() -> None:
    from alembic.script import ScriptDirectory

    assert (
        script_head() == ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    )


def test_a_current_database_is_checked_without_alembic(database_url: str) -> None:
    assert current(database_url) == script_head()  # the fixture's database is migrated
    unwanted = SQLITE_UNWANTED if database_url.startswith("sqlite") else "alembic,tenacity"
    done = subprocess.run(
        [sys.executable, "-c", CHECK, database_url, unwanted],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "none"


def test_an_older_or_new_database_is_migrated(database_url: str, tmp_path: Path) -> None:
    _on_connection(database_url, lambda conn: _downgrade(conn, database_url, "0005"))
    assert current(database_url) == "0005"
    upgrade_if_needed(database_url)
    assert current(database_url) == script_head()
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    upgrade_if_needed(fresh)
    assert current(fresh) == script_head()


def _downgrade(conn: Connection, url: str, revision: str) -> None:
    from alembic import command

    config = alembic_config(url)
    config.attributes["connection"] = conn
    command.downgrade(config, revision)


def _failing_upgrades(monkeypatch: pytest.MonkeyPatch, errors: list[Exception]) -> list[str]:
    """``upgrade`` raises each of ``errors`` in turn, then migrates for real."""
    calls: list[str] = []
    real = migrate.upgrade

    def upgrade(url: str) -> None:
        calls.append(url)
        if errors:
            raise errors.pop(0)
        real(url)

    monkeypatch.setattr(migrate, "upgrade", upgrade)
    return calls


RACE = RuntimeError('relation "servers" already exists')


def test_a_start_that_lost_the_race_migrates_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'raced.db'}"
    calls = _failing_upgrades(monkeypatch, [RACE, RACE])
    upgrade_if_needed(url)
    assert len(calls) == migrate.RACE_ATTEMPTS == 3
    assert current(url) == script_head()


def test_the_race_is_tried_a_bounded_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'raced.db'}"
    calls = _failing_upgrades(monkeypatch, [RACE] * 5)
    with pytest.raises(RuntimeError, match="already exists"):
        upgrade_if_needed(url)
    assert len(calls) == migrate.RACE_ATTEMPTS


def test_any_other_failure_is_not_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'broken.db'}"
    calls = _failing_upgrades(monkeypatch, [RuntimeError("disk I/O error")])
    with pytest.raises(RuntimeError, match="disk I/O"):
        upgrade_if_needed(url)
    assert len(calls) == 1
