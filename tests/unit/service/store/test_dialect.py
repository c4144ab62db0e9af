"""service.store.dialect: the SQLite dialect's statements against a real SQLite database.

A synchronous in-memory database with just the columns the dialect's statements touch (no
daemon, no migrations): the fenced revision write, the event insert, the claim and the lease
renew report what they should. PostgreSQL's side runs in tests/store (replicas, leases)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, create_engine, text

from service.store.database import parse
from service.store.dialect import POSTGRESQL, SQLITE, dialect_for

SCHEMA = [
    "CREATE TABLE servers (id INTEGER PRIMARY KEY, url TEXT, url_secret TEXT, "
    "generation INTEGER, lease_owner TEXT, lease_until REAL, lease_epoch INTEGER DEFAULT 0)",
    "CREATE TABLE subscriptions (id INTEGER PRIMARY KEY, server_id INTEGER, uri TEXT, "
    "content_hash TEXT, revision INTEGER DEFAULT 0, read_generation INTEGER, "
    "last_read_at REAL, updated_at REAL)",
    "CREATE TABLE revisions (id INTEGER PRIMARY KEY, subscription_id INTEGER, revision INTEGER, "
    "content_hash TEXT, contents TEXT, text TEXT, generation INTEGER, read_at REAL)",
    "CREATE TABLE events (id INTEGER PRIMARY KEY, type TEXT, subscription_id INTEGER, "
    "server_url TEXT, uri TEXT, revision_id INTEGER, revision INTEGER, data TEXT, created_at REAL)",
]


@pytest.fixture
def conn() -> Iterator[Connection]:
    engine = create_engine("sqlite://")
    with engine.begin() as connection:
        for statement in SCHEMA:
            connection.execute(text(statement))
        connection.execute(
            text(
                "INSERT INTO servers (id, url, generation) VALUES (1, 'http://127.0.0.1:9/mcp', 4)"
            )
        )
        connection.execute(
            text("INSERT INTO subscriptions (id, server_id, uri) VALUES (10, 1, 'test://a')")
        )
        yield connection
    engine.dispose()


def params(digest: str, generation: int = 4) -> dict[str, object]:
    return {
        "subscription_id": 10,
        "server_id": 1,
        "generation": generation,
        "digest": digest,
        "read_at": 1000.5,
    }


def test_the_url_picks_the_dialect() -> None:
    assert dialect_for(parse("sqlite:////tmp/x.db")) is SQLITE
    assert dialect_for(parse("postgresql://u@127.0.0.1/db")) is POSTGRESQL
    assert (SQLITE.replicated, POSTGRESQL.replicated) == (False, True)
    assert SQLITE.lock_row == "" and POSTGRESQL.lock_row == " FOR UPDATE"


def test_the_database_clock_is_epoch_seconds(conn: Connection) -> None:
    now = conn.execute(text(f"SELECT {SQLITE.now}")).scalar_one()
    assert abs(now - time.time()) < 5


def test_a_new_digest_becomes_a_revision_and_its_event(conn: Connection) -> None:
    written = SQLITE.write_revision(conn, params("h1"), '[{"text": "one"}]', "one", {"k": "v"})
    assert written is not None
    revision_id, revision, event = written
    assert revision == 1
    assert event.type == "resource.updated"
    assert (event.subscription_id, event.uri, event.revision_id, event.revision) == (
        10,
        "test://a",
        revision_id,
        1,
    )
    assert event.server_url == "http://127.0.0.1:9/mcp"
    assert event.data == {"k": "v"} and event.created_at == 1000.5
    stored = conn.execute(text("SELECT revision, text, generation FROM revisions")).one()
    assert tuple(stored) == (1, "one", 4)
    row = conn.execute(text("SELECT type, data FROM events WHERE id = :id"), {"id": event.id})
    assert tuple(row.one()) == ("resource.updated", '{"k":"v"}')
    again = SQLITE.write_revision(conn, params("h2"), "[]", "two", {})
    assert again is not None and again[1] == 2


def test_unchanged_content_or_a_stale_generation_writes_nothing(conn: Connection) -> None:
    assert SQLITE.write_revision(conn, params("h1"), "[]", "one", {}) is not None
    assert SQLITE.write_revision(conn, params("h1"), "[]", "one", {}) is None
    assert SQLITE.write_revision(conn, params("h2", generation=3), "[]", "two", {}) is None
    assert conn.execute(text("SELECT COUNT(*) FROM revisions")).scalar_one() == 1
    assert conn.execute(text("SELECT COUNT(*) FROM events")).scalar_one() == 1


def test_insert_event_defaults_data_to_an_empty_object(conn: Connection) -> None:
    event = SQLITE.insert_event(conn, "server.state", 5.0, server_url="http://127.0.0.1:9/mcp")
    assert event.data == {} and event.subscription_id is None
    stored = conn.execute(text("SELECT data FROM events WHERE id = :id"), {"id": event.id})
    assert stored.scalar_one() == "{}"


def test_claim_takes_every_link_not_held_and_reports_the_previous_owner(
    conn: Connection,
) -> None:
    conn.execute(
        text(
            "INSERT INTO servers (id, url, url_secret, generation, lease_owner) VALUES "
            "(2, 'http://127.0.0.1:9/b', 'http://u:p@127.0.0.1:9/b', 1, 'old'), "
            "(3, 'http://127.0.0.1:9/c', NULL, 1, 'me')"
        )
    )
    pick = (
        "SELECT s.id, s.lease_owner AS previous FROM servers s "
        f"WHERE {SQLITE.free_link()} ORDER BY s.id"
    )
    set_lease = "lease_owner = :me, lease_epoch = lease_epoch + 1, generation = generation + 1"
    claimed = SQLITE.claim(conn, pick, set_lease, {"me": "me"}, only=False)
    assert claimed == [
        (1, "http://127.0.0.1:9/mcp", 5, 1, None),
        (2, "http://u:p@127.0.0.1:9/b", 2, 1, "old"),
    ]
    assert SQLITE.claim(conn, pick, set_lease, {"me": "me"}, only=False) == []
    only = pick.replace("ORDER BY", "AND s.id IN :only ORDER BY")
    conn.execute(text("UPDATE servers SET lease_owner = 'other'"))
    assert [
        row[0] for row in SQLITE.claim(conn, only, set_lease, {"me": "me", "only": [3]}, only=True)
    ] == [3]


def test_renew_extends_the_leases_and_reports_what_differs_from_running(
    conn: Connection,
) -> None:
    conn.execute(
        text(
            "INSERT INTO servers (id, url, generation, lease_owner) VALUES "
            "(2, 'b', 1, 'me'), (3, 'c', 1, 'me'), (4, 'd', 1, 'other')"
        )
    )
    changes = SQLITE.renew_changes(conn, "me", 30.0, running={3, 4})
    assert sorted(tuple(row) for row in changes) == [(2, 1), (4, 0)]
    until = dict(tuple(r) for r in conn.execute(text("SELECT id, lease_until FROM servers")))
    assert until[1] is None and until[4] is None
    assert abs(until[2] - (time.time() + 30.0)) < 5 and until[3] == until[2]


def test_sqlite_has_one_live_replica_and_no_lock_or_notify(conn: Connection) -> None:
    assert SQLITE.live_replicas(conn, 30.0) == 1
    SQLITE.order_events(conn)
    SQLITE.notify(conn, "mcpsub_events", "1")
    SQLITE.migration_lock(conn)
    SQLITE.after_copy(conn, ["events"])
