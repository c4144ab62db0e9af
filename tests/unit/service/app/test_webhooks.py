"""service.app.webhooks.Webhooks: the one door to the webhook targets and deliveries. Every
change wakes the dispatcher once it is made (and not when there was nothing to change), a
refused body writes nothing, a missing target or delivery is its code; over a real migrated
SQLite store and the API tests' fake supervisor (tests/api/fakes.py)."""

from __future__ import annotations

import time

import pytest

from service.app.errors import (
    DeliveryNotFound,
    InvalidParameter,
    InvalidSecret,
    PrivateTarget,
    WebhookNotFound,
)
from service.app.webhooks import Webhooks
from tests.api.fakes import FakeSupervisor

pytestmark = pytest.mark.anyio

HOOK = "http://127.0.0.1:9/hook"


def _counting(sup: FakeSupervisor) -> tuple[Webhooks, list[str]]:
    wakes: list[str] = []
    dispatcher = sup.webhooks
    dispatcher.wake = lambda: wakes.append("wake")  # type: ignore[method-assign]
    return Webhooks(dispatcher), wakes


async def test_each_change_wakes_the_dispatcher_once_it_is_made(
    fake_supervisor: FakeSupervisor,
) -> None:
    webhooks, wakes = _counting(fake_supervisor)
    repo = webhooks.repo

    def woke() -> int:
        count = len(wakes)
        wakes.clear()
        return count

    target, secret = await webhooks.create({"url": HOOK})
    assert secret.startswith("whsec_") and woke() == 1
    assert (await webhooks.target(target.id)).mode == "all"

    assert not (await webhooks.set_enabled(target.id, False)).enabled and woke() == 1
    assert (await webhooks.set_enabled(target.id, True)).enabled and woke() == 1
    with pytest.raises(WebhookNotFound):
        await webhooks.set_enabled(target.id + 100, True)
    assert woke() == 0

    rotated, previous_until = await webhooks.rotate_secret(target.id, {})
    assert rotated != secret and previous_until > time.time() and woke() == 1
    with pytest.raises(WebhookNotFound):
        await webhooks.rotate_secret(target.id + 100, {})
    assert woke() == 0

    sub, _ = await fake_supervisor.subscribe("http://127.0.0.1:1/mcp", "test://hooked")
    await fake_supervisor.publish(sub, "v1")
    (delivery,) = await webhooks.deliveries(target_id=target.id)
    retried = await webhooks.retry(delivery.id)
    assert retried.state == "pending" and woke() == 1
    with pytest.raises(DeliveryNotFound):
        await webhooks.retry(delivery.id + 100)
    assert woke() == 0
    since = time.time() - 60
    assert await webhooks.recover({"target": target.id, "since": since}) == (target.id, since, 0)
    assert woke() == 1

    found, body, attempts = await webhooks.attempts(delivery.id)
    assert found.id == delivery.id and b"test://hooked" in body and attempts == []
    _, counts = await webhooks.target_with_counts(target.id)
    assert counts["pending"] == 1

    removed = await webhooks.delete(target.id)
    assert removed.id == target.id and woke() == 1
    with pytest.raises(WebhookNotFound):
        await webhooks.delete(target.id)
    assert woke() == 0 and await repo.get_target(target.id) is None


@pytest.mark.parametrize(
    ("body", "error", "field"),
    [
        ({"url": "http://169.254.169.254/x"}, PrivateTarget, "url"),
        ({"url": HOOK, "secret": "whsec_not base64"}, InvalidSecret, "secret"),
        ({"url": HOOK, "mode": "some"}, InvalidParameter, "mode"),
        ({"url": HOOK, "uriPatterns": ["a b"]}, InvalidParameter, "uriPatterns"),
        ({"url": HOOK, "subscriptionIds": [0]}, InvalidParameter, "subscriptionIds"),
        ({"url": HOOK, "allowPrivateTarget": "yes"}, InvalidParameter, "allowPrivateTarget"),
    ],
)
async def test_a_refused_body_writes_nothing_and_wakes_nobody(
    fake_supervisor: FakeSupervisor, body: dict[str, object], error: type[Exception], field: str
) -> None:
    webhooks, wakes = _counting(fake_supervisor)
    with pytest.raises(error) as refused:
        await webhooks.create(body)
    assert refused.value.field == field  # type: ignore[attr-defined]
    assert await webhooks.targets() == [] and wakes == []
    with pytest.raises(InvalidParameter):
        await webhooks.deliveries(state="lost")
    with pytest.raises(InvalidParameter):
        await webhooks.recover({"target": 1, "since": "yesterday"})


async def test_a_private_target_is_allowed_when_asked(fake_supervisor: FakeSupervisor) -> None:
    webhooks, _ = _counting(fake_supervisor)
    body = {"url": "http://169.254.169.254/x", "allowPrivateTarget": True}
    target, _secret = await webhooks.create(body)
    assert target.allow_private_target
