"""service.daemon.subscribe_batch.SubscribeBatcher: queued subscribe requests written together.

A fake store records each batch write; no database, no links."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from service.daemon import subscribe_batch
from service.daemon.subscribe_batch import SubscribeBatcher

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class Sub:
    id: int
    server_id: int
    uri: str


@dataclass
class FakeStore:
    """``add_subscriptions_batch``: server id = len(url), subscription ids counted up."""

    calls: list[list[tuple[str, list[str], str]]] = field(default_factory=list)
    refuse_uri: str | None = None
    database_down: bool = False
    gate: asyncio.Event | None = None

    async def add_subscriptions_batch(self, requests: list[Any]) -> list[list[tuple[Sub, bool]]]:
        self.calls.append([(url, list(uris), by) for url, uris, by in requests])
        if self.gate is not None:
            await self.gate.wait()
        if self.database_down:
            raise OperationalError("INSERT", {}, Exception("database is locked"))
        if self.refuse_uri and any(self.refuse_uri in uris for _, uris, _ in requests):
            raise ValueError(f"refused {self.refuse_uri}")
        return [
            [(Sub(100 + i, len(url), uri), True) for i, uri in enumerate(uris)]
            for url, uris, _ in requests
        ]


@dataclass
class FakeLink:
    wanted: list[tuple[str, int]] = field(default_factory=list)

    def want(self, uri: str, sub_id: int) -> None:
        self.wanted.append((uri, sub_id))


def batcher(
    store: FakeStore, held: dict[int, FakeLink] | None = None
) -> tuple[SubscribeBatcher, list[Any]]:
    claims: list[Any] = []

    async def claim(count: int, only: list[int]) -> None:
        claims.append((count, only))

    links = held or {}
    return SubscribeBatcher(store, asyncio.Lock(), links.get, claim), claims  # type: ignore[arg-type]


async def test_requests_queued_during_a_write_go_in_one_batch() -> None:
    store = FakeStore(gate=asyncio.Event())
    b, _ = batcher(store)
    first = asyncio.ensure_future(b.subscribe_many("http://a", ["r://1"]))
    await asyncio.sleep(0)  # the writer task starts and waits inside the first write
    await asyncio.sleep(0)
    later = [
        asyncio.ensure_future(b.subscribe_many("http://bb", [f"r://{i}"], "agent"))
        for i in range(3)
    ]
    await asyncio.sleep(0)
    store.gate.set()  # type: ignore[union-attr]
    results = await asyncio.gather(first, *later)
    assert [len(call) for call in store.calls] == [1, 3]
    assert store.calls[1][0] == ("http://bb", ["r://0"], "agent")
    assert results[0] == [(Sub(100, 8, "r://1"), True)]
    assert results[2] == [(Sub(100, 9, "r://1"), True)]


async def test_held_links_get_the_uris_and_unheld_servers_are_claimed_once() -> None:
    link = FakeLink()
    b, claims = batcher(FakeStore(), held={8: link})
    await asyncio.gather(
        b.subscribe_many("http://a", ["r://1", "r://2"]),
        b.subscribe_many("http://bb", ["r://3"]),
        b.subscribe_many("http://bb", ["r://4"]),
    )
    assert link.wanted == [("r://1", 100), ("r://2", 101)]
    assert claims == [(1, [9])]


async def test_a_batch_is_bounded_by_uris(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subscribe_batch, "ADD_BATCH_URIS", 3)
    store = FakeStore()
    b, _ = batcher(store)
    await asyncio.gather(
        b.subscribe_many("http://a", ["1", "2"]),
        b.subscribe_many("http://a", ["3", "4"]),
        b.subscribe_many("http://a", ["5", "6", "7", "8"]),  # larger than a batch: goes whole
        b.subscribe_many("http://a", ["9"]),
    )
    assert [[uris for _, uris, _ in call] for call in store.calls] == [
        [["1", "2"]],
        [["3", "4"]],
        [["5", "6", "7", "8"]],
        [["9"]],
    ]


async def test_one_refused_request_fails_alone() -> None:
    store = FakeStore(refuse_uri="bad")
    b, _ = batcher(store)
    results = await asyncio.gather(
        b.subscribe_many("http://a", ["ok1"]),
        b.subscribe_many("http://a", ["bad"]),
        b.subscribe_many("http://a", ["ok2"]),
        return_exceptions=True,
    )
    assert results[0] == [(Sub(100, 8, "ok1"), True)]
    assert isinstance(results[1], ValueError)
    assert results[2] == [(Sub(100, 8, "ok2"), True)]
    assert len(store.calls) == 4  # the batch, then each request on its own


async def test_a_database_that_refuses_fails_every_request_without_retries() -> None:
    store = FakeStore(database_down=True)
    b, claims = batcher(store)
    results = await asyncio.gather(
        b.subscribe_many("http://a", ["1"]),
        b.subscribe_many("http://a", ["2"]),
        return_exceptions=True,
    )
    assert all(isinstance(r, OperationalError) for r in results)
    assert len(store.calls) == 1 and claims == []
