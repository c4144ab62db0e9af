"""Group commit of reads (``Store.record_read``), on both backends.

Reads recorded in the same loop tick go to the writer in one hand-off and commit in one
transaction. Every test first checks that its reads really shared one writer call, then that
the batch kept the rules a read had on its own: each row fenced on its own, event ids in the
order of the calls and published in that order, a bad row costing only itself, and a storage
failure failing every read of the batch the way it fails one.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, event

from service.store import Store, linkstate
from service.store.health import FAULT_FILE_ENV, is_storage_failure
from service.store.linkstate import StateChange
from service.store.records import Event, Revision
from service.webhooks.repository import WebhookRepository
from tests.api.fakes import migrated_store
from tests.support.store import bump_generation

pytestmark = pytest.mark.anyio
URL = "http://127.0.0.1:1/mcp"
OTHER = "http://127.0.0.1:2/mcp"


def contents(text: str, uri: str) -> list[dict[str, str]]:
    return [{"uri": uri, "mimeType": "text/plain", "text": text}]


def count_writer_calls(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The list grows by one per transaction that writes reads (not, e.g., the
    ``daemon.storage`` event a failure queues), whichever way the store runs it."""
    calls: list[int] = []
    original = linkstate.record_reads

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(linkstate, "record_reads", counted)
    return calls


def published(store: Store) -> list[Event]:
    seen: list[Event] = []
    store.on_event.append(seen.append)
    return seen


async def subscriptions(store: Store, url: str, count: int) -> list[tuple[int, int]]:
    """``count`` subscriptions on the server ``url``: [(subscription id, server id)]."""
    added = await store.add_subscriptions(url, [f"test://{url[-5]}/{n}" for n in range(count)])
    return [(sub.id, sub.server_id) for sub, _ in added]


