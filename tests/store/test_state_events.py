"""A state change's events are inserted in one statement per thousand subscriptions
(``Dialect.insert_events``), on both backends: one event per subscription whose state
changed, ids in the order of the subscriptions, what is published is what is stored."""

from __future__ import annotations

import pytest

from service.store import Store
from service.store.dialect import EVENTS_PER_STATEMENT
from service.store.records import Event

pytestmark = pytest.mark.anyio
URL = "http://127.0.0.1:1/mcp"


async def test_a_state_change_of_many_subscriptions_writes_one_event_each_in_order(
    store: Store,
) -> None:
    count = EVENTS_PER_STATEMENT + 250  # two statements: the second begins past the bound
    added = await store.add_subscriptions(URL, [f"test://s/{n:05d}" for n in range(count)])
    ids = sorted(sub.id for sub, _ in added)
    seen: list[Event] = []
    store.on_event.append(seen.append)
    before = await store.last_event_id()

    changed = await store.set_subscription_state(ids, "error", "SERVER_ERROR: x", code="X")

    assert [e.subscription_id for e in changed] == ids
    assert [e.id for e in changed] == list(range(before + 1, before + count + 1))
    assert {e.type for e in changed} == {"subscription.state"}
    first = changed[0]
    assert first.uri == "test://s/00000" and first.server_url == URL
    assert first.data == {
        "state": "error",
        "reason": "SERVER_ERROR: x",
        "code": "X",
        "previous": "pending",
    }
    assert seen == changed, "published as inserted"
    stored = await store.events_after(before, limit=count + 10)
    assert [(e.id, e.subscription_id, e.uri, e.data) for e in stored] == [
        (e.id, e.subscription_id, e.uri, e.data) for e in changed
    ]


async def test_only_the_subscriptions_whose_state_changed_get_an_event(store: Store) -> None:
    added = await store.add_subscriptions(URL, [f"test://s/{n}" for n in range(5)])
    ids = sorted(sub.id for sub, _ in added)
    await store.set_subscription_state(ids[:2], "error", "why")
    before = await store.last_event_id()

    changed = await store.set_subscription_state(ids, "error", "why")

    assert [e.subscription_id for e in changed] == ids[2:]
    assert [e.id for e in changed] == [before + 1, before + 2, before + 3]
    assert await store.set_subscription_state(ids, "error", "why") == []
