"""service.webhooks.outbox: which targets want an event, and the deliveries its revision's
transaction inserts (in-memory SQLite with the columns the outbox's statements touch)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, create_engine, text

from service.store.records import Event
from service.webhooks.outbox import Target, enqueue_sync, new_webhook_id, target_from_row


def target(**kw: object) -> Target:
    base: dict[str, object] = {
        "id": 1,
        "url": "http://127.0.0.1:9/hook",
        "mode": "all",
        "enabled": True,
        "disabled_reason": None,
        "uri_patterns": [],
        "subscription_ids": [],
        "consecutive_failures": 0,
        "failing_since": None,
        "last_success_at": None,
        "created_at": 1.0,
    }
    return Target(**{**base, **kw})  # type: ignore[arg-type]


def test_a_target_without_filters_matches_everything() -> None:
    assert target().matches("any://thing", None)


def test_patterns_and_subscription_ids_each_match() -> None:
    t = target(uri_patterns=["repo://*/pulls"], subscription_ids=[5])
    assert t.matches("repo://a/pulls", None)
    assert not t.matches("repo://a/issues", None)
    assert t.matches("repo://a/issues", 5)
    assert not t.matches("repo://a/issues", 6)
    assert not target(uri_patterns=["Repo://*"]).matches("repo://x", None)  # case-sensitive


def test_the_secret_url_is_posted_to_but_never_shown() -> None:
    t = target(url="http://***@127.0.0.1:9/hook", url_secret="http://u:pw@127.0.0.1:9/hook")
    assert t.wire_url == "http://u:pw@127.0.0.1:9/hook"
    assert "url_secret" not in t.to_json()
    assert "pw" not in json.dumps(t.to_json())
    assert target().wire_url == "http://127.0.0.1:9/hook"


def test_webhook_ids_are_unique_and_dotless() -> None:
    ids = {new_webhook_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(re.fullmatch(r"msg_[0-9a-f]{24}", i) for i in ids)


@pytest.fixture
def conn() -> Iterator[Connection]:
    engine = create_engine("sqlite://")
    with engine.begin() as connection:
        connection.execute(
            text(
                "CREATE TABLE webhook_targets (id INTEGER PRIMARY KEY, url TEXT, mode TEXT, "
                "enabled INTEGER, disabled_reason TEXT, uri_patterns TEXT, subscription_ids TEXT, "
                "consecutive_failures INTEGER DEFAULT 0, failing_since REAL, last_success_at REAL, "
                "created_at REAL, allow_private_target INTEGER DEFAULT 0, url_secret TEXT)"
            )
        )
        connection.execute(
            text(
                "CREATE TABLE deliveries (id INTEGER PRIMARY KEY, target_id INTEGER, "
                "webhook_id TEXT, event_id INTEGER, revision_id INTEGER, subscription_id INTEGER, "
                "uri TEXT, state TEXT, attempts INTEGER, next_attempt_at REAL, last_status INTEGER, "
                "last_error TEXT, created_at REAL, updated_at REAL, delivered_at REAL)"
            )
        )
        yield connection
    engine.dispose()


def add_target(
    conn: Connection, id_: int, mode: str = "all", enabled: int = 1, patterns: str | None = None
) -> None:
    conn.execute(
        text(
            "INSERT INTO webhook_targets (id, url, mode, enabled, uri_patterns, subscription_ids, "
            "created_at) VALUES (:id, 'http://127.0.0.1:9/h', :mode, :enabled, :patterns, NULL, 1)"
        ),
        {"id": id_, "mode": mode, "enabled": enabled, "patterns": patterns},
    )


def event(id_: int, uri: str = "test://a") -> Event:
    return Event(
        id=id_,
        type="resource.updated",
        subscription_id=10,
        server_url="http://127.0.0.1:9/mcp",
        uri=uri,
        revision_id=100 + id_,
        revision=id_,
        data={},
        created_at=1.0,
    )


def deliveries(conn: Connection) -> list[tuple[object, ...]]:
    return [
        tuple(r)
        for r in conn.execute(
            text("SELECT target_id, event_id, revision_id, uri, state FROM deliveries ORDER BY id")
        )
    ]


def test_target_from_row_decodes_json_and_flags(conn: Connection) -> None:
    add_target(conn, 1, patterns='["a://*"]')
    row = conn.execute(text("SELECT * FROM webhook_targets")).one()
    t = target_from_row(row)
    assert t.uri_patterns == ["a://*"] and t.subscription_ids == []
    assert t.enabled is True and t.allow_private_target is False


def test_one_pending_delivery_per_enabled_matching_target(conn: Connection) -> None:
    add_target(conn, 1)
    add_target(conn, 2, enabled=0)
    add_target(conn, 3, patterns='["other://*"]')
    add_target(conn, 4, patterns='["test://*"]')
    assert enqueue_sync(conn, event(1)) == 2
    assert deliveries(conn) == [
        (1, 1, 101, "test://a", "pending"),
        (4, 1, 101, "test://a", "pending"),
    ]
    webhook_ids = [r[0] for r in conn.execute(text("SELECT webhook_id FROM deliveries"))]
    assert len(set(webhook_ids)) == 2


def test_mode_latest_supersedes_the_open_deliveries_of_the_same_uri(conn: Connection) -> None:
    add_target(conn, 1, mode="latest")
    add_target(conn, 2, mode="all")
    enqueue_sync(conn, event(1))
    enqueue_sync(conn, event(2, uri="test://b"))
    enqueue_sync(conn, event(3))
    assert deliveries(conn) == [
        (1, 1, 101, "test://a", "superseded"),
        (2, 1, 101, "test://a", "pending"),
        (1, 2, 102, "test://b", "pending"),
        (2, 2, 102, "test://b", "pending"),
        (1, 3, 103, "test://a", "pending"),
        (2, 3, 103, "test://a", "pending"),
    ]
