"""A link's token re-check (spec gap 14: a listen is authorised once, so a refreshed token
means a re-listen) wakes the link only when a token could have changed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from service.daemon.config import Settings
from service.daemon.link import ServerLink
from service.daemon.linkstatus import LinkState
from service.daemon.supervisor import Supervisor
from service.daemon.wiring import side_services
from tests.api.fakes import migrated_store


async def _no_token(_url: str) -> str | None:
    return None


def test_a_link_is_woken_for_its_token_only_when_a_token_could_have_changed(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        store = migrated_store(tmp_path / "mcpsub.db")
        settings = Settings(state_dir=tmp_path, replica_id="test")
        supervisor = Supervisor(store, settings, *side_services(store, settings))
        link = ServerLink(
            1,
            "http://127.0.0.1:1/mcp",
            store,
            settings,
            supervisor._new_transport,
            asyncio.Semaphore(1),
            {},
            token_provider=_no_token,
        )
        link.state = LinkState.OPEN
        due = link._token_checked + settings.token_check_s + 1

        link.tick(due, tokens_available=False)  # no store, no token: nothing can change
        assert not link._changed.is_set()

        link.tick(due, tokens_available=True)  # a store appeared (a login): look
        assert link._changed.is_set()

        link._changed.clear()
        link._session_token = "was-logged-in"
        link.tick(due, tokens_available=False)  # the store is gone (a logout): look too
        assert link._changed.is_set()

        link._changed.clear()
        link.tick(link._token_checked + 1, tokens_available=True)  # not due yet
        assert not link._changed.is_set()
        await store.close()

    asyncio.run(run())
