"""The store's contract, run on both backends (SQLite file, throwaway PostgreSQL cluster)."""

from __future__ import annotations

import asyncio
import time

import pytest

from service.store import Event, Store
from service.store.database import DatabaseUrlError, parse, redact
from service.store.linkstate import StateChange
from service.store.migrate import MIGRATIONS_DIR, current
from service.store.store import KeptForCreator
from service.webhooks.repository import WebhookRepository
from tests.support.store import bump_generation

pytestmark = pytest.mark.anyio
URL = "http://127.0.0.1:1/mcp"


def contents(text: str, uri: str = "test://a") -> list[dict[str, str]]:
    return [{"uri": uri, "mimeType": "text/plain", "text": text}]


def head_revision() -> str:
    names = sorted(p.name for p in (MIGRATIONS_DIR / "versions").glob("[0-9]*.py"))
    return names[-1].split("_", 1)[0]


def test_urls_pick_the_backend_and_passwords_stay_hidden() -> None:
    assert parse("postgresql://u:pw@h/db").async_url.startswith("postgresql+asyncpg://")
    assert parse("postgres://u@h/db").is_postgresql
    assert parse("sqlite:////tmp/x.db").async_url == "sqlite+aiosqlite:////tmp/x.db"
    assert "pw" not in redact("postgresql://u:pw@h/db")
    for bad in ("mysql://u@h/db", "not a url", ""):
        with pytest.raises(DatabaseUrlError):
            parse(bad)


async def test_migrations_reach_head(database_url: str) -> None:
    assert current(database_url) == head_revision()


async def test_subscriptions_are_idempotent_and_logged(store: Store) -> None:
    sub, created = await store.add_subscription(URL, "test://a")
    again, created_again = await store.add_subscription(URL, "test://a")
    assert (created, created_again) == (True, False)
    assert again.id == sub.id and sub.server_url == URL and sub.state == "pending"
    other, _ = await store.add_subscription(URL, "test://b")
    assert other.server_id == sub.server_id
    assert [s.uri for s in await store.list_subscriptions()] == ["test://a", "test://b"]
    assert [s.id for s in await store.find_subscriptions("test://b", URL)] == [other.id]
    removed = await store.remove_subscription(sub.id)
    assert removed is not None and removed.id == sub.id
    assert await store.remove_subscription(sub.id) is None
    events = await store.events_after(0)
    assert [e.type for e in events] == [
        "subscription.created",
        "subscription.created",
        "subscription.deleted",
    ]
    assert [e.id for e in events] == sorted(e.id for e in events)
    assert await store.last_event_id() == events[-1].id
    assert await store.first_event_id() == events[0].id


async def test_a_batch_of_requests_is_one_idempotent_write(store: Store) -> None:
    """``add_subscriptions_batch`` (concurrent POSTs written together): each request gets
    its own answers in its own order; a (server, URI) named twice, in one request or in
    two, is one subscription, created once; other servers' URIs stay apart."""
    before, _ = await store.add_subscription(URL, "test://old")
    other = "http://127.0.0.1:1/other"
    results = await store.add_subscriptions_batch(
        [
            (URL, ["test://b", "test://old", "test://a"]),
            (other, ["test://a"]),
            (URL, ["test://a", "test://c", "test://c"]),
        ]
    )
    shape = [[(s.server_url, s.uri, created) for s, created in r] for r in results]
    assert shape == [
        [(URL, "test://b", True), (URL, "test://old", False), (URL, "test://a", True)],
        [(other, "test://a", True)],
        [(URL, "test://a", False), (URL, "test://c", True), (URL, "test://c", False)],
    ]
    first, second, third = results
    assert first[1][0].id == before.id and third[0][0].id == first[2][0].id
    assert third[1][0].id == third[2][0].id
    assert second[0][0].server_id != before.server_id
    assert all(s.state == "pending" for r in results for s, _ in r)
    created = [e for e in await store.events_after(0) if e.type == "subscription.created"]
    assert [(e.server_url, e.uri) for e in created] == [
        (URL, "test://old"),
        (URL, "test://b"),
        (URL, "test://a"),
        (other, "test://a"),
        (URL, "test://c"),
    ]
    assert (await store.counts())["subscriptions"] == 5


