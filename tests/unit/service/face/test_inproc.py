"""service.face.inproc.InProcessBackend: the face's backend inside the daemon, over a real
migrated SQLite store and the API tests' fake supervisor (tests/api/fakes.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from service.face.backend import FaceError
from service.face.inproc import InProcessBackend
from tests.api.fakes import FakeSupervisor, make_supervisor

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:9/mcp"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def supervisor(tmp_path: Path) -> AsyncIterator[FakeSupervisor]:
    sup = await make_supervisor(tmp_path / "state.db")
    try:
        yield sup
    finally:
        await sup.store.close()


async def test_bad_input_is_a_face_error_with_the_api_code(supervisor: FakeSupervisor) -> None:
    backend = InProcessBackend(supervisor, None)
    with pytest.raises(FaceError) as bad_url:
        await backend.subscribe("ftp://127.0.0.1/x", ["r://a"])
    assert bad_url.value.code == "INVALID_URL" and bad_url.value.hint
    with pytest.raises(FaceError) as bad_uri:
        await backend.subscribe(URL, ["no scheme"])
    assert bad_uri.value.code == "INVALID_URI"
    assert supervisor.subscribe_calls == 0


async def test_an_agent_removes_only_what_an_agent_made_unless_widened(
    supervisor: FakeSupervisor,
) -> None:
    ((person, _),) = await supervisor.subscribe_many(URL, ["r://person"])
    ((agent, _),) = await supervisor.subscribe_many(URL, ["r://agent"], created_by="agent")
    backend = InProcessBackend(supervisor, None)
    with pytest.raises(FaceError) as refused:
        await backend.unsubscribe(person.id)
    assert refused.value.code == "NOT_CREATED_BY_AGENT"
    removed = await backend.unsubscribe(agent.id)
    assert removed is not None and removed["uri"] == "r://agent"
    assert await backend.unsubscribe(agent.id) is None  # gone
    widened = InProcessBackend(supervisor, None, unsubscribe="any")
    assert (await widened.unsubscribe(person.id))["uri"] == "r://person"  # type: ignore[index]


async def test_listings_content_and_events(supervisor: FakeSupervisor) -> None:
    backend = InProcessBackend(supervisor, None)
    assert await backend.subscriptions() == []
    ((sub, _),) = await supervisor.subscribe_many(URL, ["r://a"])
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
