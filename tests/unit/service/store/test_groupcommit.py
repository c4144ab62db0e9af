"""service.store.groupcommit: the revision write's transaction, read by read, with its sinks.

In-memory SQLite made from the store's schema; the link's generation is the fence."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, create_engine, text

from service.store import schema
from service.store.dialect import SQLITE
from service.store.groupcommit import Read, record_read, record_reads
from service.store.records import Event


@pytest.fixture
def conn() -> Iterator[Connection]:
    engine = create_engine("sqlite://")
    schema.metadata.create_all(engine)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO servers (id, url, credential_key, generation, created_at, updated_at) "
                "VALUES (1, 'http://127.0.0.1:9/mcp', '', 2, 0, 0)"
            )
        )
        for sub_id, uri in ((10, "r://a"), (11, "r://b")):
            connection.execute(
                text(
                    "INSERT INTO subscriptions (id, server_id, uri, created_at, updated_at) "
                    "VALUES (:id, 1, :uri, 0, 0)"
                ),
                {"id": sub_id, "uri": uri},
            )
        yield connection
    engine.dispose()


def read(sub_id: int, digest: str, *, generation: int = 2, at: float = 5.0) -> Read:
    return Read(
        subscription_id=sub_id,
        server_id=1,
        generation=generation,
        contents=[{"uri": "r://a", "text": digest}],
        contents_json=f'[{{"text": "{digest}"}}]',
        text=digest,
        digest=digest,
        read_at=at,
    )


def last_read_at(conn: Connection, sub_id: int) -> float | None:
    return conn.execute(
        text("SELECT last_read_at FROM subscriptions WHERE id = :id"), {"id": sub_id}
    ).scalar_one()


def test_a_new_read_is_a_revision_its_event_and_its_sinks_rows(conn: Connection) -> None:
    seen: list[Event] = []
    outcome = record_read(
        conn, SQLITE, 10, 1, 2, [{"text": "x"}], '[{"text": "x"}]', "x", "h1", 5.0,
        [lambda _conn, event: seen.append(event)], "poll",
    )  # fmt: skip
    assert outcome is not None
    revision, event = outcome
    assert (revision.subscription_id, revision.revision, revision.content_hash) == (10, 1, "h1")
    assert revision.contents == [{"text": "x"}] and revision.text == "x"
    assert event.revision_id == revision.id
    assert event.data == {"contentHash": "h1", "generation": 2, "trigger": "poll"}
    assert seen == [event]


def test_no_trigger_means_no_trigger_key(conn: Connection) -> None:
    outcome = record_read(conn, SQLITE, 10, 1, 2, [], "[]", None, "h1", 5.0)
    assert outcome is not None and "trigger" not in outcome[1].data


def test_unchanged_content_only_touches_the_read_time(conn: Connection) -> None:
    calls: list[Event] = []
    assert record_reads(conn, SQLITE, [read(10, "h1", at=5.0)]) != [None]
    assert record_reads(conn, SQLITE, [read(10, "h1", at=9.0)], [lambda c, e: calls.append(e)]) == [
        None
    ]
    assert last_read_at(conn, 10) == 9.0
    assert calls == []
    assert conn.execute(text("SELECT COUNT(*) FROM revisions")).scalar_one() == 1


def test_a_stale_generation_changes_nothing(conn: Connection) -> None:
    assert record_reads(conn, SQLITE, [read(10, "h1", generation=1, at=7.0)]) == [None]
    assert last_read_at(conn, 10) is None
    assert conn.execute(text("SELECT COUNT(*) FROM events")).scalar_one() == 0


def test_a_batch_keeps_its_order_and_fences_each_read_alone(conn: Connection) -> None:
    outcomes = record_reads(
        conn,
        SQLITE,
        [read(10, "h1"), read(11, "h2", generation=1), read(11, "h3"), read(10, "h4")],
    )
    assert outcomes[1] is None
    written = [o for o in outcomes if o is not None]
    assert [(rev.subscription_id, rev.revision, rev.content_hash) for rev, _ in written] == [
        (10, 1, "h1"),
        (11, 1, "h3"),
        (10, 2, "h4"),
    ]
    event_ids = [event.id for _, event in written]
    assert event_ids == sorted(event_ids)