async def test_status_counts_follow_every_change(store: Store) -> None:
    """``GET /v1/status`` reads all its figures in one go (``status_counts``)."""
    empty = await store.status_counts()
    assert empty.rows == {"servers": 0, "subscriptions": 0, "revisions": 0, "events": 0}
    assert (empty.subscription_states, empty.last_event_id, empty.deliveries) == ({}, 0, {})
    assert (empty.targets, empty.targets_enabled) == (0, 0)
    repo = WebhookRepository(store)
    target, _ = await repo.create_target("http://127.0.0.1:9/hook", uri_patterns=["test://*"])
    await repo.create_target("http://127.0.0.1:9/off", uri_patterns=["test://none"])
    await repo.set_enabled(target.id + 1, False)
    (added,) = await store.add_subscriptions_batch([(URL, ["test://a", "test://b"])])
    (a, _), (b, _) = added
    gen = await bump_generation(store, a.server_id)
    await store.set_subscription_state([a.id], "active", generation=gen)
    await store.record_read(a.id, a.server_id, gen, contents("x"), "x")
    counts = await store.status_counts()
    events = len(await store.events_after(0))
    assert counts.rows == {"servers": 1, "subscriptions": 2, "revisions": 1, "events": events}
    assert counts.subscription_states == {"active": 1, "pending": 1}
    assert counts.last_event_id == await store.last_event_id()
    assert counts.deliveries == {"pending": 1}
    assert (counts.targets, counts.targets_enabled) == (2, 1)
    await store.remove_subscription(b.id)
    after = await store.status_counts()
    assert after.subscription_states == {"active": 1}
    assert after.rows["subscriptions"] == 1 and after.last_event_id > counts.last_event_id


async def test_state_changes_are_fenced_and_logged_once(store: Store) -> None:
    (added,) = await store.add_subscriptions_batch([(URL, ["test://a", "test://b"])])
    ids = [s.id for s, _ in added]
    gen = await bump_generation(store, added[0][0].server_id)
    changed = await store.set_subscription_state(ids, "active", generation=gen)
    assert [(e.subscription_id, e.data["previous"]) for e in changed] == [
        (ids[0], "pending"),
        (ids[1], "pending"),
    ]
    assert await store.set_subscription_state(ids, "active", generation=gen) == []
    assert await store.set_subscription_state(ids, "error", "x", generation=gen - 1) == []
    again = await store.set_subscription_state(ids[1:], "error", "gone", code="READ_FAILED")
    assert [(e.uri, e.data) for e in again] == [
        (
            "test://b",
            {"state": "error", "reason": "gone", "code": "READ_FAILED", "previous": "active"},
        )
    ]
    states = {
        s.id: (s.state, s.state_reason, s.state_code) for s in await store.list_subscriptions()
    }
    assert states == {ids[0]: ("active", None, None), ids[1]: ("error", "gone", "READ_FAILED")}


async def test_a_read_becomes_a_revision_only_if_new_and_fenced(store: Store) -> None:
    sub, _ = await store.add_subscription(URL, "test://a")
    gen = await bump_generation(store, sub.server_id)
    first = await store.record_read(sub.id, sub.server_id, gen, contents("one"), "one")
    assert first is not None and first.revision == 1 and first.contents == contents("one")
    assert await store.record_read(sub.id, sub.server_id, gen, contents("one"), "one") is None
    newer = await bump_generation(store, sub.server_id)
    assert newer == gen + 1
    stale = await store.record_read(sub.id, sub.server_id, gen, contents("two"), "two")
    assert stale is None, "a read from an old generation must not be stored"
    second = await store.record_read(sub.id, sub.server_id, newer, contents("two"), "two")
    assert second is not None and second.revision == 2 and second.generation == newer
    latest = await store.current_revision(sub.id)
    assert latest is not None and latest.id == second.id and latest.text == "two"
    assert await store.get_revision(first.id) == first
    updated = await store.events_after(0, types=["resource.updated"])
    assert [(e.revision, e.revision_id, e.uri) for e in updated] == [
        (1, first.id, "test://a"),
        (2, second.id, "test://a"),
    ]
    refreshed = await store.get_subscription(sub.id)
    assert refreshed is not None and refreshed.revision == 2
    assert refreshed.content_hash == second.content_hash


