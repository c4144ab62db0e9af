"""Migration 0003 on a database that already has rows (SQLite: the tables are rebuilt)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from service.store.migrate import upgrade


def test_0003_keeps_rows_and_makes_ids_monotonic(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    url = f"sqlite:///{path}"
    upgrade(url, "0002")
    now = time.time()
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO servers (id, url, credential_key, created_at, updated_at) "
            "VALUES (1, 'http://127.0.0.1:1/mcp', '', ?, ?)",
            (now, now),
        )
        db.executemany(
            "INSERT INTO subscriptions (id, server_id, uri, created_at, updated_at) "
            "VALUES (?, 1, ?, ?, ?)",
            [(1, "test://a", now, now), (7, "test://b", now, now)],
        )
        db.execute(
            "INSERT INTO webhook_targets (id, url, secret, created_at, updated_at) "
            "VALUES (3, 'http://127.0.0.1:9/h', 'whsec_x', ?, ?)",
            (now, now),
        )
    upgrade(url)
    with sqlite3.connect(path) as db:
        assert db.execute(
            "SELECT id, uri, state_code FROM subscriptions ORDER BY id"
        ).fetchall() == [
            (1, "test://a", None),
            (7, "test://b", None),
        ]
        for table in ("subscriptions", "webhook_targets", "deliveries", "events"):
            (sql,) = db.execute(
                "SELECT sql FROM sqlite_master WHERE type='table' AND name=?", (table,)
            ).fetchone()
            assert "AUTOINCREMENT" in sql, table
        # The unique constraint and the cascade survived the rebuild.
        indexes = db.execute("PRAGMA index_list(subscriptions)").fetchall()
        assert any(row[2] for row in indexes), "uq_subscriptions_server_uri kept"
        fks = db.execute("PRAGMA foreign_key_list(subscriptions)").fetchall()
        assert fks and fks[0][6] == "CASCADE"
        db.execute("DELETE FROM subscriptions WHERE id = 7")
        db.execute(
            "INSERT INTO subscriptions (server_id, uri, created_at, updated_at) "
            "VALUES (1, 'test://c', ?, ?)",
            (now, now),
        )
        (new_id,) = db.execute("SELECT id FROM subscriptions WHERE uri='test://c'").fetchone()
        assert new_id == 8, "the deleted highest id is not handed out again"
