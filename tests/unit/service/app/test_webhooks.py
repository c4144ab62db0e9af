"""service.app.webhooks.Webhooks: every change to the webhook repository wakes the dispatcher
once it is made (and not when there was nothing to change), over a real migrated SQLite
store and the API tests' fake supervisor (tests/api/fakes.py)."""

from __future__ import annotations

import time

import pytest

from service.app.webhooks import Webhooks
from tests.api.fakes import FakeSupervisor

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_each_change_wakes_the_dispatcher_once_it_is_made(
    fake_supervisor: FakeSupervisor,
) -> None:
    wakes: list[str] = []
    repo = fake_supervisor.webhooks.repo

    def wake() -> None:
        wakes.append("wake")

    webhooks = Webhooks(repo, wake)

    def woke() -> int:
        count = len(wakes)
        wakes.clear()
        return count

    target, secret = await webhooks.create(
        "http://127.0.0.1:9/hook",
        allow_private_target=False,
        uri_patterns=(),
        subscription_ids=(),
        mode="all",
        secret=None,
    )
    assert secret.startswith("whsec_") and woke() == 1
    assert (await repo.get_target(target.id)) is not None

    assert await webhooks.set_enabled(target.id, False, reason="test") and woke() == 1
    assert not (await repo.get_target(target.id)).enabled  # type: ignore[union-attr]
    assert await webhooks.set_enabled(target.id, True, reason="test") and woke() == 1
    assert not await webhooks.set_enabled(target.id + 100, True, reason="test") and woke() == 0

    assert await webhooks.rotate_secret(target.id, None) not in (None, secret) and woke() == 1
    assert await webhooks.rotate_secret(target.id + 100, None) is None and woke() == 0

    sub, _ = await fake_supervisor.subscribe("http://127.0.0.1:1/mcp", "test://hooked")
    await fake_supervisor.publish(sub, "v1")
    (delivery,) = await repo.list_deliveries(target_id=target.id)
    retried = await webhooks.retry(delivery.id)
    assert retried is not None and retried.state == "pending" and woke() == 1
    assert await webhooks.retry(delivery.id + 100) is None and woke() == 0
    assert await webhooks.recover(target.id, time.time() - 60) == 0 and woke() == 1

    removed = await webhooks.delete(target.id)
    assert removed is not None and removed.id == target.id and woke() == 1
    assert await webhooks.delete(target.id) is None and woke() == 0
    assert await repo.get_target(target.id) is None
