"""service.app.subscriptions.Subscriptions: what a person or an agent may do to the
subscriptions (the one door of ``/v1/subscriptions``, ``/v1/agent/subscriptions`` and the
face's ``/mcp``), over a real migrated SQLite store and the API tests' fake supervisor
(tests/api/fakes.py)."""

from __future__ import annotations

import pytest

from service.app.errors import AgentError, SubscriptionNotFound
from service.app.subscriptions import AGENT, Subscriptions
from tests.api.fakes import FakeSupervisor

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:9/mcp"


def _subscriptions(sup: FakeSupervisor, **policy: str) -> Subscriptions:
    return Subscriptions(sup, sup.store, **policy)  # type: ignore[arg-type]


async def test_an_agent_removes_only_what_an_agent_made_unless_widened(
    fake_supervisor: FakeSupervisor,
) -> None:
    ((person, _),) = await fake_supervisor.subscribe_many(URL, ["r://person"])
    ((agent, _),) = await fake_supervisor.subscribe_many(URL, ["r://agent"], created_by="agent")
    subscriptions = _subscriptions(fake_supervisor)
    with pytest.raises(AgentError) as refused:
        await subscriptions.unsubscribe(person.id, caller=AGENT)
    assert refused.value.error_code == "NOT_CREATED_BY_AGENT"
    assert (await fake_supervisor.store.get_subscription(person.id)) is not None
    removed = await subscriptions.agent_unsubscribe_json(agent.id)
    assert removed is not None and removed["uri"] == "r://agent"
    assert await subscriptions.agent_unsubscribe_json(agent.id) is None  # gone
    widened = _subscriptions(fake_supervisor, agent_unsubscribe="any")
    assert (await widened.agent_unsubscribe_json(person.id))["uri"] == "r://person"  # type: ignore[index]


async def test_a_person_removes_anything(fake_supervisor: FakeSupervisor) -> None:
    subscriptions = _subscriptions(fake_supervisor)
    ((agent, _),) = await fake_supervisor.subscribe_many(URL, ["r://agent"], created_by="agent")
    removed = await subscriptions.unsubscribe(agent.id)
    assert removed is not None and removed.uri == "r://agent"
    assert await subscriptions.unsubscribe(agent.id) is None


async def test_show_answers_the_first_state_once_it_is_known(
    fake_supervisor: FakeSupervisor,
) -> None:
    subscriptions = _subscriptions(fake_supervisor)
    sub, created = await subscriptions.subscribe(URL, "r://a")
    assert created
    shown = await subscriptions.show(sub.id)
    assert shown["firstState"] == {"known": False, "errorCode": None, "hint": None}
    assert shown["current"] is None and shown["link"]["serverId"] == sub.server_id
    await fake_supervisor.publish(sub, "v1", activate=True)
    shown = await subscriptions.show(sub.id)
    assert shown["firstState"] == {"known": True, "errorCode": None, "hint": None}
    assert shown["current"]["revision"] == 1 and shown["current"]["text"] == "v1"
    with pytest.raises(SubscriptionNotFound):
        await subscriptions.show(sub.id + 100)


async def test_pages_filter_by_server_uri_and_state(fake_supervisor: FakeSupervisor) -> None:
    subscriptions = _subscriptions(fake_supervisor)
    added = await subscriptions.subscribe_many(URL, ["r://a", "r://b", "other://c"])
    assert [created for _, created in added] == [True, True, True]
    await fake_supervisor.subscribe("http://127.0.0.1:8/mcp", "r://d")
    assert [s.uri for s in await subscriptions.all()] == ["r://a", "r://b", "other://c", "r://d"]
    assert [s.uri for s in await subscriptions.page(uri="r://*")] == ["r://a", "r://b", "r://d"]
    assert [s.uri for s in await subscriptions.page(server=":8/")] == ["r://d"]
    first, second = added[0][0], added[1][0]
    assert [s.uri for s in await subscriptions.page(after=first.id, limit=1)] == ["r://b"]
    assert [s.id for s in await subscriptions.page(state="error")] == []
    assert second.state == "pending"


async def test_an_agent_is_answered_with_the_first_state(fake_supervisor: FakeSupervisor) -> None:
    subscriptions = _subscriptions(fake_supervisor)
    with pytest.raises(AgentError) as refused:  # no server watched yet: no origin allowed
        await subscriptions.agent_subscribe(URL, ["r://a"])
    assert refused.value.error_code == "AGENT_ORIGIN_NOT_ALLOWED"
    with pytest.raises(AgentError) as bad:
        await subscriptions.agent_subscribe(URL, ["no scheme"])
    assert bad.value.error_code == "INVALID_URI"
    assert fake_supervisor.subscribe_calls == 0

    sub, _ = await subscriptions.subscribe(URL, "r://read")
    await fake_supervisor.publish(sub, "v1", activate=True)
    (row,) = await subscriptions.agent_subscribe(URL, ["r://read"])
    assert (row["id"], row["revision"], "errorCode" in row) == (sub.id, 1, False)

    (link,) = fake_supervisor.link_status()
    link.update(state="error", lastErrorCode="PROTOCOL_UNSUPPORTED", lastErrorHint="old server")
    (failed,) = await subscriptions.agent_subscribe(URL, ["r://new"])
    assert failed["createdBy"] == "agent" and failed["errorCode"] == "PROTOCOL_UNSUPPORTED"
    assert failed["hint"] == "old server"
