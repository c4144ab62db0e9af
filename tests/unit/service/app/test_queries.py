"""service.app.queries: the console's and the API's read-only look-ups.

A SQLite file in a tmp dir, made from the store's schema and filled through the store's own
writes (catalog and groupcommit); the look-ups only need ``store.engine``, an async engine on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.ext.asyncio import create_async_engine

from service.app import queries
from service.app.queries import _like
from service.store import schema
from service.store.catalog import add_subscriptions
from service.store.dialect import SQLITE
from service.store.groupcommit import Read, record_reads

pytestmark = pytest.mark.anyio

A = "http://127.0.0.1:9/alpha"
B = "http://127.0.0.1:9/beta_x"


def fill(conn: Connection) -> None:
    add_subscriptions(
        conn, SQLITE, [(A, ["repo://1/pulls", "repo://2/issues"]), (B, ["50%_off"])], "", 1.0
    )
    conn.execute(text("UPDATE subscriptions SET state = 'active' WHERE uri = 'repo://1/pulls'"))
    reads = [
        Read(1, 1, 0, [], "[" + ",".join(["0"] * n) + "]", None, f"h{n}", 1000.0 + 60 * n)
        for n in range(1, 5)  # revisions 1..4 of subscription 1, one a minute
    ]
    record_reads(conn, SQLITE, reads)
    conn.execute(
        text(
            "INSERT INTO replicas (id, host, pid, started_at, heartbeat_at, stopping) "
            "VALUES ('r1', 'h', 42, 1.0, 2.0, 0)"
        )
    )
    conn.execute(text("UPDATE servers SET lease_owner = 'r1' WHERE url = :url"), {"url": A})


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Any]:
    # The writes go through the store's own statements, which run on the sqlite3 connection
    # itself (service.store.driver), as the store's writer thread does; the look-ups read
    # through the async engine, as the API does.
    writer = create_engine(f"sqlite:///{tmp_path / 'q.db'}")
    with writer.begin() as conn:
        schema.metadata.create_all(conn)
        fill(conn)
    writer.dispose()
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'q.db'}")
    yield SimpleNamespace(engine=engine)
    await engine.dispose()


def test_like_escapes_everything_but_the_star() -> None:
    assert _like("abc") == "%abc%"
    assert _like("a*c") == "a%c"
    assert _like("50%_off") == "%50\\%\\_off%"
    assert _like("a\\b*") == "a\\\\b%"


async def test_filtered_subscriptions(store: Any) -> None:
    async def uris(**kw: Any) -> list[str]:
        args = {"server": None, "uri": None, "state": None, "after": 0, "limit": 10} | kw
        return [s.uri for s in await queries.filtered_subscriptions(store, **args)]

    assert await uris() == ["repo://1/pulls", "repo://2/issues", "50%_off"]
    assert await uris(server="alpha") == ["repo://1/pulls", "repo://2/issues"]
    assert await uris(server="beta_") == ["50%_off"]
    assert await uris(server="beta%") == []  # % is literal, not a wildcard
    assert await uris(uri="repo://*/issues") == ["repo://2/issues"]
    assert await uris(uri="repo://*") == ["repo://1/pulls", "repo://2/issues"]
    assert await uris(uri="%") == ["50%_off"]
    assert await uris(state="active") == ["repo://1/pulls"]
    assert await uris(after=1, limit=1) == ["repo://2/issues"]


async def test_revision_pages_are_newest_first_without_contents(store: Any) -> None:
    page = await queries.revision_page(store, 1, before=None, limit=2)
    assert [(r["revision"], r["contentHash"], r["size"]) for r in page] == [
        (4, "h4", 9),
        (3, "h3", 7),
    ]
    older = await queries.revision_page(store, 1, before=3, limit=10)
    assert [r["revision"] for r in older] == [2, 1]
    assert await queries.revision_page(store, 2, before=None, limit=10) == []


async def test_a_revision_by_number_and_the_event_that_announced_it(store: Any) -> None:
    rev = await queries.revision_by_number(store, 1, 2)
    assert rev is not None and rev.content_hash == "h2" and rev.contents == [0, 0]
    assert await queries.revision_by_number(store, 1, 9) is None
    event_id = await queries.event_id_for_revision(store, 1, rev.id)
    events = await queries.events_before(
        store, 10**12, limit=100, types=None, uri=None, subscription_id=None
    )
    announced = [e for e in events if e.id == event_id]
    assert announced[0].type == "resource.updated" and announced[0].revision == 2
    assert await queries.event_id_for_revision(store, 1, 999) is None


async def test_events_before_is_the_newest_tail_oldest_first(store: Any) -> None:
    everything = await queries.events_before(
        store, 10**12, limit=100, types=None, uri=None, subscription_id=None
    )
    assert [e.id for e in everything] == sorted(e.id for e in everything)
    assert len(everything) == 3 + 4  # three created, four revisions
    tail = await queries.events_before(
        store, 10**12, limit=2, types=None, uri=None, subscription_id=None
    )
    assert tail == everything[-2:]
    below = await queries.events_before(
        store, everything[2].id, limit=100, types=None, uri=None, subscription_id=None
    )
    assert below == everything[:2]
    created = await queries.events_before(
        store, 10**12, limit=100, types=["subscription.created"], uri=None, subscription_id=None
    )
    assert [e.uri for e in created] == ["repo://1/pulls", "repo://2/issues", "50%_off"]
    only = await queries.events_before(
        store, 10**12, limit=100, types=None, uri="50%_off", subscription_id=None
    )
    assert len(only) == 1
    by_sub = await queries.events_before(
        store, 10**12, limit=100, types=None, uri=None, subscription_id=1
    )
    assert len(by_sub) == 5


async def test_revisions_per_minute_buckets_oldest_first(store: Any) -> None:
    # reads at 1060, 1120, 1180, 1240: with now = 1250, the last 3 minutes hold 1120..1240
    assert await queries.revisions_per_minute(store, 1250.0, 3) == [1, 1, 1]
    assert await queries.revisions_per_minute(store, 1250.0, 5) == [0, 1, 1, 1, 1]
    assert await queries.revisions_per_minute(store, 5000.0, 2) == [0, 0]


async def test_lease_view_counts_the_links_each_replica_holds(store: Any) -> None:
    assert await queries.lease_view(store) == [
        {
            "id": "r1",
            "host": "h",
            "pid": 42,
            "startedAt": 1.0,
            "heartbeatAt": 2.0,
            "stopping": False,
            "links": 1,
        }
    ]
