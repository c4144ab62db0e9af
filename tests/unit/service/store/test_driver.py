"""service.store.driver: a statement in each driver's form, and SQLite's side of running it
(PostgreSQL's runs in tests/store/test_driver_backends.py, on a real cluster)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import OperationalError

from service.store import health
from service.store.driver import sql, sqlite_rows
from service.store.health import FAULT_FILE_ENV, StorageHealth, is_storage_failure


def test_named_parameters_are_numbered_once_each_in_order() -> None:
    statement = sql(
        "UPDATE t SET a = :a, b = CAST(:b AS TEXT)::text, at = '12:30' WHERE c = :a AND d=:d_2"
    )
    assert statement.numbered == (
        "UPDATE t SET a = $1, b = CAST($2 AS TEXT)::text, at = '12:30' WHERE c = $1 AND d=$3"
    )
    assert statement.names == ("a", "b", "d_2")
    assert statement.positional({"d_2": 3, "b": 2, "a": 1, "unused": 0}) == (1, 2, 3)
    assert statement.text.startswith("UPDATE t SET a = :a")


def test_writes_are_told_from_reads() -> None:
    assert sql("INSERT INTO t VALUES (:a)").writes
    assert sql("  update t set a = 1").writes
    assert sql("WITH x AS (UPDATE t SET a = 1 RETURNING a) SELECT a FROM x").writes
    assert not sql("SELECT a FROM t WHERE b = :b").writes
    assert not sql("WITH x AS (SELECT 1) SELECT * FROM x").writes


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    made = create_engine(f"sqlite:///{tmp_path / 'd.db'}")
    yield made
    made.dispose()


def test_a_full_disk_fails_a_driver_write_and_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: Engine
) -> None:
    """The test hook and the health report reach statements SQLAlchemy does not execute."""
    full = tmp_path / "full"
    monkeypatch.setenv(FAULT_FILE_ENV, str(full))
    state = StorageHealth()
    health.install(engine, state)  # as the store does, before its first connection
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"))
    insert = sql("INSERT INTO t (v) VALUES (:v) RETURNING id")
    with engine.begin() as conn:
        assert sqlite_rows(conn, insert, {"v": "a"}) == [(1,)]
    full.touch()
    with pytest.raises(OperationalError) as raised, engine.begin() as conn:
        assert sqlite_rows(conn, sql("SELECT COUNT(*) FROM t"), {}) == [(1,)]  # reads go on
        sqlite_rows(conn, insert, {"v": "b"})
    assert is_storage_failure(raised.value)
    assert state.failing and state.failures_total == 1
    full.unlink()
    with engine.begin() as conn:
        assert sqlite_rows(conn, insert, {"v": "c"}) == [(2,)]
