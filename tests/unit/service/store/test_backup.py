"""service.store.backup.backup_sqlite: a private, whole copy or nothing, with sysexits codes."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest

from service.store.backup import EX_CANTCREAT, EX_IOERR, EX_NOINPUT, BackupError, backup_sqlite


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "state.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (v TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [("whsec_secret",), ("two",)])
    return path


def test_the_copy_is_whole_and_private(tmp_path: Path, database: Path) -> None:
    target = tmp_path / "backup.db"
    pages = backup_sqlite(database, target)
    assert pages >= 2
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    with sqlite3.connect(target) as conn:
        assert conn.execute("SELECT v FROM t ORDER BY rowid").fetchall() == [
            ("whsec_secret",),
            ("two",),
        ]


def test_no_database_is_noinput(tmp_path: Path) -> None:
    with pytest.raises(BackupError) as caught:
        backup_sqlite(tmp_path / "missing.db", tmp_path / "b.db")
    assert caught.value.exit_code == EX_NOINPUT == 66
    assert not (tmp_path / "b.db").exists()


def test_an_existing_target_is_never_overwritten(tmp_path: Path, database: Path) -> None:
    target = tmp_path / "b.db"
    target.write_text("keep me")
    with pytest.raises(BackupError) as caught:
        backup_sqlite(database, target)
    assert caught.value.exit_code == EX_CANTCREAT == 73
    assert target.read_text() == "keep me"


def test_an_uncreatable_target_is_cantcreat(tmp_path: Path, database: Path) -> None:
    with pytest.raises(BackupError) as caught:
        backup_sqlite(database, tmp_path / "no" / "dir" / "b.db")
    assert caught.value.exit_code == EX_CANTCREAT
    assert "\n" not in str(caught.value)


def test_a_failed_copy_leaves_nothing(tmp_path: Path) -> None:
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"this is not a database" * 100)
    target = tmp_path / "b.db"
    with pytest.raises(BackupError) as caught:
        backup_sqlite(broken, target)
    assert caught.value.exit_code == EX_IOERR == 74
    assert not target.exists()
