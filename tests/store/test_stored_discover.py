"""``Store.stored_discover`` answers the links that ask in one loop turn with one query, and
every link that asks later, including while that query is out: a standby link started during
a hand-over asked then, got no query of its own, and waited forever (the replica held one
link short of its share, so the hand-over never completed)."""

from __future__ import annotations

import asyncio

import pytest

from service.store import Store

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
