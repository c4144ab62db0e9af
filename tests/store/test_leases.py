"""Link leases and the epoch fence, on the real databases (service/store/leases.py)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from sqlalchemy import event, text

from service.store import Store
from service.store.lease_repository import LeaseRepository
from tests.support.store import bump_generation, held_leases

pytestmark = pytest.mark.anyio
TTL = 30.0


async def add_links(store: Store, count: int) -> list[int]:
    ids = []
    for n in range(count):
        sub, _ = await store.add_subscription(f"http://127.0.0.1:1/mcp{n}", "test://a")
        ids.append(sub.server_id)
    return ids


async def expire_all(store: Store) -> None:
    """Every lease expired, and every replica's heartbeat as old (its owner paused or died)."""
    async with store.engine.begin() as conn:
        await conn.execute(text("UPDATE servers SET lease_until = 0"))
        await conn.execute(text("UPDATE replicas SET heartbeat_at = 0"))


async def test_an_expired_lease_of_a_live_owner_is_left_to_it(
    pg_pair: tuple[Store, Store],
) -> None:
    """After the database was frozen every lease has expired in its clock at once, and the
    first replica back must not claim all of them (a mass swap): a claim leaves an expired
    lease whose owner heartbeats; the owner's renew takes it back."""
    a, b = pg_pair
    ids = await add_links(a, 4)
    await LeaseRepository(a).heartbeat("a", "h", 1)
    assert len(await LeaseRepository(a).claim("a", TTL, 10)) == 4
    async with a.engine.begin() as conn:  # the database was frozen past the TTL
        await conn.execute(text("UPDATE servers SET lease_until = 0"))
    await LeaseRepository(a).heartbeat("a", "h", 1)  # a is back first
    assert await LeaseRepository(b).claim("b", TTL, 10) == [], "a live owner keeps its links"
    assert set(await held_leases(a, "a", TTL)) == set(ids)
    async with a.engine.begin() as conn:  # a stops heartbeating: now they are free
        await conn.execute(text("UPDATE servers SET lease_until = 0"))
        await conn.execute(text("UPDATE replicas SET heartbeat_at = 0"))
    assert len(await LeaseRepository(b).claim("b", TTL, 10)) == 4


async def test_concurrent_claims_never_overlap(pg_pair: tuple[Store, Store]) -> None:
    a, b = pg_pair
    ids = await add_links(a, 40)
    for _ in range(3):  # rounds of racing claims of 10 each; the last finds 0-10 left
        got_a, got_b = await asyncio.gather(
            LeaseRepository(a).claim("a", TTL, 10), LeaseRepository(b).claim("b", TTL, 10)
        )
        assert not {c.server_id for c in got_a} & {c.server_id for c in got_b}
    held_a = await held_leases(a, "a", TTL)
    held_b = await held_leases(b, "b", TTL)
    assert not set(held_a) & set(held_b)
    assert len(held_a) + len(held_b) == 40
    assert set(held_a) | set(held_b) == set(ids)
    assert await LeaseRepository(b).claim("b", TTL, 100, only=list(held_a)) == [], (
        "held links stay put"
    )


async def test_a_paused_replica_is_fenced_out_after_a_new_claim(
    pg_pair: tuple[Store, Store],
) -> None:
    a, b = pg_pair
    sub, _ = await a.add_subscription("http://127.0.0.1:1/mcp", "test://a")
    [mine] = await LeaseRepository(a).claim("a", TTL, 10)
    gen_a = await bump_generation(a, sub.server_id, expected=mine.generation)
    assert gen_a == mine.generation + 1
    contents = [{"uri": "test://a", "text": "from a"}]
    assert await a.record_read(sub.id, sub.server_id, gen_a, contents, "from a") is not None
    assert await LeaseRepository(b).claim("b", TTL, 10) == [], "an unexpired lease is not taken"
    await expire_all(a)  # a was paused past its lease
    [theirs] = await LeaseRepository(b).claim("b", TTL, 10)
    assert theirs.previous_owner == "a" and theirs.epoch == mine.epoch + 1
    assert theirs.generation > gen_a, "the claim moves the generation fence"
    events_before = await a.last_event_id()
    # Everything a writes under its old generation is rejected by the database:
    stale = [{"uri": "test://a", "text": "stale"}]
    assert await a.record_read(sub.id, sub.server_id, gen_a, stale, "stale") is None
    assert await bump_generation(a, sub.server_id, expected=gen_a) is None
    assert not await a.set_server_state(sub.server_id, "backoff", generation=gen_a)
    assert await a.set_subscription_state([sub.id], "error", "x", generation=gen_a) == []
    assert await a.last_event_id() == events_before, "no event from a fenced replica"
    assert await held_leases(a, "a", TTL) == {}, "a learns it lost the link"
    current = await b.current_revision(sub.id)
    assert current is not None and current.text == "from a"
    fresh = [{"uri": "test://a", "text": "from b"}]
    assert await b.record_read(sub.id, sub.server_id, theirs.generation, fresh, "from b")


