"""service.face.inproc.InProcessBackend: the face's backend inside the daemon, over a real
migrated SQLite store and the API tests' fake supervisor (tests/api/fakes.py). What an agent
may remove is tests/unit/service/app/test_agents.py."""

from __future__ import annotations

import pytest

from service.app.changes import Changes
from service.app.errors import AgentError
from service.app.subscriptions import Subscriptions
from service.face.inproc import InProcessBackend
from tests.api.fakes import FakeSupervisor

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:9/mcp"


async def test_bad_input_is_a_face_error_with_the_api_code(fake_supervisor: FakeSupervisor) -> None:
    backend = InProcessBackend(
        Subscriptions(fake_supervisor, fake_supervisor.store),
        Changes(fake_supervisor.store, fake_supervisor.events),
    )
    with pytest.raises(AgentError) as bad_url:
        await backend.subscribe("ftp://127.0.0.1/x", ["r://a"])
    assert bad_url.value.error_code == "INVALID_URL" and bad_url.value.hint
    with pytest.raises(AgentError) as bad_uri:
        await backend.subscribe(URL, ["no scheme"])
    assert bad_uri.value.error_code == "INVALID_URI"
    assert fake_supervisor.subscribe_calls == 0


async def test_listings_content_and_events(fake_supervisor: FakeSupervisor) -> None:
    backend = InProcessBackend(
        Subscriptions(fake_supervisor, fake_supervisor.store),
        Changes(fake_supervisor.store, fake_supervisor.events),
    )
    assert await backend.subscriptions() == []
    ((sub, _),) = await fake_supervisor.subscribe_many(URL, ["r://a"])
    rows = await backend.subscriptions()
    assert [(r["id"], r["uri"], r["link"]["serverId"]) for r in rows] == [
        (sub.id, "r://a", sub.server_id)
    ]
    assert await backend.identities() == [{"id": sub.id, "uri": "r://a", "serverUrl": URL}]
    assert await backend.content({"id": sub.id}) is None  # nothing read yet
    assert await backend.content({"id": 999}) is None
    assert await backend.change({"id": 1, "subscriptionId": 999}) == {
        "revision": None,
        "previous": None,
    }
    events = await backend.events_after(0, limit=10)
    assert [(e["type"], e["uri"]) for e in events] == [("subscription.created", "r://a")]
    assert await backend.last_event_id() == events[-1]["id"]
    assert await backend.events_after(events[-1]["id"], limit=10) == []
    assert await backend.wait_beyond(events[-1]["id"], 0.05) is False
