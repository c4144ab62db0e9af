"""The supervisor's reconcile: links whose URI set changed in the database behind its back are
brought in line, and links that did not change are not reloaded (one digest row per link).
Runs on both backends (the digest query is plain SQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from service.daemon.config import Settings
from service.daemon.supervisor import Supervisor
from service.daemon.wiring import supervisor_collaborators
from service.store import Store
from service.store.lease_repository import LeaseRepository
from service.store.leases import uri_set_digest
from tests.support.store import held_leases

pytestmark = pytest.mark.anyio
ME = "replica-a"


class FakeLink:
    """What reconcile touches of a ServerLink: its URI set, and stop when it is dropped."""

    def __init__(self, wanted: dict[str, int]) -> None:
        self.wanted = dict(wanted)
        self.stopped = False

    def want(self, uri: str, subscription_id: int) -> None:
        self.wanted[uri] = subscription_id

    def unwant(self, uri: str) -> None:
        self.wanted.pop(uri, None)

    async def stop(self) -> None:
        self.stopped = True


async def test_reconcile_reloads_only_the_links_that_changed(store: Store, tmp_path: Path) -> None:
    a1, _ = await store.add_subscription("http://127.0.0.1:1/a", "test://a/1")
    a2, _ = await store.add_subscription("http://127.0.0.1:1/a", "test://a/2")
    b1, _ = await store.add_subscription("http://127.0.0.1:1/b", "test://b/1")
    claimed = await LeaseRepository(store).claim(ME, 60.0, 10)
    assert {c.server_id for c in claimed} == {a1.server_id, b1.server_id}
    settings = Settings(state_dir=tmp_path, replica_id=ME)
    sup = Supervisor(store, settings, *supervisor_collaborators(store, settings))
    link_a = FakeLink({a1.uri: a1.id, a2.uri: a2.id})
    link_b = FakeLink({b1.uri: b1.id})
    sup.links = {a1.server_id: link_a, b1.server_id: link_b}  # type: ignore[dict-item]
    loads: list[Any] = []
    real_wanted = store.wanted_uris

    async def counting_wanted(server_ids: list[int]) -> Any:
        loads.append(server_ids)
        return await real_wanted(server_ids)

    store.wanted_uris = counting_wanted  # type: ignore[method-assign]
    digests = await LeaseRepository(store).uri_set_digests(ME)
    assert digests == {
        a1.server_id: uri_set_digest(link_a.wanted),
        b1.server_id: uri_set_digest(link_b.wanted),
    }

    await sup.reconcile()
    assert loads == []  # nothing changed: no subscription loaded

    # behind the supervisor's back (as another replica's API would): a URI added to link a,
    # the same URI of link a re-created under a new id, and link b's only URI removed
    a3, _ = await store.add_subscription("http://127.0.0.1:1/a", "test://a/3")
    await store.remove_subscription(a2.id)
    a2_again, _ = await store.add_subscription("http://127.0.0.1:1/a", "test://a/2")
    await store.remove_subscription(b1.id)
    await sup.reconcile()
    assert loads == [[a1.server_id, b1.server_id]]
    assert link_a.wanted == {a1.uri: a1.id, a3.uri: a3.id, a2_again.uri: a2_again.id}
    assert link_b.stopped and b1.server_id not in sup.links
    assert await held_leases(store, ME, 60.0) == {a1.server_id: claimed[0].epoch}

    loads.clear()
    await sup.reconcile()
    assert loads == []
