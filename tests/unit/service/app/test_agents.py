"""service.app.agents.Agents: what an agent may do to the subscriptions (the policy the face's
``/mcp`` and ``/v1/agent/subscriptions`` share), over a real migrated SQLite store and the API
tests' fake supervisor (tests/api/fakes.py)."""

from __future__ import annotations

import pytest

from service.app.agents import Agents
from service.app.errors import AgentError
from tests.api.fakes import FakeSupervisor

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:9/mcp"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_an_agent_removes_only_what_an_agent_made_unless_widened(
    fake_supervisor: FakeSupervisor,
) -> None:
    ((person, _),) = await fake_supervisor.subscribe_many(URL, ["r://person"])
    ((agent, _),) = await fake_supervisor.subscribe_many(URL, ["r://agent"], created_by="agent")
    agents = Agents(fake_supervisor, None)
    with pytest.raises(AgentError) as refused:
        await agents.unsubscribe(person.id)
    assert refused.value.code == "NOT_CREATED_BY_AGENT"
    removed = await agents.unsubscribe(agent.id)
    assert removed is not None and removed["uri"] == "r://agent"
    assert await agents.unsubscribe(agent.id) is None  # gone
    widened = Agents(fake_supervisor, None, unsubscribe="any")
    assert (await widened.unsubscribe(person.id))["uri"] == "r://person"  # type: ignore[index]
