"""service.store.catalog: adding subscriptions idempotently and the status counts, on an
in-memory SQLite database made from the store's schema (no daemon, no migrations)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, create_engine, text

from service.store import catalog, schema
from service.store.catalog import (
    add_subscriptions,
    secret_credential_key,
    server_identity,
    status_counts,
)
from service.store.dialect import SQLITE

A = "http://127.0.0.1:9/mcp"


@pytest.fixture
def conn() -> Iterator[Connection]:
    engine = create_engine("sqlite://")
    schema.metadata.create_all(engine)
    with engine.begin() as connection:
        yield connection
    engine.dispose()


def test_server_identity_keeps_credentials_out_of_the_shown_url() -> None:
    assert server_identity(A, "") == {"url": A, "secret": None, "key": ""}
    one = server_identity("http://u:1@127.0.0.1:9/mcp", "")
    two = server_identity("http://u:2@127.0.0.1:9/mcp", "")
    assert one["url"] == two["url"] and "1@" not in one["url"]
    assert one["secret"] == "http://u:1@127.0.0.1:9/mcp"
    assert one["key"] != two["key"]  # two servers, two links
    assert one["key"] == secret_credential_key("http://u:1@127.0.0.1:9/mcp")
    assert one["key"].startswith("url:") and len(one["key"]) == 36
    assert server_identity("http://u:1@127.0.0.1:9/mcp", "given")["key"] == "given"


def test_adding_is_idempotent_per_server_and_uri(conn: Connection) -> None:
    added, events, rows = add_subscriptions(
        conn, SQLITE, [(A, ["r://1", "r://2", "r://1"]), (A, ["r://2"], "agent")], "", 1.0
    )
    first, second = added
    assert first.server_id == second.server_id
    (id1, new1), (id2, new2), (id1_again, new3) = first.ids
    assert (new1, new2, new3) == (True, True, False) and id1_again == id1
    assert second.ids == [(id2, False)]
    assert [(e.type, e.uri, e.server_url) for e in events] == [
        ("subscription.created", "r://1", A),
        ("subscription.created", "r://2", A),
    ]
    assert sorted((r.id, r.uri, r.created_by) for r in rows) == [
        (id1, "r://1", "person"),
        (id2, "r://2", "person"),  # keeps the creator it has
    ]
    again, more_events, _ = add_subscriptions(conn, SQLITE, [(A, ["r://1", "r://3"])], "", 2.0)
    assert again[0].ids[0] == (id1, False) and again[0].ids[1][1] is True
    assert [e.uri for e in more_events] == ["r://3"]


def test_a_credential_url_is_its_own_server_shown_redacted(conn: Connection) -> None:
    added, events, rows = add_subscriptions(
        conn,
        SQLITE,
        [("http://u:1@127.0.0.1:9/mcp", ["r://1"]), ("http://u:2@127.0.0.1:9/mcp", ["r://1"])],
        "",
        1.0,
    )
    assert added[0].server_id != added[1].server_id
    assert all("u:1" not in (e.server_url or "") for e in events)
    secrets = conn.execute(text("SELECT url_secret FROM servers ORDER BY id")).scalars().all()
    assert secrets == ["http://u:1@127.0.0.1:9/mcp", "http://u:2@127.0.0.1:9/mcp"]
    assert all("u:1" not in r.url and "u:2" not in r.url for r in rows)


def test_many_uris_span_several_in_chunks(
    conn: Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(catalog, "IN_CHUNK", 3)
    uris = [f"r://{i}" for i in range(8)]
    add_subscriptions(conn, SQLITE, [(A, uris[:5])], "", 1.0)
    added, events, rows = add_subscriptions(conn, SQLITE, [(A, uris)], "", 2.0)
    assert [created for _, created in added[0].ids] == [False] * 5 + [True] * 3
    assert len(events) == 3 and len(rows) == 8


def test_status_counts(conn: Connection) -> None:
    empty = status_counts(conn)
    assert empty.rows == {"servers": 0, "subscriptions": 0, "revisions": 0, "events": 0}
    assert (empty.last_event_id, empty.targets, empty.targets_enabled) == (0, 0, 0)
    _, events, _ = add_subscriptions(conn, SQLITE, [(A, ["r://1", "r://2"])], "", 1.0)
    conn.execute(text("UPDATE subscriptions SET state = 'active' WHERE uri = 'r://1'"))
    counts = status_counts(conn)
    assert counts.rows["servers"] == 1 and counts.rows["subscriptions"] == 2
    assert counts.rows["events"] == 2 and counts.last_event_id == events[-1].id
    assert sum(counts.subscription_states.values()) == 2
    assert counts.subscription_states["active"] == 1
