"""The standby links' owner (service/daemon/takeover.Handover), without a database or a peer:
what becomes of a standby link when its listen is acknowledged, when the request is gone, and
when it was abandoned meanwhile. The whole make-before-break hand-over between two real
replicas on PostgreSQL is tests/daemon/test_replicas.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from service.daemon.takeover import Handover
from service.store.leases import Claimed, Requested

pytestmark = pytest.mark.anyio


@dataclass
class FakeSub:
    id: int
    uri: str


@dataclass
class FakeLink:
    """What the hand-over touches of a ServerLink."""

    server_id: int
    url: str
    wanted: dict[str, int] = field(default_factory=dict)
    started: bool = False
    stopped: bool = False
    takeover: Any = None
    on_lease_lost: Any = None

    def want(self, uri: str, subscription_id: int) -> None:
        self.wanted[uri] = subscription_id

    def unwant(self, uri: str) -> None:
        self.wanted.pop(uri, None)

    def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped = True


class FakeStore:
    def __init__(self, subs: dict[int, list[FakeSub]]) -> None:
        self.subs = subs

    async def wanted_uris(self, server_ids: list[int]) -> dict[int, dict[str, int]]:
        return {i: {sub.uri: sub.id for sub in self.subs.get(i, [])} for i in server_ids}


def _handover(
    subs: dict[int, list[FakeSub]], lease: Claimed | None
) -> tuple[Handover, dict[int, Any], list[int], FakeStore]:
    held: dict[int, Any] = {}
    lost: list[int] = []
    store = FakeStore(subs)

    async def take_lease(server_id: int) -> Claimed | None:
        return lease

    def new_link(server_id: int, url: str, wanted: dict[str, int]) -> FakeLink:
        link = FakeLink(server_id, url)
        for uri, subscription_id in wanted.items():
            link.want(uri, subscription_id)
        return link

    handover = Handover(store, take_lease, new_link, held, lost.append)  # type: ignore[arg-type]
    return handover, held, lost, store


async def test_an_acknowledged_standby_link_becomes_held_with_the_current_uris() -> None:
    handover, held, lost, store = _handover(
        {7: [FakeSub(1, "test://a"), FakeSub(2, "test://b")]},
        Claimed(7, "http://127.0.0.1:1/mcp", generation=12, epoch=3, previous_owner="b"),
    )
    await handover.prepare(Requested(7, "http://127.0.0.1:1/mcp", owner="b"))
    link = handover.links[7]
    assert link.started and link.takeover is not None and 7 not in held
    # Another replica removed test://b and added test://c while we stood by.
    store.subs[7] = [FakeSub(1, "test://a"), FakeSub(3, "test://c")]
    assert await link.takeover() == 12
    assert held == {7: link} and handover.links == {}
    assert link.wanted == {"test://a": 1, "test://c": 3}
    link.on_lease_lost(7)
    assert lost == [7], "a held link's lost lease goes to the supervisor"


async def test_a_request_that_is_gone_leaves_the_link_standing_by() -> None:
    handover, held, _, _ = _handover({7: [FakeSub(1, "test://a")]}, None)
    await handover.prepare(Requested(7, "http://127.0.0.1:1/mcp", owner="b"))
    link = handover.links[7]
    assert await link.takeover() is None
    assert held == {}


async def test_an_abandoned_standby_link_is_stopped_and_never_taken() -> None:
    handover, held, _, _ = _handover(
        {7: [FakeSub(1, "test://a")]},
        Claimed(7, "http://127.0.0.1:1/mcp", generation=12, epoch=3, previous_owner="b"),
    )
    await handover.prepare(Requested(7, "http://127.0.0.1:1/mcp", owner="b"))
    link = handover.links[7]
    await handover.abandon(7)
    assert link.stopped and handover.links == {}
    assert await link.takeover() is None
    assert held == {}


async def test_a_link_already_held_or_standing_by_is_not_prepared_twice() -> None:
    handover, held, _, _ = _handover({7: [], 8: []}, None)
    held[7] = FakeLink(7, "http://127.0.0.1:1/mcp")
    await handover.prepare(Requested(7, "http://127.0.0.1:1/mcp", owner="b"))
    assert handover.links == {}
    await handover.prepare(Requested(8, "http://127.0.0.1:2/mcp", owner="b"))
    first = handover.links[8]
    await handover.prepare(Requested(8, "http://127.0.0.1:2/mcp", owner="b"))
    assert handover.links[8] is first
