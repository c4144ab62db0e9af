"""service.app.changes.Changes: the change an event describes, the wait for the next change
after a cursor, the follow of the event log, and the history a subscription keeps.

A real migrated SQLite store in a tmp dir and the event hub its commits publish to (the API
tests' fake supervisor, tests/api/fakes.py); no sockets. A ``Changes`` over a hub that was
told of nothing (its ring empty) answers from the table, one over the store's own hub from
memory once the events were published: both must say the same.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import delete

from service.app import changes as changes_module
from service.app.changes import KEEPALIVE, Changes, Reset, Waited
from service.app.views import change_json, event_from_json, event_json
from service.store import schema
from service.store.eventhub import EventHub
from service.store.records import Event, Subscription
from tests.api.fakes import FakeSupervisor

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:9/mcp"


async def two_subscriptions(sup: FakeSupervisor) -> tuple[Subscription, Subscription]:
    (a, _), (b, _) = await sup.subscribe_many(URL, ["r://a", "r://b"])
    return a, b


async def updates(changes: Changes, after: int = 0) -> list[Event]:
    return await changes.events_after(after, limit=100, types=["resource.updated"])


def from_the_table(sup: FakeSupervisor) -> Changes:
    """A ``Changes`` whose hub holds no event in memory: every read is a query."""
    return Changes(sup.store, EventHub(sup.events.last_id))


async def told(changes: Changes, sup: FakeSupervisor) -> None:
    """Tell a hub the store does not publish to of the newest commit, as NOTIFY tells
    another replica's."""
    if changes.hub is not sup.events:
        changes.hub.seen(await sup.store.last_event_id())


async def test_a_change_is_its_revision_and_the_one_before(fake_supervisor: FakeSupervisor) -> None:
    sup = fake_supervisor
    changes = Changes(sup.store, sup.events)
    a, _ = await two_subscriptions(sup)
    await sup.publish(a, "v1")
    await sup.publish(a, "v2")
    first, second = await updates(changes)
    one = await changes.change_for(first)
    assert one is not None and one.revision is not None and one.previous is None
    assert (one.revision.text, one.event_id) == ("v1", first.id)
    two = await changes.change_for(second, a)  # the caller's subscription: no look-up
    assert two is not None and two.revision is not None and two.previous is not None
    assert (two.revision.text, two.previous.text) == ("v2", "v1")
    shown = change_json(two)
    assert shown["previous"] == {"revision": 1, "text": "v1"}
    assert shown["revision"]["eventId"] == second.id and shown["revision"]["text"] == "v2"
    # The face hands events around as JSON: the same change from the event's JSON.
    again = await changes.change_for(event_from_json(event_json(second)))
    assert change_json(again) == shown


async def test_a_pruned_revision_stands_in_as_the_current_one(
    fake_supervisor: FakeSupervisor,
) -> None:
    sup = fake_supervisor
    changes = Changes(sup.store, sup.events)
    a, _ = await two_subscriptions(sup)
    await sup.publish(a, "v1")
    await sup.publish(a, "v2")
    first, _second = await updates(changes)
    async with sup.store.engine.begin() as conn:
        await conn.execute(delete(schema.revisions).where(schema.revisions.c.revision == 1))
    change = await changes.change_for(first)
    assert change is not None and change.revision is not None
    # The newer revision, with no event of its own to name and nothing kept before it.
    assert (change.revision.text, change.event_id, change.previous) == ("v2", None, None)
    assert change_json(change)["revision"]["eventId"] is None


async def test_no_change_for_a_removed_subscription(fake_supervisor: FakeSupervisor) -> None:
    sup = fake_supervisor
    changes = Changes(sup.store, sup.events)
    a, _ = await two_subscriptions(sup)
    await sup.publish(a, "v1")
    (event,) = await updates(changes)
    await sup.unsubscribe(a.id)
    assert await changes.change_for(event) is None
    assert change_json(None) == {"revision": None, "previous": None}
    assert await changes.subscription(a.id) is None


async def test_events_after_from_memory_and_from_the_table_agree(
    fake_supervisor: FakeSupervisor,
) -> None:
    sup = fake_supervisor
    a, b = await two_subscriptions(sup)
    for n in range(3):
        await sup.publish(a, f"a{n}")
        await sup.publish(b, f"b{n}")
    memory, table = Changes(sup.store, sup.events), from_the_table(sup)
    for kwargs in (
        {"limit": 100},
        {"limit": 3},  # a page: the first three, not the last three
        {"limit": 100, "types": ["resource.updated"], "uri": "r://b"},
        {"limit": 2, "subscription_ids": [a.id]},
    ):
        hits = sup.events.ring_hits
        got = await memory.events_after(1, **kwargs)  # type: ignore[arg-type]
        assert sup.events.ring_hits == hits + 1, "answered from memory"
        assert got == await table.events_after(1, **kwargs)  # type: ignore[arg-type]
    assert [e.id for e in await memory.events_after(1, limit=3)] == [2, 3, 4]