async def test_release_and_balance(pg_pair: tuple[Store, Store]) -> None:
    a, b = pg_pair
    await add_links(a, 4)
    await LeaseRepository(a).heartbeat("a", "h", 1)
    await LeaseRepository(b).heartbeat("b", "h", 2)
    assert await LeaseRepository(a).balance(TTL) == (2, 4)
    await LeaseRepository(b).heartbeat("b", "h", 2, stopping=True)
    assert await LeaseRepository(a).balance(TTL) == (1, 4), "a stopping replica is not counted"
    claimed = await LeaseRepository(a).claim("a", TTL, 4)
    assert len(claimed) == 4
    assert await LeaseRepository(a).release("a", [claimed[0].server_id]) == 1
    again = await LeaseRepository(b).claim("b", TTL, 4)
    assert [c.server_id for c in again] == [claimed[0].server_id], "released: free at once"
    await LeaseRepository(a).leave("a")
    assert len(await LeaseRepository(b).claim("b", TTL, 4)) == 3
    assert await LeaseRepository(a).balance(TTL) == (1, 4)


async def test_handover_is_make_before_break_and_fenced(pg_pair: tuple[Store, Store]) -> None:
    """Offer, request, take: the owner writes until the successor takes the lease, and not
    one write after (the take moves owner, epoch and generation in one statement)."""
    a, b = pg_pair
    sub, _ = await a.add_subscription("http://127.0.0.1:1/mcp", "test://a")
    await LeaseRepository(a).heartbeat("a", "h", 1)
    await LeaseRepository(b).heartbeat("b", "h", 2)
    [mine] = await LeaseRepository(a).claim("a", TTL, 10)
    gen_a = await bump_generation(a, sub.server_id, expected=mine.generation)
    assert gen_a is not None
    assert await LeaseRepository(b).request("b", TTL, 10) == [], "nothing offered yet"
    assert await LeaseRepository(a).offer("a", None) == [sub.server_id]
    assert await LeaseRepository(a).offer("a", None) == [], "an offer is made once"
    [req] = await LeaseRepository(b).request("b", TTL, 10)
    assert (req.server_id, req.owner) == (sub.server_id, "a")
    assert await LeaseRepository(a).request("a", TTL, 10) == [], "the owner never requests its own"
    assert await LeaseRepository(b).requested("b") == {sub.server_id}
    # Requested but not taken: the owner still holds the lease and its writes land.
    assert await held_leases(a, "a", TTL) == {sub.server_id: mine.epoch}
    before = [{"uri": "test://a", "text": "before the take"}]
    assert await a.record_read(sub.id, sub.server_id, gen_a, before, "before the take")
    assert await LeaseRepository(a).withdraw_offers("a") == 0, "a requested link is not withdrawn"
    taken = await LeaseRepository(b).take("b", TTL, sub.server_id)
    assert taken is not None and taken.previous_owner == "a"
    assert taken.epoch == mine.epoch + 1 and taken.generation > gen_a
    assert await LeaseRepository(b).take("b", TTL, sub.server_id) is None, "taken once"
    events = await a.last_event_id()
    after = [{"uri": "test://a", "text": "stale"}]
    assert await a.record_read(sub.id, sub.server_id, gen_a, after, "stale") is None
    assert not await a.set_server_state(sub.server_id, "open", generation=gen_a)
    assert await bump_generation(a, sub.server_id, expected=gen_a) is None
    assert await a.last_event_id() == events, "no event from the previous owner"
    assert await held_leases(a, "a", TTL) == {}
    assert await held_leases(b, "b", TTL) == {sub.server_id: taken.epoch}
    current = await b.current_revision(sub.id)
    assert current is not None and current.text == "before the take"


