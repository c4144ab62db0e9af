"""service.app.status.Status: what the daemon says about itself (``/v1/status``,
``/v1/overview``, ``/readyz``, ``/metrics``), over a real migrated SQLite store and the API
tests' fake supervisor (tests/api/fakes.py)."""

from __future__ import annotations

import pytest

from service.app.status import CHART_MINUTES, Status
from service.app.triggers import Triggers
from service.app.views import figures_json
from tests.api.fakes import FakeSupervisor

pytestmark = pytest.mark.anyio


async def test_the_figures_the_storage_and_the_last_hour(fake_supervisor: FakeSupervisor) -> None:
    status = Status(fake_supervisor.store, Triggers(fake_supervisor.triggers))
    sub, _ = await fake_supervisor.subscribe("http://127.0.0.1:1/mcp", "test://a")
    await fake_supervisor.publish(sub, "v1", activate=True)
    answer = await status.counts()
    assert answer.fresh
    figures = figures_json(answer.value)
    assert figures["lastEventId"] == await fake_supervisor.store.last_event_id()
    assert figures["deliveries"]["pending"] == 0 and figures["webhooks"]["targets"] == 0
    assert answer.value.subscription_states == {"active": 1}
    assert status.storage_json()["backend"] == "sqlite" and not status.storage.failing
    recent = await status.recent()
    assert len(recent["revisionsPerMinute"]) == CHART_MINUTES
    assert recent["revisionsPerMinute"][-1] == 1
    assert recent["triggers"] == {"total": 0, "paused": 0, "runs": recent["triggers"]["runs"]}
    assert isinstance(recent["replicas"], list)