async def test_a_fenced_row_in_a_batch_leaves_the_other_rows_alone(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = await subscriptions(store, URL, 3)
    b = await subscriptions(store, OTHER, 2)
    gen_a = await bump_generation(store, a[0][1])
    stale_b = await bump_generation(store, b[0][1])
    current_b = await bump_generation(store, b[0][1])  # link b re-listened: stale_b is fenced
    seen = published(store)
    calls = count_writer_calls(store, monkeypatch)
    plan = [(a[0], gen_a), (b[0], stale_b), (a[1], gen_a), (b[1], current_b), (a[2], gen_a)]
    results = await asyncio.gather(
        *(
            store.record_read(sid, server, gen, contents(f"n{i}", f"u{i}"), f"n{i}")
            for i, ((sid, server), gen) in enumerate(plan)
        )
    )
    assert len(calls) == 1, "the five reads were meant to share one transaction"
    assert results[1] is None, "a read from an old generation must not be stored"
    stored = [r for r in results if r is not None]
    assert [r.subscription_id for r in stored] == [a[0][0], a[1][0], b[1][0], a[2][0]]
    assert all(r.revision == 1 for r in stored)
    assert await store.current_revision(b[0][0]) is None
    assert [e.revision_id for e in seen] == [r.id for r in stored]
    # the fenced read is re-issued under the current generation and then stored
    again = await store.record_read(b[0][0], b[0][1], current_b, contents("n1", "u1"), "n1")
    assert again is not None and again.generation == current_b


async def test_event_ids_follow_the_calls_within_and_across_batches(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    subs = await subscriptions(store, URL, 40)
    gen = await bump_generation(store, subs[0][1])
    before = await store.last_event_id()
    seen = published(store)
    calls = count_writer_calls(store, monkeypatch)

    def read(i: int, tag: str) -> Any:
        sid, server = subs[i]
        return store.record_read(sid, server, gen, contents(f"{tag}{i}", "u"), f"{tag}{i}")

    first = [asyncio.ensure_future(read(i, "x")) for i in range(20)]
    await asyncio.sleep(0)  # the committer takes the first twenty ...
    second = [asyncio.ensure_future(read(i, "y")) for i in range(20, 40)]  # ... and then these
    results: list[Revision | None] = list(await asyncio.gather(*first, *second))
    assert len(calls) == 2, "twenty reads per tick, two ticks: two transactions"
    ids = [e.id for e in seen]
    assert ids == list(range(before + 1, before + 41)), "contiguous, in commit order"
    assert [e.subscription_id for e in seen] == [sid for sid, _ in subs]
    assert [e.revision_id for e in seen] == [r.id for r in results if r is not None]
    stored = await store.events_after(before, limit=100)
    assert [e.id for e in stored] == ids


async def test_a_failing_row_costs_only_itself(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = WebhookRepository(store)
    await repo.create_target("http://127.0.0.1:9/hook", uri_patterns=["test://*"])
    subs = await subscriptions(store, URL, 3)
    gen = await bump_generation(store, subs[0][1])
    bad = subs[1][0]

    def refuse(_conn: Connection, event: Event) -> None:
        if event.subscription_id == bad:
            raise RuntimeError("this row's sink failed")

    store.event_sinks.append(refuse)
    seen = published(store)
    calls = count_writer_calls(store, monkeypatch)
    results = await asyncio.gather(
        *(
            store.record_read(sid, server, gen, contents(f"v{sid}", "u"), f"v{sid}")
            for sid, server in subs
        ),
        return_exceptions=True,
    )
    assert len(calls) == 1 + 3, "the batch, then each read in a transaction of its own"
    assert isinstance(results[1], RuntimeError)
    ok = [r for r in (results[0], results[2]) if isinstance(r, Revision)]
    assert [r.subscription_id for r in ok] == [subs[0][0], subs[2][0]]
    assert await store.current_revision(bad) is None
    assert [e.subscription_id for e in seen] == [subs[0][0], subs[2][0]]
    deliveries = await repo.list_deliveries()
    assert sorted(d.revision_id for d in deliveries) == sorted(r.id for r in ok)


async def test_a_storage_failure_fails_every_read_of_the_batch(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = tmp_path / "disk-full"
    monkeypatch.setenv(FAULT_FILE_ENV, str(full))
    store = Store.open(database_url)
    try:
        subs = await subscriptions(store, URL, 4)
        gen = await bump_generation(store, subs[0][1])
        before = await store.last_event_id()
        seen = published(store)
        calls = count_writer_calls(store, monkeypatch)
        full.touch()
        results = await asyncio.gather(
            *(
                store.record_read(sid, server, gen, contents("v1", "u"), "v1")
                for sid, server in subs
            ),
            return_exceptions=True,
        )
        assert len(calls) == 1, "one batch, one failed transaction: nothing retried row by row"
        assert all(isinstance(r, Exception) and is_storage_failure(r) for r in results), results
        assert store.health.failing and store.health.failures_total >= 4, "one per read (at least)"
        assert seen == []
        full.unlink()
        assert await store.last_event_id() == before
        assert [await store.current_revision(sid) for sid, _ in subs] == [None] * 4
        # as after a full disk on its own: each reader tries again, and every read is stored
        again = await asyncio.gather(
            *(
                store.record_read(sid, server, gen, contents("v1", "u"), "v1")
                for sid, server in subs
            )
        )
        assert all(r is not None and r.revision == 1 for r in again)
        assert not store.health.failing
    finally:
        await store.close()


async def test_a_caller_that_leaves_before_its_turn_is_not_written(store: Store) -> None:
    subs = await subscriptions(store, URL, 3)
    gen = await bump_generation(store, subs[0][1])
    seen = published(store)
    # The writer is busy with the first read's batch: the next two reads wait in the queue
    # behind it. SQLite's writer thread is held inside a transaction queued before the
    # batch; PostgreSQL's transactions run on the loop, so its writer call is held instead.
    go_on, go_on_loop = threading.Event(), asyncio.Event()
    holding: asyncio.Future[Any] | None = None
    if store.sync_engine is not None:
        busy = threading.Event()

        def held_thread(_conn: Connection) -> None:
            busy.set()
            go_on.wait(10)

        holding = asyncio.ensure_future(store.in_writer(held_thread))
        assert await asyncio.to_thread(busy.wait, 10)
    else:
        reached = asyncio.Event()
        original = store.in_writer

        async def held(fn: Callable[[Connection], Any]) -> Any:
            reached.set()
            await go_on_loop.wait()
            return await original(fn)

        store.in_writer = held  # type: ignore[method-assign]
    first = asyncio.ensure_future(
        store.record_read(subs[2][0], subs[2][1], gen, contents("f", "u"), "f")
    )
    if store.sync_engine is None:
        await reached.wait()
        store.in_writer = original  # type: ignore[method-assign]
    else:
        await asyncio.sleep(0)  # the first read's batch is on its way to the writer thread
    kept = asyncio.ensure_future(
        store.record_read(subs[0][0], subs[0][1], gen, contents("k", "u"), "k")
    )
    left = asyncio.ensure_future(
        store.record_read(subs[1][0], subs[1][1], gen, contents("l", "u"), "l")
    )
    await asyncio.sleep(0)  # both are queued
    left.cancel()
    go_on.set()
    go_on_loop.set()
    if holding is not None:
        await holding
    assert (await first) is not None
    revision = await kept
    assert revision is not None and left.cancelled()
    assert await store.current_revision(subs[1][0]) is None
    assert [e.subscription_id for e in seen] == [subs[2][0], subs[0][0]]


async def test_the_writer_keeps_one_connection_and_a_failure_replaces_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite: the writer thread checks a connection out of the pool once and keeps it for
    every transaction (a checkout per transaction was a share of each read's cost); a
    transaction that fails hands it back, and the next write runs on a fresh one."""
    full = tmp_path / "disk-full"
    monkeypatch.setenv(FAULT_FILE_ENV, str(full))
    store = migrated_store(tmp_path / "mcpsub.db")
    assert store.sync_engine is not None
    checkouts: list[int] = []
    event.listen(store.sync_engine, "checkout", lambda *_: checkouts.append(1))
    try:
        subs = await subscriptions(store, URL, 2)
        gen = await bump_generation(store, subs[0][1])
        before = len(checkouts)
        for n in range(5):
            for sid, server in subs:
                await store.record_read(sid, server, gen, contents(f"v{n}", "u"), f"v{n}")
        assert len(checkouts) - before <= 1, "one connection for ten transactions"
        full.touch()
        with pytest.raises(Exception) as failed:
            await store.record_read(subs[0][0], subs[0][1], gen, contents("x", "u"), "x")
        assert is_storage_failure(failed.value)
        full.unlink()
        kept = len(checkouts)
        revision = await store.record_read(subs[0][0], subs[0][1], gen, contents("y", "u"), "y")
        assert revision is not None
        assert len(checkouts) == kept + 1, "the failed transaction's connection is not reused"
    finally:
        await store.close()


async def test_an_sqlite_read_is_committed_without_a_task(tmp_path: Path) -> None:
    """SQLite's batch runs from loop callbacks and the writer thread's hand-back: a
    committer task per batch was a task created and two loop turns per re-read."""
    store = migrated_store(tmp_path / "mcpsub.db")
    loop = asyncio.get_running_loop()
    created: list[object] = []
    factory = loop.get_task_factory()

    def counting(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> Any:
        created.append(getattr(coro, "__qualname__", coro))
        if factory is not None:
            return factory(loop, coro, **kwargs)
        return asyncio.Task(coro, loop=loop, **kwargs)

    try:
        subs = await subscriptions(store, URL, 3)
        gen = await bump_generation(store, subs[0][1])
        seen = published(store)
        loop.set_task_factory(counting)
        try:
            for n in range(4):
                sid, server = subs[n % 3]
                assert await store.record_read(sid, server, gen, contents(f"v{n}", "u"), "t")
        finally:
            loop.set_task_factory(factory)
        assert created == []
        assert len(seen) == 4
    finally:
        await store.close()


async def test_a_write_waiting_behind_a_batch_publishes_after_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Event ids reach subscribers in order across writers: a write that asked for the lock
    while a batch was being committed runs, and publishes, after the batch; a batch that
    finds the lock taken waits its turn."""
    subs = await subscriptions(store, URL, 2)
    gen = await bump_generation(store, subs[0][1])
    seen = published(store)

    async def note(tag: str) -> list[Event]:
        def transaction(conn: Connection) -> list[Event]:
            return [store.dialect.insert_event(conn, "daemon.storage", 0.0, data={"t": tag})]

        events = await store.write(transaction, events=True)
        store.publish(events)
        return events

    first = asyncio.ensure_future(
        store.record_read(subs[0][0], subs[0][1], gen, contents("a", "u"), "a")
    )
    await asyncio.sleep(0)  # the batch is on its way (it holds the write lock)
    written = asyncio.ensure_future(note("after the first batch"))
    await asyncio.sleep(0)  # the write waits for the lock ...
    second = asyncio.ensure_future(
        store.record_read(subs[1][0], subs[1][1], gen, contents("b", "u"), "b")
    )  # ... and a read queued after it commits after it
    await asyncio.gather(first, written, second)
    ids = [e.id for e in seen]
    assert ids == sorted(ids) and len(ids) == 3
    assert [e.type for e in seen] == ["resource.updated", "daemon.storage", "resource.updated"]


# ---- acknowledgements (``Store.listen_acknowledged``) ----------------------------------------
def count_transactions(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Grows by one per write transaction the store runs (``Store.in_writer``)."""
    calls: list[int] = []
    original = store.in_writer

    async def counted(fn: Callable[[Connection], Any]) -> Any:
        calls.append(1)
        return await original(fn)

    monkeypatch.setattr(store, "in_writer", counted)
    return calls


async def acked_links(store: Store, count: int) -> list[tuple[int, int, int]]:
    """``count`` links with one subscription each: [(server id, subscription id, generation)]."""
    links = []
    for n in range(count):
        sub, _ = await store.add_subscription(f"http://127.0.0.1:{n + 1}/mcp", f"test://ack/{n}")
        generation = await bump_generation(store, sub.server_id)
        assert generation is not None
        links.append((sub.server_id, sub.id, generation))
    return links


async def test_acknowledgements_in_one_turn_share_a_transaction_each_fenced_on_its_own(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start of 10,000 links wrote each acknowledgement in a transaction of its own."""
    links = await acked_links(store, 3)
    seen = published(store)
    calls = count_transactions(store, monkeypatch)
    stale = links[1]
    results = await asyncio.gather(
        *(
            store.listen_acknowledged(
                server, generation - (server == stale[0]), [StateChange([sub], "active")]
            )
            for server, sub, generation in links
        )
    )
    assert len(calls) == 1, "the three acknowledgements were meant to share one transaction"
    assert results[1] is None  # another replica moved that link on: nothing written for it
    assert [(r.generation if r else None) for r in results] == [
        links[0][2] + 1,
        None,
        links[2][2] + 1,
    ]
    assert [(e.subscription_id, e.data["state"]) for e in seen] == [
        (links[0][1], "active"),
        (links[2][1], "active"),
    ]
    assert [e.id for e in seen] == sorted(e.id for e in seen)
    stale_server = await store.get_server(stale[0])
    assert stale_server is not None and stale_server.generation == stale[2]
    assert (await store.get_subscription(stale[1])).state == "pending"  # type: ignore[union-attr]


async def test_a_failing_acknowledgement_in_a_batch_costs_only_itself(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    links = await acked_links(store, 3)
    bad = links[1][0]
    original = linkstate.acknowledged

    def refuse(conn: Connection, dialect: Any, server_id: int, *rest: Any) -> Any:
        if server_id == bad:
            raise RuntimeError("this link's acknowledgement failed")
        return original(conn, dialect, server_id, *rest)

    monkeypatch.setattr(linkstate, "acknowledged", refuse)
    calls = count_transactions(store, monkeypatch)
    results = await asyncio.gather(
        *(
            store.listen_acknowledged(server, generation, [StateChange([sub], "active")])
            for server, sub, generation in links
        ),
        return_exceptions=True,
    )
    assert len(calls) == 1 + 3, "the batch, then each acknowledgement in a transaction of its own"
    assert isinstance(results[1], RuntimeError)
    assert all(isinstance(results[i], linkstate.Acknowledgement) for i in (0, 2)), results
    states = [(await store.get_subscription(sub)).state for _, sub, _ in links]  # type: ignore[union-attr]
    assert states == ["active", "pending", "active"]
