"""``Store.stored_discover`` answers the links that ask in one loop turn with one query, and
every link that asks later, including while that query is out: a standby link started during
a hand-over asked then, got no query of its own, and waited forever (the replica held one
link short of its share, so the hand-over never completed)."""

from __future__ import annotations

import asyncio

import pytest

from service.store import Store, schema

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:1/mcp?link={}"


async def test_a_link_asking_while_a_query_is_out_is_answered(store: Store) -> None:
    ids = []
    for n in range(3):
        sub, _ = await store.add_subscription(URL.format(n), f"test://kept/{n}")
        ids.append(sub.server_id)
    acked = await store.listen_acknowledged(ids[2], 0, [], '{"kept": 2}')
    assert acked is not None
    first = asyncio.ensure_future(store.stored_discover(ids[0]))
    # Let the first round take its waiting links and send its query, then ask while it is out.
    while store._discover_loader is None or store._discover_waiting:
        await asyncio.sleep(0)
    assert not store._discover_loader.done()
    later = [asyncio.ensure_future(store.stored_discover(i)) for i in ids[1:]]
    async with asyncio.timeout(5):
        answers = await asyncio.gather(first, *later)
    assert answers == [None, None, '{"kept": 2}']


async def test_links_asking_in_one_turn_share_a_query(store: Store) -> None:
    ids = [
        (await store.add_subscription(URL.format(n), "test://kept"))[0].server_id for n in range(5)
    ]
    rounds = 0
    answer = store._answer_discovers

    async def counted(waiting: dict[int, list[asyncio.Future[str | None]]]) -> None:
        nonlocal rounds
        rounds += 1
        await answer(waiting)

    store._answer_discovers = counted  # type: ignore[method-assign]
    async with asyncio.timeout(5):
        assert await asyncio.gather(*(store.stored_discover(i) for i in ids)) == [None] * 5
    assert rounds == 1


async def test_links_asking_in_later_rounds_are_answered_from_one_query(store: Store) -> None:
    """A start's links pass the connect gate a few at a time: each round was a query of its
    own (hundreds at 10,000 links). One snapshot answers them all for a while, with what this
    store wrote since; another replica's write since is missed (that link discovers)."""
    ids = [
        (await store.add_subscription(URL.format(n), "test://kept"))[0].server_id for n in range(3)
    ]
    assert await store.listen_acknowledged(ids[0], 0, [], '{"kept": 0}') is not None
    queries = 0
    in_reader = store.in_reader

    async def counted(fn):  # type: ignore[no-untyped-def]
        nonlocal queries
        queries += 1
        return await in_reader(fn)

    store.in_reader = counted  # type: ignore[method-assign]
    async with asyncio.timeout(5):
        assert await store.stored_discover(ids[0]) == '{"kept": 0}'
        assert await store.listen_acknowledged(ids[1], 0, [], '{"kept": 1}') is not None
        assert await store.stored_discover(ids[1]) == '{"kept": 1}'  # ours: read back
        assert await store.stored_discover(ids[2]) is None
        await store.write(  # another replica's, after the snapshot
            lambda conn: conn.execute(
                schema.servers.update()
                .where(schema.servers.c.id == ids[2])
                .values(discovered='{"kept": 2}')
            )
        )
        assert await store.stored_discover(ids[2]) is None
        assert queries == 1
        store._drop_discover_snapshot()  # its time is up
        assert await store.stored_discover(ids[2]) == '{"kept": 2}'
    assert queries == 2
