"""The event cursor on PostgreSQL: ids are commit-ordered, and every replica is woken.

Sequence values are handed out at INSERT, not at COMMIT: without care, replica A takes id 9,
replica B takes id 10 and commits first, a follower reads up to 10 and moves its cursor
there, then A commits 9, which that follower never sees. The store prevents it by taking a
transaction-scoped advisory lock before an event's id is drawn (service/store/groupcommit.py,
``order_events``): the next event transaction waits until the previous one has committed,
so once any id is visible every lower id is visible too (or was rolled back).
"""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import text

from service.api.sse import event_stream
from service.app.changes import Changes
from service.store import Store
from service.store.eventhub import EventHub
from service.store.notify import PgListener
from tests.support.poll import until_async
from tests.support.postgres import PgCluster
from tests.support.store import bump_generation

pytestmark = pytest.mark.anyio


async def waiting_for_the_order_lock(store: Store) -> int:
    async with store.engine.connect() as conn:
        value = await conn.scalar(
            text("SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
        )
    return int(value or 0)


async def test_a_later_commit_cannot_overtake_a_lower_id(pg_pair: tuple[Store, Store]) -> None:
    a, b = pg_pair
    hub = EventHub(await b.last_event_id())
    follower = event_stream(Changes(b, hub), after=0, keepalive_s=0.05)
    seen: list[int] = []

    async def follow(count: int) -> None:
        async for chunk in follower:
            for line in chunk.decode().splitlines():
                if line.startswith("id: "):
                    seen.append(int(line[4:]))
            if len(seen) >= count:
                return

    async with a.engine.connect() as conn:
        slow = await conn.begin()  # replica A: an event inserted, its commit delayed
        first = await conn.run_sync(
            lambda c: (
                a.dialect.order_events(c),
                a.dialect.insert_event(c, "test.slow", time.time()),
            )[1]
        )
        # Replica B writes an event meanwhile: it must wait for A's commit before it even
        # draws its id, so no follower can see B's event without A's.
        fast = asyncio.create_task(b.add_subscription("http://127.0.0.1:1/mcp", "test://b"))
        await until_async("B waits for the order lock", lambda: waiting_for_the_order_lock(b), 10)
        assert not fast.done()
        assert await b.last_event_id() == 0, "nothing is visible yet"
        await slow.commit()
    await fast
    await asyncio.wait_for(follow(2), 10)
    later = await b.events_after(first.id)
    assert [e.type for e in later] == ["subscription.created"]
    assert later[0].id > first.id, "ids follow commit order"
    assert seen == [first.id, later[0].id], "the follower saw each event once, in order"
    await follower.aclose()


async def test_notify_wakes_a_replica_that_did_not_write(
    pg_cluster: PgCluster, pg_pair: tuple[Store, Store]
) -> None:
    a, b = pg_pair
    hub = EventHub(await b.last_event_id())
    listener = PgListener(
        str(b.engine.url.render_as_string(False)),
        hub.seen,
        newest_id=b.last_event_id,
    )
    listener.start()
    try:
        await asyncio.wait_for(listener.connected.wait(), 10)
        before = hub.last_id
        sub, _ = await a.add_subscription("http://127.0.0.1:1/mcp", "test://n")
        assert await hub.wait_beyond(before, timeout=10), "no wake-up from another replica"
        [event] = await b.events_after(before)
        assert hub.last_id == event.id and event.subscription_id == sub.id
    finally:
        await listener.stop()


async def test_the_one_statement_revision_write_waits_for_the_order_lock(
    pg_pair: tuple[Store, Store],
) -> None:
    """On PostgreSQL a revision is written by one statement (``RECORD_READ_PG``); its
    event-order lock is part of it, so the rule holds for revisions too, and the NOTIFY fires."""
    a, b = pg_pair
    sub, _ = await b.add_subscription("http://127.0.0.1:1/mcp", "test://rev")
    generation = await bump_generation(b, sub.server_id)
    hub = EventHub(await b.last_event_id())
    listener = PgListener(
        str(b.engine.url.render_as_string(False)), hub.seen, newest_id=b.last_event_id
    )
    listener.start()
    try:
        await asyncio.wait_for(listener.connected.wait(), 10)
        async with a.engine.connect() as conn:
            slow = await conn.begin()
            first = await conn.run_sync(
                lambda c: (
                    a.dialect.order_events(c),
                    a.dialect.insert_event(c, "test.slow", time.time()),
                )[1]
            )
            contents = [{"uri": sub.uri, "text": "v1"}]
            write = asyncio.create_task(
                b.record_read(sub.id, sub.server_id, generation, contents, "v1")
            )

            async def blocked_or_done() -> bool:
                return write.done() or await waiting_for_the_order_lock(b)

            await until_async("the write waits for the order lock", blocked_or_done, 10)
            assert not write.done(), "the revision write did not wait for the order lock"
            await slow.commit()
        revision = await write
        assert revision is not None and revision.revision == 1
        [updated] = await b.events_after(first.id)
        assert updated.type == "resource.updated" and updated.id > first.id
        assert updated.revision_id == revision.id and updated.uri == sub.uri
        assert await hub.wait_beyond(first.id, timeout=10), "no NOTIFY for the revision"
        # unchanged content and a stale generation write nothing, in the same statement
        assert await b.record_read(sub.id, sub.server_id, generation, contents, "v1") is None
        stale = [{"uri": sub.uri, "text": "v2"}]
        assert await b.record_read(sub.id, sub.server_id, generation - 1, stale, "v2") is None
        assert await b.events_after(updated.id) == []
    finally:
        await listener.stop()