async def test_state_changes_are_logged_once(store: Store) -> None:
    sub, _ = await store.add_subscription(URL, "test://a")
    assert len(await store.set_subscription_state([sub.id], "active")) == 1
    assert await store.set_subscription_state([sub.id], "active") == []
    changed = await store.set_subscription_state([sub.id], "error", "boom")
    assert changed[0].data == {
        "state": "error",
        "reason": "boom",
        "code": None,
        "previous": "active",
    }
    coded = await store.set_subscription_state([sub.id], "error", "gone", code="RESOURCE_NOT_FOUND")
    assert coded[0].data["code"] == "RESOURCE_NOT_FOUND"
    got = await store.get_subscription(sub.id)
    assert got is not None and (got.state_code, got.state_reason) == ("RESOURCE_NOT_FOUND", "gone")
    await store.set_server_state(sub.server_id, "open", connected=True, reconnect=True)
    server = await store.get_server(sub.server_id)
    assert server is not None and server.state == "open" and server.reconnects == 1


async def test_prune_keeps_the_current_revision(store: Store) -> None:
    sub, _ = await store.add_subscription(URL, "test://a")
    gen = await bump_generation(store, sub.server_id)
    for n in range(5):
        await store.record_read(sub.id, sub.server_id, gen, contents(f"v{n}"), f"v{n}")
    removed = await store.prune(keep_revisions=2, max_age_s=3600, keep_events=3)
    assert removed["revisions"] == 3
    assert (await store.counts())["revisions"] == 2
    assert (await store.counts())["events"] == 3
    removed = await store.prune(keep_revisions=1, max_age_s=0, keep_events=100)
    latest = await store.current_revision(sub.id)
    assert latest is not None and latest.text == "v4", "the current revision always stays"


async def test_deliveries_commit_with_their_revision(store: Store) -> None:
    repo = WebhookRepository(store)
    target, _secret = await repo.create_target("http://127.0.0.1:9/hook", uri_patterns=["test://a"])
    sub, _ = await store.add_subscription(URL, "test://a")
    other, _ = await store.add_subscription(URL, "test://b")
    gen = await bump_generation(store, sub.server_id)
    revision = await store.record_read(sub.id, sub.server_id, gen, contents("x"), "x")
    await store.record_read(other.id, other.server_id, gen, contents("y", "test://b"), "y")
    assert revision is not None
    deliveries = await repo.list_deliveries()
    assert [(d.target_id, d.revision_id, d.uri) for d in deliveries] == [
        (target.id, revision.id, "test://a")
    ]
    due, _next = await repo.due_work(time.time() + 1, limit=10)
    assert [item.delivery.id for item in due] == [deliveries[0].id]
    assert await repo.signing_secrets(target.id) == [_secret]


async def test_ids_are_never_reused(store: Store) -> None:
    """An old event (or a script's saved id) never points at a new object.

    Without AUTOINCREMENT, SQLite hands the highest deleted id out again.
    """
    repo = WebhookRepository(store)
    first_target, _ = await repo.create_target("http://127.0.0.1:9/a", uri_patterns=["test://*"])
    sub, _ = await store.add_subscription(URL, "test://a")
    gen = await bump_generation(store, sub.server_id)
    await store.record_read(sub.id, sub.server_id, gen, contents("x"), "x")
    (first_delivery,) = await repo.list_deliveries()
    await store.remove_subscription(sub.id)
    await repo.delete_target(first_target.id)  # cascades to its deliveries
    assert await repo.list_deliveries() == []

    target, _ = await repo.create_target("http://127.0.0.1:9/b", uri_patterns=["test://*"])
    again, _ = await store.add_subscription(URL, "test://a")
    await store.record_read(again.id, again.server_id, gen, contents("y"), "y")
    (delivery,) = await repo.list_deliveries()
    assert target.id > first_target.id
    assert again.id > sub.id
    assert delivery.id > first_delivery.id


