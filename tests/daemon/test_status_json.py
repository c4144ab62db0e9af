"""``Supervisor.link_status_json`` keeps each link's JSON until the link changes; whatever
changed on a link must show in the very next ``/v1/status``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from service.daemon.config import Settings
from service.daemon.link import ServerLink
from service.daemon.linkstatus import LinkState
from service.daemon.supervisor import Supervisor
from service.daemon.wiring import supervisor_collaborators
from tests.api.fakes import migrated_store


def test_link_status_json_follows_every_change(tmp_path: Path) -> None:
    async def run() -> None:
        store = migrated_store(tmp_path / "mcpsub.db")
        settings = Settings(state_dir=tmp_path, replica_id="test")
        supervisor = Supervisor(store, settings, *supervisor_collaborators(store, settings))
        links = [
            ServerLink(
                n,
                f"http://127.0.0.1:1/mcp?link={n}",
                store,
                supervisor.settings,
                supervisor._new_transport,
                asyncio.Semaphore(1),
                {},
            )
            for n in (1, 2)
        ]
        for link in links:
            supervisor.links[link.server_id] = link

        def same() -> None:
            assert json.loads(supervisor.link_status_json()) == supervisor.link_status()

        try:
            same()
            one, two = links
            one.want("test://a", 10)
            same()
            one.want("test://b", 11)
            one.unwant("test://a")
            same()
            one.want("test://a", 10)  # same set, other order: still right
            same()
            m = two.machine
            m.state, m.generation, m.reconnects = LinkState.BACKOFF, 3, 1
            m.last_error, m.last_error_code = "refused \u202e", "CONNECTION_REFUSED"
            same()
            one.machine.honored = frozenset({"test://a"})
            same()
            one.machine.honored = frozenset({"test://b"})  # same size, other URI
            same()
            two.capabilities = {"subscribe": True, "huge": 2**70}  # orjson refuses this one
            same()
            del supervisor.links[1]
            same()
            assert list(supervisor._status_cache.parts) == [2], "a dropped link's JSON is dropped"
        finally:
            for link in links:
                await link.stop()
            await store.close()

    asyncio.run(run())


def test_every_link_state_has_a_circuit_view() -> None:
    """Scripts read ``circuit`` beside ``state``: failing states open it, trying half-opens it."""
    assert {state.value: state.circuit for state in LinkState} == {
        "idle": "closed",
        "connecting": "half_open",
        "open": "closed",
        "backoff": "open",
        "throttled": "open",
        "not_honored": "open",
        "login_required": "open",
        "error": "open",
        "released": "closed",
        "stopped": "closed",
    }
