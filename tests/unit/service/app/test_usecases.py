"""service.app.usecases.UseCases: the use cases work on the parts the composition root hands
them (DaemonParts), never on the supervisor's store, dispatcher or runner: built here over a
supervisor that offers only SupervisorLike's members, they still answer."""

from __future__ import annotations

from typing import Any

import pytest

from service.app.supervisor_protocol import SupervisorLike
from service.app.usecases import UseCases
from tests.api.fakes import FakeSupervisor

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:9/mcp"


class OnlyTheProtocol:
    """The fake supervisor seen through SupervisorLike: any other attribute is an error."""

    def __init__(self, sup: FakeSupervisor) -> None:
        self._sup = sup

    def __getattr__(self, name: str) -> Any:
        if name not in SupervisorLike.__dict__:
            raise AttributeError(f"{name} is not part of SupervisorLike")
        return getattr(self._sup, name)


def test_the_protocol_offers_neither_the_store_nor_the_dispatcher_nor_the_runner() -> None:
    assert not {"store", "webhooks", "triggers"} & set(SupervisorLike.__dict__)


async def test_the_use_cases_answer_from_the_parts(fake_supervisor: FakeSupervisor) -> None:
    cases = UseCases.build(OnlyTheProtocol(fake_supervisor), fake_supervisor.parts)  # type: ignore[arg-type]
    sub, created = await cases.subscriptions.subscribe(URL, "r://a")
    assert created and (await cases.subscriptions.show(sub.id))["id"] == sub.id
    target, _secret = await cases.webhooks.create({"url": "http://127.0.0.1:9/hook"})
    assert [t.id for t in await cases.webhooks.targets()] == [target.id]
    assert (await cases.triggers.summary())["total"] == 0
    assert (await cases.status.counts()).value.subscription_states == {"pending": 1}
    assert await cases.changes.last_event_id() >= 1