async def test_an_acknowledgement_makes_active_only_what_has_a_stored_read(store: Store) -> None:
    """``active`` is "a read is stored and the link is open"; the ack proves only
    the second. A subscription with no revision goes to the ``unread`` state instead."""
    a, _ = await store.add_subscription(URL, "test://read")
    b, _ = await store.add_subscription(URL, "test://unread")
    gen = await bump_generation(store, a.server_id)
    assert gen is not None
    assert await store.record_read(
        a.id, a.server_id, gen, [{"uri": "test://read", "text": "x"}], "x"
    )
    await store.set_subscription_state([a.id, b.id], "backoff", "CONNECTION_REFUSED: down")
    change = StateChange([a.id, b.id], "active", unread="pending")
    acked = await store.listen_acknowledged(a.server_id, gen, [change])
    assert acked is not None and acked.unread == frozenset({b.id})
    states = {s.uri: (s.state, s.state_reason) for s in await store.list_subscriptions()}
    assert states == {"test://read": ("active", None), "test://unread": ("pending", None)}


async def test_a_read_stored_with_activate_makes_the_subscription_active_with_it(
    store: Store,
) -> None:
    """``active`` and "a read is stored" commit together, fenced alike; the state's event
    comes before the revision's, so a cursor at the revision sees no state change after it."""
    a, _ = await store.add_subscription(URL, "test://first")
    gen = await bump_generation(store, a.server_id)
    assert gen is not None
    seen: list[Event] = []
    store.on_event.append(seen.append)
    contents = [{"uri": "test://first", "text": "x"}]
    stale = await store.record_read(a.id, a.server_id, gen - 1, contents, "x", activate=True)
    assert stale is None and seen == []
    assert (await store.list_subscriptions())[0].state == "pending"
    assert await store.record_read(a.id, a.server_id, gen, contents, "x", activate=True)
    assert [(e.type, e.data.get("state")) for e in seen] == [
        ("subscription.state", "active"),
        ("resource.updated", None),
    ]
    assert seen[0].id < seen[1].id
    (sub,) = await store.list_subscriptions()
    assert (sub.state, sub.revision) == ("active", 1)


async def test_first_reads_committed_together_activate_each_under_its_own_fence(
    store: Store,
) -> None:
    """Group commit: first reads of two links at the same generation number, and one read
    whose generation is stale, share one transaction. The activations are grouped by
    generation, and still each row is fenced on its own server: the stale one stays
    ``pending`` with no revision, and every state event precedes its revision's event."""
    first, _ = await store.add_subscription(URL, "test://one")
    second, _ = await store.add_subscription(URL, "test://two")
    other, _ = await store.add_subscription("http://127.0.0.1:2/mcp", "test://three")
    stale, _ = await store.add_subscription("http://127.0.0.1:3/mcp", "test://four")
    gen = await bump_generation(store, first.server_id)
    assert gen == await bump_generation(store, other.server_id)
    assert gen is not None and gen == await bump_generation(store, stale.server_id)
    await bump_generation(store, stale.server_id)  # its link re-listened: gen is stale now
    seen: list[Event] = []
    store.on_event.append(seen.append)
    reads = [
        store.record_read(sub.id, sub.server_id, gen, [{"uri": sub.uri, "text": "x"}], "x",
                          activate=True)
        for sub in (first, second, other, stale)
    ]  # fmt: skip
    outcomes = await asyncio.gather(*reads)
    assert [outcome is not None for outcome in outcomes] == [True, True, True, False]
    states = {s.uri: (s.state, s.revision) for s in await store.list_subscriptions()}
    assert states == {
        "test://one": ("active", 1),
        "test://two": ("active", 1),
        "test://three": ("active", 1),
        "test://four": ("pending", 0),
    }
    order = [(e.type, e.subscription_id) for e in sorted(seen, key=lambda e: e.id)]
    for sub in (first, second, other):
        assert order.index(("subscription.state", sub.id)) < order.index(
            ("resource.updated", sub.id)
        )
    assert ("subscription.state", stale.id) not in order