async def test_handover_requests_race_withdraw_and_expire(pg_pair: tuple[Store, Store]) -> None:
    a, b = pg_pair
    ids = await add_links(a, 20)
    for replica in ("a", "b", "c"):
        await LeaseRepository(a).heartbeat(replica, "h", 1)
    await LeaseRepository(a).claim("a", TTL, 20)
    assert len(await LeaseRepository(a).offer("a", ids[:10])) == 10
    got_b, got_c = await asyncio.gather(
        LeaseRepository(b).request("b", TTL, 6), LeaseRepository(a).request("c", TTL, 6)
    )
    assert len(got_b) + len(got_c) == 10
    assert not {r.server_id for r in got_b} & {r.server_id for r in got_c}, "one successor each"
    assert {r.server_id for r in got_b} | {r.server_id for r in got_c} == set(ids[:10])
    # c stops before taking: its requests may be taken over by a live replica.
    await LeaseRepository(a).heartbeat("c", "h", 1, stopping=True)
    again = await LeaseRepository(b).request("b", TTL, 20)
    assert {r.server_id for r in again} == {r.server_id for r in got_c}
    assert await LeaseRepository(a).take("c", TTL, got_c[0].server_id) is None, "c lost its request"
    # Offers nobody requested are withdrawn; a plain claim after expiry clears a request.
    assert len(await LeaseRepository(a).offer("a", ids[10:12])) == 2
    assert await LeaseRepository(a).withdraw_offers("a") == 2
    assert await LeaseRepository(b).request("b", TTL, 20) == []
    await expire_all(a)
    claimed = await LeaseRepository(a).claim("c", TTL, 20, only=[got_b[0].server_id])
    assert [c.server_id for c in claimed] == [got_b[0].server_id]
    assert await LeaseRepository(b).take("b", TTL, got_b[0].server_id) is None, (
        "overtaken by a claim"
    )


async def test_sqlite_holds_every_link_even_after_a_crash(
    sqlite_template: Path, tmp_path: Path
) -> None:
    """One daemon per SQLite file: a new run takes over its previous run's leases at once."""
    shutil.copyfile(sqlite_template, tmp_path / "db")
    store = Store.open(f"sqlite:///{tmp_path / 'db'}")
    try:
        await _sqlite_takeover(store)
    finally:
        await store.close()


async def _sqlite_takeover(store: Store) -> None:
    ids = await add_links(store, 3)
    first = await LeaseRepository(store).claim("run1", TTL, 10)
    assert [c.server_id for c in first] == ids
    second = await LeaseRepository(store).claim("run2", TTL, 10)
    assert [c.server_id for c in second] == ids
    assert all(c.previous_owner == "run1" for c in second)
    assert await LeaseRepository(store).balance(TTL) == (1, 3)


async def test_a_sqlite_claim_updates_every_link_in_one_statement(
    sqlite_template: Path, tmp_path: Path
) -> None:
    """A start claims every link at once: one UPDATE for all of them, not one per link (10,000
    statements on the writer thread at 10,000 links), and each keeps its previous owner."""
    shutil.copyfile(sqlite_template, tmp_path / "db")
    store = Store.open(f"sqlite:///{tmp_path / 'db'}")
    try:
        ids = await add_links(store, 6)
        await LeaseRepository(store).claim("run1", TTL, 2)
        updates: list[str] = []

        def seen(conn, cursor, statement, *args) -> None:  # type: ignore[no-untyped-def]
            if statement.lstrip().upper().startswith("UPDATE"):
                updates.append(statement)

        assert store.sync_engine is not None
        event.listen(store.sync_engine, "before_cursor_execute", seen)
        claimed = await LeaseRepository(store).claim("run2", TTL, 10)
        event.remove(store.sync_engine, "before_cursor_execute", seen)
        assert [c.server_id for c in claimed] == ids
        assert [c.previous_owner for c in claimed] == ["run1", "run1", None, None, None, None]
        assert [c.generation for c in claimed] == [2, 2, 1, 1, 1, 1]
        assert len(updates) == 1
    finally:
        await store.close()


async def test_each_delivery_attempt_is_leased_to_one_replica(
    pg_pair: tuple[Store, Store],
) -> None:
    from service.webhooks.repository import WebhookRepository

    a, b = pg_pair
    repo_a, repo_b = WebhookRepository(a), WebhookRepository(b)
    await repo_a.create_target("http://127.0.0.1:9/hook")
    for n in range(6):
        sub, _ = await a.add_subscription("http://127.0.0.1:1/mcp", f"test://d/{n}")
        gen = await bump_generation(a, sub.server_id)
        assert gen is not None
        await a.record_read(sub.id, sub.server_id, gen, [{"uri": sub.uri, "text": "x"}], "x")
    ids = [d.id for d in await repo_a.list_deliveries()]
    assert len(ids) == 6
    got_a, got_b = await asyncio.gather(
        repo_a.claim_deliveries(ids, "a", 60), repo_b.claim_deliveries(ids, "b", 60)
    )
    assert not got_a & got_b and got_a | got_b == set(ids), "one replica per attempt"
    assert await repo_a.claim_deliveries(ids, "a", 60) == got_a, "a keeps its own"
    async with a.engine.begin() as conn:  # a died: its leases expire
        await conn.execute(text("UPDATE deliveries SET lease_until = 0 WHERE lease_owner = 'a'"))
    assert await repo_b.claim_deliveries(ids, "b", 60) == set(ids), "b takes them over"


