"""service.store.copy.copy_database: every durable row with its id, leases reset, one
transaction, an occupied target refused. SQLite to SQLite here (the copy is the same code
for any target; tests/store/test_migrate_db.py runs it into PostgreSQL through mcpsubd)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from service.store import schema
from service.store.catalog import add_subscriptions
from service.store.copy import TABLES, CopyError, copy_database
from service.store.dialect import SQLITE
from service.store.groupcommit import Read, record_reads

pytestmark = pytest.mark.anyio


def make_db(path: Path, *, filled: bool) -> str:
    engine = create_engine(f"sqlite:///{path}")
    schema.metadata.create_all(engine)
    if filled:
        with engine.begin() as conn:
            add_subscriptions(
                conn, SQLITE, [("http://127.0.0.1:9/mcp", ["r://a", "r://b"])], "", 1.0
            )
            record_reads(conn, SQLITE, [Read(1, 1, 0, [], "[]", "x", "h1", 2.0)])
            conn.execute(text("DELETE FROM subscriptions WHERE uri = 'r://a'"))  # a gap in the ids
            conn.execute(
                text(
                    "UPDATE servers SET lease_owner = 'r1', lease_until = 99.0, lease_successor = '*'"
                )
            )
    engine.dispose()
    return f"sqlite:///{path}"


def rows(path: Path, query: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(query).fetchall()


async def test_rows_keep_their_ids_and_leases_are_reset(tmp_path: Path) -> None:
    source = make_db(tmp_path / "a.db", filled=True)
    target = make_db(tmp_path / "b.db", filled=False)
    progress: list[tuple[str, int]] = []
    report = await copy_database(source, target, lambda table, n: progress.append((table, n)))
    assert [table for table, _ in progress] == [t.name for t in TABLES]
    assert report.counts["servers"] == 1 and report.counts["subscriptions"] == 1
    assert report.counts["revisions"] == 1 and report.counts["events"] == 3
    for table in ("subscriptions", "revisions", "events"):
        query = f"SELECT * FROM {table} ORDER BY id"
        assert rows(tmp_path / "b.db", query) == rows(tmp_path / "a.db", query)
    assert rows(tmp_path / "b.db", "SELECT id FROM subscriptions") == [(2,)]
    leases = "SELECT lease_owner, lease_until, lease_successor FROM servers"
    assert rows(tmp_path / "b.db", leases) == [(None, None, None)]


async def test_an_occupied_target_is_refused_and_left_alone(tmp_path: Path) -> None:
    source = make_db(tmp_path / "a.db", filled=True)
    target = make_db(tmp_path / "b.db", filled=True)
    before = rows(tmp_path / "b.db", "SELECT COUNT(*) FROM events")
    with pytest.raises(CopyError, match=r"not empty: .*events \(3\)"):
        await copy_database(source, target)
    assert rows(tmp_path / "b.db", "SELECT COUNT(*) FROM events") == before