async def test_wait_returns_the_next_matching_change(fake_supervisor: FakeSupervisor) -> None:
    """A waiter started before the change gets it; events of another URI move its cursor
    but do not end it."""
    sup = fake_supervisor
    a, b = await two_subscriptions(sup)
    for changes in (Changes(sup.store, sup.events), from_the_table(sup)):
        cursor = await changes.last_event_id()
        waiter = asyncio.create_task(
            changes.wait(
                after=cursor,
                deadline=time.monotonic() + 60,
                types=["resource.updated"],
                uri="r://a",
            )
        )
        await sup.publish(b, f"other {cursor}")
        await sup.publish(a, f"mine {cursor}")
        await told(changes, sup)
        waited = await waiter
        assert waited.event is not None and waited.event.uri == "r://a"
        assert waited.cursor == waited.event.id == cursor + 2


async def test_wait_ends_at_its_deadline_with_the_cursor_it_reached(
    fake_supervisor: FakeSupervisor,
) -> None:
    sup = fake_supervisor
    a, b = await two_subscriptions(sup)
    await sup.publish(b, "other")
    newest = await sup.store.last_event_id()
    for changes in (Changes(sup.store, sup.events), from_the_table(sup)):
        # A deadline already past: one look, no wait.
        assert await changes.wait(after=0, deadline=0.0, uri="r://a", types=[
            "resource.updated"
        ]) == Waited(None, newest)  # fmt: skip
        waited = await changes.wait(
            after=0, deadline=time.monotonic() + 0.05, subscription_ids=[a.id],
            types=["resource.updated"],
        )  # fmt: skip
        assert waited == Waited(None, newest)


async def test_follow_replays_in_pages_then_follows_and_keeps_alive(
    fake_supervisor: FakeSupervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(changes_module, "FOLLOW_PAGE", 2)
    sup = fake_supervisor
    a, _ = await two_subscriptions(sup)
    for n in range(3):
        await sup.publish(a, f"v{n}")
    changes = from_the_table(sup)
    follower = changes.follow(after=0, idle_s=0.05)
    replayed = [await anext(follower) for _ in range(5)]
    assert [e.id for e in replayed if isinstance(e, Event)] == [1, 2, 3, 4, 5]
    assert await anext(follower) is KEEPALIVE  # nothing new for idle_s
    nxt = asyncio.ensure_future(anext(follower))
    await sup.publish(a, "v3")
    await told(changes, sup)
    event = await nxt
    assert isinstance(event, Event) and event.id == 6
    await follower.aclose()


async def test_follow_resets_a_cursor_the_log_no_longer_holds(
    fake_supervisor: FakeSupervisor,
) -> None:
    sup = fake_supervisor
    a, _ = await two_subscriptions(sup)
    for n in range(3):
        await sup.publish(a, f"v{n}")
    async with sup.store.engine.begin() as conn:
        await conn.execute(delete(schema.events).where(schema.events.c.id <= 3))
    changes = Changes(sup.store, sup.events)
    pruned = changes.follow(after=1, idle_s=60)
    assert await anext(pruned) == Reset(1, 4, 5)
    assert [(await anext(pruned)).id for _ in range(2)] == [4, 5]  # type: ignore[union-attr]
    await pruned.aclose()
    ahead = changes.follow(after=99, idle_s=0.05)  # another database's cursor
    assert await anext(ahead) == Reset(99, 4, 5)
    assert await anext(ahead) is KEEPALIVE  # from the newest on: nothing replayed
    await ahead.aclose()


async def test_history_reads(fake_supervisor: FakeSupervisor) -> None:
    sup = fake_supervisor
    changes = Changes(sup.store, sup.events)
    a, b = await two_subscriptions(sup)
    assert await changes.current(a) is None
    await sup.publish(a, "v1")
    await sup.publish(a, "v2")
    rev, event_id = await changes.current(a) or (None, None)
    assert rev is not None and rev.text == "v2" and event_id == (await updates(changes))[-1].id
    kept = await changes.revision(a, 1)
    assert kept is not None and kept.text == "v1" and await changes.revision(b, 1) is None
    page = await changes.revision_page(a, before=None, limit=1)
    assert [r["revision"] for r in page] == [2]
    assert [s.id for s in await changes.watchers("r://a")] == [a.id]
    assert await changes.watchers("r://a", "http://127.0.0.1:9/other") == []
    tail, follow_from = await changes.events_before(10**6, limit=2)
    assert [e.id for e in tail] == [3, 4] and follow_from == 4


async def test_next_events_waits_for_the_first_within_its_timeout(
    fake_supervisor: FakeSupervisor,
) -> None:
    """What the face's follower and ``wait_for_change`` take a page at a time: the events
    there are at once, else the first ones committed within the timeout, else none."""
    sup = fake_supervisor
    a, _ = await two_subscriptions(sup)
    changes = Changes(sup.store, sup.events)
    assert [e.id for e in await changes.next_events(0, limit=1, timeout=60)] == [1]
    newest = await changes.last_event_id()
    assert await changes.next_events(newest, limit=10, timeout=0.05) == []
    waiter = asyncio.create_task(changes.next_events(newest, limit=10, timeout=60))
    await sup.publish(a, "v1")
    assert [e.type for e in await waiter] == ["resource.updated"]