def test_the_replica_id_survives_a_restart_on_the_same_state_dir(tmp_path: Path) -> None:
    from service.daemon.leases import default_replica_id

    first = default_replica_id(tmp_path)
    assert default_replica_id(tmp_path) == first
    assert default_replica_id(tmp_path / "other") != first  # no such dir: a fresh id


class RecordingOwner:
    """The keeper's link owner, recording what it was handed (no links are started)."""

    def __init__(self) -> None:
        self.links: dict[int, list[str]] = {}
        self.dropped: list[int] = []

    def held(self) -> set[int]:
        return set(self.links)

    async def adopt(self, claimed, wanted=None) -> None:  # type: ignore[no-untyped-def]
        assert wanted is not None, "the keeper reads the claimed links' subscriptions itself"
        self.links[claimed.server_id] = list(wanted)

    async def drop(self, server_id: int, *, release: bool) -> None:
        self.links.pop(server_id)
        self.dropped.append(server_id)

    async def reconcile(self) -> None:
        pass

    def standby(self) -> set[int]:
        return set()

    async def prepare(self, requested) -> None:  # type: ignore[no-untyped-def]
        raise AssertionError("nothing is offered in these tests")

    async def abandon(self, server_id: int) -> None:
        pass


async def test_a_pass_claims_and_offers_many_links_in_a_few_statements(
    pg_pair: tuple[Store, Store],
) -> None:
    """One query for every claimed link's subscriptions and one offer statement, however
    many links move: a statement per link made a pass that takes or hands over hundreds of
    links outlast the TTL on a busy host, the heartbeat lapsed, and the replicas passed the
    links to and fro (found by bench/scaleout.py at 1,000 links)."""
    from service.daemon.leases import LeaseKeeper

    a, b = pg_pair
    ids = await add_links(a, 12)
    await a.add_subscription("http://127.0.0.1:1/mcp0", "test://b")
    reads: list[object] = []
    wanted_uris = a.wanted_uris

    async def counted(server_ids):  # type: ignore[no-untyped-def]
        reads.append(server_ids)
        return await wanted_uris(server_ids)

    a.wanted_uris = counted  # type: ignore[method-assign]
    owner = RecordingOwner()
    keeper = LeaseKeeper(a, owner, TTL, "replica-a")
    await keeper.tick()  # alone: claims every link
    assert owner.held() == set(ids)
    assert sorted(owner.links[ids[0]]) == ["test://a", "test://b"]
    assert len(reads) == 1, "one query for the subscriptions of all the claimed links"
    await LeaseRepository(b).heartbeat("replica-b", "host", 2)  # a second live replica: share 6
    offers: list[list[int] | None] = []
    offer_leases = keeper.repo.offer

    async def counted_offer(replica: str, server_ids: list[int] | None) -> list[int]:
        offers.append(None if server_ids is None else list(server_ids))
        return await offer_leases(replica, server_ids)

    keeper.repo.offer = counted_offer  # type: ignore[method-assign]
    await keeper.tick()
    assert len(owner.held()) == 12 and not owner.dropped, "offered, still running"
    assert len(offers) == 1 and offers[0] is not None and len(offers[0]) == 6, "one statement"
    requested = await LeaseRepository(b).request("replica-b", TTL, 12)
    assert sorted(r.server_id for r in requested) == sorted(offers[0])
    for r in requested:  # replica-b's standby listens were acknowledged
        assert await LeaseRepository(b).take("replica-b", TTL, r.server_id) is not None
    await keeper.tick()
    assert len(owner.held()) == 6 and sorted(owner.dropped) == sorted(offers[0])