async def test_an_acknowledged_listen_is_one_fenced_transaction(store: Store) -> None:
    """``listen_acknowledged``: generation + 1, server open, states and their events together;
    with a stale ``expected`` generation nothing at all is written."""
    a, _ = await store.add_subscription(URL, "test://a")
    b, _ = await store.add_subscription(URL, "test://b")
    c, _ = await store.add_subscription(URL, "test://c")
    gen = await bump_generation(store, a.server_id)
    assert gen is not None
    await store.set_server_state(a.server_id, "backoff", error="down", error_code="X")
    seen: list[Event] = []
    store.on_event.append(seen.append)
    changes = [
        StateChange([a.id, b.id], "active"),
        StateChange([c.id], "not_honored", "not in the ack", "SUBSCRIPTION_NOT_HONORED"),
    ]
    assert await store.listen_acknowledged(a.server_id, gen - 1, changes) is None
    server = await store.get_server(a.server_id)
    assert server is not None and (server.generation, server.state) == (gen, "backoff")
    assert {s.state for s in await store.list_subscriptions(a.server_id)} == {"pending"}
    assert seen == []

    new = await store.listen_acknowledged(a.server_id, gen, changes)
    assert new is not None and new.generation == gen + 1 and new.unread == frozenset()
    server = await store.get_server(a.server_id)
    assert server is not None
    assert (server.generation, server.state, server.last_error) == (gen + 1, "open", None)
    assert server.connected_at is not None
    states = {s.uri: (s.state, s.state_code) for s in await store.list_subscriptions(a.server_id)}
    assert states == {
        "test://a": ("active", None),
        "test://b": ("active", None),
        "test://c": ("not_honored", "SUBSCRIPTION_NOT_HONORED"),
    }
    assert [(e.type, e.uri, e.data["previous"]) for e in seen] == [
        ("subscription.state", "test://a", "pending"),
        ("subscription.state", "test://b", "pending"),
        ("subscription.state", "test://c", "pending"),
    ]
    assert [e.id for e in seen] == sorted(e.id for e in seen)
    # unchanged states log nothing; the fence is on the generation just set
    seen.clear()
    again = await store.listen_acknowledged(a.server_id, gen + 1, changes)
    assert again is not None and again.generation == gen + 2
    assert seen == []
    assert await store.set_subscription_state([a.id], "error", "x", generation=gen + 1) == []
    assert len(await store.set_subscription_state([a.id], "error", "x", generation=gen + 2)) == 1


async def test_a_removal_for_one_creator_keeps_what_another_took_over(store: Store) -> None:
    """The creator is judged by the DELETE itself (an agent's unsubscribe racing a person's
    takeover: tests/hostile/test_face_takeover_race.py)."""
    made = (await store.add_subscriptions(URL, ["test://shared"], created_by="agent"))[0][0]
    await store.add_subscription(URL, "test://shared")  # the person takes it over
    with pytest.raises(KeptForCreator):
        await store.remove_subscription(made.id, created_by="agent")
    kept = await store.get_subscription(made.id)
    assert kept is not None and kept.created_by == "person"
    assert [e.type for e in await store.events_after(0)] == ["subscription.created"]
    other = (await store.add_subscriptions(URL, ["test://own"], created_by="agent"))[0][0]
    removed = await store.remove_subscription(other.id, created_by="agent")
    assert removed is not None and removed.id == other.id