async def test_a_renew_returns_only_what_differs_from_the_running_links(store: Store) -> None:
    """The lease pass's renew: every lease extended, and back come only the links running here
    that are not ours any more and the ones ours that do not run here (both backends)."""
    ids = await add_links(store, 3)
    claimed = await LeaseRepository(store).claim("a", TTL, 2)
    mine = [c.server_id for c in claimed]
    assert mine == ids[:2]
    async with store.engine.begin() as conn:
        await conn.execute(text("UPDATE servers SET lease_until = 1"))
    quiet = await LeaseRepository(store).renew_changes("a", TTL, set(mine))
    assert (quiet.lost, quiet.orphans) == ([], [])
    async with store.engine.connect() as conn:
        until = (await conn.execute(text("SELECT id, lease_until FROM servers"))).all()
    assert {r.id for r in until if r.lease_until and r.lease_until > 1} == set(mine)
    gone = await LeaseRepository(store).renew_changes("a", TTL, {*mine, ids[2]})
    assert (gone.lost, gone.orphans) == ([ids[2]], [])
    orphan = await LeaseRepository(store).renew_changes("a", TTL, {mine[0]})
    assert (orphan.lost, orphan.orphans) == ([], [mine[1]])
    none_running = await LeaseRepository(store).renew_changes("a", TTL, set())
    assert (none_running.lost, none_running.orphans) == ([], mine)


async def test_a_renew_during_a_claim_does_not_claim_the_link_again(store: Store) -> None:
    """An API subscribe claims its new link and starts it after reading its subscriptions; a
    renew in between finds the link ours in the table but not running (an orphan). The next
    pass claimed it again: a second generation bump under the link just started, whose first
    stream was then closed right after the server acknowledged it (seen as a flaky
    ``test_adding_a_uri_is_make_before_break[postgresql]`` in CI). Both backends."""
    from service.daemon.leases import LeaseKeeper

    [server_id] = await add_links(store, 1)
    adopting, go_on = asyncio.Event(), asyncio.Event()

    class SlowFirstStart(RecordingOwner):
        async def adopt(self, claimed, wanted=None) -> None:  # type: ignore[no-untyped-def]
            self.generations = [*getattr(self, "generations", []), claimed.generation]
            if not adopting.is_set():
                adopting.set()
                await go_on.wait()  # the subscribe's claim: committed, its link not yet started
            await super().adopt(claimed, wanted)

    owner = SlowFirstStart()
    keeper = LeaseKeeper(store, owner, TTL, "replica-a")
    subscribe = asyncio.create_task(keeper.claim(1, only=[server_id]))
    await adopting.wait()
    assert await keeper.renew() == {server_id}, "ours in the table, not running yet"
    next_pass = asyncio.create_task(keeper.balance({server_id}))
    await asyncio.sleep(0)
    go_on.set()
    await asyncio.gather(subscribe, next_pass)
    assert owner.held() == {server_id}
    assert len(owner.generations) == 1, "claimed once"
    async with store.engine.connect() as conn:
        stored = (
            await conn.execute(
                text("SELECT generation FROM servers WHERE id = :i"), {"i": server_id}
            )
        ).scalar_one()
    assert stored == owner.generations[0], "the started link's generation is the current one"


async def test_a_standby_whose_owner_left_claims_the_link(pg_pair: tuple[Store, Store]) -> None:
    """The owner offered a link, replica b listens to it in standby, and the owner stops
    before b's listen is acknowledged. b counted the link towards its share, so no replica at
    its share claimed it: unowned for as long as b's listen was not acknowledged (forever, for
    a server that never acknowledges). b's next pass claims it."""
    from service.daemon.leases import LeaseKeeper

    a, b = pg_pair
    [server_id] = await add_links(a, 1)
    await LeaseRepository(a).heartbeat("a", "host", 1)
    assert [c.server_id for c in await LeaseRepository(a).claim("a", TTL, 1)] == [server_id]
    assert await LeaseRepository(a).offer("a", [server_id]) == [server_id]

    class Standing(RecordingOwner):
        def __init__(self) -> None:
            super().__init__()
            self.waiting: set[int] = set()

        def standby(self) -> set[int]:
            return set(self.waiting)

        async def prepare(self, requested) -> None:  # type: ignore[no-untyped-def]
            self.waiting.add(requested.server_id)  # its listen is never acknowledged

        async def adopt(self, claimed, wanted=None) -> None:  # type: ignore[no-untyped-def]
            self.waiting.discard(claimed.server_id)  # the standby link gives way
            await super().adopt(claimed, wanted)

    owner = Standing()
    keeper = LeaseKeeper(b, owner, TTL, "b")
    await keeper.tick()
    assert owner.standby() == {server_id} and not owner.held(), "listening in standby"
    await keeper.tick()
    assert owner.standby() == {server_id}, "the owner is alive: stand by"
    await LeaseRepository(a).leave("a")  # the owner stops; its offer is still recorded
    await keeper.tick()
    assert owner.held() == {server_id} and not owner.standby()
    async with a.engine.connect() as conn:
        row = (
            await conn.execute(
                text("SELECT lease_owner, lease_successor FROM servers WHERE id = :i"),
                {"i": server_id},
            )
        ).one()
    assert (row.lease_owner, row.lease_successor) == ("b", None)
